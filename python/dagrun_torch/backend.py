"""``torch.compile(model, backend="dagrun")``: dagrun's streams over Inductor's kernels.

The backend is registered under the name ``dagrun`` in the
``torch_dynamo_backends`` entry-point group of the installed package, so
after ``pip install`` ::

    fast = torch.compile(model, backend="dagrun", options={"max_streams": "auto", "verify": False})
    with torch.no_grad():
        y = fast(x)

Dynamo hands the backend each FX graph it captures (a graph break gives
several, each compiled and planned on its own; a new input shape fails
dynamo's guards and compiles again). For each graph the backend

1. compiles it with Inductor (``compile_fx``, no CUDA graph) for its fused
   Triton kernels and its cuDNN/cuBLAS calls, with Inductor's FX wrapper
   (``torch._inductor.config.fx_wrapper``): Inductor hands its wrapper over
   as a ``torch.fx`` graph of allocations, views and launches in program
   order (``dagrun_torch.inductor.compile_fx_wrapper``);
2. runs the compiled graph on the example inputs, which gives the
   wrapper's arguments, and walks the wrapper graph into an operator graph,
   one node per kernel launch, with the tensors each launch reads and
   writes and its time by CUDA graph replay (``trace_fx``);
3. plans it with dagrun (``plan_graph``: ``dagrun import``, ``dagrun plan``)
   and captures the plan as one multi-stream CUDA graph
   (``CompiledInductor``), with buffers released inside the capture by the
   plan's lifetime records;
4. on each call copies the inputs into the graph's static inputs (weights
   and buffers of the module are read in place, not copied) and replays the
   graph, as ``mode="reduce-overhead"`` does. The returned tensors are the
   graph's static outputs: the next call overwrites them; clone what you keep.

Options (``options=``): ``max_streams``: "auto" (default: plan the graph
on one stream, capped at 4 and 16 streams and uncapped, all at once;
capture the one-stream plan and the capped ones, narrowest first, time each
by 20 replays, keep the fastest, or among the plans within
MEMORY_TOLERANCE of the fastest the one whose graph reserved the least
memory; a wider plan whose ideal makespan is not MEMORY_TOLERANCE below a
timed narrower one's is not captured: more streams hold more memory and
cuBLAS workspaces for no predicted gain), 0 for no cap, or a cap from 1
to 2**31 - 1 (MAX_STREAMS); ``strategy``: dagrun's planning strategy
("default", "single", "round-robin", "naive"); ``verify``: check the chosen graph's outputs
against the same kernels on one stream bit for bit, also with GPU delays
in front of a tenth of the launches (``verify_trials`` runs, default 2,
at least 1), raising ``dagrun_torch.VerificationError`` on a difference;
``dagrun``: the path of the dagrun binary (None: ``find_dagrun``'s).

Never slower, never a crash: the backend runs Inductor's own path
(``mode="reduce-overhead"``: its one-stream CUDA graph) instead, with one
``DagrunFallbackWarning`` that says why, when there is no CUDA device,
when autograd is needed (inference only: run under ``torch.no_grad()``),
when the graph has dynamic shapes (``torch.compile(..., dynamic=False)``
gives a graph per shape), when an input is not a CUDA tensor or dynamo
passes fake example inputs, when the graph writes its inputs, when
torch has no Inductor FX wrapper (torch before 2.9), when no dagrun binary
is found (``find_dagrun``) or the one found or named does not answer
``dagrun version`` (both checked before Inductor compiles), when Inductor's FX
converter cannot express the graph (a kernel that is not Triton's, say) or
its wrapper graph has a node the tracer does not read (the warning names
it), or when the chosen graph's outputs differ from the one-stream run's.
When the plan has one stream, the planner predicts no gain or the fastest
plan is not MIN_GAIN faster than the same kernels on one stream, the graph
runs the one-stream plan, captured with its arena and lifetimes: Inductor's
kernels on one stream as one CUDA graph, which is what reduce-overhead
runs, without compiling the graph again (``CompiledGraph.path`` is
ONE_STREAM; one warning says why, unless ``max_streams`` is 1). Bad options raise ValueError when dynamo first
calls the backend (the model's first call), before anything is compiled;
torch.compile raises it, as it does VerificationError, inside
``torch._dynamo.exc.BackendCompilerFailed``. ``parse_options`` checks a
dict at once.

Memory: the trace frees intermediates where Inductor's wrapper does; each
captured plan takes the buffers Inductor's wrapper allocates from one arena
laid out by dagrun's planner, holds the outputs of extern kernels by the
plan's lifetimes, and one cuBLAS workspace per stream that runs a multiply,
all inside its own memory pool (``dagrun_torch.inductor``); the
one-stream reference takes every buffer from the caching allocator; a
candidate is released as soon as it can no longer be chosen, the
one-stream reference once it is timed, and the cached allocator blocks
they leave are returned (``torch.cuda.empty_cache``) before the backend
returns. Only the chosen graph stays.

Needs torch 2.0 or later (``torch.compile``; ``require_torch_compile``
says so on an older one); the dagrun path needs torch 2.9 or later
(Inductor's FX wrapper), an older torch runs Inductor's own path with one
warning per graph. The FX path is checked on the CPU with hand-built
wrapper graphs and on a GPU by ``python/tests/gpu_fx_tracer_check.py`` and
``bench --backend`` (torch 2.11, H100: docs/pytorch.md).
"""
from __future__ import annotations

