"""python3 -m dagrun_torch timeline [--models ...] [--costs FILE] [--iters N] [--replays N] [--out DIR]

Where a plan's time goes on the GPU, from its kernels' timeline. Per model
(torchvision/timm, random weights, batch 1, float32, eval): PyTorch's
one-stream CUDA graph, the traced graph planned on one stream (the same
kernels as the plans), and the fastest of dagrun's candidate plans (stream
caps 2, 4, 8, 16 and none, and the priority order under caps 4, 16 and none:
``schedule.form``), each timed unprofiled (median of ``--iters`` calls)
and then replayed ``--replays`` times under the PyTorch profiler (Kineto
over CUPTI). Of each profiled replay's GPU work (kernels, memsets and
copies) ``decompose`` gives the makespan, the time with no kernel running
(the front end starting kernels, or a dependency's latency, not hidden by
other work), the kernels' summed time and how many run at once; the replay
of median makespan is reported. The plan's kernel time over the one-stream
plan's is how much running together slowed the kernels down.

Each model runs in a process of its own: after the profiler has run in a
process, its CUDA graphs replay slower. The cost model that orders the
priority candidates is read from
``--costs`` (a JSON or .json.gz file mapping model names to cost models,
as ``bench --schedules`` writes in costs.json) when it holds the model with
the export's nodes, else measured in a child process; within a model's
process the unprofiled timings come first, the profiled replays last.
Writes DIR/timeline.json and DIR/timeline.md (and each model's in
DIR/MODEL/). Needs a GPU and the dagrun binary.
"""
from __future__ import annotations

import gzip
import json
import os
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

__all__ = ["gpu_intervals", "decompose", "profile_replays", "main"]

# The candidates timed per model (schedule.form keys); "1" is profiled
# for the kernels' own times and is not a candidate for the fastest.
KEYS = ("2", "4", "8", "16", "0", "prio4", "prio16", "prio0")

_GPU_CATS = ("kernel", "gpu_memset", "gpu_memcpy")


def gpu_intervals(trace: dict) -> Dict[Any, List[Tuple[float, float]]]:
    """The GPU work of a Kineto chrome trace (kernels, memsets, copies),
    grouped by the host call that issued it: its correlation id, which every
    kernel of one CUDA graph replay shares with the replay's
    cudaGraphLaunch. Returns {correlation: [(start µs, end µs), ...]}, each
    list sorted by start."""
    out: Dict[Any, List[Tuple[float, float]]] = {}
    for e in trace.get("traceEvents") or []:
        if e.get("cat") not in _GPU_CATS or e.get("ph") != "X":
            continue
        c = (e.get("args") or {}).get("correlation")
        ts = float(e["ts"])
        out.setdefault(c, []).append((ts, ts + float(e.get("dur", 0.0))))
    for v in out.values():
        v.sort()
    return out


def decompose(intervals: Sequence[Tuple[float, float]]) -> dict:
    """Where the time of one run of GPU work goes, from its intervals
    (start, end; µs). Returns: ``kernels`` (how many), ``makespan_us``
    (first start to last end), ``kernel_us`` (the intervals' summed
    length), ``busy_us`` (time with at least one running), ``idle_us``
    (makespan − busy: nothing runs although work remains), ``concurrency``
    (kernel_us / busy_us: how many run at once on average while any does)
    and ``level_us`` ({k: time with exactly k running}, k ≥ 1). Raises
    ValueError on an interval that ends before it starts."""
    ev: List[Tuple[float, int]] = []
    total = 0.0
    for s, e in intervals:
        if e < s:
            raise ValueError("interval (%r, %r) ends before it starts" % (s, e))
        ev += [(s, 1), (e, -1)]
        total += e - s
    if not ev:
        return {"kernels": 0, "makespan_us": 0.0, "kernel_us": 0.0, "busy_us": 0.0, "idle_us": 0.0,
                "concurrency": 0.0, "level_us": {}}
    ev.sort()
    levels: Dict[int, float] = {}
    running, last = 0, ev[0][0]
    for t, d in ev:
        if running > 0 and t > last:
            levels[running] = levels.get(running, 0.0) + (t - last)
        running += d
        last = t
    makespan = ev[-1][0] - ev[0][0]
    busy = sum(levels.values())
    return {"kernels": len(intervals), "makespan_us": round(makespan, 3), "kernel_us": round(total, 3),
            "busy_us": round(busy, 3), "idle_us": round(makespan - busy, 3),
            "concurrency": round(total / busy, 3) if busy > 0 else 0.0,
            "level_us": {k: round(v, 3) for k, v in sorted(levels.items())}}


