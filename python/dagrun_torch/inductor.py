"""dagrun's streams over torch.compile's fused kernels.

``compile_inductor(model, inputs)`` compiles the model with
``torch.compile`` (mode "default": Inductor's fused Triton kernels and its
calls of cuDNN/cuBLAS, no CUDA graph), takes the Python wrapper Inductor
generated for the graph (its ``call(args)``: allocations, kernel launches,
``del``s, in program order), and treats every statement of it that launches
GPU work as one graph node:

- a Triton launch (``kernel.run(..., stream=stream0)``) writes the tensor
  arguments the kernel's signature names ``out_ptr*`` or ``in_out_ptr*`` or
  its metadata lists as mutated, and reads the others and the
  ``in_out_ptr*`` and mutated ones (an ``out_ptr`` is stored to, never
  loaded);
- any other launching statement (``bufN = extern_kernels.convolution(...)``,
  ``extern_kernels.mm(..., out=buf)``, ``torch.ops.aten.*``) writes what it
  assigns and its ``out=`` tensors and reads the other tensors it names; a
  bare call with no ``out=`` is taken to read and write every tensor it
  names;
- allocations, views (``reinterpret_tensor``), aliases of reused buffers,
  ``del`` and asserts launch nothing.

Tensors are storages (a reused buffer is the same tensor, so reuse orders
its kernels by WAR/WAW; one an operator returns is marked ``"alloc":
"producer"``: the operator allocates it, so dagrun's planner leaves it out
of the arena), node times are measured by CUDA graph replay as the
exporter does, and the graph goes through ``dagrun import`` and ``dagrun
plan`` like any exported graph. The wrapper is then run once, statement by
statement inside a CUDA graph capture, following the plan's issue order:
each launching statement on its planned stream (Triton launches get that
stream's handle), records and waits where the plan issues them, and the
host statements (allocations, views, ``del``) before the launch that
follows them. A buffer the wrapper allocates is allocated on the stream of
the first launch that touches it: PyTorch's caching allocator hands a block
freed on a stream (a cuDNN workspace, say) to the next allocation on that
stream, which is safe only for work in that stream's order; allocated on
the capture stream and written first on another, the buffer's bytes could
still be in use by a kernel on the capture stream. That needs the plan to issue launches in program order, which
dagrun's planner keeps for an imported graph (its stable topological
order); ``CompiledInductor`` checks it and raises otherwise.

Memory inside the capture comes from two places. The buffers the wrapper
allocates itself (``empty_strided_cuda``: Triton kernels' outputs, the
``out=`` of matrix multiplies) are views into one arena of the plan's size,
at the offsets dagrun's planner gave them (``arena_slots``): two buffers
share bytes only where every launch touching one happens-before every
launch touching the other in the plan, which the planner's verifier checks,
so the multi-stream graph needs about the memory of the plan's live set
whatever streams run it, with no blocks cached per stream. The buffers an
extern kernel returns (a convolution's output) come from PyTorch's caching
allocator and follow the plan's lifetime records, as
``dagrun_torch.compile`` does for eager kernels (``plan.lower``): when the
wrapper ``del``s a buffer, its host reference is held until the stream that
allocated it is ordered after every launch, on every stream, that touches
it; then it goes back to the caching allocator, which hands the block only
to later allocations on that stream. A buffer whose allocating stream may
differ from its producer's (a kernel reads it before any kernel writes
it) is held to the end of the capture. ``lifetimes=False`` holds every
buffer to the end instead: all intermediates at once. The caching
allocator still serves each stream's own allocations of 1 to 10 MiB (an
extern kernel's output) from 20 MiB segments of that stream's.

cuBLAS workspaces: PyTorch gives every (cuBLAS handle, stream) pair that
runs a matrix multiply a workspace of its own (32 MiB on Hopper by default,
``CUBLAS_WORKSPACE_CONFIG``) and keeps it until
``torch._C._cuda_clearCublasWorkspaces()``. A capture clears that cache
after its warm-up run and again after the capture, as reduce-overhead's
CUDA graph trees do around theirs, so the workspaces its multiplies use are
allocated inside the capture, in the graph's private memory pool: they
live and die with the graph (a later clear elsewhere cannot hand them to
other tensors), and a discarded graph leaves none behind. A graph holds one
workspace per stream that runs a multiply. The captures share one set of
streams per device (``shared_streams``), and ``trace_call`` times every
launch on one side stream.

The trace follows the wrapper's own memory: an intermediate is freed when
the wrapper drops its last name, as Inductor planned, and a tensor id
stands for one storage from its allocation to its release (a later buffer
at the same address, once the first is freed, is another tensor).

Needs torch ≥ 2.4 with Inductor and Triton, and CUDA.
"""
from __future__ import annotations

