"""Export a PyTorch model's operator graph in the JSON format ``dagrun import`` reads.

    python3 -m dagrun_torch export --model resnet18 --out resnet18.json
    python3 -m dagrun_torch export --model timm:nasnetalarge --size 331 --out nasnet.json
    dagrun import resnet18.json -o resnet18.yaml

From Python: ``ex = dagrun_torch.export(model, (x,))``; ``ex.graph`` is the
JSON object, ``ex.save(path)`` writes it, ``ex.gm`` is the traced module.

The model is traced with ``torch.fx.symbolic_trace``; when that fails (a
model whose Python code branches on shapes, such as timm's nasnetalarge) with
``torch.export.export(model, inputs).module()``. The traced graph is then run
node by node on the example inputs. Each node that launches GPU work (it
returns a tensor in new storage, or writes one of its inputs) becomes one JSON
node, in program order, with the tensor ids it reads and writes:

- tensors are storages: a node whose output shares storage with an input (a
  view: reshape, flatten, getitem, an Identity or an eval-mode dropout that
  returns its input) is dropped, and later readers read the aliased tensor;
- in-place nodes (``nn.ReLU(inplace=True)``, ``x.add_(y)``, ``x += y``,
  ``out[i] = v``, ATen ops whose schema marks an argument as written) read
  and write the same tensor id;
- host-side nodes (shapes, asserts, guards) are dropped.

Durations (µs) are measured by CUDA graph replay: each node is captured
``repeats`` times back to back in one CUDA graph, the graph is replayed, and
the median replay time over a few replays divided by ``repeats`` is the
node's time. Timing a node alone between two events instead adds the launch
and event floor of several µs to every node. Without CUDA, durations are 0
(unknown).

Format: the fields dagrun import reads (dag/import_graph.go: model, source, tracer,
batch, device, torch, sum_node_us, tensors, nodes), plus ``timing`` and the
counts of dropped view and host nodes. Tensor sizes are storage sizes in
bytes, rounded up to a multiple of 4 (``dagrun import`` works in 4-byte words).
Tested with torch 1.13 (CPU) and 2.11 (CUDA 13).
"""
from __future__ import annotations

import os
import json
import operator
import statistics
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx

__all__ = ["ExportError", "Exported", "export", "storage_key", "main"]


class ExportError(RuntimeError):
    """The model cannot be exported (tracing failed, or it writes its inputs or weights)."""


_INPLACE_OPERATORS = {operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
                      operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor,
                      operator.ilshift, operator.irshift, operator.imatmul, operator.setitem}


def storage_key(t: torch.Tensor) -> Tuple[str, int]:
    """(device, address of the storage) of a tensor: equal for views of one storage."""
    try:
        s = t.untyped_storage()
    except AttributeError:  # torch < 2.0
        s = t.storage()
    return (str(t.device), int(s.data_ptr()))


def _storage_nbytes(t: torch.Tensor) -> int:
    try:
        return int(t.untyped_storage().nbytes())
    except AttributeError:
        return int(t.storage().nbytes())


def _flat_tensors(x: Any) -> List[torch.Tensor]:
    out: List[torch.Tensor] = []

    def walk(v):
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            for e in v:
                walk(e)
        elif isinstance(v, dict):
            for e in v.values():
                walk(e)
    walk(x)
    return out


def _target_name(gm: torch.fx.GraphModule, node: torch.fx.Node) -> str:
    if node.op == "call_module":
        return type(gm.get_submodule(node.target)).__name__
    if node.op == "call_method":
        return str(node.target)
    t = node.target
    if isinstance(t, torch._ops.OpOverload):
        return "%s.%s" % (t._schema.name.split("::")[-1], t._overloadname)
    return getattr(t, "__name__", str(t))


