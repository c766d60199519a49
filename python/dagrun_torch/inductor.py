"""dagrun's streams over torch.compile's fused kernels.

``compile_fx_wrapper(gm, example_inputs)`` compiles a dynamo graph with
Inductor (no CUDA graph: its fused Triton kernels and its calls of
cuDNN/cuBLAS) through Inductor's FX wrapper
(``torch._inductor.config.fx_wrapper``, torch 2.9 or later): instead of
Python source, Inductor hands its wrapper over as a ``torch.fx``
GraphModule (``WrapperFxCodegen.compile_graph``, the override point
Inductor documents for backends), whose nodes are, in program order, the
wrapper's allocations, views and kernel launches. ``trace_fx`` walks those
nodes and treats every node that launches GPU work as one graph node
(``node_kind``):

- a Triton launch (the ``triton_kernel_wrapper_mutation`` higher-order
  operator, its ``kwargs`` keyed by the kernel signature's names) reads
  the tensor arguments named ``in_ptr*`` (or ``arg_*``, a template's
  inputs) and writes those named ``out_ptr*`` (stored to, never loaded);
  it reads and writes every other tensor argument (``in_out_ptr*``, a
  workspace ``ws_ptr``) and those its launcher lists as mutated
  (``mutated_args``); it is launched through Inductor's own launcher (the
  kernel's autotuner, ``tuner.run(..., stream=...)``), as Inductor's
  Python wrapper launches it. A Triton kernel of the model's own (a
  user-defined one: its launcher's ``custom_kernel``), whose argument names
  say nothing of what it writes, or one with TMA descriptors to make at the
  launch is a node of no kind here (below);
- an ATen operator (``aten.convolution.default``, ``aten.addmm.out``,
  ``aten.topk.default``: Inductor's extern kernels and fallbacks) writes
  the arguments its schema marks as written (``Tensor(a!)``) and the fresh
  tensors it returns, and reads its other tensor arguments and the
  written ones that are not ``out=`` arguments (in place);
- allocations (``torch.empty_strided``), views (``torch.as_strided``),
  ``operator.getitem`` of a multi-output operator, symbolic sizes,
  placeholders and constants launch nothing (host nodes).

A node of any other kind raises InductorError naming it; so does
Inductor's converter for a wrapper it cannot express as FX (a kernel that
is not Triton's, say): the backend then runs Inductor's own path.

Tensors are storages (a reused buffer is the same node or a view of it, so
reuse orders its kernels by WAR/WAW; one an operator returns is marked
``"alloc": "producer"``: the operator allocates it, so dagrun's planner
leaves it out of the arena), node times are measured by CUDA graph replay
as the exporter does, and the graph goes through ``dagrun import`` and
``dagrun plan`` like any exported graph. The wrapper graph is then run
once, node by node inside a CUDA graph capture, following the plan's
issue order: each launch on its planned stream, records and waits where
the plan issues them, and the host nodes before the launch that follows
them. A buffer the wrapper allocates is allocated on the stream of the
first launch that touches it: PyTorch's caching allocator hands a block
freed on a stream (a cuDNN workspace, say) to the next allocation on that
stream, which is safe only for work in that stream's order; allocated on
the capture stream and written first on another, the buffer's bytes could
still be in use by a kernel on the capture stream. That needs the plan to
issue launches in program order, which dagrun's planner keeps for an
imported graph (its stable topological order); ``CompiledInductor`` checks
it and raises otherwise.

Memory inside the capture comes from two places. The buffers the wrapper
allocates itself (``torch.empty_strided`` nodes: Triton kernels' outputs,
the ``out=`` of matrix multiplies) are views into one arena of the plan's
size, at the offsets dagrun's planner gave them (``arena_slots``): two
buffers share bytes only where every launch touching one happens-before
every launch touching the other in the plan, which the planner's verifier
checks, so the multi-stream graph needs about the memory of the plan's
live set whatever streams run it, with no blocks cached per stream. The
buffers an extern kernel returns (a convolution's output) come from
PyTorch's caching allocator and follow the plan's lifetime records, as
``dagrun_torch.compile`` does for eager kernels (``plan.lower``): when a
value of the wrapper graph is past its last use (FX frees implicitly, as
``torch.fx.Interpreter`` does), its host reference is held until the
stream that allocated it is ordered after every launch, on every stream,
that touches it; then it goes back to the caching allocator, which hands
the block only to later allocations on that stream. A buffer whose
allocating stream may differ from its producer's (a kernel reads it
before any kernel writes it) is held to the end of the capture.
``lifetimes=False`` holds every buffer to the end instead: all
intermediates at once. The caching allocator still serves each stream's
own allocations of 1 to 10 MiB (an extern kernel's output) from 20 MiB
segments of that stream's.

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
streams per device (``shared_streams``), and ``trace_fx`` times every
launch on one side stream.

The trace follows the wrapper's own memory: an intermediate is freed after
its last use in the wrapper graph, as Inductor planned, and a tensor id
stands for one storage from its allocation to its release (a later buffer
at the same address, once the first is freed, is another tensor).

Needs torch 2.9 or later (Inductor's FX wrapper) with Triton, and CUDA;
tested with torch 2.11. ``fx_wrapper_missing`` says why an older torch
cannot take this path.
"""
from __future__ import annotations

import contextlib
import json
import operator
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
import torch.fx

from ._binary import run_dagrun, run_dagrun_json
from .exporter import _flat_tensors, _storage_nbytes, _time_graph_replay, storage_key
from .plan import Plan, lower