import ast
import json
import os
import statistics
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from ._binary import run_dagrun, run_dagrun_json
from .exporter import _flat_tensors, _storage_nbytes, _time_graph_replay, storage_key
from .plan import Plan, lower

__all__ = ["InductorGraph", "WrapperCall", "CompiledInductor", "capture_call", "trace_call", "plan_graph", "plan_graphs", "issue_steps",
           "compile_inductor", "input_slots", "one_stream", "InductorError", "held_to_end", "clear_blas_workspaces",
           "shared_streams", "runs_blas", "blas_streams"]

_HOST_CALLS = {"empty_strided_cuda", "empty_strided", "empty", "empty_strided_cpu", "assert_size_stride",
               "assert_alignment", "reinterpret_tensor", "get_raw_stream", "get_cuda_stream", "set_device",
               "_DeviceGuard", "clear", "grid", "device", "check_nan", "alloc_from_pool"}


class InductorError(RuntimeError):
    """Inductor's wrapper could not be found or scheduled."""


def clear_blas_workspaces() -> bool:
    """Synchronize the device and free the cuBLAS and cuBLASLt workspaces
    PyTorch caches per (handle, stream) (module doc). The next multiply on a
    stream allocates a new one. Returns False, doing nothing, where torch
    has no ``torch._C._cuda_clearCublasWorkspaces``."""
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is None or not torch.cuda.is_available():
        return False
    torch.cuda.synchronize()
    clear()
    return True


_STREAMS: Dict[int, List[Any]] = {}


def shared_streams(n: int, device: torch.device) -> List[Any]:
    """The first ``n`` of one set of non-blocking streams per device, shared
    by every capture of this process (``runner.new_streams`` creates what is
    missing). A CUDA graph does not keep the streams it was captured on, so
    captures made one after another can share them; sharing bounds the
    streams, and with them the cached cuBLAS workspaces, to the widest plan."""
    from .runner import new_streams
    have = _STREAMS.setdefault(device.index if device.index is not None else torch.cuda.current_device(), [])
    if len(have) < n:
        have.extend(new_streams(n - len(have), device))
    return have[:n]