def _written_args(gm: torch.fx.GraphModule, node: torch.fx.Node, args: tuple, kwargs: dict) -> List[torch.Tensor]:
    """The tensor arguments a node writes in place."""
    t = node.target
    if node.op == "call_module":
        mod = gm.get_submodule(t)
        if getattr(mod, "inplace", False) and args and isinstance(args[0], torch.Tensor):
            return [args[0]]
        return []
    if node.op == "call_function" and isinstance(t, torch._ops.OpOverload):
        out = []
        schema = t._schema
        for i, a in enumerate(schema.arguments):
            if a.alias_info is None or not a.alias_info.is_write:
                continue
            if i < len(args):
                out += _flat_tensors(args[i])
            elif a.name in kwargs:
                out += _flat_tensors(kwargs[a.name])
        return out
    name = _target_name(gm, node)
    inplace = (node.op == "call_function" and (t in _INPLACE_OPERATORS or kwargs.get("inplace") is True)) or \
              (name.endswith("_") and not name.startswith("_")) or name in ("__setitem__", "__iadd__", "__imul__", "__isub__", "__itruediv__")
    if inplace and args and isinstance(args[0], torch.Tensor):
        return [args[0]]
    return []


def _time_graph_replay(fn: Callable[[], Any], repeats: int, replays: int = 7,
                       stream: Optional[torch.cuda.Stream] = None) -> Optional[float]:
    """GPU time of one call of fn in µs: the median replay of a CUDA graph of
    ``repeats`` back-to-back calls, divided by ``repeats``. None if fn cannot be
    captured (it synchronizes, for example). Uses capture_begin/capture_end
    directly: torch.cuda.graph() would run the garbage collector per node.
    ``stream``: the side stream to capture on (None: one from PyTorch's pool;
    a caller timing many calls passes one, so that cuBLAS keeps one
    workspace for them, not one per pool stream)."""
    s = stream if stream is not None else torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.stream(s):
            fn()
            fn()
            s.synchronize()
            g.capture_begin()
            try:
                for _ in range(repeats):
                    fn()
            finally:
                g.capture_end()
    except Exception:
        torch.cuda.synchronize()
        return None
    torch.cuda.current_stream().wait_stream(s)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    g.replay()
    times = []
    for _ in range(replays):
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0 / repeats)
    del g
    return statistics.median(times)