__all__ = ["InductorGraph", "FxWrapper", "CompiledInductor", "compile_fx_wrapper", "compile_model", "fx_wrapper_missing",
           "FX_CONFIG", "node_kind", "node_access", "last_uses", "trace_fx", "plan_graph", "plan_graphs", "issue_steps",
           "compile_inductor", "input_slots", "one_stream", "InductorError", "held_to_end", "clear_blas_workspaces",
           "shared_streams", "runs_blas", "blas_streams", "triton_hop", "mutated_args", "node_failed", "naming_node"]


class InductorError(RuntimeError):
    """Inductor's wrapper could not be compiled to FX, read or scheduled."""


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


# Inductor's configuration for the FX wrapper compile. The asserts are off: Inductor writes them as raw
# lines, which its FX converter does not take (the wrapper's sizes are the example inputs', which dynamo's
# guards keep); autotuning happens at compile time because the FX converter bakes the tuned block sizes
# into the graph; no CUDA graph: dagrun captures its own. Keys this torch's config lacks are left out.
FX_CONFIG = {"fx_wrapper": True, "size_asserts": False, "nan_asserts": False, "alignment_asserts": False,
             "triton.cudagraphs": False, "triton.autotune_at_compile_time": True}


def _has_key(config: Any, key: str) -> bool:
    obj = config
    for part in key.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def fx_wrapper_missing(config: Any = None) -> str:
    """Why this torch cannot give Inductor's wrapper as an FX graph ("" when
    it can): no Inductor, or no ``config.fx_wrapper`` (torch before 2.9).
    ``config``: Inductor's config module (None: ``torch._inductor.config``)."""
    if config is None:
        try:
            import torch._inductor.config as config
        except ImportError:
            return "torch %s has no Inductor (torch._inductor)" % torch.__version__
    if not hasattr(config, "fx_wrapper"):
        return ("torch %s has no Inductor FX wrapper (torch._inductor.config.fx_wrapper, torch 2.9 or later), "
                "which the dagrun path reads" % torch.__version__)
    return ""


@dataclass
class FxWrapper:
    """Inductor's wrapper of one graph as FX: ``gm`` (the wrapper
    GraphModule), ``args`` (the argument list Inductor's compiled graph
    gets, caught at its first call; None before), ``tuners`` ({HOP
    ``kernel_idx``: the kernel's Inductor autotuner, its launcher})."""
    gm: Any
    args: Optional[List[Any]] = None
    tuners: Dict[int, Any] = field(default_factory=dict)
    nodes: Optional[Tuple[List[Any], List[str], Dict[int, List[Any]]]] = None   # wrapper_nodes' result


def compile_fx_wrapper(gm: Any, example_inputs: Sequence[Any]) -> Tuple[Callable, FxWrapper]:
    """Compile dynamo's graph ``gm`` with Inductor (``compile_fx``, FX_CONFIG)
    and catch the wrapper GraphModule Inductor makes for it: returns
    (Inductor's compiled callable, its FxWrapper, whose ``args`` fill at the
    callable's first call). Patches ``WrapperFxCodegen.compile_graph`` (to
    catch the graph and the arguments) and ``FxConverter.generate`` (to keep
    each kernel's autotuner) for the duration of the compile only. Raises
    InductorError where this torch has no FX wrapper (``fx_wrapper_missing``)
    or its FX wrapper lacks the two methods patched, where Inductor's FX
    converter cannot express the graph (its NotImplementedError: a kernel
    that is not Triton's, a line it does not convert), where the compile fails otherwise (the error's type and first
    line), or where it makes other than one wrapper graph in this process
    (none: another wrapper, a cached compile, a compile in another
    process)."""
    why = fx_wrapper_missing()
    if why:
        raise InductorError(why)
    import torch._inductor.config as config
    from torch._inductor.compile_fx import compile_fx
    try:
        from torch._inductor.codegen import wrapper_fxir as W
        generate0, compile_graph0 = W.FxConverter.generate, W.WrapperFxCodegen.compile_graph
    except (ImportError, AttributeError) as e:
        raise InductorError("torch %s's Inductor FX wrapper has no %s, which the dagrun path hooks to catch the "
                            "wrapper graph (written against torch 2.11)" % (torch.__version__, _missing_name(e))) from e
    caught: List[FxWrapper] = []

    def generate(self: Any) -> Any:
        g = generate0(self)
        g.meta["dagrun_tuners"] = {k.wrapped.kernel_idx: k.tuner for k in getattr(self, "kernels", {}).values()
                                   if hasattr(k, "wrapped") and hasattr(k, "tuner")}
        return g

    def compile_graph(self: Any, g: Any) -> Callable:
        fx = FxWrapper(g, None, dict(g.meta.get("dagrun_tuners") or {}))
        caught.append(fx)

        def call(*args: Any) -> Any:
            if fx.args is None:
                fx.args = list(args)
            return run_wrapper(fx, args)
        return call

    patches = {k: v for k, v in FX_CONFIG.items() if _has_key(config, k)}
    W.FxConverter.generate, W.WrapperFxCodegen.compile_graph = generate, compile_graph
    try:
        inner = compile_fx(gm, list(example_inputs), config_patches=patches)
    except NotImplementedError as e:
        raise InductorError("Inductor's FX wrapper cannot express this graph: %s" % _first_line(e)) from e
    except Exception as e:
        # the FX wrapper's own failure, or Inductor's: Inductor's own path (which the caller runs next)
        # raises the latter again
        raise InductorError("Inductor's compile with its FX wrapper failed: %s: %s" % (type(e).__name__, _first_line(e))) from e
    finally:
        W.FxConverter.generate, W.WrapperFxCodegen.compile_graph = generate0, compile_graph0
    if not caught:
        raise InductorError("Inductor's compile made no FX wrapper graph in this process (another wrapper took "
                            "over, such as torch._inductor.config.cpp_wrapper, or the compile came from a cache or "
                            "ran in another process); the dagrun path reads one")
    if len(caught) != 1:
        raise InductorError("Inductor made %d wrapper graphs for this graph (graph partitions or subgraphs); "
                            "the dagrun path reads one" % len(caught))
    return inner, caught[0]