class TensorIds:
    """Tensor ids of a trace, one per storage from its allocation to its
    release: ``tensors`` lists {"id", "bytes" (rounded up to 4), "kind"}. A
    storage at the address of one that has been freed (a weak reference to
    each non-input storage tells) gets a new id."""

    def __init__(self) -> None:
        self.tensors: List[dict] = []
        self._of: Dict[Tuple[str, int], str] = {}
        self._alive: Dict[Tuple[str, int], Any] = {}

    def known(self, t: torch.Tensor) -> bool:
        """Whether t's address has an id (of t's storage or of a freed one)."""
        return storage_key(t) in self._of

    def id(self, t: torch.Tensor, kind: str) -> Optional[str]:
        """t's storage's id, new if the storage is new; None for an empty storage."""
        k = storage_key(t)
        if k in self._of and k in self._alive and self._alive[k].expired():
            del self._of[k]   # the storage that had this address was freed: t's is another tensor
        if k not in self._of:
            nb = _storage_nbytes(t)
            if nb == 0:
                return None
            self._of[k] = "t%d" % len(self.tensors)
            self.tensors.append({"id": self._of[k], "bytes": (nb + 3) // 4 * 4, "kind": kind})
            if kind != "input":
                self._alive[k] = _weak_storage(t)
        return self._of[k]


def _weak_storage(t: torch.Tensor) -> Any:
    """A weak reference to t's storage (``expired()`` once it is freed)."""
    from torch.multiprocessing.reductions import StorageWeakRef
    try:
        return StorageWeakRef(t.untyped_storage())
    except AttributeError:  # torch < 2.0
        return StorageWeakRef(t.storage())


@dataclass
class WrapperCall:
    """One call of Inductor's generated ``call``: its code object, the
    module's namespace, the argument list as it came in, and the other
    locals at entry (``self`` when ``call`` is a method)."""
    code: Any
    globals_: dict
    args: List[Any]
    extra: dict


def capture_call(compiled: Callable[..., Any], inputs: Sequence[Any]) -> WrapperCall:
    """Run ``compiled`` (a torch.compile'd module, already warmed up) once and
    catch Inductor's generated ``call(args)`` as it starts (``sys.setprofile``
    on calls of a function named ``call`` in a file of Inductor's code
    cache), with a copy of its argument list before it clears it. Raises
    InductorError when the call does not reach exactly one generated graph
    (a graph break makes several)."""
    import sys
    seen: List[WrapperCall] = []
    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")

    def prof(frame, event, arg):
        if event != "call":
            return
        co = frame.f_code
        if co.co_name != "call" or "args" not in frame.f_locals:
            return
        fn = co.co_filename
        if "torchinductor" not in fn and not (cache and fn.startswith(cache)):
            return
        loc = frame.f_locals
        a = loc.get("args")
        if not isinstance(a, list):
            return
        seen.append(WrapperCall(co, frame.f_globals, list(a), {k: v for k, v in loc.items() if k != "args"}))

    old = sys.getprofile()
    sys.setprofile(prof)
    try:
        with torch.no_grad():
            compiled(*inputs)
    finally:
        sys.setprofile(old)
    torch.cuda.synchronize()
    if len(seen) != 1:
        raise InductorError("the compiled model ran %d Inductor wrappers (graph breaks?); want 1" % len(seen))
    return seen[0]


def _call_body(code: Any) -> List[ast.stmt]:
    with open(code.co_filename) as f:
        src = f.read()
    tree = ast.parse(src)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == code.co_name and node.lineno <= code.co_firstlineno <= node.body[0].lineno:
            return _flatten_with(node.body)
    raise InductorError("no function %s at line %d of %s" % (code.co_name, code.co_firstlineno, code.co_filename))


def _flatten_with(body: List[ast.stmt]) -> List[ast.stmt]:
    out: List[ast.stmt] = []
    for s in body:
        if isinstance(s, ast.With):
            out += _flatten_with(s.body)
        else:
            out.append(s)
    return out


def _call_name(c: ast.Call) -> str:
    f = c.func
    if isinstance(f, ast.Attribute):
        return f.attr
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Subscript):
        return "[]"
    return "?"


def _is_host(s: ast.stmt) -> bool:
    """Statements that launch nothing: del, pass, asserts, assignments of
    names/views/allocations/streams, unpacking args, host calls."""
    if isinstance(s, (ast.Delete, ast.Pass, ast.Assert, ast.Import, ast.ImportFrom)):
        return True
    if isinstance(s, ast.Assign):
        v = s.value
        if isinstance(v, (ast.Name, ast.Constant, ast.Tuple)) and all(isinstance(e, ast.Name) for e in getattr(v, "elts", [v])):
            return True
        if isinstance(v, ast.Name):
            return True
        if isinstance(v, ast.Call):
            return all(_call_name(c) in _HOST_CALLS for c in ast.walk(v) if isinstance(c, ast.Call))
        return False
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
        return all(_call_name(c) in _HOST_CALLS for c in ast.walk(s.value) if isinstance(c, ast.Call))
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
        return True
    return False


def _triton_kernel(s: ast.stmt, ns: dict) -> Optional[Tuple[Any, List[ast.expr]]]:
    if not isinstance(s, ast.Expr) or not isinstance(s.value, ast.Call):
        return None
    f = s.value.func
    if isinstance(f, ast.Attribute) and f.attr == "run" and isinstance(f.value, ast.Name):
        k = ns.get(f.value.id)
    elif isinstance(f, ast.Subscript) and isinstance(f.value, ast.Name):
        k = ns.get(f.value.id)
    else:
        return None
    if k is None or not (hasattr(k, "fn") or hasattr(k, "triton_meta")):
        return None
    return k, list(s.value.args)


def _arg_names(k: Any) -> Optional[List[str]]:
    fn = getattr(k, "fn", None)
    names = getattr(fn, "arg_names", None)
    if names:
        return list(names)
    sig = (getattr(k, "triton_meta", None) or {}).get("signature")
    if isinstance(sig, dict):
        return list(sig.keys())
    return None


def _names(e: ast.AST) -> List[str]:
    return [n.id for n in ast.walk(e) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]


@dataclass
class InductorGraph:
    """A traced Inductor wrapper: ``stmts`` (compiled statements),
    ``launch`` (statement index → node id, for launching statements),
    ``graph`` (the JSON ``dagrun import`` reads), ``globals_`` (the wrapper
    module's namespace), ``args`` (the call's arguments), ``first_use``
    (allocating statement index → the first node that touches what it
    allocates), ``name_tids`` (each name the wrapper assigns → the tensor
    ids its value holds)."""
    stmts: List[Tuple[ast.stmt, Any]]
    launch: Dict[int, str]
    graph: dict
    globals_: dict
    args: List[Any]
    first_use: Dict[int, str] = field(default_factory=dict)
    name_tids: Dict[str, List[str]] = field(default_factory=dict)
    allocs: Dict[int, List[str]] = field(default_factory=dict)
    returned: List[str] = field(default_factory=list)


def _exec(stmt: ast.stmt, code: Any, ns: dict) -> Any:
    if isinstance(stmt, ast.Return):
        return eval(code, ns)
    exec(code, ns)
    return None


def trace_call(wc: WrapperCall, *, repeats: int = 20, timing: bool = True, name: str = "inductor") -> InductorGraph:
    """Run Inductor's caught ``call`` (``capture_call``) statement by statement on the
    current stream and build its operator graph (module doc). Intermediates
    are freed where the wrapper drops them; a storage freed and an address
    reused gives a new tensor id (a weak reference to each storage tells).
    Each launch is timed by CUDA graph replay on one side stream. Raises
    InductorError on a wrapper it cannot read."""
    body = _call_body(wc.code)
    glb = dict(wc.globals_)
    glb.update(wc.extra)
    args = list(wc.args)
    stmts = []
    for s in body:
        if isinstance(s, ast.Return):
            stmts.append((s, compile(ast.Expression(s.value), "<inductor-return>", "eval")))
        else:
            stmts.append((s, compile(ast.Module([s], []), "<inductor>", "exec")))
    ns = dict(glb)
    ns["args"] = list(args)
    keep: List[Any] = list(args)
    ids = TensorIds()
    tensors = ids.tensors
    tid = ids.id

    def tids(names: Sequence[str], kind: str = "activation") -> List[str]:
        out = []
        for n in names:
            for t in _flat_tensors(ns.get(n)):
                if t.is_cuda:
                    i = tid(t, kind)
                    if i and i not in out:
                        out.append(i)
        return out

    for t in args:
        if isinstance(t, torch.Tensor) and t.is_cuda:
            tid(t, "input")
    nodes: List[dict] = []
    launch: Dict[int, str] = {}
    allocated: Dict[int, List[str]] = {}
    name_tids: Dict[str, List[str]] = {}

    def assigned(s: ast.stmt) -> None:
        if isinstance(s, ast.Assign):
            for tgt in s.targets:
                for x in ast.walk(tgt):
                    if isinstance(x, ast.Name):
                        # tid() gives a storage at a freed one's address its own id
                        got = [tid(t, "activation") for t in _flat_tensors(ns.get(x.id)) if t.is_cuda and ids.known(t)]
                        name_tids[x.id] = list(dict.fromkeys(i for i in got if i))
    out = None
    tstream = torch.cuda.Stream() if timing else None
    with torch.no_grad():
        for i, (s, code) in enumerate(stmts):
            try:
                if _is_host(s) or isinstance(s, ast.Return):
                    out = _exec(s, code, ns)
                    if _allocates(s):
                        allocated[i] = tids([x.id for t in s.targets for x in ast.walk(t) if isinstance(x, ast.Name)])
                    assigned(s)
                    continue
                kern = _triton_kernel(s, ns)
                reads = tids(_names(s))
                writes: List[str] = []
                if kern is not None:
                    k, pos = kern
                    an = _arg_names(k)
                    mutated = set((getattr(k, "inductor_meta", None) or {}).get("mutated_arg_names") or [])
                    if an is None:
                        writes = list(reads)
                    else:
                        stored: List[ast.expr] = []   # out_ptr arguments: stored to, never loaded
                        for a, e in zip(an, pos):
                            if a.startswith("out_ptr") or a.startswith("in_out_ptr") or a in mutated:
                                writes += [w for w in tids(_names(e)) if w not in writes]
                                if a.startswith("out_ptr") and a not in mutated:
                                    stored.append(e)
                        reads = _loaded(s, stored, tids)
                else:
                    call = getattr(s, "value", None)
                    outs = [kw.value for kw in getattr(call, "keywords", []) if kw.arg == "out"]
                    for e in outs:
                        writes += [w for w in tids(_names(e)) if w not in writes]
                    if isinstance(s, ast.Expr) and not outs:
                        writes = list(reads)
                    elif outs:
                        reads = _loaded(s, outs, tids)
                stream_before = ns.get("stream0")
                ns["stream0"] = torch.cuda.current_stream().cuda_stream
                known = len(tensors)
                _exec(s, code, ns)
                if isinstance(s, ast.Assign):
                    for tgt in s.targets:
                        writes += [w for w in tids([x.id for x in ast.walk(tgt) if isinstance(x, ast.Name)]) if w not in writes]
                    # a tensor the launch returns is allocated by the operator itself: never in the plan's arena
                    for t in tensors[known:]:
                        if t["id"] in writes:
                            t["alloc"] = "producer"
                assigned(s)
                dur = 0.0
                if timing:
                    def fn(code=code, s=s):
                        scratch = dict(ns)
                        scratch["stream0"] = torch.cuda.current_stream().cuda_stream
                        _exec(s, code, scratch)
                    d = _time_graph_replay(fn, repeats, stream=tstream)
                    dur = d if d is not None else 0.0
                if stream_before is not None:
                    ns["stream0"] = stream_before
                nid = "k%d" % i
                launch[i] = nid
                text = _text(s)
                nodes.append({"id": nid, "op": text[:80], "reads": [r for r in reads if r not in writes] + [w for w in writes if w in reads],
                              "writes": writes, "duration_us": round(dur, 3), "inplace": any(w in reads for w in writes), "param_bytes": 0})
            except InductorError:
                raise
            except Exception as e:
                raise InductorError("cannot trace Inductor's wrapper at %s:%d (%s): %s: %s" % (
                    wc.code.co_filename, getattr(s, "lineno", 0), _text(s)[:120], type(e).__name__,
                    str(e).splitlines()[0] if str(e) else "")) from e
    torch.cuda.synchronize()
    returned = [tid(t, "activation") for t in _flat_tensors(out) if t.is_cuda and ids.known(t)]
    graph = {"model": name, "tracer": "torch.compile (inductor wrapper)", "batch": 1,
             "device": torch.cuda.get_device_name(), "torch": torch.__version__, "timing": "cuda-graph-replay",
             "sum_node_us": round(sum(n["duration_us"] for n in nodes), 2), "tensors": tensors, "nodes": nodes}
    del keep, out
    return InductorGraph(stmts=stmts, launch=launch, graph=graph, globals_=glb, args=list(args),
                         first_use=first_uses(allocated, nodes), name_tids=name_tids, allocs=allocated,
                         returned=[t for t in dict.fromkeys(returned) if t])


def _text(s: ast.stmt) -> str:
    """A wrapper statement's source text (its type's name where ``ast``
    cannot unparse)."""
    return ast.unparse(s) if hasattr(ast, "unparse") else type(s).__name__


def _loaded(s: ast.stmt, stored: Sequence[ast.expr], tids: Callable[[Sequence[str]], List[str]]) -> List[str]:
    """Tensor ids a launching statement reads: those of every name in it
    outside the ``stored`` argument expressions (a Triton kernel's
    ``out_ptr`` arguments, an extern kernel's ``out=``), which the launch
    writes without loading. A name that also appears elsewhere in the
    statement is read."""
    skip = {id(n) for e in stored for n in ast.walk(e)}
    names = [n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in skip]
    return tids(names)


def _allocates(s: ast.stmt) -> bool:
    """An assignment of a fresh buffer (empty_strided_cuda, empty_strided, empty)."""
    return isinstance(s, ast.Assign) and isinstance(s.value, ast.Call) and \
        _call_name(s.value) in ("empty_strided_cuda", "empty_strided", "empty")


# Calls that run cuBLAS (or cuBLASLt), each taking the workspace PyTorch caches for its stream.
_BLAS_CALLS = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "matmul", "linear", "_int_mm", "_scaled_mm",
               "dot", "vdot", "addr"}


