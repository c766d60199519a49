#!/usr/bin/env python3
"""Export a PyTorch model's operator graph for `dagrun import`.

    python3 scripts/export_graph.py --model resnet18 --out resnet18.json
    python3 scripts/export_graph.py --model timm:mobilenetv3_small_100 --out m.json
    dagrun import resnet18.json -o specs/models/resnet18.yaml

The model is traced with torch.fx.symbolic_trace (random weights, batch 1,
no weights are downloaded). Shapes come from torch.fx's ShapeProp. Every node
that runs on the GPU becomes one JSON node, listed in program order, with the
tensor ids it reads and writes and its GPU time in µs: the median over
--repeats runs, each timed with CUDA events around the node alone after a
warm-up. View-like nodes (reshape, flatten, getitem, ...) alias their input:
they are dropped and later readers read the aliased tensor. In-place nodes
(nn.ReLU(inplace=True), torch.relu_, x.add_(...)) read and write the same
tensor id. Output format: see ../shared/graphs/README.md (the same fields).

Checked on the H200 (torch 2.11.0+cu130, torchvision 0.26.0): googlenet
exports to the same 196 nodes and 140 tensors as ../shared/graphs, with
identical read and write sets for every node. Its durations are higher (sum
4634 µs against 835 µs there): each node is timed alone between two events,
which includes the launch and event floor of several µs, while the reference
replayed each node 20 times in a CUDA graph. Treat these durations as upper
bounds; the planner's schedule depends on their ratios.
"""
import argparse
import json
import statistics
import sys

import torch
import torch.fx
from torch.fx.passes.shape_prop import ShapeProp

VIEW_OPS = {"view", "reshape", "flatten", "squeeze", "unsqueeze", "permute",
            "transpose", "contiguous", "getitem", "size", "expand", "chunk",
            "split", "narrow", "select", "t", "dim", "detach"}


def build_model(name):
    if name.startswith("timm:"):
        import timm
        return timm.create_model(name[5:], pretrained=False), "timm"
    import torchvision.models as tvm
    kwargs = {"weights": None}
    if name in ("inception_v3", "googlenet"):
        kwargs["aux_logits"] = False
        kwargs["init_weights"] = False
    return getattr(tvm, name)(**kwargs), "torchvision"


def target_name(gm, node):
    if node.op == "call_module":
        return type(gm.get_submodule(node.target)).__name__
    if node.op == "call_method":
        return node.target
    return getattr(node.target, "__name__", str(node.target))


def is_inplace(gm, node):
    if node.op == "call_module":
        return bool(getattr(gm.get_submodule(node.target), "inplace", False))
    if node.kwargs.get("inplace", False):
        return True
    name = target_name(gm, node)
    return name.endswith("_") and not name.startswith("_")


def is_view(gm, node):
    name = target_name(gm, node).lower()
    return node.op in ("call_method", "call_function") and name in VIEW_OPS


def tensor_args(node):
    out = []
    torch.fx.node.map_arg((node.args, node.kwargs), lambda a: out.append(a))
    return out


def time_node(fn, repeats):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)  # ms -> µs
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="torchvision name, or timm:NAME")
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", type=int, default=224, help="input height and width")
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()

    model, source = build_model(args.model)
    model = model.eval().cuda()
    x = torch.randn(1, 3, args.size, args.size, device="cuda")
    gm = torch.fx.symbolic_trace(model)
    ShapeProp(gm).propagate(x)

    tensors, nodes = [], []
    tid = {}      # fx node name -> tensor id it produced (or aliases)
    values = {}   # fx node name -> value, for replaying nodes one by one
    env = {}

    def new_tensor(nbytes, kind):
        t = "t%d" % len(tensors)
        tensors.append({"id": t, "bytes": int(nbytes), "kind": kind})
        return t

    def nbytes(meta):
        return meta.shape.numel() * torch.empty((), dtype=meta.dtype).element_size()

    with torch.no_grad():
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                env[node.name] = x
                tid[node.name] = new_tensor(x.numel() * x.element_size(), "input")
                continue
            if node.op == "output":
                continue
            if node.op == "get_attr":
                v = gm
                for part in node.target.split("."):
                    v = getattr(v, part)
                env[node.name] = v
                if torch.is_tensor(v):
                    tid[node.name] = new_tensor(v.numel() * v.element_size(), "param")
                continue
            a = torch.fx.node.map_arg(node.args, lambda n: env[n.name])
            kw = torch.fx.node.map_arg(node.kwargs, lambda n: env[n.name])
            if node.op == "call_module":
                mod = gm.get_submodule(node.target)
                fn = lambda: mod(*a, **kw)
                params = sum(p.numel() * p.element_size() for p in mod.parameters(recurse=True))
            elif node.op == "call_method":
                fn = lambda: getattr(a[0], node.target)(*a[1:], **kw)
                params = 0
            else:
                fn = lambda: node.target(*a, **kw)
                params = 0
            reads = [tid[n.name] for n in tensor_args(node) if n.name in tid]
            value = fn()
            if is_view(gm, node) or not torch.is_tensor(value) or not value.is_cuda:
                # host-side or aliasing node: no GPU time; later readers read what it aliases
                env[node.name] = value
                if reads:
                    tid[node.name] = reads[0]
                continue
            inplace = is_inplace(gm, node)
            dur = time_node(fn, args.repeats)
            env[node.name] = fn()
            if inplace and reads:
                writes = [reads[0]]
                tid[node.name] = reads[0]
            else:
                meta = node.meta.get("tensor_meta")
                size = nbytes(meta) if meta is not None and hasattr(meta, "shape") else env[node.name].numel() * env[node.name].element_size()
                tid[node.name] = new_tensor(size, "activation")
                writes = [tid[node.name]]
            nodes.append({"id": node.name, "op": target_name(gm, node), "reads": sorted(set(reads), key=reads.index),
                          "writes": writes, "duration_us": round(dur, 3), "inplace": inplace, "param_bytes": int(params)})

    out = {"model": args.model.replace("timm:", ""), "source": source, "tracer": "torch.fx.symbolic_trace",
           "batch": 1, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "sum_node_us": round(sum(n["duration_us"] for n in nodes), 2), "tensors": tensors, "nodes": nodes}
    with open(args.out, "w") as f:
        json.dump(out, f)
    print("%s: %d nodes, %d tensors, sum of nodes %.1f µs -> %s" % (args.model, len(nodes), len(tensors), out["sum_node_us"], args.out))


if __name__ == "__main__":
    sys.exit(main())