def wrapper_nodes(fx: FxWrapper) -> Tuple[List[torch.fx.Node], List[str], Dict[int, List[torch.fx.Node]]]:
    """(nodes, their kinds (``node_kind``), the values dying after each
    (``last_uses``)) of ``fx``'s wrapper graph, worked out once per graph.
    Numbers the placeholders (``node.meta["dagrun_arg"]``, their position
    among the arguments). Raises InductorError naming a node the dagrun
    path does not read."""
    if fx.nodes is None:
        nodes = list(fx.gm.graph.nodes)
        kinds = [node_kind(n, fx.tuners) for n in nodes]
        k = 0
        for n in nodes:
            if n.op == "placeholder":
                n.meta["dagrun_arg"] = k
                k += 1
        fx.nodes = (nodes, kinds, last_uses(nodes))
    return fx.nodes


def run_wrapper(fx: FxWrapper, args: Sequence[Any]) -> Any:
    """Run Inductor's wrapper graph on ``args`` node by node on the current
    stream, each Triton kernel through Inductor's launcher for it
    (``launch_node``), each value let go after its last use; returns the
    graph's outputs. Inductor's own FX module launches through the Triton
    operator's dense implementation, which compiles the kernel again from
    its Python source; a kernel that Inductor compiled in a worker process
    has no source in this one (its JITFunction's ``fn`` is None), while its
    launcher holds the compiled binary. Raises InductorError on a node the
    dagrun path does not read (``node_kind``), a placeholder count that
    is not the arguments', or a node that fails (``node_failed``: it names
    the node; the node's error is chained)."""
    nodes, kinds, dies = wrapper_nodes(fx)
    if sum(1 for n in nodes if n.op == "placeholder") != len(args):
        raise InductorError("Inductor's wrapper graph has %d placeholders for %d arguments" % (
            sum(1 for n in nodes if n.op == "placeholder"), len(args)))
    env: Dict[torch.fx.Node, Any] = {}
    stream = None
    for i, n in enumerate(nodes):
        if n.op == "output":
            return _load(n.args[0], env)
        with naming_node("run", n, fx.tuners):
            if kinds[i] == "host":
                env[n] = run_host(n, env, args, fx.gm)
            else:
                if stream is None:
                    stream = torch.cuda.current_stream().cuda_stream
                env[n] = launch_node(n, kinds[i], env, fx.tuners, stream)
        for d in dies.get(i, ()):
            env.pop(d, None)
    return None


@contextlib.contextmanager
def naming_node(verb: str, node: torch.fx.Node, tuners: Dict[int, Any]) -> Iterator[None]:
    """Turn an error of the body (other than InductorError) into
    ``node_failed(verb, node, ...)``, the body's error chained."""
    try:
        yield
    except InductorError:
        raise
    except Exception as e:
        raise node_failed(verb, node, tuners, e) from e


def node_failed(verb: str, node: torch.fx.Node, tuners: Dict[int, Any], e: BaseException) -> InductorError:
    """The InductorError for wrapper node ``node`` failing with ``e`` as the
    wrapper graph is ``verb`` ("run", "trace"): names the node, the error's
    type and its first line."""
    return InductorError("cannot %s Inductor's wrapper graph at node %s: %s: %s" % (
        verb, describe(node, tuners)[:120], type(e).__name__, _first_line(e)))


def compile_model(model: torch.nn.Module, inputs: Sequence[torch.Tensor]) -> Tuple[Callable, FxWrapper]:
    """``torch.compile(model, dynamic=False)`` through ``compile_fx_wrapper``,
    run once on ``inputs`` under ``torch.no_grad()``: returns the compiled
    model and the FxWrapper of its one graph (arguments caught). Raises
    InductorError as compile_fx_wrapper does, and when the model compiles to
    other than one graph (a graph break)."""
    seen: List[FxWrapper] = []

    def backend(gm: Any, example_inputs: Sequence[Any]) -> Callable:
        inner, fx = compile_fx_wrapper(gm, example_inputs)
        seen.append(fx)
        return inner
    compiled = torch.compile(model, backend=backend, dynamic=False)
    with torch.no_grad():
        compiled(*inputs)
    torch.cuda.synchronize()
    if len(seen) != 1:
        raise InductorError("the model compiled to %d graphs (graph breaks?); want 1" % len(seen))
    return compiled, seen[0]


def _missing_name(e: BaseException) -> str:
    """What an ImportError or AttributeError says is missing: the module's
    or the attribute's name where it carries one, else its message."""
    name = getattr(e, "name", None)
    if isinstance(e, AttributeError) and name:
        obj = getattr(e, "obj", None)
        owner = getattr(obj, "__name__", type(obj).__name__) if obj is not None else ""
        return "%s.%s" % (owner, name) if owner else name
    if isinstance(e, ImportError) and name:
        return "module %s" % name
    return _first_line(e)


def _first_line(e: BaseException) -> str:
    s = str(e)
    return s.splitlines()[0][:300] if s else type(e).__name__


_TRITON_HOP: List[Any] = []