import os
import statistics
import sys
import time
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

__all__ = ["dagrun", "Options", "parse_options", "DagrunFallbackWarning", "CompiledGraph", "compiled_graphs",
           "MIN_GAIN", "AUTO_CAPS", "ONE_STREAM", "MAX_STREAMS", "MAX_VERIFY_TRIALS", "MEMORY_TOLERANCE", "needs_autograd", "dynamic_inputs",
           "require_torch_compile", "register"]

# A multi-stream plan is kept only when its replay is at least this much faster
# (a fraction) than the same kernels captured on one stream.
MIN_GAIN = 0.02
# The stream caps "auto" captures and times besides the one-stream plan (0: no cap).
AUTO_CAPS = (4, 16, 0)
# Plans whose replay is within this fraction of the fastest one's count as
# fast as it; among them the backend keeps the one whose CUDA graph reserved
# the least memory (fewer streams hold fewer cuBLAS workspaces).
MEMORY_TOLERANCE = 0.01
STRATEGIES = ("default", "single", "round-robin", "naive")
# The largest stream cap the backend takes, as a spec's ``max_streams`` (2**31 - 1).
MAX_STREAMS = 2**31 - 1
# The most runs with delays the backend's verify takes: each is a capture and a run of the whole graph at
# compile time, so the bound keeps a compile's time bounded.
MAX_VERIFY_TRIALS = 100
# CompiledGraph.path of a graph whose plans gain nothing over one stream: the one-stream plan's CUDA graph.
ONE_STREAM = "one stream"


def require_torch_compile(what: str = "dagrun backend") -> None:
    """Raise ImportError, saying what to do, where this torch has no
    ``torch.compile`` (dynamo and Inductor, torch ≥ 2.0), which the backend
    runs inside; does nothing where it has. ``what`` opens the message."""
    import torch
    if not hasattr(torch, "compile"):
        raise ImportError("%s: torch %s has no torch.compile (dynamo and Inductor: torch 2.0 or later); "
                          "install a newer torch, or plan the model's eager kernels on this one with "
                          "dagrun_torch.compile(model, inputs)" % (what, torch.__version__))


class DagrunFallbackWarning(UserWarning):
    """The dagrun backend runs a graph other than on a multi-stream plan:
    Inductor's own path (reduce-overhead), the one-stream plan (no plan
    gains), or Inductor's kernels without a CUDA graph (a weight moved
    after compiling); the message says which and why."""


@dataclass
class Options:
    """The backend's options. ``max_streams``: "auto", 0 (no cap) or a cap
    from 1 to MAX_STREAMS; ``strategy``: dagrun's planning strategy; ``verify``: check bit
    identity with injected delays at compile time; ``verify_trials``: runs
    with delays, 0 to MAX_VERIFY_TRIALS; ``dagrun``: the binary's path (None: find_dagrun)."""
    max_streams: Any = "auto"
    strategy: str = "default"
    verify: bool = False
    verify_trials: int = 2
    dagrun: Optional[str] = None


def _integer(v: Any) -> Optional[int]:
    """``v`` as a Python int where it is an integer (a numpy integer
    included) and not a bool, else None."""
    import numbers
    if isinstance(v, bool) or type(v).__name__ == "bool_" or not isinstance(v, numbers.Integral):
        return None
    return int(v)


# The most characters of a value's repr that an error message shows.
MAX_SHOWN = 80


def _value(v: Any) -> str:
    """``v`` as an error message shows it: its repr (the first MAX_SHOWN
    characters, then how long it is), and its type where that is not a
    Python bool, int or str (numpy's 4 prints as 4)."""
    r = repr(v)
    if len(r) > MAX_SHOWN:
        r = "%s… (%d characters)" % (r[:MAX_SHOWN], len(r))
    t = type(v)
    if t in (bool, int, str, type(None)) or isinstance(v, os.PathLike):
        return r
    return "%s (a %s.%s)" % (r, t.__module__, t.__qualname__)


def _not_executable(v: Any) -> str:
    """Why path ``v`` is not an executable file ("" when it is)."""
    if not isinstance(v, (str, os.PathLike)):
        return "not a path"
    if not os.path.exists(v):
        return "no such file"
    if not os.path.isfile(v):
        return "not a file"
    if not os.access(v, os.X_OK):
        return "not executable"
    return ""


