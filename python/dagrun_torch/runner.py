"""Run a model on its dagrun plan: every graph node on its planned stream.

``compile`` exports the model (``dagrun_torch.export``), has the dagrun
binary import and plan it (``dagrun import``, ``dagrun plan --json``), lowers
the plan (``dagrun_torch.plan.lower``) and returns a CompiledModel. In
``mode="graph"`` it captures the whole multi-stream schedule once as one CUDA
graph: every side stream first waits on the capture stream, the plan's
records and waits are issued in the plan's issue order (inside the capture
they become graph edges), and the capture stream waits on every side stream
before the capture ends. Each call copies the inputs into the graph's static
inputs and replays it. ``mode="eager"`` issues the same schedule on the
streams at each call.

Memory follows the plan's lifetime records (see plan.lower): an intermediate
tensor's host references are dropped only once the stream that allocated it
is ordered after every stream that touches it, so the caching allocator (which
reuses a block only on its allocating stream) never hands a block to a new
tensor while another stream may still use it. That also holds inside the
capture, where freeing a tensor as soon as the host is done with it would let
a later kernel of the same capture overwrite bytes that a kernel on another
stream still reads. Inference only (autograd is off).

Tested with torch 2.11 (CUDA 13) on an H200.
"""
from __future__ import annotations

import ctypes
import json
import os
import random
import statistics
import tempfile
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx

from ._binary import run_dagrun, run_dagrun_json
from .exporter import Exported, export
from .plan import Action, Plan, lower, peak_live_bytes, stream_priorities

__all__ = ["compile", "CompiledModel", "VerificationError", "plan_model", "bitwise_equal", "choose_cap"]


class VerificationError(AssertionError):
    """The multi-stream run's outputs differ from the one-stream run's."""


def bitwise_equal(a: Any, b: Any) -> Tuple[bool, str]:
    """Compare two output structures bit for bit. Returns (equal, why not)."""
    fa, fb = _flatten(a), _flatten(b)
    if len(fa) != len(fb):
        return False, "%d outputs against %d" % (len(fa), len(fb))
    for i, (x, y) in enumerate(zip(fa, fb)):
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
            if x != y:
                return False, "output %d: %r != %r" % (i, x, y)
            continue
        if x.shape != y.shape or x.dtype != y.dtype:
            return False, "output %d: %s %s against %s %s" % (i, tuple(x.shape), x.dtype, tuple(y.shape), y.dtype)
        bx = x.detach().contiguous().reshape(-1).view(torch.uint8)
        by = y.detach().contiguous().reshape(-1).view(torch.uint8)
        if not torch.equal(bx, by):
            diff = (x.detach().double() - y.detach().double()).abs()
            n = int((x.detach() != y.detach()).sum())
            return False, "output %d: %d of %d elements differ (max |diff| %.3g)" % (i, n, x.numel(), float(diff.max()))
    return True, ""


def _flatten(v: Any) -> List[Any]:
    if isinstance(v, (list, tuple)):
        out = []
        for e in v:
            out += _flatten(e)
        return out
    if isinstance(v, dict):
        out = []
        for k in sorted(v):
            out += _flatten(v[k])
        return out
    return [v]


_cudart = None


def _cudart_lib():
    """The CUDA runtime library this process already loaded (torch's)."""
    global _cudart
    if _cudart is not None:
        return _cudart or None
    paths = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.split()[-1] if line.strip() else ""
                if "libcudart.so" in p and p not in paths:
                    paths.append(p)
    except OSError:
        pass
    for name in paths + ["libcudart.so", "libcudart.so.13", "libcudart.so.12"]:
        try:
            lib = ctypes.CDLL(name)
            lib.cudaStreamCreateWithFlags
            _cudart = lib
            return lib
        except (OSError, AttributeError):
            continue
    _cudart = False
    return None


def priority_range() -> Tuple[int, int]:
    """(least, greatest) CUDA stream priority of the current device (e.g. (0, -5));
    (0, 0) when the runtime cannot be asked."""
    lib = _cudart_lib()
    if lib is None:
        return 0, 0
    lo, hi = ctypes.c_int(), ctypes.c_int()
    if lib.cudaDeviceGetStreamPriorityRange(ctypes.byref(lo), ctypes.byref(hi)) != 0:
        return 0, 0
    return lo.value, hi.value