def triton_hop() -> Any:
    """The higher-order operator that Inductor's FX wrapper launches Triton
    kernels with (``triton_kernel_wrapper_mutation``); None where torch has
    none."""
    if not _TRITON_HOP:
        try:
            from torch._higher_order_ops.triton_kernel_wrap import triton_kernel_wrapper_mutation as hop
        except ImportError:
            hop = None
        _TRITON_HOP.append(hop)
    return _TRITON_HOP[0]


# Host nodes: they launch nothing on the GPU.
_HOST_TARGETS = (torch.empty_strided, torch.as_strided, operator.getitem)
# ATen operators on sizes (dynamic shapes), host-side.
_SYM_OPS = {"sym_size", "sym_stride", "sym_numel", "sym_storage_offset"}


def _target_name(node: torch.fx.Node, tuners: Optional[Dict[int, Any]] = None) -> str:
    t = node.target
    hop = triton_hop()
    if hop is not None and t is hop:
        tu = (tuners or {}).get(node.kwargs.get("kernel_idx"))
        fn = getattr(tu, "fn", None)
        return str(getattr(fn, "__name__", None) or (getattr(tu, "inductor_meta", None) or {}).get("kernel_name")
                   or "triton kernel %s" % node.kwargs.get("kernel_idx"))
    if isinstance(t, torch._ops.OpOverload):
        return str(t)   # namespace.name.overload: aten.addmm.out, prims.convert_element_type.default
    if isinstance(t, str):
        return t
    mod = getattr(t, "__module__", None)
    name = getattr(t, "__name__", None) or type(t).__name__
    return "%s.%s" % (mod, name) if mod else str(name)


def describe(node: torch.fx.Node, tuners: Optional[Dict[int, Any]] = None) -> str:
    """A wrapper node as text: ``buf6 = aten.addmm.out(arg4_1, buf4, arg3_1_view, out=buf6)``; a Triton
    launch as its kernel's name and its kwargs."""
    def show(v: Any) -> str:
        if isinstance(v, torch.fx.Node):
            return v.name
        if isinstance(v, (list, tuple)):
            inner = ", ".join(show(x) for x in v)
            return "[%s]" % inner if isinstance(v, list) else "(%s)" % inner
        return repr(v)
    hop = triton_hop()
    if hop is not None and node.target is hop:
        kw = node.kwargs.get("kwargs") or {}
        return "%s(%s)" % (_target_name(node, tuners), ", ".join("%s=%s" % (k, show(v)) for k, v in kw.items()))
    if node.op in ("placeholder", "get_attr", "output"):
        return "%s %s%s" % (node.op, node.name, "" if node.op != "output" else " " + show(node.args[0]))
    args = [show(a) for a in node.args] + ["%s=%s" % (k, show(v)) for k, v in node.kwargs.items()]
    return "%s = %s(%s)" % (node.name, _target_name(node, tuners), ", ".join(args))


def node_kind(node: torch.fx.Node, tuners: Dict[int, Any]) -> str:
    """What a node of Inductor's wrapper graph is: "host" (placeholders,
    constants, the output, allocations, views, ``getitem``, symbolic sizes:
    no GPU work), "triton" (a launch of the Triton higher-order operator
    whose kernel has its autotuner in ``tuners``) or "aten" (an ATen
    operator: an extern kernel or a fallback). Raises InductorError naming
    the node for anything else (a Triton launch without its launcher, of
    a kernel of the model's own or with TMA descriptors to make, a call of
    a Python function or a module, a method call)."""
    if node.op in ("placeholder", "get_attr", "output"):
        return "host"
    if node.op != "call_function":
        raise InductorError("Inductor's FX wrapper has a node the dagrun path does not read: %s (a %s node)" % (
            describe(node, tuners), node.op))
    t = node.target
    if any(t is h for h in _HOST_TARGETS):
        return "host"
    hop = triton_hop()
    if hop is not None and t is hop:
        tu = tuners.get(node.kwargs.get("kernel_idx"))
        if getattr(tu, "custom_kernel", False):
            raise InductorError("Inductor's FX wrapper launches a Triton kernel of the model's own, whose argument "
                                "names do not say which it writes: %s" % describe(node, tuners))
        if node.kwargs.get("tma_descriptor_metadata"):
            raise InductorError("Inductor's FX wrapper launches a Triton kernel with TMA descriptors made at the launch, "
                                "which its launcher does not make: %s" % describe(node, tuners))
        if tu is not None:
            return "triton"
        raise InductorError("Inductor's FX wrapper launches a Triton kernel without Inductor's launcher for it "
                            "(kernel_idx %s): %s" % (node.kwargs.get("kernel_idx"), describe(node, tuners)))
    if isinstance(t, torch._ops.OpOverload):
        return "host" if t.overloadpacket.__name__ in _SYM_OPS else "aten"
    raise InductorError("Inductor's FX wrapper has a node the dagrun path does not read: %s" % describe(node, tuners))


def _nodes_in(v: Any) -> List[torch.fx.Node]:
    out: List[torch.fx.Node] = []
    torch.fx.node.map_arg(v, lambda n: out.append(n) or n)
    return out


# Inductor's names of the tensor arguments a Triton kernel it generates only loads: its inputs, and a
# template's inputs (``arg_A``); ``out_ptr*`` are only stored, ``in_out_ptr*`` loaded and stored. Any other
# tensor argument (a workspace, ``ws_ptr``) counts as loaded and stored.
_LOADED_ONLY = ("in_ptr", "arg_")


def mutated_args(tuner: Any) -> set:
    """The argument names Inductor's launcher ``tuner`` lists as mutated:
    its ``mutated_arg_names`` (Inductor's ``cached_autotune`` moves the
    kernel metadata's list there), and any left in ``inductor_meta``."""
    meta = getattr(tuner, "inductor_meta", None) or {}
    return set(getattr(tuner, "mutated_arg_names", None) or ()) | set(meta.get("mutated_arg_names") or ())