def parse_options(options: Optional[dict]) -> Options:
    """Options from torch.compile's ``options=`` dict. Raises ValueError
    naming the option, the value given (with its type where that is not a
    Python bool, int or str) and what it takes, on an unknown key, a bad
    value (a ``max_streams`` above MAX_STREAMS among them), a ``dagrun``
    path that is not an executable file (saying why), or ``verify`` with
    ``verify_trials`` 0. Integers may be numpy's."""
    o = Options()
    if options is None:
        return o
    if not isinstance(options, dict):
        raise ValueError("dagrun backend: options=%s: want a dict" % _value(options))
    known = set(Options.__dataclass_fields__)
    for k, v in options.items():
        if k not in known:
            raise ValueError("dagrun backend: unknown option %s (known: %s)" % (_value(k), ", ".join(sorted(known))))
        if k == "max_streams":
            if not (isinstance(v, str) and v == "auto"):
                n = _integer(v)
                if n is None or n < 0 or n > MAX_STREAMS:
                    raise ValueError("dagrun backend: max_streams=%s: want \"auto\", 0 (no cap) or an integer from 1 "
                                     "to %d" % (_value(v), MAX_STREAMS))
                v = n
        elif k == "strategy":
            if not isinstance(v, str) or v not in STRATEGIES:
                raise ValueError("dagrun backend: strategy=%s: want one of %s" % (_value(v), ", ".join(STRATEGIES)))
        elif k == "verify":
            if not isinstance(v, bool):
                raise ValueError("dagrun backend: verify=%s: want True or False" % _value(v))
        elif k == "verify_trials":
            n = _integer(v)
            if n is None or n < 0 or n > MAX_VERIFY_TRIALS:
                raise ValueError("dagrun backend: verify_trials=%s: want an integer from 0 to %d" % (
                    _value(v), MAX_VERIFY_TRIALS))
            v = n
        elif k == "dagrun":
            if v is not None:
                why = _not_executable(v)
                if why:
                    raise ValueError("dagrun backend: dagrun=%s: %s; want the path of an executable dagrun binary "
                                     "(None: find_dagrun's)" % (_value(v), why))
                v = os.path.abspath(v)   # a bare name is the file here, as checked, not a search of PATH
        setattr(o, k, v)
    if o.verify and o.verify_trials < 1:
        raise ValueError("dagrun backend: verify=True with verify_trials=%d: want at least 1 run with delays "
                         "(or verify=False)" % o.verify_trials)
    return o


@dataclass
class CompiledGraph:
    """What the backend did with one FX graph: ``path`` ("dagrun";
    ONE_STREAM: no plan gains over one stream, and the graph runs the
    one-stream plan; "reduce-overhead": Inductor's own path), ``reason``
    (why not the dagrun path, "" on it), ``streams`` (the chosen plan's), ``launches`` (kernel launches
    traced), ``candidates`` ({cap: {"streams", "ms", "pool_mb"}}: median
    replay of each captured plan, ms, and the memory its capture reserved,
    MB; cap 1 is the one-stream plan; ``arena_mb``: the part of the pool
    that is the plan's arena), ``identical``
    (outputs bit-identical to the one-stream plan's), ``verified`` (verify
    ran and passed; None where it did not run, as on the one-stream path,
    whose launches delays cannot reorder), ``traceback`` (of the failure that made it fall
    back, where one did), ``compile_s`` (seconds in the
    backend), ``inductor_s`` (of which Inductor's compile with its FX
    wrapper: on the dagrun and one-stream paths the rest is dagrun's own; a
    graph that falls back to reduce-overhead after it also holds Inductor's
    second compile), and of dagrun's own: ``trace_s`` (the traced run and
    each launch timed by replay), ``plan_s`` (the ``dagrun`` plans),
    ``capture_s`` (the candidates captured and timed), ``verify_s`` (the
    bit-identity check and the runs with delays)."""
    path: str = "dagrun"
    reason: str = ""
    streams: int = 0
    launches: int = 0
    candidates: Dict[str, dict] = field(default_factory=dict)
    identical: Optional[bool] = None
    verified: Optional[bool] = None
    traceback: str = ""
    compile_s: float = 0.0
    inductor_s: float = 0.0
    trace_s: float = 0.0
    plan_s: float = 0.0
    capture_s: float = 0.0
    verify_s: float = 0.0


_COMPILED: List[CompiledGraph] = []


def compiled_graphs() -> List[CompiledGraph]:
    """Every graph the backend compiled in this process, oldest first."""
    return list(_COMPILED)