def runs_blas(stmt: ast.stmt) -> bool:
    """Whether a wrapper statement calls a cuBLAS operator
    (``extern_kernels.mm(...)``, ``torch.ops.aten.bmm.default(...)``)."""
    for c in ast.walk(stmt):
        if not isinstance(c, ast.Call):
            continue
        f = c.func
        if isinstance(f, ast.Attribute) and f.attr == "default" and isinstance(f.value, ast.Attribute):
            f = f.value
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if name in _BLAS_CALLS:
            return True
    return False


def blas_streams(plan: Plan, ig: "InductorGraph") -> int:
    """How many of the plan's streams run a cuBLAS launch: each holds a
    cuBLAS workspace in the captured graph (module doc)."""
    return len({plan.stages[nid] for i, nid in ig.launch.items() if nid in plan.stages and runs_blas(ig.stmts[i][0])})


def first_uses(allocated: Dict[int, List[str]], nodes: Sequence[dict]) -> Dict[int, str]:
    """For each allocating statement (index → tensor ids it allocates), the
    first node in program order that reads or writes one of them; statements
    whose buffers no node touches are left out."""
    out: Dict[int, str] = {}
    for i, tids in allocated.items():
        want = set(tids)
        for n in nodes:
            if want & (set(n.get("reads") or ()) | set(n.get("writes") or ())):
                out[i] = n["id"]
                break
    return out