def node_access(node: torch.fx.Node, kind: str, tuners: Dict[int, Any]) -> Tuple[List[torch.fx.Node], List[torch.fx.Node]]:
    """(read, written): the nodes whose values a launching node of ``kind``
    ("triton" or "aten", ``node_kind``) loads and stores (module doc); the
    node's own result is not among them (``written_result``). A node passed
    both as a stored-only argument and as a loaded one is read too."""
    reads: List[torch.fx.Node] = []
    writes: List[torch.fx.Node] = []
    if kind == "triton":
        mutated = mutated_args(tuners[node.kwargs["kernel_idx"]])
        for name, v in (node.kwargs.get("kwargs") or {}).items():
            ns = _nodes_in(v)
            if name in mutated or not name.startswith(_LOADED_ONLY):
                writes += ns
            if name in mutated or not name.startswith("out_ptr"):
                reads += ns
    elif kind == "aten":
        schema = node.target._schema
        given: List[Tuple[Any, Any]] = []
        positional = [a for a in schema.arguments if not a.kwarg_only]
        given += list(zip(positional, node.args))
        by_name = {a.name: a for a in schema.arguments}
        given += [(by_name.get(k), v) for k, v in node.kwargs.items()]
        for a, v in given:
            ns = _nodes_in(v)
            w = a is not None and a.alias_info is not None and a.alias_info.is_write
            if w:
                writes += ns
            if not (w and getattr(a, "is_out", a.kwarg_only)):
                reads += ns
    else:
        raise InductorError("internal error: node_access of a %s node" % kind)
    return list(dict.fromkeys(reads)), list(dict.fromkeys(writes))


def written_result(node: torch.fx.Node, kind: str, value: Any) -> List[torch.Tensor]:
    """The tensors of a launching node's result that it writes: an ATen
    operator's returns that alias no argument (fresh tensors; a return the
    schema marks ``Tensor(a)`` or ``Tensor(a!)`` is a view of an argument
    or the ``out=`` tensor itself, counted with the arguments). A Triton
    launch returns nothing."""
    if kind != "aten":
        return []
    rets = list(node.target._schema.returns)
    vals = list(value) if isinstance(value, (list, tuple)) and len(rets) != 1 else [value]
    out: List[torch.Tensor] = []
    for i, v in enumerate(vals):
        r = rets[i] if i < len(rets) else None
        if r is not None and r.alias_info is not None:
            continue
        out += _flat_tensors(v)
    return out


def last_uses(nodes: Sequence[torch.fx.Node]) -> Dict[int, List[torch.fx.Node]]:
    """{node index: the nodes whose values die after it}: a value dies after
    its last user (as ``torch.fx.Interpreter`` frees), one with no user after
    its own node; the output node's arguments never die (the call returns
    them)."""
    index = {n: i for i, n in enumerate(nodes)}
    last: Dict[torch.fx.Node, int] = {}
    for i, n in enumerate(nodes):
        for a in _nodes_in((n.args, n.kwargs)):
            last[a] = i
    out: Dict[int, List[torch.fx.Node]] = {}
    for n in nodes:
        if n.op == "output":
            continue
        i = last.get(n, index[n])
        if nodes[i].op == "output":
            continue
        out.setdefault(i, []).append(n)
    return out


def _load(v: Any, env: Dict[torch.fx.Node, Any]) -> Any:
    return torch.fx.node.map_arg(v, lambda n: env[n])


def triton_args(tuner: Any, values: Dict[str, Any]) -> List[Any]:
    """The positional arguments of ``tuner.run`` (Inductor's launcher of one
    Triton kernel) from the HOP's values by name: the kernel signature's
    names (``triton_meta["signature"]``) less the tuned configuration's
    block sizes, which the launcher adds itself, then the metadata's
    ``extra_launcher_args``. A specialized argument (in
    ``triton_meta["constants"]``, such as an ``xnumel`` of 1) is still one
    of the launcher's arguments, as in Inductor's Python wrapper; its value
    is the HOP's, else the constant. Raises InductorError naming an
    argument the values lack."""
    meta = getattr(tuner, "triton_meta", None) or {}
    consts = meta.get("constants") or {}
    launchers = getattr(tuner, "launchers", None) or []
    if not launchers:
        raise InductorError("Inductor's launcher of %s has no compiled configuration" % getattr(
            getattr(tuner, "fn", None), "__name__", "a Triton kernel"))
    tuned = getattr(launchers[0].config, "kwargs", None) or {}
    names = [a for a in meta.get("signature") or {} if a not in tuned]
    names += list((getattr(tuner, "inductor_meta", None) or {}).get("extra_launcher_args") or ())
    values = dict(values)
    for a in names:
        if a not in values and a in consts:
            values[a] = consts[a]
    missing = [a for a in names if a not in values]
    if missing:
        raise InductorError("Inductor's FX wrapper gives no %s for %s" % (", ".join(map(str, missing)), getattr(
            getattr(tuner, "fn", None), "__name__", "a Triton kernel")))
    return [values[a] for a in names]


def launch_node(node: torch.fx.Node, kind: str, env: Dict[torch.fx.Node, Any], tuners: Dict[int, Any],
                stream: int) -> Any:
    """Launch one launching node on the current stream; ``stream`` is its
    handle (``cuda_stream``), which Inductor's Triton launcher takes.
    Returns the node's value (None for a Triton launch)."""
    if kind == "triton":
        kw = node.kwargs
        tu = tuners[kw["kernel_idx"]]
        values = dict(_constant_args(kw.get("constant_args_idx")))
        values.update(_load(dict(kw.get("kwargs") or {}), env))
        tu.run(*triton_args(tu, values), stream=stream)
        return None
    return node.target(*_load(node.args, env), **_load(dict(node.kwargs), env))