def needs_autograd(example_inputs: Sequence[Any], grad_enabled: bool, gm: Any = None) -> bool:
    """Whether the graph must record autograd: grad mode is on and an input
    (weights included, which dynamo passes as inputs) or a parameter or
    buffer of ``gm`` (weights a graph holds as attributes, where dynamo
    does not inline the module) requires grad."""
    if not grad_enabled:
        return False
    held = []
    if gm is not None and hasattr(gm, "parameters"):
        held = list(gm.parameters()) + list(gm.buffers())
    return any(getattr(x, "requires_grad", False) for x in list(example_inputs) + held)


def dynamic_inputs(example_inputs: Sequence[Any]) -> List[int]:
    """Indexes of inputs that make the graph shape-dynamic: symbolic or
    plain integers (dynamo passes sizes as ints to a dynamic graph)."""
    import torch
    out = []
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.Tensor):
            continue
        if isinstance(x, (int, getattr(torch, "SymInt", int))) and not isinstance(x, bool):
            out.append(i)
    return out


def static_inputs(gm: Any, example_inputs: Sequence[Any]) -> List[int]:
    """Indexes of inputs that are the module's weights or buffers (read in
    place at each replay, not copied): nn.Parameter, tensors dynamo marks
    static (``_dynamo_static_input_type``), and placeholders whose source
    is a module attribute."""
    import torch
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"] if hasattr(gm, "graph") else []
    out = []
    for i, x in enumerate(example_inputs):
        if not isinstance(x, torch.Tensor):
            continue
        if isinstance(x, torch.nn.Parameter) or getattr(x, "_dynamo_static_input_type", None):
            out.append(i)
            continue
        if i < len(phs):
            meta = phs[i].meta
            td = meta.get("tensor_dict") or {}
            ga = meta.get("grapharg")
            src = getattr(ga, "source", None)
            name = ""
            try:
                name = src.name() if src is not None else ""
            except Exception:
                name = ""
            if td.get("_dynamo_static_input_type") or any(k in name for k in ("_parameters[", "_buffers[")):
                out.append(i)
    return out


def _inductor(gm: Any, example_inputs: Sequence[Any], cudagraphs: bool) -> Callable:
    """Inductor's compile of ``gm``: with ``cudagraphs`` its reduce-overhead
    path (one-stream CUDA graph trees), else its default (no CUDA graph)."""
    from torch._inductor.compile_fx import compile_fx
    return compile_fx(gm, list(example_inputs), config_patches={"triton.cudagraphs": bool(cudagraphs)})


def _inductor_fx(gm: Any, example_inputs: Sequence[Any]) -> Tuple[Callable, Any]:
    """Inductor's compile of ``gm`` with its FX wrapper, no CUDA graph:
    (the compiled callable, its ``inductor.FxWrapper``). Raises
    InductorError where the FX wrapper is not available or cannot express
    the graph (``inductor.compile_fx_wrapper``)."""
    from .inductor import compile_fx_wrapper
    return compile_fx_wrapper(gm, example_inputs)


def warn_fallback(message: str) -> None:
    """Warn ``message`` as a DagrunFallbackWarning from the first frame
    outside dagrun_torch and torch: the user's line that called the compiled
    model (through dynamo), not torch's call of the backend."""
    import torch
    skip = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (sys.modules[__package__], torch))
    level, f = 1, sys._getframe(0)
    while f is not None and f.f_code.co_filename.startswith(skip):
        f, level = f.f_back, level + 1
    warnings.warn(message, DagrunFallbackWarning, stacklevel=level if f is not None else 2)


def _fallback(gm: Any, example_inputs: Sequence[Any], why: str, info: CompiledGraph, t0: float) -> Callable:
    warn_fallback("dagrun backend: running Inductor's own path (reduce-overhead) for this graph: %s" % why)
    info.path, info.reason = "reduce-overhead", why
    fn = _inductor(gm, example_inputs, cudagraphs=True)
    info.compile_s = round(time.time() - t0, 2)
    return fn


def _median_replay_ms(ci: Any, n: int = 20) -> float:
    """Median GPU time of ``n`` replays of a captured graph, ms (3 replays first, untimed)."""
    import torch
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        ci.replay()
    times = []
    for _ in range(n):
        start.record()
        ci.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _flat_out(v: Any) -> List[Any]:
    from .exporter import _flat_tensors
    return _flat_tensors(v)