def plan_graph(graph: dict, max_streams: int = 0, dagrun: Optional[str] = None, strategy: str = "default") -> Plan:
    """``dagrun import`` and ``dagrun plan --json --strategy STRATEGY
    --max-streams MAX_STREAMS`` (0: no cap) of an operator graph. Raises
    DagrunError from the binary."""
    return plan_graphs(graph, [(max_streams, strategy)], dagrun)[(max_streams, strategy)]


def plan_graphs(graph: dict, caps: Sequence[Tuple[int, str]], dagrun: Optional[str] = None) -> Dict[Tuple[int, str], Plan]:
    """Plans of one operator graph under several (max_streams, strategy)
    pairs (max_streams 0: no cap): the graph is imported once (``dagrun
    import``) and the ``dagrun plan`` runs go in parallel, one process each.
    Returns {(max_streams, strategy): Plan}. Raises DagrunError from the
    binary (the first pair's failure, in the order given), DagrunNotFound
    where it is not dagrun (``run_dagrun``)."""
    from concurrent.futures import ThreadPoolExecutor
    caps = list(dict.fromkeys(caps))
    with tempfile.TemporaryDirectory(prefix="dagrun_torch-ind-") as d:
        g, s = os.path.join(d, "graph.json"), os.path.join(d, "spec.yaml")
        with open(g, "w") as f:
            json.dump(graph, f)
        run_dagrun(["import", g, "-o", s], binary=dagrun)

        def one(c: Tuple[int, str]) -> Plan:
            return Plan.from_dict(run_dagrun_json(["plan", s, "--json", "--strategy", c[1], "--max-streams", str(c[0])],
                                                  binary=dagrun)[1])
        with ThreadPoolExecutor(max_workers=max(1, min(len(caps), os.cpu_count() or 1))) as ex:
            futures = [ex.submit(one, c) for c in caps]
            return {c: f.result() for c, f in zip(caps, futures)}