def new_streams(n: int, device: torch.device, priorities: Optional[Sequence[int]] = None) -> List[torch.cuda.Stream]:
    """n distinct non-blocking CUDA streams, with the given CUDA priorities
    (lower is more urgent; None: the default priority). PyTorch's own pool
    holds 32 streams per priority and hands them out round-robin, so a plan
    with more streams would share them (adding false dependencies to a
    captured graph): the streams are created with
    cudaStreamCreateWithPriority(cudaStreamNonBlocking) through the CUDA
    runtime torch loaded, falling back to the pool with a warning. They live
    as long as the process."""
    lib = _cudart_lib()
    out: List[torch.cuda.Stream] = []
    if lib is not None:
        with torch.cuda.device(device):
            for i in range(n):
                h = ctypes.c_void_p()
                prio = int(priorities[i]) if priorities is not None else 0
                rc = lib.cudaStreamCreateWithPriority(ctypes.byref(h), ctypes.c_uint(1), ctypes.c_int(prio))
                if rc != 0:
                    break
                out.append(torch.cuda.ExternalStream(h.value, device=device))
    if len(out) < n:
        if n > 32:
            warnings.warn("dagrun_torch: could not create %d CUDA streams; plan streams share PyTorch's pool of 32" % n)
        with torch.cuda.device(device):
            while len(out) < n:
                p = int(priorities[len(out)]) if priorities is not None else 0
                out.append(torch.cuda.Stream(device=device, priority=p))
    return out


def _check_plan_args(max_streams: Any, strategy: Any, auto: bool) -> None:
    """Raise ValueError unless ``strategy`` is one of dagrun's and
    ``max_streams`` is None or 0 (no cap), an integer from 1 to the
    backend's MAX_STREAMS (a spec's bound) or, with ``auto``, "auto"."""
    from .backend import MAX_STREAMS, STRATEGIES
    if strategy not in STRATEGIES:
        raise ValueError("strategy=%r: want 'default', 'single', 'round-robin' or 'naive'" % (strategy,))
    if max_streams is None or auto and max_streams == "auto":
        return
    if isinstance(max_streams, bool) or not isinstance(max_streams, int) or not 0 <= max_streams <= MAX_STREAMS:
        raise ValueError("max_streams=%r: want None or 0 (no cap), an integer from 1 to %d%s" % (
            max_streams, MAX_STREAMS, " or 'auto'" if auto else ""))


def plan_model(exported: Exported, *, max_streams: Optional[int] = None, strategy: str = "default",
               workdir: Optional[str] = None, dagrun: Optional[str] = None, graph: Optional[dict] = None) -> Plan:
    """Write the exported graph, run ``dagrun import`` and ``dagrun plan --json``
    on it, and return the plan. ``max_streams``: None or 0 for no cap, else ≥ 1.
    ``graph``: plan this form of the exported graph instead (the same nodes
    and dependencies in another topological order, with stream pins:
    ``schedule.apply``); the plan runs the exported module all the same.
    Files go to ``workdir`` (graph.json, spec.yaml, plan.json), a temporary
    folder if None. Raises ValueError on bad arguments and DagrunError when
    dagrun rejects the graph or finds a race in its own plan, DagrunNotFound
    where the binary is not dagrun (``run_dagrun``)."""
    _check_plan_args(max_streams, strategy, auto=False)
    tmp = None
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="dagrun_torch-")
        workdir = tmp.name
    os.makedirs(workdir, exist_ok=True)
    try:
        gpath = os.path.join(workdir, "graph.json")
        spath = os.path.join(workdir, "spec.yaml")
        if graph is None:
            exported.save(gpath)
        else:
            with open(gpath, "w") as f:
                json.dump(graph, f)
        run_dagrun(["import", gpath, "-o", spath], binary=dagrun)
        args = ["plan", spath, "--json", "--strategy", strategy, "--max-streams", str(max_streams or 0)]
        r, doc = run_dagrun_json(args, binary=dagrun)
        with open(os.path.join(workdir, "plan.json"), "w") as f:
            f.write(r.stdout)
        return Plan.from_dict(doc)
    finally:
        if tmp is not None:
            tmp.cleanup()


