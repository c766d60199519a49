"""python3 -m dagrun_torch bench [--models ...] [--iters N] [--compile | --no-compile] [--out DIR]

Times each model (torchvision/timm, random weights, batch 1, float32, eval)
on one GPU and prints a markdown table: median ms per call of PyTorch eager
on one stream, a one-stream CUDA graph of the model, torch.compile
(mode="reduce-overhead"), and dagrun_torch.compile in graph mode (default
plan, and capped at --max-streams streams); whether dagrun's outputs are
bit-identical to the one-stream run of the same traced graph; and peak
memory (MB): the model's weights plus the most bytes that capturing and
replaying the one-stream graph, or dagrun's graph, allocated over what was
allocated just before the capture. Each timed call is bracketed
by two CUDA events on the calling stream; graph-mode calls include copying
the input into the graph's static input. ``--budget-s`` bounds the run: the
slow torch.compile columns come last and are skipped (printed as "skipped")
when the budget would run out. Writes DIR/bench.json and DIR/bench.md after
every model. Needs a GPU and the dagrun binary.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from typing import Callable, Dict, List, Optional

import torch

MODELS = {
    "googlenet": ("googlenet", 224), "inception_v3": ("inception_v3", 299), "inception_v4": ("timm:inception_v4", 299),
    "nasnetalarge": ("timm:nasnetalarge", 331), "resnet50": ("resnet50", 224), "densenet121": ("densenet121", 224),
}
# Rough torch.compile times (s) on an H200, to skip what the budget cannot hold.
_COMPILE_S = {"googlenet": 25, "inception_v3": 30, "inception_v4": 60, "nasnetalarge": 100, "resnet50": 25, "densenet121": 50}


def median_ms(fn: Callable[[], object], iters: int, warmup: int = 5) -> float:
    """Median over ``iters`` calls of the GPU time between two events around one call, ms."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(iters):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def weight_bytes(model: torch.nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in list(model.parameters()) + list(model.buffers()))


def one_stream_graph(model: torch.nn.Module, x: torch.Tensor):
    """Capture model(x) as one CUDA graph on one stream. Returns (call, output,
    graph, bytes the capture and a replay added at their peak over what was
    allocated before the capture)."""
    static = x.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(s):
        for _ in range(3):
            model(static)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(g, stream=s):
        out = model(static)
    g.replay()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - before

    def call(inp=x):
        static.copy_(inp)
        g.replay()
        return out
    return call, out, g, peak


def _fmt(v, nd=3):
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    return ("%%.%df" % nd) % v