class _Replay:
    """The callable the backend returns for a graph on the dagrun or the
    one-stream path:
    copies the inputs that are not weights into the capture's static inputs,
    replays it, returns its static outputs in the compiled graph's form."""

    def __init__(self, ci: Any, static: Dict[int, int], out_form: Callable[[List[Any]], Any],
                 copies: List[Tuple[int, int]], inner: Callable):
        import torch
        self.ci = ci
        self._inner = inner
        self._static_idx = list(static)              # input indexes of the weights and buffers
        self._static_ptr = [static[i] for i in self._static_idx]
        # by input index, as torch._C._tensors_data_ptrs_at_indices_equal reads them
        self._ptr_at = [static.get(i, 0) for i in range(max(static, default=-1) + 1)]
        self._same = getattr(torch._C, "_tensors_data_ptrs_at_indices_equal", None)
        self._form = out_form
        self._copies = copies                        # (input index, wrapper argument index) to copy
        self._flat = _flat_out(ci._out)
        self._warned = False

    def _moved(self, args: Sequence[Any]) -> Optional[int]:
        if self._same is not None:
            if self._same(list(args), self._ptr_at, self._static_idx):
                return None
        for i, p in zip(self._static_idx, self._static_ptr):
            if args[i].data_ptr() != p:
                return i
        return None

    def __call__(self, *args: Any) -> Any:
        moved = self._moved(args) if self._static_idx else None
        if moved is not None:
            if not self._warned:
                self._warned = True
                warn_fallback("dagrun backend: a weight or buffer of the compiled module is another tensor than "
                              "at compile time (input %d): running Inductor's kernels without a CUDA graph; "
                              "torch._dynamo.reset() and compiling again captures the new one" % moved)
            return self._inner(*args)
        self.ci.replay([(args[i], slot) for i, slot in self._copies])
        return self._form(self._flat)


def dagrun(gm: Any, example_inputs: Sequence[Any], options: Optional[dict] = None, mode: Optional[str] = None) -> Callable:
    """The ``torch.compile`` backend (module doc). ``gm``: dynamo's FX graph;
    ``example_inputs``: its real example inputs; ``options``: see
    ``parse_options``; ``mode``: torch.compile's mode, which only "default"
    or None fits. Returns the callable dynamo calls in the graph's place.
    Raises ValueError on bad options, ImportError where torch has no
    torch.compile (``require_torch_compile``), VerificationError when
    ``verify`` finds a difference; every other failure falls back (module
    doc)."""
    opts = parse_options(options)
    if mode not in (None, "default"):
        raise ValueError("dagrun backend: mode=%r: the backend picks its own CUDA graphs; leave mode out "
                         "(options=... takes %s)" % (mode, ", ".join(Options.__dataclass_fields__)))
    require_torch_compile()
    import torch
    t0 = time.time()
    info = CompiledGraph()
    _COMPILED.append(info)
    example_inputs = list(example_inputs)
    why = _before_compile(gm, example_inputs, torch.is_grad_enabled(), opts.dagrun)
    if why:
        return _fallback(gm, example_inputs, why, info, t0)
    # Where Inductor's FX wrapper cannot express the graph, the graph takes Inductor's own path;
    # Inductor's own failures raise there as they would under backend="inductor".
    # compile_fx's result is called as dynamo calls a backend's: f(*args). (Its ``_boxed_call``
    # attribute, copied from the function it wraps, speaks for that inner function.)
    from .inductor import InductorError
    try:
        inner, fx = _inductor_fx(gm, example_inputs)
    except InductorError as e:
        return _fallback(gm, example_inputs, str(e), info, t0)
    info.inductor_s = round(time.time() - t0, 2)
    try:
        fn = _fast_path(gm, example_inputs, inner, fx, opts, info)
    except Exception as e:
        from .runner import VerificationError
        if isinstance(e, VerificationError):
            raise
        import traceback
        fn = None
        tb = traceback.extract_tb(e.__traceback__)
        where = " (%s:%d)" % (tb[-1].filename.rsplit("/", 1)[-1], tb[-1].lineno) if tb else ""
        info.reason = "%s: %s%s" % (type(e).__name__, str(e).splitlines()[0][:300] if str(e) else "", where)
        info.traceback = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    if fn is None:
        return _fallback(gm, example_inputs, info.reason, info, t0)
    info.compile_s = round(time.time() - t0, 2)
    return fn


def _inputs(idx: Sequence[int], one: str, many: str) -> str:
    """``idx`` said in a reason: "input 3 is ONE", "inputs 0, 2 are MANY",
    the first five, then how many more."""
    if len(idx) == 1:
        return "input %d is %s" % (idx[0], one)
    more = " and %d more" % (len(idx) - 5) if len(idx) > 5 else ""
    return "inputs %s%s are %s" % (", ".join(map(str, idx[:5])), more, many)