class _Program:
    """The lowered plan bound to an fx graph: what each action runs and frees."""

    def __init__(self, exported: Exported, actions: List[Action]):
        self.ex = exported
        gm = exported.gm
        self.gm = gm
        self.actions = actions
        self.nodes = {n.name: n for n in gm.graph.nodes}
        info = exported.info
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.params = [n for n in gm.graph.nodes if n.op == "get_attr"]
        self.output = next(n for n in gm.graph.nodes if n.op == "output")
        # holders[tid]: fx nodes whose value holds storage tid (views, tuples).
        self.holders: Dict[str, List[str]] = {}
        for name, ni in info.items():
            if ni.kind in ("stage", "view"):
                for t in ni.tids:
                    self.holders.setdefault(t, []).append(name)
        # Non-stage nodes (views, host values) are evaluated as soon as their
        # inputs exist: they launch no GPU work.
        avail = {n.name for n in self.placeholders} | {n.name for n in self.params}
        deps_left: Dict[str, int] = {}
        users: Dict[str, List[str]] = {}
        order = {n.name: i for i, n in enumerate(gm.graph.nodes)}
        for n in gm.graph.nodes:
            if n.op in ("placeholder", "get_attr", "output"):
                continue
            ins = [m.name for m in n.all_input_nodes if m.name not in avail]
            deps_left[n.name] = len(set(ins))
            for m in set(ins):
                users.setdefault(m, []).append(n.name)
        self.stage_names = {n for n, ni in info.items() if ni.kind == "stage"}

        def ready_after(name: Optional[str]) -> List[str]:
            out, queue = [], ([name] if name else [])
            if name is None:
                queue = []
                for n, k in deps_left.items():
                    if k == 0 and n not in self.stage_names:
                        out.append(n)
                out.sort(key=order.get)
                queue = list(out)
            while queue:
                cur = queue.pop(0)
                for u in users.get(cur, []):
                    deps_left[u] -= 1
                    if deps_left[u] == 0 and u not in self.stage_names:
                        out.append(u)
                        queue.append(u)
            out.sort(key=order.get)
            return out

        self.pre = ready_after(None)
        self.post: List[List[str]] = []
        for a in actions:
            self.post.append(ready_after(a.stage) if a.kind == "launch" else [])
        left = [n for n, k in deps_left.items() if k > 0]
        if left:
            raise RuntimeError("dagrun_torch: internal error: %d graph nodes never become ready (%s)" % (len(left), ", ".join(left[:5])))

    def _run_node(self, env: Dict[str, Any], name: str) -> None:
        n = self.nodes[name]
        a = torch.fx.node.map_arg(n.args, lambda m: env[m.name])
        kw = torch.fx.node.map_arg(n.kwargs, lambda m: env[m.name])
        if n.op == "call_module":
            env[name] = self.gm.get_submodule(n.target)(*a, **kw)
        elif n.op == "call_method":
            env[name] = getattr(a[0], n.target)(*a[1:], **kw)
        else:
            env[name] = n.target(*a, **kw)

    def run(self, inputs: List[torch.Tensor], streams: List[Any], events: List[Any], fork: Any, joins: List[Any],
            delays: Optional[Dict[int, int]] = None, stream_ctx: Any = None, sleep: Any = None) -> Any:
        """Issue the program once on ``streams`` (streams[0] is the current
        stream). ``delays`` maps action index → cycles of torch.cuda._sleep
        issued on that action's stream just before it. ``stream_ctx`` and
        ``sleep`` default to torch.cuda.stream and torch.cuda._sleep (tests
        pass stand-ins to run the schedule on the CPU)."""
        stream_ctx = stream_ctx or torch.cuda.stream
        sleep = sleep or torch.cuda._sleep
        cur = streams[0]
        env: Dict[str, Any] = {}
        for n, v in zip(self.placeholders, inputs):
            env[n.name] = v
        for n in self.params:
            v = self.gm
            for part in str(n.target).split("."):
                v = getattr(v, part)
            env[n.name] = v
        fork.record(cur)
        for s in streams[1:]:
            s.wait_event(fork)
        for name in self.pre:
            self._run_node(env, name)
        for k, a in enumerate(self.actions):
            s = streams[a.stream]
            if a.kind == "launch":
                with stream_ctx(s):
                    if delays and k in delays:
                        sleep(delays[k])
                    self._run_node(env, a.stage)
                    for name in self.post[k]:
                        self._run_node(env, name)
            elif a.kind == "record":
                events[a.event].record(s)
            else:
                s.wait_event(events[a.event])
            for t in a.frees:
                for name in self.holders.get(t, ()):
                    env.pop(name, None)
        for s, e in zip(streams[1:], joins):
            e.record(s)
            cur.wait_event(e)
        out = torch.fx.node.map_arg(self.output.args[0], lambda m: env[m.name])
        spec = getattr(getattr(getattr(self.gm.graph, "_codegen", None), "pytree_info", None), "out_spec", None)
        if spec is not None:  # torch.export modules return their outputs flattened in the graph
            import torch.utils._pytree as pytree
            out = pytree.tree_unflatten(list(out) if isinstance(out, (list, tuple)) else [out], spec)
        return out