def profile_replays(call: Callable[[], Any], replays: int) -> List[dict]:
    """Run ``call`` (one replay of a CUDA graph) ``replays`` times under the
    PyTorch profiler, synchronizing after each, and return ``decompose`` of
    each replay's GPU work in order: the calls' groups of GPU work (by
    correlation) with the most intervals, one per replay. Raises
    RuntimeError when the profiler saw fewer groups than replays (no CUPTI)."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            call()
            torch.cuda.synchronize()
    with tempfile.TemporaryDirectory(prefix="dagrun_torch-timeline-") as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    groups = sorted(gpu_intervals(trace).values(), key=len, reverse=True)[:replays]
    if len(groups) < replays:
        raise RuntimeError("the profiler recorded %d groups of GPU work for %d replays (is CUPTI available?)" % (len(groups), replays))
    groups.sort(key=lambda g: g[0][0])
    return [decompose(g) for g in groups]


def median_replay(runs: Sequence[dict]) -> dict:
    """The run of median makespan (the lower middle one of an even count)."""
    by = sorted(runs, key=lambda r: r["makespan_us"])
    return by[(len(by) - 1) // 2]


def load_costs(path: Optional[str]) -> Dict[str, dict]:
    """The cost models of ``path`` ({model: cost model dict}; .gz read
    compressed), {} for None."""
    if not path:
        return {}
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def _cost_for(name: str, spec: str, size: int, ex, costs: Dict[str, dict], out: str):
    """The cost model of ``name`` from ``costs`` when it has the export's
    nodes, else measured in a child; attached to ``ex``. Returns (cost
    model, "file" or "measured")."""
    from . import costmodel
    from .bench import attach_cost, measure_in_child
    d = costs.get(name)
    ids = {n["id"] for n in ex.graph["nodes"]}
    if d is not None and set(d.get("nodes", {})) == ids:
        cost, where = costmodel.CostModel.from_dict(d), "file"
    else:
        cost, where = measure_in_child(ex, spec, size, out), "measured"
    attach_cost(ex, cost)
    return cost, where


def _levels(d: dict) -> str:
    lv = {int(k): v for k, v in d["level_us"].items()}
    span = max(d["makespan_us"], 1e-9)
    parts = [sum(v for k, v in lv.items() if lo <= k <= hi) for lo, hi in ((1, 1), (2, 2), (3, 4), (5, 10 ** 9))]
    return " / ".join("%.0f%%" % (100 * p / span) for p in parts)


def table(rows: List[dict]) -> str:
    """The markdown table of ``timeline`` rows."""
    from .bench import cand_label
    head = ("| model | one-stream CUDA graph ms | fastest plan ms (candidate; streams) | speed-up | lower bound µs: critical path / SM-time "
            "| profiled replay makespan µs: one-stream graph / one-stream plan / fastest plan "
            "| no kernel running µs (share): one-stream plan / fastest plan "
            "| kernel time µs: one-stream plan / fastest plan (slowdown) | kernels running at once (while any runs) "
            "| share of the makespan with 1 / 2 / 3–4 / ≥5 kernels running | bit-identical |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        if "error" in r:
            lines.append("| %s | error: %s |" % (r["model"], r["error"]))
            continue
        g, one, best = r["graph_tl"], r["one_tl"], r["best_tl"]
        lines.append("| %s | %.3f | %.3f (%s; %d streams) | %.2f× | %.0f / %.0f | %.0f / %.0f / %.0f | %.0f (%.0f%%) / %.0f (%.0f%%) | %.0f / %.0f (%.2f×) | %.2f | %s | %s |" % (
            r["model"], r["graph_ms"], r["best_ms"], cand_label(r["best"]), r["best_streams"], r["graph_ms"] / r["best_ms"],
            r["bound"]["cp_us"], r["bound"]["sm_us"],
            g["makespan_us"], one["makespan_us"], best["makespan_us"],
            one["idle_us"], 100 * one["idle_us"] / max(one["makespan_us"], 1e-9),
            best["idle_us"], 100 * best["idle_us"] / max(best["makespan_us"], 1e-9),
            one["kernel_us"], best["kernel_us"], best["kernel_us"] / max(one["kernel_us"], 1e-9),
            best["concurrency"], _levels(best), "yes" if r["identical"] else "NO"))
    return "\n".join(lines)


def write(args, rows: List[dict], note: str) -> None:
    """Write DIR/timeline.json (the rows, with the device, torch, the
    candidates and the counts) and DIR/timeline.md (note, then the table)."""
    import torch
    with open(os.path.join(args.out, "timeline.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "keys": list(KEYS),
                   "iters": args.iters, "replays": args.replays, "rows": rows}, f, indent=1)
    with open(os.path.join(args.out, "timeline.md"), "w") as f:
        f.write(note + "\n\n" + table(rows) + "\n")


def run_each(args) -> int:
    """``run`` of each model in a child process of its own (profiling slows
    the CUDA graphs of its process for good, so a model timed after another
    was profiled would be timed slow), its rows gathered into DIR."""
    import subprocess
    import torch
    t_start = time.time()
    os.makedirs(args.out, exist_ok=True)
    rows: List[dict] = []
    for name in args.models:
        sub = os.path.join(args.out, name)
        cmd = [sys.executable, "-m", "dagrun_torch", "timeline", "--models", name, "--iters", str(args.iters),
               "--replays", str(args.replays), "--out", sub] + (["--costs", args.costs] if args.costs else [])
        rc = subprocess.run(cmd).returncode
        try:
            with open(os.path.join(sub, "timeline.json")) as f:
                rows += json.load(f)["rows"]
        except (OSError, ValueError, KeyError) as e:
            rows.append({"model": name, "error": "child exited %d: %s" % (rc, e)})
    note = ("%s, torch %s, batch 1, float32, random weights, each model in a process of its own; unprofiled: median "
            "of %d calls (ms); profiled: the replay of median makespan of %d; %.0f s in all." % (
                torch.cuda.get_device_name(), torch.__version__, args.iters, args.replays, time.time() - t_start))
    write(args, rows, note)
    print()
    print(note)
    print(table(rows))
    return 0 if all("error" not in r for r in rows) else 1


def run(args) -> int:
    import torch
    from . import schedule
    from .bench import each_model, gpu_model, median_ms, one_stream_graph
    from .exporter import export
    from .runner import CompiledModel, bitwise_equal, plan_model
    t_start = time.time()
    os.makedirs(args.out, exist_ok=True)
    costs = load_costs(args.costs)
    rows: List[dict] = []

    def note():
        return ("%s, torch %s, batch 1, float32, random weights; unprofiled: median of %d calls (ms); profiled: the "
                "replay of median makespan of %d; %.0f s in all." % (torch.cuda.get_device_name(), torch.__version__,
                                                                    args.iters, args.replays, time.time() - t_start))

    def save():
        write(args, rows, note())

    def one_model(name: str, spec: str, size: int, r: dict) -> None:
        model, x = gpu_model(spec, size)
        gcall, _, _, _ = one_stream_graph(model, x)
        r["graph_ms"] = median_ms(gcall, args.iters)
        ex = export(model, (x,))
        with torch.no_grad():
            ref = ex.gm(x)
        cost, r["cost_from"] = _cost_for(name, spec, size, ex, costs, args.out)
        from . import costmodel
        r["bound"] = costmodel.lower_bound(ex.graph, cost)
        cms: Dict[str, Any] = {}
        cands: Dict[str, dict] = {}
        r["cands"] = cands
        for key in ("1",) + KEYS:
            cap, g, _ = schedule.form(ex.graph, cost, key)
            plan = plan_model(ex, max_streams=cap, graph=g)
            cm = CompiledModel(ex, plan, "graph", (x,), priority="auto")
            ms = median_ms(lambda: cm(x), args.iters)
            cands[key] = {"ms": ms, "streams": len(plan.streams), "identical": bitwise_equal(cm(x), ref)[0]}
            cms[key] = cm
            print(name, key, json.dumps(cands[key]), flush=True)
        best = min(KEYS, key=lambda k: cands[k]["ms"])
        r["best"], r["best_ms"], r["best_streams"] = best, cands[best]["ms"], cands[best]["streams"]
        r["identical"] = all(c["identical"] for c in cands.values())
        for k in list(cms):
            if k not in ("1", best):
                del cms[k]
        torch.cuda.synchronize()
        # Profiled last: CUPTI slows the graphs of its process.
        for label, call in (("graph_tl", gcall), ("one_tl", lambda: cms["1"](x)), ("best_tl", lambda: cms[best](x))):
            runs = profile_replays(call, args.replays)
            r[label] = median_replay(runs)
            r[label + "_makespans"] = [d["makespan_us"] for d in runs]
        del cms

    each_model(rows, args.models, one_model, save)
    print()
    print(note())
    print(table(rows))
    save()
    return 0 if all("error" not in r for r in rows) else 1


def main(argv: Optional[List[str]] = None) -> int:
    from ._cli import MAX_ITERS, MAX_REPLAYS, MODELS, out_folder_error
    from ._cli import timeline as parser
    ap = parser()
    args = ap.parse_args(argv)
    bad = [m for m in args.models if m not in MODELS]
    if bad:
        ap.error("--models: unknown %s (known: %s)" % (", ".join(bad), ", ".join(MODELS)))
    for flag, v, high in (("--iters", args.iters, MAX_ITERS), ("--replays", args.replays, MAX_REPLAYS)):
        if not 1 <= v <= high:
            ap.error("%s %d: want an integer from 1 to %d" % (flag, v, high))
    why = out_folder_error(args.out)
    if why:
        ap.error("--out %s: %s; want a folder to write the timelines in" % (args.out, why))
    if not args.models:
        ap.error("--models: name at least one model (known: %s)" % ", ".join(MODELS))
    if args.costs and not os.path.exists(args.costs):
        ap.error("--costs %s: no such file" % args.costs)
    try:
        costs = load_costs(args.costs)
    except (OSError, ValueError, EOFError) as e:
        ap.error("--costs %s: not a cost-model JSON file: %s" % (args.costs, e))
    if not isinstance(costs, dict):
        ap.error("--costs %s: not a cost-model JSON file: want an object of cost models by model name" % args.costs)
    import torch
    if not torch.cuda.is_available():
        print("timeline: needs a GPU", file=sys.stderr)
        return 2
    return run(args) if len(args.models) == 1 else run_each(args)