def issue_steps(plan: Plan, launch: Dict[int, str]) -> List[Tuple[str, int, int]]:
    """The plan's ops in its issue order, as (kind, stream, x): ("launch",
    stream, statement index), ("record", stream, event) or ("wait", stream,
    event); lagged waits are dropped (one call at a time). Records and waits
    keep their places between launches, so a record issued after a wait
    stands for what that wait ordered. ``launch`` maps statement index → node
    id. Raises InductorError when the plan does not issue the launches in
    program order (the wrapper's statements run in that order)."""
    stmt_of = {nid: i for i, nid in launch.items()}
    order = [plan.streams[s].ops[j].stage for s, j in plan.issue_order if plan.streams[s].ops[j].kind == "launch"]
    if order != [launch[i] for i in sorted(launch)]:
        raise InductorError("the plan's issue order is not the wrapper's program order: cannot run it statement by statement")
    steps: List[Tuple[str, int, int]] = []
    for si, j in plan.issue_order:
        o = plan.streams[si].ops[j]
        if o.kind == "launch":
            steps.append(("launch", si, stmt_of[o.stage]))
        elif o.kind == "record":
            steps.append(("record", si, o.event))
        elif o.lag == 0:
            steps.append(("wait", si, o.event))
    return steps


def held_to_end(graph: dict) -> List[str]:
    """Tensor ids of ``graph`` whose allocating stream may not be their
    producer's stream: the first node (program order) that touches the
    tensor is not the first that writes it without reading it. The buffer
    is allocated on the first toucher's stream, while ``plan.lower`` orders
    its release after the producer's stream, so such a buffer is never
    released inside the capture."""
    first: Dict[str, str] = {}
    producer: Dict[str, str] = {}
    for n in graph["nodes"]:
        r, w = set(n.get("reads") or ()), list(n.get("writes") or ())
        for t in list(r) + w:
            first.setdefault(t, n["id"])
        for t in w:
            if t not in producer and t not in r:
                producer[t] = n["id"]
    return sorted(t for t, nid in first.items() if producer.get(t) != nid)