def table(rows: List[dict], cap: int) -> str:
    head = ("| model | eager, one stream | CUDA graph, one stream | torch.compile reduce-overhead | dagrun plan, one CUDA graph "
            "| dagrun capped at %d streams | speed-up over the one-stream graph (default / capped) | streams (default / capped) "
            "| bit-identical to one stream | peak MB: one-stream graph / dagrun / dagrun capped |" % cap)
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        g = r.get("graph_ms")
        sp = "—"
        if g and r.get("dagrun_ms") and r.get("dagrun_cap_ms"):
            sp = "%.2f× / %.2f×" % (g / r["dagrun_ms"], g / r["dagrun_cap_ms"])
        mem = "%s / %s / %s" % tuple(_fmt(r.get(k) and r[k] / 1e6, 0) for k in ("graph_peak", "dagrun_peak", "dagrun_cap_peak"))
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s / %s | %s | %s |" % (
            r["model"], _fmt(r.get("eager_ms"), 2), _fmt(r.get("graph_ms")), _fmt(r.get("compile_ms")),
            _fmt(r.get("dagrun_ms")), _fmt(r.get("dagrun_cap_ms")), sp, r.get("streams", "—"), r.get("streams_cap", "—"),
            r.get("identical", "—"), mem))
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m dagrun_torch bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--max-streams", type=int, default=16)
    ap.add_argument("--compile", dest="compile", action="store_true", default=True)
    ap.add_argument("--no-compile", dest="compile", action="store_false")
    ap.add_argument("--only-compile", action="store_true", help="time eager, the one-stream graph and torch.compile only")
    ap.add_argument("--verify-trials", type=int, default=2)
    ap.add_argument("--budget-s", type=float, default=540.0)
    ap.add_argument("--out", default="bench-out")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench: needs a GPU", file=sys.stderr)
        return 2
    for m in args.models:
        if m not in MODELS:
            print("bench: unknown model %r (known: %s)" % (m, ", ".join(MODELS)), file=sys.stderr)
            return 2
    from .exporter import build_model, export
    from .runner import bitwise_equal, compile as dcompile
    t_start = time.time()
    os.makedirs(args.out, exist_ok=True)
    torch.backends.cudnn.benchmark = False
    rows: List[dict] = []
    models: Dict[str, tuple] = {}

    def save():
        with open(os.path.join(args.out, "bench.json"), "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)
        with open(os.path.join(args.out, "bench.md"), "w") as f:
            f.write(note() + "\n\n" + table(rows, args.max_streams) + "\n")

    def note():
        return ("%s, torch %s, batch 1, float32, random weights; median of %d calls, ms; %.0f s in all." % (
            torch.cuda.get_device_name(), torch.__version__, args.iters, time.time() - t_start))

    for name in args.models:
        spec, size = MODELS[name]
        r = {"model": name}
        rows.append(r)
        try:
            torch.manual_seed(0)
            model, _ = build_model(spec)
            model = model.eval().cuda()
            x = torch.randn(1, 3, size, size, device="cuda")
            models[name] = (model, x)
            with torch.no_grad():
                r["eager_ms"] = median_ms(lambda: model(x), args.iters)
            wb = weight_bytes(model)
            call, gout, g, peak = one_stream_graph(model, x)
            r["graph_ms"] = median_ms(call, args.iters)
            r["graph_peak"] = wb + peak
            del g, call, gout
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            if not args.only_compile:
                t0 = time.time()
                ex = export(model, (x,))
                r["export_s"] = round(time.time() - t0, 1)
                r["tracer"] = ex.tracer
                r["nodes"] = len(ex.graph["nodes"])
                with torch.no_grad():
                    ref = ex.gm(x)
                    eager_ref = model(x)
                r["graph_equals_model"] = bitwise_equal(ref, eager_ref)[0]
                ident = []
                for key, cap in (("dagrun", None), ("dagrun_cap", args.max_streams)):
                    t0 = time.time()
                    cm = dcompile(model, (x,), max_streams=cap, exported=ex)
                    r[key + "_compile_s"] = round(time.time() - t0, 1)
                    r["streams" if cap is None else "streams_cap"] = cm.streams
                    r[key + "_peak"] = wb + cm.memory["peak_allocated"] - cm.memory["before"]
                    r[key + "_live_model_mb"] = round(cm.memory.get("model_live_peak", 0) / 1e6, 1)
                    r[key + "_priority"] = cm.priority
                    r[key + "_tuning_ms"] = cm.tuning
                    r[key + "_ms"] = median_ms(lambda: cm(x), args.iters)
                    ok, why = bitwise_equal(cm(x), ref)
                    vok = True
                    if args.verify_trials:
                        try:
                            cm.verify(x, trials=args.verify_trials)
                        except AssertionError as e:
                            vok, why = False, str(e)
                    ident.append(ok and vok)
                    if not (ok and vok):
                        r[key + "_mismatch"] = why
                    del cm
                    torch.cuda.synchronize()
                r["identical"] = "yes" if all(ident) else "NO"
        except Exception as e:
            r["error"] = "%s: %s" % (type(e).__name__, e)
            traceback.print_exc()
        torch.cuda.empty_cache()
        print(name, json.dumps({k: v for k, v in r.items() if k != "model"}), flush=True)
        save()
    if args.compile:
        # the branchy models first: they are the ones to compare with torch.compile
        order = sorted(args.models, key=lambda m: (m in ("resnet50", "densenet121"), _COMPILE_S[m]))
        for name in order:
            r = next(r for r in rows if r["model"] == name)
            if name not in models:
                continue
            if time.time() - t_start + _COMPILE_S[name] > args.budget_s:
                r["compile_ms"] = "skipped"
                continue
            model, x = models[name]
            try:
                t0 = time.time()
                cmodel = torch.compile(model, mode="reduce-overhead")
                with torch.no_grad():
                    for _ in range(3):
                        cmodel(x)
                    r["compile_s"] = round(time.time() - t0, 1)
                    r["compile_ms"] = median_ms(lambda: cmodel(x), args.iters)
                del cmodel
                torch._dynamo.reset()
            except Exception as e:
                r["compile_ms"] = "failed"
                r["compile_error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
                traceback.print_exc()
            print(name, "torch.compile", r.get("compile_s"), r.get("compile_ms"), flush=True)
            save()
    print()
    print(note())
    print(table(rows, args.max_streams))
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