def _constant_args(idx: Any) -> Dict[str, Any]:
    """The HOP's arguments kept out of the graph (its side table's constant args)."""
    if idx is None:
        return {}
    try:
        from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table
    except ImportError:
        return {}
    return dict(kernel_side_table.get_constant_args(idx) or {})


def run_host(node: torch.fx.Node, env: Dict[torch.fx.Node, Any], args: Sequence[Any], gm: Any,
             offsets: Optional[Dict[str, int]] = None) -> Any:
    """A host node's value: a placeholder's argument (by position among the
    placeholders, ``node.meta["dagrun_arg"]``), a constant of ``gm``, or the
    call of its target (an allocation, a view, ``getitem``, a size).

    Inductor's FX converter writes a view as ``torch.as_strided(buf, size,
    stride, offset)`` with ``offset`` counted from the start of ``buf``'s
    storage, as Inductor allocated it. Where ``buf``'s tensor is now another
    one over other bytes (a buffer in the plan's arena starts at its offset
    there; a static input is a copy), ``offsets`` (wrapper node name → the
    storage offset of its tensor in the trace, in elements) moves the view
    by the difference, so it covers the same elements of ``buf``."""
    if node.op == "placeholder":
        return args[node.meta["dagrun_arg"]]
    if node.op == "get_attr":
        v = gm
        for part in str(node.target).split("."):
            v = getattr(v, part)
        return v
    a, kw = _load(node.args, env), dict(_load(dict(node.kwargs), env))
    if offsets is not None and node.target is torch.as_strided and isinstance(node.args[0], torch.fx.Node):
        base = node.args[0]
        shift = a[0].storage_offset() - offsets.get(base.name, a[0].storage_offset())
        if shift and len(a) > 3:
            a = (*a[:3], a[3] + shift, *a[4:])
        elif shift and kw.get("storage_offset") is not None:
            kw["storage_offset"] = kw["storage_offset"] + shift
    return node.target(*a, **kw)


def _on_device(t: torch.Tensor) -> bool:
    return bool(t.is_cuda)


@dataclass
class InductorGraph:
    """A traced wrapper graph: ``nodes`` (its FX nodes in program order),
    ``kinds`` (each node's ``node_kind``), ``dies`` (``last_uses``),
    ``launch`` (node index → graph node id, for launching nodes), ``graph``
    (the JSON ``dagrun import`` reads), ``fx`` (the FxWrapper: graph
    module, tuners), ``args`` (the call's arguments), ``first_use``
    (allocating node index → the first graph node that touches what it
    allocates), ``name_tids`` (each wrapper node's name → the tensor ids
    its value holds), ``offsets`` (each wrapper node's name → the storage
    offset of its tensor, in elements, for ``run_host``), ``allocs`` (allocating node index → tensor ids),
    ``returned`` (tensor ids of the outputs)."""
    nodes: List[torch.fx.Node]
    kinds: List[str]
    dies: Dict[int, List[torch.fx.Node]]
    launch: Dict[int, str]
    graph: dict
    fx: FxWrapper
    args: List[Any]
    first_use: Dict[int, str] = field(default_factory=dict)
    name_tids: Dict[str, List[str]] = field(default_factory=dict)
    offsets: Dict[str, int] = field(default_factory=dict)
    allocs: Dict[int, List[str]] = field(default_factory=dict)
    returned: List[str] = field(default_factory=list)