def _time_events(fn: Callable[[], Any], repeats: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    times = []
    for _ in range(repeats):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(times)


@dataclass
class NodeInfo:
    """How the runner treats one fx node: ``kind`` is "stage" (a JSON node,
    run on its planned stream), "view" (aliases an input, no GPU work), "host"
    (no tensor output), "input", "param" or "output"; ``tids`` are the tensor
    ids its value holds."""
    kind: str
    tids: List[str] = field(default_factory=list)


@dataclass
class Exported:
    """The result of ``export``: ``graph`` (the JSON object ``dagrun import``
    reads), ``gm`` (the traced GraphModule), ``info`` (fx node name → NodeInfo),
    ``outputs`` (tensor ids of the model's outputs), ``tracer``."""
    gm: torch.fx.GraphModule
    graph: dict
    info: Dict[str, NodeInfo]
    outputs: List[str]
    tracer: str

    def save(self, path: str) -> None:
        """Write the graph JSON to ``path``."""
        with open(path, "w") as f:
            json.dump(self.graph, f)


def trace(model: torch.nn.Module, example_inputs: Sequence[Any], tracer: str = "auto") -> Tuple[torch.fx.GraphModule, str]:
    """Trace ``model`` into a GraphModule: ``tracer`` is "fx"
    (torch.fx.symbolic_trace), "export" (torch.export.export(...).module()) or
    "auto" (fx, then export if fx fails). Returns (module, tracer used).
    Raises ExportError naming both failures."""
    if tracer not in ("auto", "fx", "export"):
        raise ValueError("tracer=%r: want 'auto', 'fx' or 'export'" % (tracer,))
    err_fx = None
    if tracer in ("auto", "fx"):
        try:
            return torch.fx.symbolic_trace(model), "torch.fx.symbolic_trace"
        except Exception as e:  # fx raises many kinds on untraceable Python
            err_fx = e
            if tracer == "fx":
                raise ExportError("torch.fx.symbolic_trace failed: %s: %s" % (type(e).__name__, e)) from e
    if not hasattr(torch, "export") or not hasattr(getattr(torch, "export"), "export"):
        none = "this torch (%s) has no torch.export" % torch.__version__
        if err_fx is None:   # tracer="export": fx was not tried
            raise ExportError(none)
        raise ExportError("torch.fx.symbolic_trace failed (%s: %s) and %s" % (type(err_fx).__name__, err_fx, none))
    try:
        ep = torch.export.export(model, tuple(example_inputs))
        return ep.module(), "torch.export"
    except Exception as e:
        msg = "torch.export.export failed: %s: %s" % (type(e).__name__, e)
        if err_fx is not None:
            msg = "torch.fx.symbolic_trace failed (%s: %s); %s" % (type(err_fx).__name__, err_fx, msg)
        raise ExportError(msg) from e


def export(model: torch.nn.Module, example_inputs: Sequence[Any], *, tracer: str = "auto", repeats: int = 20,
           timing: Optional[str] = None, name: Optional[str] = None, source: str = "") -> Exported:
    """Trace ``model`` and measure it on ``example_inputs`` (a tuple of the
    forward arguments, on the device the model runs on).

    ``timing``: "graph" (CUDA graph replay, the default on CUDA), "events"
    (two events around each node: includes the launch floor) or "none"
    (durations 0, the default without CUDA). ``repeats``: calls per timed
    graph (≥ 1). Returns an Exported. Raises ExportError when the model
    cannot be traced, fails on the example inputs (a RuntimeError of a node:
    a shape its kernels do not take, memory), or writes an input or a weight
    in place; ValueError on bad arguments.
    """
    if not isinstance(model, torch.nn.Module):
        raise ValueError("export: model must be a torch.nn.Module, got %s" % type(model).__name__)
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    if repeats < 1:
        raise ValueError("export: repeats=%d: want ≥ 1" % repeats)
    flat_inputs = _flat_tensors(example_inputs)
    on_cuda = bool(flat_inputs) and flat_inputs[0].is_cuda
    if timing is None:
        timing = "graph" if on_cuda else "none"
    if timing not in ("graph", "events", "none"):
        raise ValueError("export: timing=%r: want 'graph', 'events' or 'none'" % (timing,))
    if timing != "none" and not on_cuda:
        raise ValueError("export: timing=%r needs CUDA inputs" % (timing,))
    model = model.eval()
    gm, used = trace(model, example_inputs, tracer)

    tensors: List[dict] = []
    nodes: List[dict] = []
    info: Dict[str, NodeInfo] = {}
    by_storage: Dict[Tuple[str, int], str] = {}
    kinds: Dict[str, str] = {}
    env: Dict[str, Any] = {}
    deps: Dict[str, List[str]] = {}  # host node -> tensor ids its value was computed from
    dropped_views = dropped_host = event_timed = 0

    def new_tensor(t: torch.Tensor, kind: str) -> Optional[str]:
        nb = _storage_nbytes(t)
        if nb == 0:
            return None
        tid = "t%d" % len(tensors)
        tensors.append({"id": tid, "bytes": (nb + 3) // 4 * 4, "kind": kind})
        by_storage[storage_key(t)] = tid
        kinds[tid] = kind
        return tid

    def tids_of(v: Any) -> List[str]:
        out = []
        for t in _flat_tensors(v):
            tid = by_storage.get(storage_key(t))
            if tid is not None and tid not in out:
                out.append(tid)
        return out

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(flat_inputs):
        raise ExportError("the traced graph takes %d inputs, example_inputs hold %d tensors" % (len(placeholders), len(flat_inputs)))
    ph_values = dict(zip((n.name for n in placeholders), flat_inputs))
    outputs: List[str] = []
    with torch.no_grad():
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                v = ph_values[node.name]
                env[node.name] = v
                tid = by_storage.get(storage_key(v)) or new_tensor(v, "input")
                info[node.name] = NodeInfo("input", [tid] if tid else [])
                continue
            if node.op == "get_attr":
                v = gm
                for part in str(node.target).split("."):
                    v = getattr(v, part)
                env[node.name] = v
                tids = []
                if isinstance(v, torch.Tensor):
                    tid = by_storage.get(storage_key(v)) or new_tensor(v, "param")
                    tids = [tid] if tid else []
                info[node.name] = NodeInfo("param", tids)
                continue
            if node.op == "output":
                outputs = tids_of(torch.fx.node.map_arg(node.args, lambda n: env[n.name]))
                info[node.name] = NodeInfo("output", list(outputs))
                continue
            a = torch.fx.node.map_arg(node.args, lambda n: env[n.name])
            kw = torch.fx.node.map_arg(node.kwargs, lambda n: env[n.name])
            params = 0
            if node.op == "call_module":
                mod = gm.get_submodule(node.target)
                fn = (lambda mod, a, kw: lambda: mod(*a, **kw))(mod, a, kw)
                params = sum(p.numel() * p.element_size() for p in mod.parameters(recurse=True))
            elif node.op == "call_method":
                fn = (lambda name, a, kw: lambda: getattr(a[0], name)(*a[1:], **kw))(node.target, a, kw)
            else:
                fn = (lambda f, a, kw: lambda: f(*a, **kw))(node.target, a, kw)
            reads = tids_of((a, kw))
            for n in node.all_input_nodes:  # a shape read from a tensor orders that tensor's producer first
                for t in deps.get(n.name, ()):
                    if t not in reads:
                        reads.append(t)
            written = _written_args(gm, node, a, kw)
            wtids = tids_of(written)
            for w in wtids:
                if kinds[w] in ("input", "param"):
                    raise ExportError("node %s (%s) writes %s tensor %s in place: dagrun_torch needs a model that "
                                      "leaves its inputs and weights unchanged (call model.eval(), clone the input)" % (
                                          node.name, _target_name(gm, node), kinds[w], w))
            try:
                value = fn()
            except RuntimeError as e:   # an input too small for a kernel, or too large for memory
                raise ExportError("node %s (%s) fails on the example inputs: %s" % (
                    node.name, _target_name(gm, node), (str(e).strip().splitlines() or [type(e).__name__])[0])) from e
            env[node.name] = value
            outs = _flat_tensors(value)
            new = [t for t in outs if storage_key(t) not in by_storage and _storage_nbytes(t) > 0]
            if not new and not wtids:
                if outs:
                    dropped_views += 1
                    info[node.name] = NodeInfo("view", tids_of(value))
                else:
                    dropped_host += 1
                    info[node.name] = NodeInfo("host", [])
                    deps[node.name] = reads
                continue
            new_ids = []
            for t in new:
                if storage_key(t) in by_storage:
                    continue  # two outputs sharing one new storage
                tid = new_tensor(t, "activation")
                if tid:
                    new_ids.append(tid)
            dur = 0.0
            if timing != "none":
                if written:
                    ws = {id(w) for w in written}
                    clone = lambda v: v.clone() if isinstance(v, torch.Tensor) and id(v) in ws else v
                    ta = tuple(torch.fx.node.map_aggregate(a, clone))
                    tkw = dict(torch.fx.node.map_aggregate(kw, clone))
                    if node.op == "call_module":
                        tfn = (lambda mod, a, kw: lambda: mod(*a, **kw))(mod, ta, tkw)
                    elif node.op == "call_method":
                        tfn = (lambda name, a, kw: lambda: getattr(a[0], name)(*a[1:], **kw))(node.target, ta, tkw)
                    else:
                        tfn = (lambda f, a, kw: lambda: f(*a, **kw))(node.target, ta, tkw)
                else:
                    tfn = fn
                d = _time_graph_replay(tfn, repeats) if timing == "graph" else None
                if d is None:
                    d = _time_events(tfn, repeats)
                    event_timed += timing == "graph"
                dur = d
            writes = wtids + [t for t in new_ids if t not in wtids]
            info[node.name] = NodeInfo("stage", tids_of(value) or list(writes))
            nodes.append({"id": node.name, "op": _target_name(gm, node), "reads": reads, "writes": writes,
                          "duration_us": round(dur, 3), "inplace": bool(wtids), "param_bytes": int(params)})
    if not nodes:
        raise ExportError("the model launched no GPU work: nothing to export")
    batch = flat_inputs[0].shape[0] if flat_inputs and flat_inputs[0].dim() > 0 else 1
    graph = {
        "model": name or type(model).__name__, "source": source, "tracer": used, "batch": int(batch),
        "device": torch.cuda.get_device_name(flat_inputs[0].device) if on_cuda else str(flat_inputs[0].device if flat_inputs else "cpu"),
        "torch": torch.__version__, "timing": {"graph": "cuda-graph-replay", "events": "events", "none": "none"}[timing],
        "repeats": repeats, "event_timed_nodes": event_timed,
        "sum_node_us": round(sum(n["duration_us"] for n in nodes), 2),
        "dropped_view_nodes": dropped_views, "dropped_host_nodes": dropped_host,
        "tensors": tensors, "nodes": nodes,
    }
    return Exported(gm=gm, graph=graph, info=info, outputs=outputs, tracer=used)


def build_model(name: str) -> Tuple[torch.nn.Module, str]:
    """A model by name with random weights: a torchvision name, or ``timm:NAME``."""
    if name.startswith("timm:"):
        import timm
        return timm.create_model(name[5:], pretrained=False), "timm"
    import torchvision.models as tvm
    if not hasattr(tvm, name):
        raise ValueError("unknown torchvision model %r (use timm:NAME for timm models)" % name)
    kwargs: Dict[str, Any] = {"weights": None}
    if name in ("inception_v3", "googlenet"):
        kwargs["aux_logits"] = False
        kwargs["init_weights"] = False
    return getattr(tvm, name)(**kwargs), "torchvision"


def _memory_bytes(device: str) -> Optional[int]:
    """The memory of ``device``, bytes: the current GPU's ("cuda"), or the
    machine's physical memory ("cpu"); None where the system does not say."""
    if device == "cuda":
        return torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def input_memory_error(flags: str, batch: int, size: int, device: str) -> str:
    """Why a float32 input of ``batch`` images of 3 × ``size`` × ``size``
    cannot be made on ``device`` ("cuda" or "cpu"), as one line starting
    with ``flags`` (the options that set it): more bytes than the device's
    memory (``_memory_bytes``). "" when it fits or the memory is unknown."""
    nbytes, memory = batch * 3 * size * size * 4, _memory_bytes(device)
    if memory is not None and nbytes > memory:
        return "%s: the input alone is %d bytes, more than the %s's %d bytes of memory" % (flags, nbytes, device, memory)
    return ""


def main(argv: Optional[List[str]] = None) -> int:
    from ._cli import MAX_ITERS, export as parser, out_file_error
    ap = parser()
    args = ap.parse_args(argv)
    for flag, v in (("--size", args.size), ("--batch", args.batch), ("--repeats", args.repeats)):
        if v < 1:
            ap.error("%s %d: want an integer ≥ 1" % (flag, v))
    if args.repeats > MAX_ITERS:
        ap.error("--repeats %d: want an integer from 1 to %d (calls captured in each node's timed CUDA graph)" % (
            args.repeats, MAX_ITERS))
    gpu = [f for f, on in (("--device cuda", args.device == "cuda"),
                           ("--timing %s" % args.timing, args.timing in ("graph", "events"))) if on]
    if args.device == "cpu" and args.timing in ("graph", "events"):
        ap.error("--timing %s times kernels on the GPU: not with --device cpu (--timing none)" % args.timing)
    if gpu and not torch.cuda.is_available():
        ap.error("%s: needs a GPU, and torch.cuda.is_available() is False" % " and ".join(gpu))
    why = out_file_error(args.out)
    if why:
        ap.error("--out %s: %s; want the path of the graph JSON file to write" % (args.out, why))
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    why = input_memory_error("--batch %d --size %d" % (args.batch, args.size), args.batch, args.size, args.device)
    if why:
        ap.error(why)
    torch.manual_seed(0)
    try:
        model, source = build_model(args.model)
    except (ValueError, KeyError, AttributeError, ImportError, RuntimeError) as e:
        print("export: --model %s: %s" % (args.model, e), file=sys.stderr)
        return 2
    model = model.eval().to(args.device)
    x = torch.randn(args.batch, 3, args.size, args.size, device=args.device)
    try:
        ex = export(model, (x,), tracer=args.tracer, repeats=args.repeats, timing=args.timing,
                    name=args.model.replace("timm:", ""), source=source)
    except ExportError as e:
        print("export: %s: %s" % (args.model, e), file=sys.stderr)
        return 2
    ex.save(args.out)
    g = ex.graph
    print("%s (%s): %d nodes, %d tensors, sum of nodes %.1f µs, %d views and %d host nodes dropped -> %s" % (
        g["model"], g["tracer"], len(g["nodes"]), len(g["tensors"]), g["sum_node_us"],
        g["dropped_view_nodes"], g["dropped_host_nodes"], args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