class CompiledInductor:
    """Inductor's kernels captured as one CUDA graph over a dagrun plan's
    streams. Call it with the model's inputs (copied into the graph's static
    input); returns the graph's static outputs (flat, as Inductor's call
    returns them). ``streams``: plan streams; ``plan``; ``graph``.
    ``delays`` (statement index → cycles) puts ``torch.cuda._sleep`` on the
    launch's stream before it, to expose a missing order (a consumer would
    read before its producer is done). ``lifetimes``: release buffers
    inside the capture by the plan's lifetime records (module doc), else
    hold every buffer to the end of the capture. ``pool_bytes``: the bytes
    the capture reserved for its private memory pool (intermediates at their
    peak and cuBLAS workspaces). Raises InductorError when the plan
    cannot be run statement by statement, PlanError when its lifetime
    records do not cover a use. ``arena``: take the wrapper's allocations
    from the plan's arena (module doc; ``arena_bytes`` is its size, 0 when
    no allocation takes part), else every buffer from the caching allocator.
    """

    def __init__(self, ig: InductorGraph, plan: Plan, input_slots: Dict[int, int],
                 delays: Optional[Dict[int, int]] = None, lifetimes: bool = True, arena: bool = True):
        self.ig, self.plan = ig, plan
        self._arena_at = arena_slots(ig, plan) if arena else {}
        size_of = {t["id"]: int(t["bytes"]) for t in ig.graph.get("tensors", [])}
        self._arena_planned = {i: size_of.get(ig.allocs[i][0]) for i in self._arena_at}
        self.arena_bytes = int((plan.stats or {}).get("arena_bytes") or 0) if self._arena_at else 0
        self._delays = dict(delays or {})
        self.streams = len(plan.streams)
        self._steps = issue_steps(plan, ig.launch)
        self._frees: List[List[str]] = [[] for _ in self._steps]
        self.lifetimes = lifetimes
        if lifetimes:
            acts = lower(plan, ig.graph, keep=held_to_end(ig.graph))
            if [a.kind for a in acts] != [k for k, _, _ in self._steps]:
                raise InductorError("internal error: the lowered plan's actions are not the plan's issue steps")
            self._frees = [list(a.frees) for a in acts]
        self._input_slots = input_slots
        dev = torch.device("cuda", torch.cuda.current_device())
        self._streams = shared_streams(self.streams, dev)
        self._events = [torch.cuda.Event() for _ in range(plan.events)]
        self._keep: List[Any] = []
        self._graph = torch.cuda.CUDAGraph()
        self._static_args = [a.clone() if isinstance(a, torch.Tensor) and i in input_slots.values() else a
                             for i, a in enumerate(ig.args)]
        cap = self._streams[0]
        cap.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(cap):
            self._run(warm=True)   # warm every stream (handles, kernels) outside the capture
            torch.cuda.synchronize()
            self._keep = []
            # the multiplies' workspaces are allocated inside the capture, in its pool (module doc)
            clear_blas_workspaces()
            torch.cuda.empty_cache()
            reserved = torch.cuda.memory_reserved()
            with torch.cuda.graph(self._graph, stream=cap):
                self._out = self._run()
            clear_blas_workspaces()
            # bytes the capture reserved: its private pool (the intermediates at their peak, the workspaces)
            self.pool_bytes = max(0, torch.cuda.memory_reserved() - reserved)
        torch.cuda.current_stream().wait_stream(cap)
        self._graph.replay()
        torch.cuda.synchronize()

    def _run(self, warm: bool = False) -> Any:
        ig = self.ig
        streams = self._streams
        cap = streams[0]
        arena = None
        if self.arena_bytes:
            # on the capture stream before the fork: every stream is ordered after it
            arena = torch.empty(self.arena_bytes, dtype=torch.uint8, device=cap.device)
            self._keep.append(arena)
        fork = torch.cuda.Event()
        fork.record(cap)
        for s in streams[1:]:
            s.wait_event(fork)
        ns = dict(ig.globals_)
        ns["args"] = list(self._static_args)
        keep = self._keep
        keep.extend(self._static_args)
        out = None
        done = 0  # statements run so far
        held: Dict[str, List[Any]] = {}   # tensor id → host references the wrapper let go of
        freed = set()                     # tensor ids the plan has released

        def let_go(name: str) -> None:
            ids = ig.name_tids.get(name) if self.lifetimes else None
            if ids is None:
                keep.append(ns[name])
                return
            for t in ids:
                if t not in freed:
                    held.setdefault(t, []).append(ns[name])

        def host_until(stop: int) -> Any:
            nonlocal done
            r = None
            while done < stop:
                s, code = ig.stmts[done]
                if isinstance(s, ast.Delete):
                    for x in ast.walk(s):
                        if isinstance(x, ast.Name) and x.id in ns:
                            let_go(x.id)
                if done in ig.launch:
                    raise InductorError("internal error: statement %d launches but the plan did not issue it" % done)
                first = ig.first_use.get(done)
                if done in self._arena_at:
                    name = _call_name(s.value)
                    alloc = ns[name]
                    ns[name] = _arena_alloc(arena, self._arena_at[done], self.arena_bytes, self._arena_planned[done])
                    try:
                        r = _exec(s, code, ns)
                    finally:
                        ns[name] = alloc
                elif first is not None:
                    # allocate on the stream of the buffer's first launch (see the module doc)
                    with torch.cuda.stream(streams[self.plan.stages[first]]):
                        r = _exec(s, code, ns)
                else:
                    r = _exec(s, code, ns)
                done += 1
            return r

        with torch.no_grad():
            for i, (kind, si, x) in enumerate(self._steps):
                st = streams[si]
                for t in self._frees[i - 1] if i else ():
                    held.pop(t, None)
                    freed.add(t)
                if kind == "record":
                    self._events[x].record(st)
                    continue
                if kind == "wait":
                    st.wait_event(self._events[x])
                    continue
                host_until(x)
                s, code = ig.stmts[x]
                with torch.cuda.stream(st):
                    if x in self._delays:
                        torch.cuda._sleep(self._delays[x])
                    ns["stream0"] = st.cuda_stream
                    _exec(s, code, ns)
                    ns["stream0"] = cap.cuda_stream
                if isinstance(s, ast.Assign) and not self.lifetimes:
                    for t in s.targets:
                        for y in ast.walk(t):
                            if isinstance(y, ast.Name) and y.id in ns:
                                keep.append(ns[y.id])
                done = x + 1
            out = host_until(len(ig.stmts))
        for s in streams[1:]:
            e = torch.cuda.Event()
            e.record(s)
            cap.wait_event(e)
        return out

    def __call__(self, *inputs: Any) -> Any:
        flat = _flat_tensors(inputs)
        for k, slot in self._input_slots.items():
            self._static_args[slot].copy_(flat[k])
        self._graph.replay()
        return self._out

    def replay(self, copies: Sequence[Tuple[torch.Tensor, int]] = ()) -> Any:
        """Copy each (tensor, argument index) of ``copies`` into the graph's
        static argument and replay the graph; returns its static outputs.
        The call path with the least host work: no flattening, no lookups."""
        args = self._static_args
        for t, slot in copies:
            args[slot].copy_(t)
        self._graph.replay()
        return self._out