class CompiledModel:
    """A model running on its dagrun plan. Call it like the model.

    Attributes: ``plan`` (the Plan), ``exported`` (the Exported graph),
    ``mode`` ("graph" or "eager"), ``streams`` (plan streams), ``memory``
    (bytes: ``peak_allocated`` while capturing and replaying (graph mode) or
    during the first call (eager), ``before`` (allocated before that: weights,
    inputs) and ``model_live_peak``, the planned peak of live activations),
    ``priority`` (whether the streams carry the plan's priorities) and
    ``tuning`` (graph mode with priority="auto": the median replay in ms of
    each candidate graph).

    In graph mode the returned tensors are the graph's static outputs: the
    next call overwrites them; clone what you keep.
    """

    def __init__(self, exported: Exported, plan: Plan, mode: str, example_inputs: Sequence[torch.Tensor],
                 priority: Any = "auto"):
        if mode not in ("graph", "eager"):
            raise ValueError("mode=%r: want 'graph' or 'eager'" % (mode,))
        if priority not in (True, False, "auto"):
            raise ValueError("priority=%r: want True, False or 'auto'" % (priority,))
        self.exported = exported
        self.plan = plan
        self.schedule: Optional[dict] = None  # compile(max_streams="auto"): the cost model's choice
        self.mode = mode
        self.actions = lower(plan, exported.graph, keep=exported.outputs)
        self.program = _Program(exported, self.actions)
        flat = _flatten(tuple(example_inputs))
        if not flat or not all(isinstance(x, torch.Tensor) and x.is_cuda for x in flat):
            raise ValueError("dagrun_torch.compile needs CUDA tensor inputs")
        self.device = flat[0].device
        self._shapes = [(tuple(x.shape), x.dtype) for x in flat]
        n = len(plan.streams)
        self.streams = n
        least, greatest = priority_range()
        levels = abs(least - greatest) + 1
        ranks = stream_priorities(plan, exported.graph, levels)
        step = -1 if greatest < least else 1
        self._cuda_priorities = [greatest - step * r for r in ranks]  # rank 0 → the most urgent priority
        self._events = [torch.cuda.Event() for _ in range(plan.events)]
        self._fork = torch.cuda.Event()
        self._joins = [torch.cuda.Event() for _ in range(max(n - 1, 0))]
        self.memory: Dict[str, int] = {}
        self.memory["model_live_peak"] = peak_live_bytes(self.actions, exported.graph)[0]
        self.tuning: Dict[str, float] = {}
        self._graph = None
        self._static_in: List[torch.Tensor] = []
        self._static_out: Any = None
        if mode == "eager":
            self.priority = priority is not False and n > 1
            self._cap, self._side = self._stream_set(self.priority)
            return
        self._static_in = [x.detach().clone() for x in flat]
        if priority == "auto" and n == 1:
            priority = False  # one stream: nothing competes, priorities only add to the replay
        choices = [True, False] if priority == "auto" else [priority]
        built = {}
        for c in choices:
            built[c] = self._capture(c)
        if len(choices) > 1:
            for c in choices:
                self.tuning["priority" if c else "plain"] = self._time_replays(built[c][0])
            best = min(choices, key=lambda c: self.tuning["priority" if c else "plain"])
        else:
            best = choices[0]
        self.priority = best
        g, out, mem, (cap, side) = built[best]
        self._graph, self._static_out, self._cap, self._side = g, out, cap, side
        self.memory.update(mem)
        del built

    def _stream_set(self, priority: bool):
        """(capture stream, side streams) with the plan's priorities or plain."""
        prios = self._cuda_priorities if priority else [0] * len(self._cuda_priorities)
        streams = new_streams(len(prios), self.device, prios)
        return streams[0], streams[1:]

    def _issue(self, inputs: List[torch.Tensor], delays: Optional[Dict[int, int]] = None, side: Optional[List[Any]] = None) -> Any:
        streams = [torch.cuda.current_stream(self.device)] + list(self._side if side is None else side)
        with torch.no_grad():
            return self.program.run(inputs, streams, self._events, self._fork, self._joins, delays)

    def _capture(self, priority: bool):
        cap, side = self._stream_set(priority)
        cap.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(cap):
            for _ in range(2):  # warm up cuDNN/cuBLAS handles and workspaces on every stream
                self._issue(self._static_in, side=side)
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        before = torch.cuda.memory_allocated(self.device)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=cap):
            out = self._issue(self._static_in, side=side)
        g.replay()
        torch.cuda.synchronize(self.device)
        mem = dict(peak_allocated=torch.cuda.max_memory_allocated(self.device), before=before,
                   peak_reserved=torch.cuda.max_memory_reserved(self.device))
        return g, out, mem, (cap, side)

    @staticmethod
    def _time_replays(g: Any, n: int = 30) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(n):
            start.record()
            g.replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)

    def _check_inputs(self, flat: List[Any]) -> None:
        if len(flat) != len(self._shapes):
            raise ValueError("expected %d input tensors, got %d" % (len(self._shapes), len(flat)))
        for i, (x, (shape, dtype)) in enumerate(zip(flat, self._shapes)):
            if not isinstance(x, torch.Tensor) or tuple(x.shape) != shape or x.dtype != dtype:
                got = "%s %s" % (tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else type(x).__name__
                raise ValueError("input %d: compiled for %s %s, got %s" % (i, shape, dtype, got))

    def __call__(self, *inputs: Any) -> Any:
        flat = _flatten(inputs)
        self._check_inputs(flat)
        if self.mode == "eager":
            if not self.memory.get("peak_allocated"):
                torch.cuda.synchronize(self.device)
                torch.cuda.reset_peak_memory_stats(self.device)
                before = torch.cuda.memory_allocated(self.device)
                out = self._issue(flat)
                torch.cuda.synchronize(self.device)
                self.memory.update(peak_allocated=torch.cuda.max_memory_allocated(self.device), before=before,
                                   peak_reserved=torch.cuda.max_memory_reserved(self.device))
                return out
            return self._issue(flat)
        for s, x in zip(self._static_in, flat):
            s.copy_(x)
        self._graph.replay()
        return self._static_out

    def reference(self, *inputs: Any) -> Any:
        """The one-stream run: the traced module called on the current stream."""
        with torch.no_grad():
            return self.exported.gm(*inputs)

    def verify(self, *inputs: Any, trials: int = 3, seed: int = 0, max_delay_us: float = 200.0,
               delay_fraction: float = 0.1) -> None:
        """Check that the outputs equal the one-stream run's bit for bit, with
        GPU delays (torch.cuda._sleep, up to ``max_delay_us`` µs each) put in
        front of a random ``delay_fraction`` of the launches on their planned
        streams, ``trials`` times with different choices, in eager issue and
        (graph mode) in a separately captured graph; then the compiled call
        itself. Delays expose a missing order: without one, a consumer would
        read before its producer is done. Raises VerificationError naming the
        run and the first differing output."""
        flat = _flatten(inputs) if inputs else list(self._static_in)
        self._check_inputs(flat)
        ref = self.reference(*flat)
        torch.cuda.synchronize(self.device)
        rng = random.Random(seed)
        launches = [k for k, a in enumerate(self.actions) if a.kind == "launch"]
        cycles_per_us = 1.98e3  # an H200's 1.98 GHz SM clock: delays are approximate
        for trial in range(trials):
            pick = rng.sample(launches, max(1, int(len(launches) * delay_fraction)))
            delays = {k: int(rng.uniform(0.1, 1.0) * max_delay_us * cycles_per_us) for k in pick}
            out = self._issue(flat, delays)
            torch.cuda.synchronize(self.device)
            ok, why = bitwise_equal(out, ref)
            if not ok:
                raise VerificationError("eager multi-stream run with delays (trial %d, seed %d): %s" % (trial, seed, why))
            del out
            if self.mode == "graph":
                cap = self._cap
                statics = [x.detach().clone() for x in flat]
                g = torch.cuda.CUDAGraph()
                cap.wait_stream(torch.cuda.current_stream(self.device))
                with torch.cuda.graph(g, stream=cap):
                    out = self._issue(statics, delays)
                for _ in range(2):
                    g.replay()
                    torch.cuda.synchronize(self.device)
                    ok, why = bitwise_equal(out, ref)
                    if not ok:
                        raise VerificationError("CUDA graph with delays (trial %d, seed %d): %s" % (trial, seed, why))
                del g, out
        out = self(*flat)
        torch.cuda.synchronize(self.device)
        ok, why = bitwise_equal(out, ref)
        if not ok:
            raise VerificationError("compiled %s call: %s" % (self.mode, why))


def _choose(exported: Exported, example_inputs: Sequence[Any], keys: Sequence[str], strategy: str,
            dagrun: Optional[str]) -> Tuple[str, Dict[str, dict], Any]:
    from . import costmodel, schedule
    cost = costmodel.from_graph(exported.graph)
    if cost is None:
        warnings.warn("dagrun_torch: measuring the cost model profiles this process, and its CUDA graphs replay "
                      "slower afterwards; for timings, measure in another process (python3 -m dagrun_torch costmodel) "
                      "and attach it to the export (costmodel.attach)")
        flat = [x for x in _flatten(tuple(example_inputs)) if isinstance(x, torch.Tensor)]
        cost = costmodel.measure(exported, flat)
        costmodel.attach(exported.graph, cost)
    best, cands = schedule.choose(exported.graph, cost, lambda c, g: plan_model(exported, max_streams=c, strategy=strategy,
                                                                                dagrun=dagrun, graph=g), keys)
    return best, cands, cost


def _key(k: str) -> Any:
    return int(k) if k.isdigit() else k


def choose_cap(exported: Exported, example_inputs: Sequence[Any], *, strategy: str = "default",
               caps: Sequence[int] = (1, 2, 4, 6, 8, 12, 16, 24, 32, 0), extra: Sequence[str] = (),
               dagrun: Optional[str] = None) -> Tuple[int, dict]:
    """The schedule that the cost model predicts fastest (schedule.choose)
    among the stream caps (0: none) and the ``extra`` candidates
    (schedule.EXTRA: the staged schedule, the priority order under caps).
    The cost model is the one stored in the exported graph
    (costmodel.attach), else measured now (costmodel.measure, with a
    warning: profiling slows the process's later graph replays) and stored
    there. Raises ValueError when the stored model does not cover the graph
    or a candidate is unknown, DagrunError from the binary. Returns (the
    chosen candidate's cap, {"cap", "candidate" (its cap, or its name),
    "predicted_us": {candidate: µs}, "predicted_priority_us", "streams",
    "capacity", "interference"}), caps as integers, other candidates by name."""
    best, cands, cost = _choose(exported, example_inputs, [str(c) for c in caps] + list(extra), strategy, dagrun)
    return cands[best]["cap"], {"cap": cands[best]["cap"], "candidate": _key(best),
                                "predicted_us": {_key(c): round(v["predicted_us"], 2) for c, v in cands.items()},
                                "predicted_priority_us": {_key(c): round(v["predicted_priority_us"], 2) for c, v in cands.items()},
                                "streams": {_key(c): v["streams"] for c, v in cands.items()},
                                "capacity": cost.capacity, "interference": cost.interference}


def compile(model: torch.nn.Module, example_inputs: Sequence[Any], max_streams: Any = None,
            strategy: str = "default", mode: str = "graph", verify: bool = False, *,
            exported: Optional[Exported] = None, repeats: int = 20, workdir: Optional[str] = None,
            dagrun: Optional[str] = None, priority: Any = "auto") -> CompiledModel:
    """Run ``model`` on its dagrun plan.

    Exports the model on ``example_inputs`` (CUDA tensors; node times by CUDA
    graph replay, ``repeats`` calls per timed graph), plans it with the dagrun
    binary (``strategy``: "default", "single", "round-robin" or "naive";
    ``max_streams``: None or 0 for no cap, a cap, or "auto": the schedule
    the cost model predicts fastest among the caps, the staged schedule and the priority
    order (``choose_cap``; the latter two with the default strategy),
    recorded in ``.schedule``), and returns a CompiledModel whose call
    replays one multi-stream CUDA graph (``mode="graph"``) or issues the
    schedule on the streams (``mode="eager"``). ``verify=True`` checks the
    outputs against the one-stream run bit for bit, with delays injected on
    random streams (CompiledModel.verify). ``exported`` reuses an earlier
    export; ``workdir`` keeps graph.json, spec.yaml and plan.json there;
    ``dagrun`` is the binary's path (else DAGRUN, PATH, or a build).
    ``priority``: give each stream a CUDA priority by its longest remaining
    chain (plan.stream_priorities) so that kernels on the critical path start
    first when ready kernels compete; True, False, or "auto" (graph mode:
    capture both, keep the one whose replay is faster, in ``.tuning`` (ms);
    eager mode: True).

    Raises ValueError on bad arguments, ExportError when the model cannot be
    exported, DagrunNotFound/DagrunError from the binary, VerificationError.
    """
    if mode not in ("graph", "eager"):
        raise ValueError("mode=%r: want 'graph' or 'eager'" % (mode,))
    _check_plan_args(max_streams, strategy, auto=True)   # before the export, which times every node
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    flat = _flatten(tuple(example_inputs))
    if not flat or not all(isinstance(x, torch.Tensor) and x.is_cuda for x in flat):
        raise ValueError("dagrun_torch.compile needs CUDA tensor inputs (got %s)" % (
            ", ".join(type(x).__name__ if not isinstance(x, torch.Tensor) else str(x.device) for x in flat) or "none"))
    if not torch.cuda.is_available():
        raise ValueError("dagrun_torch.compile needs CUDA")
    ex = exported if exported is not None else export(model, tuple(example_inputs), repeats=repeats)
    schedule, form = None, None
    if max_streams == "auto":
        from .schedule import EXTRA, form as schedule_form
        max_streams, schedule = choose_cap(ex, tuple(example_inputs), strategy=strategy, dagrun=dagrun,
                                           extra=EXTRA if strategy == "default" else ())
        if isinstance(schedule["candidate"], str):
            from .costmodel import from_graph
            _, form, _ = schedule_form(ex.graph, from_graph(ex.graph), schedule["candidate"])
    plan = plan_model(ex, max_streams=max_streams, strategy=strategy, workdir=workdir, dagrun=dagrun, graph=form)
    cm = CompiledModel(ex, plan, mode, tuple(example_inputs), priority=priority)
    cm.schedule = schedule
    if verify:
        cm.verify(*example_inputs)
    return cm