def trace_fx(fx: FxWrapper, *, repeats: int = 20, timing: bool = True, name: str = "inductor") -> InductorGraph:
    """Run Inductor's wrapper graph (``compile_fx_wrapper``, arguments
    caught) node by node on the current stream and build its operator
    graph (module doc). Every node is classified (``node_kind``) before
    anything runs. Intermediates die after their last use; a storage freed
    and an address reused gives a new tensor id (a weak reference to each
    storage tells). Each launch is timed by CUDA graph replay on one side
    stream (``timing``; ``repeats`` launches per replay). Raises
    InductorError naming the node on a wrapper node it does not read or
    one that fails."""
    if fx.args is None:
        raise InductorError("internal error: Inductor's compiled graph has not run: no arguments caught")
    nodes, kinds, dies = wrapper_nodes(fx)
    args = list(fx.args)
    k = sum(1 for n in nodes if n.op == "placeholder")
    if k != len(args):
        raise InductorError("Inductor's wrapper graph has %d placeholders for %d arguments" % (k, len(args)))
    ids = TensorIds()
    tensors = ids.tensors
    tid = ids.id

    def tids(v: Any, kind: str = "activation") -> List[str]:
        out: List[str] = []
        for t in _flat_tensors(v):
            if _on_device(t):
                i = tid(t, kind)
                if i and i not in out:
                    out.append(i)
        return out

    for t in args:
        if isinstance(t, torch.Tensor) and _on_device(t):
            tid(t, "input")
    env: Dict[torch.fx.Node, Any] = {}
    graph_nodes: List[dict] = []
    launch: Dict[int, str] = {}
    allocated: Dict[int, List[str]] = {}
    name_tids: Dict[str, List[str]] = {}
    offsets: Dict[str, int] = {}
    out: Any = None
    tstream = torch.cuda.Stream() if timing else None
    with torch.no_grad():
        for i, n in enumerate(nodes):
            with naming_node("trace", n, fx.tuners):
                kind = kinds[i]
                if kind == "host":
                    if n.op == "output":
                        out = _load(n.args[0], env)
                        continue
                    env[n] = run_host(n, env, args, fx.gm)
                    if n.op == "get_attr":
                        tids(env[n], "input")     # constants outlive the call, as inputs do
                    if n.target is torch.empty_strided:
                        allocated[i] = tids(env[n])
                else:
                    rn, wn = node_access(n, kind, fx.tuners)
                    reads = tids([env[x] for x in rn])
                    writes = tids([env[x] for x in wn])
                    known = len(tensors)
                    env[n] = launch_node(n, kind, env, fx.tuners, torch.cuda.current_stream().cuda_stream)
                    writes += [w for w in tids(written_result(n, kind, env[n])) if w not in writes]
                    # a tensor the launch returns is allocated by the operator itself: never in the plan's arena
                    for t in tensors[known:]:
                        if t["id"] in writes:
                            t["alloc"] = "producer"
                    dur = 0.0
                    if timing:
                        def fn(n: torch.fx.Node = n, kind: str = kind) -> None:
                            launch_node(n, kind, env, fx.tuners, torch.cuda.current_stream().cuda_stream)
                        d = _time_graph_replay(fn, repeats, stream=tstream)
                        dur = d if d is not None else 0.0
                    nid = "k%d" % i
                    launch[i] = nid
                    graph_nodes.append({"id": nid, "op": describe(n, fx.tuners)[:80],
                                        "reads": [r for r in reads if r not in writes] + [w for w in writes if w in reads],
                                        "writes": writes, "duration_us": round(dur, 3),
                                        "inplace": any(w in reads for w in writes), "param_bytes": 0})
                if isinstance(env.get(n), torch.Tensor):
                    offsets[n.name] = env[n].storage_offset()
                # tid() gives a storage at a freed one's address its own id
                name_tids[n.name] = [x for x in dict.fromkeys(
                    tid(t, "activation") for t in _flat_tensors(env.get(n)) if _on_device(t) and ids.known(t)) if x]
            for d in dies.get(i, ()):
                env.pop(d, None)
    torch.cuda.synchronize()
    returned = [tid(t, "activation") for t in _flat_tensors(out) if _on_device(t) and ids.known(t)]
    graph = {"model": name, "tracer": "torch.compile (inductor fx wrapper)", "batch": 1,
             "device": torch.cuda.get_device_name(), "torch": torch.__version__, "timing": "cuda-graph-replay",
             "sum_node_us": round(sum(n["duration_us"] for n in graph_nodes), 2), "tensors": tensors, "nodes": graph_nodes}
    del env, out
    return InductorGraph(nodes=nodes, kinds=kinds, dies=dies, launch=launch, graph=graph, fx=fx, args=args,
                         first_use=first_uses(allocated, graph_nodes), name_tids=name_tids, offsets=offsets, allocs=allocated,
                         returned=[t for t in dict.fromkeys(returned) if t])


# ATen operators that run cuBLAS (or cuBLASLt), each taking the workspace PyTorch caches for its stream.
_BLAS_CALLS = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "matmul", "linear", "_int_mm", "_scaled_mm",
               "dot", "vdot", "addr"}


def runs_blas(node: torch.fx.Node) -> bool:
    """Whether a wrapper node calls a cuBLAS operator (``aten.mm.out``,
    ``aten.addmm.out``, ``aten.bmm.default``, in place or not)."""
    t = node.target
    return node.op == "call_function" and isinstance(t, torch._ops.OpOverload) and \
        t.overloadpacket.__name__.rstrip("_") in _BLAS_CALLS


def blas_streams(plan: Plan, ig: "InductorGraph") -> int:
    """How many of the plan's streams run a cuBLAS launch: each holds a
    cuBLAS workspace in the captured graph (module doc)."""
    return len({plan.stages[nid] for i, nid in ig.launch.items() if nid in plan.stages and runs_blas(ig.nodes[i])})


def first_uses(allocated: Dict[int, List[str]], nodes: Sequence[dict]) -> Dict[int, str]:
    """For each allocating wrapper node (index → tensor ids it allocates),
    the first graph node in program order that reads or writes one of them;
    allocations whose buffers no node touches are left out."""
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
    stream, node index), ("record", stream, event) or ("wait", stream,
    event); lagged waits are dropped (one call at a time). Records and waits
    keep their places between launches, so a record issued after a wait
    stands for what that wait ordered. ``launch`` maps wrapper node index → graph
    node id. Raises InductorError when the plan does not issue the launches
    in program order (the wrapper's nodes run in that order)."""
    node_of = {nid: i for i, nid in launch.items()}
    order = [plan.streams[s].ops[j].stage for s, j in plan.issue_order if plan.streams[s].ops[j].kind == "launch"]
    if order != [launch[i] for i in sorted(launch)]:
        raise InductorError("the plan's issue order is not the wrapper's program order: cannot run it node by node")
    steps: List[Tuple[str, int, int]] = []
    for si, j in plan.issue_order:
        o = plan.streams[si].ops[j]
        if o.kind == "launch":
            steps.append(("launch", si, node_of[o.stage]))
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
    ``delays`` (wrapper node index → cycles) puts ``torch.cuda._sleep`` on
    the launch's stream before it, to expose a missing order (a consumer
    would read before its producer is done). ``lifetimes``: release buffers
    inside the capture by the plan's lifetime records (module doc), else
    hold every buffer to the end of the capture. ``pool_bytes``: the bytes
    the capture reserved for its private memory pool (intermediates at their
    peak and cuBLAS workspaces). Raises InductorError when the plan
    cannot be run node by node, PlanError when its lifetime records do not
    cover a use. ``arena``: take the wrapper's allocations from the plan's
    arena (module doc; ``arena_bytes`` is its size, 0 when no allocation
    takes part), else every buffer from the caching allocator.
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
        return run_plan(self.ig, self._steps, self._frees, self._streams, self._events, self._static_args, self._keep,
                        arena_at=self._arena_at, arena_planned=self._arena_planned, arena_bytes=self.arena_bytes,
                        first_stream={i: self.plan.stages[nid] for i, nid in self.ig.first_use.items()},
                        delays=self._delays, lifetimes=self.lifetimes)

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