def _before_compile(gm: Any, example_inputs: Sequence[Any], grad_enabled: bool, binary: Optional[str] = None) -> str:
    """Why the graph cannot take the dagrun path, found before compiling
    ("" when it can). ``binary``: the ``dagrun`` option; where it is None,
    ``find_dagrun`` must find one (it may build it with Go in a checkout).
    Either must answer ``dagrun version`` (``binary_version``)."""
    import torch
    if not torch.cuda.is_available():
        return "no CUDA device (torch.cuda.is_available() is False)"
    if needs_autograd(example_inputs, grad_enabled, gm):
        return ("autograd is needed (the backend is for inference: call the compiled model under torch.no_grad() "
                "or torch.inference_mode())")
    dyn = dynamic_inputs(example_inputs)
    if dyn:
        return ("the graph has dynamic shapes (%s); torch.compile(..., dynamic=False) compiles a graph per shape"
                % _inputs(dyn, "a size", "sizes"))
    bad = [i for i, x in enumerate(example_inputs) if not (isinstance(x, torch.Tensor) and x.is_cuda)]
    if bad:
        return _inputs(bad, "not a CUDA tensor", "not CUDA tensors")
    try:
        from torch._subclasses.fake_tensor import is_fake
    except ImportError:
        is_fake = None
    if is_fake is not None and any(is_fake(x) for x in example_inputs):
        return "dynamo passed fake example inputs: the kernels cannot be run and timed at compile time"
    from .inductor import fx_wrapper_missing
    why = fx_wrapper_missing()
    if why:
        return why
    from ._binary import DagrunNotFound, binary_version, find_dagrun
    try:
        binary_version(binary or find_dagrun())
    except DagrunNotFound as e:
        why = str(e).splitlines()[0] if str(e) else "none found"
        return why if why.startswith("no dagrun binary") else "no dagrun binary to plan with (%s)" % why
    return ""


def worth_timing(c: dict) -> bool:
    """Whether a candidate plan ({"streams", "sum_us": one stream's time,
    "ideal_us": the planner's ideal makespan, µs}) is worth capturing and
    timing: more than one stream, and a predicted gain of at least
    MIN_GAIN (where the plan predicts)."""
    if c["streams"] < 2:
        return False
    if c.get("sum_us") and c.get("ideal_us") and c["sum_us"] < (1 + MIN_GAIN) * c["ideal_us"]:
        c["skipped"] = "no predicted gain"
        return False
    return True


def wider_for_nothing(c: dict, cands: Dict[str, dict]) -> bool:
    """Whether candidate ``c`` ({"streams", "ideal_us": the planner's ideal
    makespan, µs; "blas_streams": streams that run a cuBLAS launch}) is not
    worth capturing because a timed candidate of ``cands`` has no more
    streams and the planner predicts ``c`` no MEMORY_TOLERANCE gain over it:
    a wider graph holds more events, memory and cuBLAS workspaces (32 MiB
    each on Hopper) for nothing, and one as wide (two caps that gave the
    same plan) costs a capture for nothing. Sets c["skipped"] when so."""
    for k, d in cands.items():
        if k == "1" or d.get("ms") is None:
            continue
        if d["streams"] <= c["streams"] and c.get("ideal_us") and d.get("ideal_us") and \
                c["ideal_us"] > (1 - MEMORY_TOLERANCE) * d["ideal_us"]:
            held = ""
            if d.get("blas_streams") is not None and c.get("blas_streams") is not None:
                held = ", which holds %d cuBLAS workspace%s against %d" % (
                    d["blas_streams"], "" if d["blas_streams"] == 1 else "s", c["blas_streams"])
            c["skipped"] = ("no predicted gain over the plan capped at %s streams (%d streams%s)" % (
                k if k != "0" else "no", d["streams"], held))
            return True
    return False


def eligible(cands: Dict[str, dict]) -> List[str]:
    """The timed multi-stream candidates that ``choose`` could still pick
    (as more are timed, the list only shrinks): MIN_GAIN faster than one
    stream and within MEMORY_TOLERANCE of the fastest so far."""
    one_ms = cands["1"]["ms"]
    timed = {k: c["ms"] for k, c in cands.items() if k != "1" and c.get("ms") is not None}
    if not timed:
        return []
    best_ms = min(timed.values())
    return [k for k, ms in timed.items() if ms <= (1 - MIN_GAIN) * one_ms and ms <= (1 + MEMORY_TOLERANCE) * best_ms]


def choose(cands: Dict[str, dict]) -> Tuple[Optional[int], str]:
    """The cap to run among timed candidates ({cap: {"streams", "ms",
    "pool_mb"}}; "1" is the one-stream plan, the reference), or (None, why
    not): no timed multi-stream plan, or the fastest not MIN_GAIN faster
    than one stream. Among the candidates within MEMORY_TOLERANCE of the
    fastest (and MIN_GAIN faster than one stream), the one whose graph
    reserved the least memory, then the one with fewer streams."""
    one_ms = cands["1"]["ms"]
    timed = [(c["ms"], int(k)) for k, c in cands.items() if k != "1" and c.get("ms") is not None]
    if not timed:
        if max(c["streams"] for c in cands.values()) < 2:
            return None, "dagrun's plan has one stream"
        return None, ("the planner predicts no gain over one stream (the kernels' sum within %d%% of the plan's "
                      "ideal makespan)" % round(100 * MIN_GAIN))
    best_ms, best = min(timed)
    if best_ms > (1 - MIN_GAIN) * one_ms:
        return None, ("dagrun's fastest plan (%d streams) replays in %.3f ms against %.3f ms for the same kernels on "
                      "one stream: less than %d%% gain" % (cands[str(best)]["streams"], best_ms, one_ms, round(100 * MIN_GAIN)))
    near = [(cands[k].get("pool_mb") or 0.0, cands[k]["streams"], cands[k]["ms"], int(k)) for k in eligible(cands)]
    return min(near)[3], ""