_ARENA_ALLOCS = ("empty_strided_cuda", "empty_strided")


def arena_slots(ig: InductorGraph, plan: Plan) -> Dict[int, int]:
    """The wrapper's allocations that take their bytes from the plan's arena:
    {allocating statement index: offset in bytes}. A statement qualifies
    when it calls ``empty_strided_cuda`` or ``empty_strided`` by name and
    allocates one tensor that the planner placed in the arena
    (``plan.arena``) and that the graph does not return (the outputs
    outlive the call)."""
    out: Dict[int, int] = {}
    ret = set(ig.returned)
    for i, tids in ig.allocs.items():
        s = ig.stmts[i][0]
        if len(tids) != 1 or tids[0] in ret or tids[0] not in plan.arena:
            continue
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Name) and \
                s.value.func.id in _ARENA_ALLOCS:
            out[i] = plan.arena[tids[0]]
    return out


def _arena_alloc(arena: Optional[torch.Tensor], offset: int, size: int,
                 planned: Optional[int] = None) -> Callable[..., torch.Tensor]:
    """An ``empty_strided``-like function that returns a tensor over
    ``arena``'s bytes from ``offset`` (bytes). Raises InductorError when the
    tensor does not fit the arena's ``size`` bytes (a negative offset
    included), takes more than the ``planned`` bytes the planner placed at
    ``offset`` (it would overlap the next buffer's), or ``offset`` is not a
    multiple of its element size."""
    def alloc(shape: Sequence[int], stride: Sequence[int], dtype: Optional[torch.dtype] = None, *a: Any, **kw: Any) -> torch.Tensor:
        dt = dtype if isinstance(dtype, torch.dtype) else kw.get("dtype") or torch.get_default_dtype()
        n = 0 if any(d == 0 for d in shape) else 1 + sum((d - 1) * st for d, st in zip(shape, stride))
        item = getattr(dt, "itemsize", None) or torch.empty((), dtype=dt).element_size()
        nbytes = n * item
        if arena is None or offset < 0 or offset + nbytes > size:
            raise InductorError("internal error: a buffer of %d bytes at arena offset %d past the arena's %d bytes" % (nbytes, offset, size))
        if planned is not None and nbytes > planned:
            raise InductorError("internal error: a buffer of %d bytes at arena offset %d, where the plan placed %d bytes" % (
                nbytes, offset, planned))
        if offset % item:
            raise InductorError("internal error: arena offset %d is not a multiple of %s's %d bytes" % (offset, dt, item))
        if nbytes == 0:
            return torch.empty_strided(tuple(shape), tuple(stride), dtype=dt, device=arena.device)
        return arena[offset:offset + nbytes].view(dt).as_strided(tuple(shape), tuple(stride))
    return alloc


def one_stream(ig: InductorGraph, input_slots: Dict[int, int], dagrun: Optional[str] = None) -> CompiledInductor:
    """The same kernels captured on one stream (the single plan): the reference for bit identity."""
    return CompiledInductor(ig, plan_graph(ig.graph, 1, dagrun), input_slots)


def compile_inductor(model: torch.nn.Module, inputs: Sequence[torch.Tensor], max_streams: int = 0, *,
                     compiled: Optional[Callable] = None, dagrun: Optional[str] = None,
                     ig: Optional[InductorGraph] = None) -> CompiledInductor:
    """torch.compile ``model`` (mode "default"), trace Inductor's wrapper
    (``trace_call``), plan it with dagrun (``max_streams``: 0 for no cap) and
    capture it over the plan's streams. ``compiled``/``ig`` reuse an earlier
    compile or trace. Raises InductorError when the wrapper cannot be read
    or scheduled; DagrunError from the binary."""
    if ig is None:
        if compiled is None:
            compiled = torch.compile(model)
            with torch.no_grad():
                for _ in range(2):
                    compiled(*inputs)
        ig = trace_call(capture_call(compiled, inputs))
    slots = input_slots(ig.args, inputs)
    return CompiledInductor(ig, plan_graph(ig.graph, max_streams, dagrun), slots)


def input_slots(args: Sequence[Any], inputs: Sequence[torch.Tensor]) -> Dict[int, int]:
    """Which of the wrapper's arguments are the model's inputs: {input index: argument index}."""
    flat = _flat_tensors(tuple(inputs))
    out = {}
    for k, x in enumerate(flat):
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor) and a.data_ptr() == x.data_ptr() and a.shape == x.shape:
                out[k] = i
                break
    return out