def run_plan(ig: InductorGraph, steps: Sequence[Tuple[str, int, int]], frees: Sequence[Sequence[str]],
             streams: Sequence[Any], events: Sequence[Any], static_args: Sequence[Any], keep: List[Any], *,
             arena_at: Dict[int, int], arena_planned: Dict[int, Optional[int]], arena_bytes: int,
             first_stream: Dict[int, int], delays: Dict[int, int], lifetimes: bool) -> Any:
    """Issue the wrapper graph's nodes over ``streams`` in the plan's issue
    order (``issue_steps``), as CompiledInductor captures it: records and
    waits on ``events``; each launch on its stream (after a
    ``torch.cuda._sleep`` of ``delays[index]`` cycles where given); the host
    nodes before it, each allocation on the stream of its first launch
    (``first_stream``: allocating node index → plan stream) or in the arena
    at ``arena_at`` (module doc); a value past its last use held until the
    plan's release of its tensors (``frees``, per step) where ``lifetimes``,
    else kept to the end in ``keep`` (which also keeps the arena and the
    arguments). Returns the output node's values."""
    cap = streams[0]
    arena = None
    if arena_bytes:
        # on the capture stream before the fork: every stream is ordered after it
        arena = torch.empty(arena_bytes, dtype=torch.uint8, device=cap.device)
        keep.append(arena)
    fork = torch.cuda.Event()
    fork.record(cap)
    for s in streams[1:]:
        s.wait_event(fork)
    keep.extend(static_args)
    env: Dict[torch.fx.Node, Any] = {}
    out: Any = None
    done = 0  # wrapper nodes run so far
    held: Dict[str, List[Any]] = {}   # tensor id → host references past their last use in the wrapper
    freed = set()                     # tensor ids the plan has released
    nodes, gm, tuners = ig.nodes, ig.fx.gm, ig.fx.tuners

    def let_go(i: int) -> None:
        for d in ig.dies.get(i, ()):
            if d not in env:
                continue
            v = env.pop(d)
            ids = ig.name_tids.get(d.name) if lifetimes else None
            if ids is None:
                keep.append(v)
                continue
            for t in ids:
                if t not in freed:
                    held.setdefault(t, []).append(v)

    def host_until(stop: int) -> None:
        nonlocal done, out
        while done < stop:
            n = nodes[done]
            if done in ig.launch:
                raise InductorError("internal error: wrapper node %d launches but the plan did not issue it" % done)
            if n.op == "output":
                out = _load(n.args[0], env)
            elif done in arena_at:
                env[n] = _arena_alloc(arena, arena_at[done], arena_bytes, arena_planned.get(done))(
                    *_load(n.args, env), **_load(dict(n.kwargs), env))
            elif done in first_stream:
                # allocate on the stream of the buffer's first launch (see the module doc)
                with torch.cuda.stream(streams[first_stream[done]]):
                    env[n] = run_host(n, env, static_args, gm, ig.offsets)
            else:
                env[n] = run_host(n, env, static_args, gm, ig.offsets)
            let_go(done)
            done += 1

    with torch.no_grad():
        for i, (kind, si, x) in enumerate(steps):
            st = streams[si]
            for t in frees[i - 1] if i else ():
                held.pop(t, None)
                freed.add(t)
            if kind == "record":
                events[x].record(st)
                continue
            if kind == "wait":
                st.wait_event(events[x])
                continue
            host_until(x)
            n = nodes[x]
            with torch.cuda.stream(st):
                if x in delays:
                    torch.cuda._sleep(delays[x])
                env[n] = launch_node(n, ig.kinds[x], env, tuners, st.cuda_stream)
            let_go(x)
            done = x + 1
        host_until(len(nodes))
    for s in streams[1:]:
        e = torch.cuda.Event()
        e.record(s)
        cap.wait_event(e)
    return out


def arena_slots(ig: InductorGraph, plan: Plan) -> Dict[int, int]:
    """The wrapper's allocations that take their bytes from the plan's arena:
    {allocating node index: offset in bytes}. A node qualifies when it is a
    ``torch.empty_strided`` call that allocates one tensor that the planner
    placed in the arena (``plan.arena``) and that the graph does not return
    (the outputs outlive the call)."""
    out: Dict[int, int] = {}
    ret = set(ig.returned)
    for i, tids in ig.allocs.items():
        n = ig.nodes[i]
        if len(tids) != 1 or tids[0] in ret or tids[0] not in plan.arena:
            continue
        if n.op == "call_function" and n.target is torch.empty_strided:
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
                     dagrun: Optional[str] = None, ig: Optional[InductorGraph] = None) -> CompiledInductor:
    """torch.compile ``model`` through Inductor's FX wrapper (``compile_model``),
    trace its wrapper graph (``trace_fx``), plan it with dagrun
    (``max_streams``: 0 for no cap) and capture it over the plan's streams.
    ``ig`` reuses an earlier trace. Raises InductorError when the wrapper
    cannot be compiled to FX, read or scheduled; DagrunError from the
    binary."""
    if ig is None:
        _, fx = compile_model(model, inputs)
        ig = trace_fx(fx)
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