def _fast_path(gm: Any, example_inputs: List[Any], inner: Callable, fx: Any, opts: Options,
               info: CompiledGraph) -> Optional[Callable]:
    """The dagrun path for one graph, or the one-stream path where no plan
    gains (``info.path`` ONE_STREAM, ``info.reason`` why), or None with
    ``info.reason`` set (the caller falls back to reduce-overhead).
    ``inner``: Inductor's compiled graph; ``fx``: its ``inductor.FxWrapper``,
    whose arguments ``inner``'s first call here catches."""
    import random
    import torch
    from . import inductor as ind
    from .runner import VerificationError, bitwise_equal

    t0 = time.time()
    static = static_inputs(gm, example_inputs)
    versions = [x._version for x in example_inputs]
    with torch.no_grad():
        res = inner(*example_inputs)
    torch.cuda.synchronize()
    if [x._version for x in example_inputs] != versions:
        info.reason = "the graph writes its inputs in place"
        return None
    res_flat = _flat_out(res)
    form = _output_form(res)
    ig = ind.trace_fx(fx, name=getattr(gm, "_get_name", lambda: "graph")())
    info.launches = len(ig.graph["nodes"])
    kinds = {t["id"]: t["kind"] for t in ig.graph["tensors"]}
    if any(kinds.get(w) == "input" for n in ig.graph["nodes"] for w in n["writes"]):
        info.reason = "a kernel of the graph writes one of its inputs in place"
        return None
    if not ig.graph["nodes"]:
        info.reason = "the graph launches no kernel"
        return None
    tensor_pos = [i for i, x in enumerate(example_inputs) if isinstance(x, torch.Tensor)]
    tensors = [example_inputs[i] for i in tensor_pos]
    slots = ind.input_slots(ig.args, tensors)
    static_set = set(static)
    copied = {k: v for k, v in slots.items() if tensor_pos[k] not in static_set}
    lost = [tensor_pos[k] for k, x in enumerate(tensors) if tensor_pos[k] not in static_set and k not in slots]
    if lost:
        info.reason = _inputs(lost, "passed to Inductor's kernels in another form than given",
                              "passed to Inductor's kernels in another form than given")
        return None

    info.trace_s = round(time.time() - t0, 2)
    caps = AUTO_CAPS if opts.max_streams == "auto" else (opts.max_streams,)
    t0 = time.time()
    plans = ind.plan_graphs(ig.graph, [(1, "default")] + [(cap, opts.strategy) for cap in caps], opts.dagrun)
    info.plan_s = round(time.time() - t0, 2)
    t0 = time.time()

    def timed(ci: Any, c: dict) -> None:
        c["ms"] = round(_median_replay_ms(ci), 4)
        c["pool_mb"] = round(getattr(ci, "pool_bytes", 0) / 1e6, 1)
        if getattr(ci, "arena_bytes", 0):
            c["arena_mb"] = round(ci.arena_bytes / 1e6, 1)

    # the trace's multiplies left a cached workspace on its timing stream
    ind.clear_blas_workspaces()
    # the reference takes every buffer from the allocator, none from the plan's arena, so that the
    # bit-identity check below also checks the chosen plan's arena layout
    one = ind.CompiledInductor(ig, plans[(1, "default")], copied, arena=False)
    made = [weakref.ref(one)]   # every capture, to tell whether a discarded one is still alive
    ref = [t.clone() for t in _flat_out(one(*tensors))]
    if len(ref) != len(res_flat) or any(a.shape != b.shape or a.dtype != b.dtype for a, b in zip(ref, res_flat)):
        info.reason = "Inductor's wrapper returns %d outputs, its compiled graph %d (or other shapes)" % (len(ref), len(res_flat))
        return None
    info.candidates["1"] = {"streams": 1}
    timed(one, info.candidates["1"])
    del one   # the reference is its outputs (ref) and its time
    _release(gc_first=False)
    kept: Dict[str, Any] = {}   # captured candidates that may still be chosen
    # narrowest first, so that a wider plan with no predicted gain over a timed one is not captured
    # (cap 1 is the reference, timed above)
    for cap in sorted((k for k in caps if k != 1), key=lambda k: len(plans[(k, opts.strategy)].streams)):
        plan = plans[(cap, opts.strategy)]
        st = plan.stats or {}
        c: Dict[str, Any] = {"streams": len(plan.streams), "sum_us": st.get("sum_us"), "ideal_us": st.get("ideal_makespan_us"),
                             "blas_streams": ind.blas_streams(plan, ig)}
        info.candidates[str(cap)] = c
        if worth_timing(c) and not wider_for_nothing(c, info.candidates):
            ci = ind.CompiledInductor(ig, plan, copied)
            made.append(weakref.ref(ci))
            timed(ci, c)
            kept[str(cap)] = (plan, ci)
            del ci
            still = set(eligible(info.candidates))
            for k in [k for k in kept if k not in still]:
                del kept[k]   # released as soon as it can no longer be chosen
            _release(gc_first=False)
    best, info.reason = choose(info.candidates)
    chosen = kept.pop(str(best)) if best is not None else None
    kept.clear()
    # a full garbage collection costs a process with torch.compile loaded a large part of a small
    # graph's compile: run it only when a discarded capture is still alive (in a reference cycle)
    _release(gc_first=any(r() is not None and (chosen is None or r() is not chosen[1]) for r in made))
    if chosen is None:
        # no plan gains over one stream: the one-stream plan, captured with its arena and lifetimes,
        # is Inductor's one-stream CUDA graph without a second compile
        chosen = (plans[(1, "default")], ind.CompiledInductor(ig, plans[(1, "default")], copied))
        info.path = ONE_STREAM
    info.capture_s = round(time.time() - t0, 2)
    t0 = time.time()
    plan, ci = chosen
    del chosen
    info.streams = len(plan.streams)
    out = _flat_out(ci(*tensors))
    ok, why = bitwise_equal(out, ref)
    info.identical = ok
    if not ok:
        info.reason = "; ".join(x for x in (info.reason, "the %d-stream graph's outputs differ from one stream's (%s)" % (
            info.streams, why)) if x)
        return None
    if info.path == ONE_STREAM:
        if opts.max_streams != 1:   # one stream is what a cap of 1 asks for: nothing to warn of
            warn_fallback("dagrun backend: running Inductor's kernels on one stream, as one CUDA graph, for this "
                          "graph: %s" % info.reason)
    elif opts.verify:
        rng = random.Random(0)
        launches = sorted(ig.launch)
        for trial in range(opts.verify_trials):
            delays = {k: int(rng.uniform(0.1, 1.0) * 200 * 1.98e3)
                      for k in rng.sample(launches, max(1, len(launches) // 10))}
            cd = ind.CompiledInductor(ig, plan, copied, delays=delays)
            same, why = bitwise_equal(_flat_out(cd(*tensors)), ref)
            del cd
            _release(gc_first=False)
            if not same:
                raise VerificationError("dagrun backend: the %d-stream graph with GPU delays (trial %d) differs from "
                                        "one stream: %s" % (info.streams, trial, why))
        info.verified = True
    info.verify_s = round(time.time() - t0, 2)
    static_ptr = {i: example_inputs[i].data_ptr() for i in static}
    return _Replay(ci, static_ptr, form, [(tensor_pos[k], slot) for k, slot in sorted(copied.items())], inner)


def _release(gc_first: bool = True) -> None:
    """Return what discarded captures left to the device: collect garbage
    (``gc_first``: graphs in reference cycles), wait for the device, and
    release the caching allocator's free blocks (a destroyed graph's private
    pool among them)."""
    import gc
    import torch
    if gc_first:
        gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def _output_form(res: Any) -> Callable[[List[Any]], Any]:
    """A function that puts flat output tensors back into the form of ``res``
    (a tuple or list of tensors and Nones, as Inductor's compiled graph returns)."""
    import torch
    if isinstance(res, torch.Tensor):
        return lambda flat: flat[0]
    if isinstance(res, (list, tuple)):
        kinds = [isinstance(x, torch.Tensor) for x in res]
        others = list(res)
        typ = type(res) if type(res) in (list, tuple) else tuple

        def form(flat: List[Any]) -> Any:
            it = iter(flat)
            return typ(next(it) if k else o for k, o in zip(kinds, others))
        if all(isinstance(x, torch.Tensor) or x is None or isinstance(x, (int, float, bool)) for x in res):
            return form
    raise ValueError("the compiled graph returns %s, not a tuple of tensors" % type(res).__name__)


def register() -> None:
    """Register the backend with dynamo under the name "dagrun" where the
    entry point is not installed (a checkout on PYTHONPATH). Idempotent.
    Raises ImportError where torch has no torch.compile
    (``require_torch_compile``)."""
    require_torch_compile()
    from torch._dynamo.backends.registry import _BACKENDS, register_backend
    if "dagrun" not in _BACKENDS:
        register_backend(compiler_fn=dagrun, name="dagrun")
