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
every model. Needs a GPU and the dagrun binary. Exits 1 when a model
failed (its traceback printed as it came; the others still run and are
written; one line at the end names the failed ones), 2 on bad usage. A
model skipped for the budget is no failure, nor, with --backend, a graph
the backend runs on one stream or gives to reduce-overhead (its "dagrun
path" column says which).
"""
from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from . import _cli
from .schedule import EXTRA  # the candidates beyond the caps: the staged schedule, the priority order

MODELS = _cli.MODELS
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


def host_and_pipelined_ms(fn: Callable[[], object], iters: int) -> Tuple[float, float]:
    """(median host time of one call with the GPU idle before it, ms; mean
    time per call of ``iters`` calls issued back to back with one
    synchronization at the end, ms). The first is what a call costs the
    host (guards, copies, launches); the second the throughput when the
    host runs ahead of the GPU."""
    hs = []
    for _ in range(iters):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        hs.append((time.perf_counter() - t0) * 1e3)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return statistics.median(hs), (time.perf_counter() - t0) * 1e3 / iters


def gpu_model(spec, size: int):
    """The model of spec (random weights, seed 0) in eval mode on the GPU and
    an input of shape [1, 3, size, size] (float32)."""
    from .exporter import build_model
    torch.manual_seed(0)
    model, _ = build_model(spec)
    return model.eval().cuda(), torch.randn(1, 3, size, size, device="cuda")


def reduce_overhead_ms(model: torch.nn.Module, x: torch.Tensor, iters: int):
    """torch.compile(mode="reduce-overhead") of model: its compile time (s,
    with 3 warm-up calls) and the median ms per call over iters calls. The
    compiled model is dropped and dynamo reset before returning."""
    t0 = time.time()
    cmodel = torch.compile(model, mode="reduce-overhead")
    with torch.no_grad():
        for _ in range(3):
            cmodel(x)
        compile_s = round(time.time() - t0, 1)
        ms = median_ms(lambda: cmodel(x), iters)
    del cmodel
    torch._dynamo.reset()
    return compile_s, ms


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


def exit_status(rows: List[dict]) -> int:
    """The exit status of a bench run over ``rows``: 0 when every model ran,
    else 1, with one line on stderr naming the models whose row, or one of
    whose modes, holds an error (their tracebacks were printed as they
    came). A skipped model is no failure."""
    failed = [r["model"] for r in rows
              if any(k.endswith("error") for k in r) or
              any(isinstance(v, dict) and any(k.endswith("error") for k in v) for v in r.values())]
    if failed:
        print("bench: %d of %d models failed (tracebacks above): %s" % (len(failed), len(rows), ", ".join(failed)),
              file=sys.stderr, flush=True)
        return 1
    return 0


def each_model(rows: List[dict], models: List[str], body: Callable[[str, str, int, dict], None],
               save: Callable[[], None]) -> None:
    """Append one row per model to ``rows``, {"model": name} filled in by
    ``body(name, spec, size, row)`` (MODELS' spec and input size); an
    exception is the row's "error", its traceback printed. After each model
    the GPU's cached memory is released, the row printed (without its
    candidates) and ``save()`` called."""
    for name in models:
        spec, size = MODELS[name]
        r: dict = {"model": name}
        rows.append(r)
        try:
            body(name, spec, size, r)
        except Exception as e:
            r["error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
            traceback.print_exc()
        torch.cuda.empty_cache()
        print(name, json.dumps({k: v for k, v in r.items() if k not in ("model", "cands")}), flush=True)
        save()


def measure_in_child(ex, spec: str, size: int, out_dir: str, cudnn_benchmark: bool = False):
    """The cost model of model ``spec`` (input size ``size``), measured by
    ``python3 -m dagrun_torch costmodel`` in a child process (profiling
    slows the later graph replays of its process), its graph file written
    to ``out_dir`` and removed. Raises RuntimeError when the child's export
    has other nodes than ``ex``, subprocess.CalledProcessError when it fails."""
    from . import costmodel
    cpath = os.path.join(out_dir, "graph-%s.json" % spec.replace(":", "_"))
    subprocess.run([sys.executable, "-m", "dagrun_torch", "costmodel", "--model", spec, "--size", str(size),
                    "--out", cpath] + (["--cudnn-benchmark"] if cudnn_benchmark else []), check=True)
    with open(cpath) as f:
        child = json.load(f)
    os.remove(cpath)
    if [n["id"] for n in child["nodes"]] != [n["id"] for n in ex.graph["nodes"]]:
        raise RuntimeError("the cost model's export has other nodes than this one")
    return costmodel.from_graph(child)


def attach_cost(ex, cost) -> None:
    """Plan ``ex`` with the node times ``cost`` holds, and keep the cost model
    in its graph (``cost_model``)."""
    from . import costmodel
    for n in ex.graph["nodes"]:
        n["duration_us"] = cost.nodes[n["id"]].us
    costmodel.attach(ex.graph, cost)


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


CAPS = _cli.CAPS


def _x(a, b):
    return "%.2f×" % (a / b) if a and b else "—"




def cand_label(k) -> str:
    """A candidate's name in the tables: a cap, "none", "staged" or "priority order, cap N"."""
    k = str(k)
    if k == "staged":
        return "staged"
    if k.startswith("prio"):
        return "priority order, %s" % cand_label(k[4:])
    return "none" if k == "0" else k


def schedule_table(rows: List[dict]) -> str:
    """The schedule comparison (``--schedules``) as markdown."""
    head = ("| model | one-stream CUDA graph | dagrun default plan (streams) | capped at 16 | staged (IOS) plan (streams) "
            "| priority order, best of caps 4/16/none (cap) | cost-model choice | best by search | lower bound: critical path / SM-time "
            "| speed-up over the one-stream graph: default / 16 / staged / cost model / search | search ÷ lower bound | bit-identical "
            "| torch.compile reduce-overhead |")
    lines = [head, "|" + "---|" * 13]
    for r in rows:
        c = r.get("cands") or {}
        if "error" in r or not c:
            lines.append("| %s | %s |" % (r["model"], r.get("error", "—")) + " |" * 11)
            continue
        g = r["graph_ms"]
        d, k16, stg, cm, se = c.get("0"), c.get("16"), c.get("staged"), c.get(r["cost_cap"]), c.get(r["search_cap"])
        pk = min((k for k in EXTRA if k.startswith("prio") and k in c), key=lambda k: c[k]["ms"], default=None)
        lb = r["bound"]
        lines.append("| %s | %.3f | %.3f (%d) | %.3f | %s | %s | %.3f (%s) | %.3f (%s) | %.3f / %.3f | %s / %s / %s / %s / %s | %.2f | %s | %s |" % (
            r["model"], g, d["ms"], d["streams"], k16["ms"],
            "%.3f (%d)" % (stg["ms"], stg["streams"]) if stg else "—",
            "%.3f (%s)" % (c[pk]["ms"], cand_label(pk[4:])) if pk else "—",
            cm["ms"], cand_label(r["cost_cap"]), se["ms"], cand_label(r["search_cap"]), lb["cp_us"] / 1e3, lb["sm_us"] / 1e3,
            _x(g, d["ms"]), _x(g, k16["ms"]), _x(g, stg["ms"]) if stg else "—", _x(g, cm["ms"]), _x(g, se["ms"]),
            se["ms"] / (lb["bound_us"] / 1e3), r.get("identical", "—"), _fmt(r.get("compile_ms"))))
    return "\n".join(lines)


def schedules(args) -> int:
    """--schedules: per model, the cost model, the lower bound, every
    stream cap of CAPS, the staged (IOS) schedule and the priority order
    (EXTRA), planned, predicted and timed in one run; the cost model's choice
    is the candidate it predicts fastest, the search the one measured fastest."""
    from . import costmodel, schedule
    from .exporter import build_model, export
    from .runner import CompiledModel, bitwise_equal, plan_model
    t_start = time.time()
    os.makedirs(args.out, exist_ok=True)
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    rows: List[dict] = []
    costs: Dict[str, dict] = {}
    conn = os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS", "8 (default)")

    def note():
        return ("%s, torch %s, CUDA_DEVICE_MAX_CONNECTIONS %s, cudnn.benchmark %s, batch 1, float32, random weights; "
                "median of %d calls, ms; %.0f s in all." % (torch.cuda.get_device_name(), torch.__version__, conn,
                                                           args.cudnn_benchmark, args.iters, time.time() - t_start))

    def save():
        with open(os.path.join(args.out, "schedules.json"), "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "connections": conn,
                       "cudnn_benchmark": args.cudnn_benchmark,
                       "caps": list(CAPS), "extra": list(EXTRA), "rows": rows}, f, indent=1)
        with open(os.path.join(args.out, "costs.json"), "w") as f:
            json.dump(costs, f)
        with open(os.path.join(args.out, "schedules.md"), "w") as f:
            f.write(note() + "\n\n" + schedule_table(rows) + "\n")

    def one_model(name: str, spec: str, size: int, r: dict) -> None:
        model, x = gpu_model(spec, size)
        call, gout, g, _ = one_stream_graph(model, x)
        r["graph_ms"] = median_ms(call, args.iters)
        del call, gout, g
        t0 = time.time()
        ex = export(model, (x,))
        with torch.no_grad():
            ref = ex.gm(x)
        r["export_s"] = round(time.time() - t0, 1)
        t0 = time.time()
        cost = measure_in_child(ex, spec, size, args.out, args.cudnn_benchmark)
        attach_cost(ex, cost)
        costs[name] = cost.to_dict()
        r["measure_s"] = round(time.time() - t0, 1)
        r["launch_us"] = cost.launch_us
        r["capacity"], r["interference"] = cost.capacity, cost.interference
        cal = cost.calibration
        r["calibration_pairs"] = len(cal)
        if cal:
            r["calibration_median_error"] = round(statistics.median(abs(p["predicted_us"] / p["together_us"] - 1) for p in cal if "repeats" in p), 4)
        r["bound"] = costmodel.lower_bound(ex.graph, cost)
        r["kernels"] = sum(len(n.kernels) for n in cost.nodes.values())
        r["launch_bound_us"] = round(sum(max(1, len(n.kernels)) for n in cost.nodes.values()) * cost.launch_us, 1)
        r["mean_occupancy"] = round(sum(n.occupancy * n.us for n in cost.nodes.values()) / max(1e-9, sum(n.us for n in cost.nodes.values())), 4)
        wide = costmodel.CostModel(cost.device, cost.sms, cost.nodes, capacity=1e9, interference=0.0)
        cands: Dict[str, dict] = {}
        r["cands"] = cands
        keys = [str(c) for c in CAPS] + list(EXTRA)
        best, chosen = schedule.choose(ex.graph, cost, lambda cap, g: plan_model(ex, max_streams=cap, graph=g), keys)
        r["staged"] = chosen["staged"]["summary"]
        r["cost_cap"] = best
        for cap in keys:
            plan = chosen[cap]["plan"]
            c = {k: (round(v, 2) if isinstance(v, float) else v) for k, v in chosen[cap].items()
                 if k not in ("plan", "form", "summary", "cap")}
            c["predicted_no_width_us"] = round(costmodel.predict(plan, wide), 2)
            cm = CompiledModel(ex, plan, "graph", (x,), priority="auto")
            c["ms"] = median_ms(lambda: cm(x), args.iters)
            c["priority"], c["tuning_ms"] = cm.priority, cm.tuning
            c["identical"] = bitwise_equal(cm(x), ref)[0]
            cands[str(cap)] = c
            del cm
            torch.cuda.synchronize()
            print(name, cand_label(cap), json.dumps(c), flush=True)
        r["search_cap"] = min(keys, key=lambda k: cands[k]["ms"])
        ok = all(c["identical"] for c in cands.values())
        for cap in sorted({"0", r["cost_cap"], r["search_cap"]}):
            if not args.verify_trials:
                break
            cm = CompiledModel(ex, chosen[cap]["plan"], "graph", (x,), priority="auto")
            try:
                cm.verify(x, trials=args.verify_trials)
            except AssertionError as e:
                ok = False
                r["mismatch_%s" % cap] = str(e)
            del cm
        r["identical"] = "yes" if ok else "NO"
        if name in args.compile_models and time.time() - t_start + _COMPILE_S[name] < args.budget_s:
            r["compile_s"], r["compile_ms"] = reduce_overhead_ms(model, x, args.iters)

    each_model(rows, args.models, one_model, save)
    print()
    print(note())
    print(schedule_table(rows))
    save()
    return exit_status(rows)


INDUCTOR_CAPS = (4, 8, 16, 0)


def inductor_table(rows: List[dict]) -> str:
    """The torch.compile composition (``--inductor``) as markdown."""
    lines = ["| model | torch.compile reduce-overhead | Inductor's kernels, one-stream CUDA graph | dagrun over Inductor's kernels "
             "(best cap of %s) | streams | speed-up over reduce-overhead | over the one-stream graph of the same kernels "
             "| bit-identical to one stream | launches |" % "/".join(str(c or "none") for c in INDUCTOR_CAPS),
             "|" + "---|" * 9]
    for r in rows:
        if "best_ms" not in r:
            lines.append("| %s | %s | %s |" % (r["model"], _fmt(r.get("compile_ms")), r.get("error", "—")) + " |" * 6)
            continue
        lines.append("| %s | %s | %.3f | %.3f (cap %s) | %d | %s | %s | %s | %d |" % (
            r["model"], _fmt(r.get("compile_ms")), r["one_ms"], r["best_ms"], r["best_cap"] or "none", r["best_streams"],
            _x(r.get("compile_ms") if isinstance(r.get("compile_ms"), float) else None, r["best_ms"]),
            _x(r["one_ms"], r["best_ms"]), r["identical"], r["launches"]))
    return "\n".join(lines)


def inductor(args) -> int:
    """--inductor: torch.compile reduce-overhead against dagrun's plans over
    the same Inductor kernels (dagrun_torch.inductor)."""
    from . import inductor as ind
    from .exporter import build_model
    from .runner import bitwise_equal
    t_start = time.time()
    os.makedirs(args.out, exist_ok=True)
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    rows: List[dict] = []

    def note():
        return ("%s, torch %s, batch 1, float32, random weights; median of %d calls, ms; %.0f s in all." % (
            torch.cuda.get_device_name(), torch.__version__, args.iters, time.time() - t_start))

    def save():
        with open(os.path.join(args.out, "inductor.json"), "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)
        with open(os.path.join(args.out, "inductor.md"), "w") as f:
            f.write(note() + "\n\n" + inductor_table(rows) + "\n")

    def one_model(name: str, spec: str, size: int, r: dict) -> None:
        model, x = gpu_model(spec, size)
        if name in args.compile_models and time.time() - t_start + 2 * _COMPILE_S[name] < args.budget_s:
            r["compile_s"], r["compile_ms"] = reduce_overhead_ms(model, x, args.iters)
        t0 = time.time()
        cd, fx = ind.compile_model(model, (x,))     # torch.compile's default mode, through Inductor's FX wrapper
        with torch.no_grad():
            cd(x)
        r["compile_default_s"] = round(time.time() - t0, 1)
        t0 = time.time()
        ig = ind.trace_fx(fx, name=name)
        r["trace_s"] = round(time.time() - t0, 1)
        r["launches"] = len(ig.graph["nodes"])
        r["sum_us"] = ig.graph["sum_node_us"]
        slots = ind.input_slots(ig.args, (x,))
        one = ind.one_stream(ig, slots)
        r["one_ms"] = median_ms(lambda: one(x), args.iters)
        ref = [t.clone() for t in _flat(one(x))]
        with torch.no_grad():
            eager = _flat(cd(x))
        r["one_equals_compiled"] = bitwise_equal(ref, [t.clone() for t in eager])[0]
        # a kernel whose result depends on timing shows as a one-stream graph that differs from itself
        again = ind.one_stream(ig, slots)
        r["one_stream_repeatable"] = all(bitwise_equal(list(_flat(g_(x))), ref)[0] for g_ in (one, again, one))
        del one, again
        cands = {}
        for cap in INDUCTOR_CAPS:
            ci = ind.CompiledInductor(ig, ind.plan_graph(ig.graph, cap), slots)
            c = {"streams": ci.streams, "ms": median_ms(lambda: ci(x), args.iters)}
            c["identical"], why = bitwise_equal(list(_flat(ci(x))), ref)
            if why:
                c["mismatch"] = why
            cands[str(cap)] = c
            del ci
            torch.cuda.synchronize()
            print(name, "inductor cap", cap, json.dumps(c), flush=True)
        r["cands"] = cands
        best = min(INDUCTOR_CAPS, key=lambda k: cands[str(k)]["ms"])
        r["best_cap"], r["best_ms"], r["best_streams"] = best, cands[str(best)]["ms"], cands[str(best)]["streams"]
        ok = all(c["identical"] for c in cands.values())
        rng = random.Random(0)
        launches = sorted(ig.launch)
        for trial in range(args.verify_trials):  # the best plan again, with GPU delays before a tenth of the launches
            delays = {k: int(rng.uniform(0.1, 1.0) * 200 * 1.98e3) for k in rng.sample(launches, max(1, len(launches) // 10))}
            ci = ind.CompiledInductor(ig, ind.plan_graph(ig.graph, best), slots, delays=delays)
            same = bitwise_equal(list(_flat(ci(x))), ref)[0]
            r.setdefault("delayed_identical", []).append(same)
            ok = ok and same
            del ci
        r["identical"] = "yes" if ok else "NO"
        del cd, ig
        torch._dynamo.reset()

    each_model(rows, args.models, one_model, save)
    print()
    print(note())
    print(inductor_table(rows))
    save()
    return exit_status(rows)


TRANSFORMERS = _cli.TRANSFORMERS


def workload(name: str):
    """(model, inputs) of a bench --backend workload: a torchvision or timm
    CNN of MODELS at batch 1, or a transformer of TRANSFORMERS."""
    if name in MODELS:
        model, x = gpu_model(*MODELS[name])
        return model, (x,)
    return transformer_model(name)


def transformer_model(name: str):
    """(model, inputs) of a transformer workload, random weights (seed 0),
    eval, float32, on the GPU. "bert-base": transformers' BertModel with
    BertConfig's defaults, input ids of batch 1, length 128. "moe-N": a
    mixture-of-experts feed-forward layer of a decoder at decode time (N
    tokens, hidden size 1024): a router picks 2 of 8 experts per token,
    and every expert (transformers' Mixtral expert MLP, 3584 wide) runs on
    all N tokens, weighted by its gate (0 where not picked), so the experts
    are parallel branches of one graph."""
    torch.manual_seed(0)
    if name == "bert-base":
        from transformers import BertConfig, BertModel
        m = BertModel(BertConfig()).eval().cuda()
        return m, (torch.randint(0, 30522, (1, 128), device="cuda"),)
    n = int(name.split("-", 1)[1])
    from transformers import MixtralConfig
    from transformers.models.mixtral import modeling_mixtral as mm
    cfg = MixtralConfig(hidden_size=1024, intermediate_size=3584, num_local_experts=8, num_experts_per_tok=2)
    expert = getattr(mm, "MixtralBlockSparseTop2MLP", None) or getattr(mm, "MixtralMLP", None)

    class Expert(torch.nn.Module):
        def __init__(self):
            super().__init__()
            if expert is not None:
                self.mlp = expert(cfg)
            else:  # transformers without a per-expert module: the same SwiGLU MLP
                from transformers.activations import ACT2FN
                self.w1 = torch.nn.Linear(1024, 3584, bias=False)
                self.w3 = torch.nn.Linear(1024, 3584, bias=False)
                self.w2 = torch.nn.Linear(3584, 1024, bias=False)
                self.act = ACT2FN[cfg.hidden_act]

        def forward(self, x):
            if expert is not None:
                return self.mlp(x)
            return self.w2(self.act(self.w1(x)) * self.w3(x))

    class MoE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = torch.nn.Linear(1024, 8, bias=False)
            self.experts = torch.nn.ModuleList([Expert() for _ in range(8)])

        def forward(self, x):
            w = torch.softmax(self.gate(x), dim=-1)
            top, idx = torch.topk(w, 2, dim=-1)
            gates = torch.zeros_like(w).scatter(-1, idx, top / top.sum(-1, keepdim=True))
            out = x
            for e, ex in enumerate(self.experts):
                out = out + gates[:, e:e + 1] * ex(x)
            return out
    return MoE().eval().cuda(), (torch.randn(n, 1024, device="cuda"),)


# Rough cold compile seconds of one torch.compile mode on an H100 (torch 2.11,
# the measured default column), to skip models the --backend budget cannot hold.
_COLD_COMPILE_S = {"googlenet": 21, "inception_v3": 20, "resnet50": 11, "densenet121": 36, "bert-base": 11,
                   "moe-1": 2, "moe-8": 2, "inception_v4": 29, "nasnetalarge": 90}
BACKEND_MODES = ("default", "reduce-overhead", "dagrun")


def backend_estimate_s(name: str, scale: float = 1.0) -> float:
    """Seconds bench --backend expects model ``name`` to take: three cold
    compiles (_COLD_COMPILE_S; 30 s for a model it does not list) plus 5 s,
    times ``scale`` (measured ÷ expected over the models run so far)."""
    return scale * (3 * _COLD_COMPILE_S.get(name, 30) + 5)


def backend_table(rows: List[dict]) -> str:
    """--backend as markdown. The dagrun column's streams are those of each
    graph on the dagrun or one-stream path (``own_graphs``: "1/4" for a
    graph break whose first graph no plan speeds up), "1" where every graph
    took reduce-overhead; "dagrun path" lists each distinct path with its
    reason: "dagrun", "one stream" (no plan gains: the one-stream plan's
    CUDA graph, no second compile) or "reduce-overhead" (Inductor's own)."""
    lines = ["| model | torch.compile default | reduce-overhead | backend=\"dagrun\" (streams) | dagrun ÷ reduce-overhead "
             "| peak MB during compile: default / reduce-overhead / dagrun "
             "| peak MB in steady replay: default / reduce-overhead / dagrun "
             "| held MB in steady state: default / reduce-overhead / dagrun "
             "| cold compile s: default / reduce-overhead / dagrun (of which dagrun's own) "
             "| bit-identical to default | dagrun path |", "|" + "---|" * 11]
    for r in rows:
        d, ro, dg = r.get("default", {}), r.get("reduce-overhead", {}), r.get("dagrun", {})
        path = "; ".join(sorted(set(g["path"] + (" (" + g["reason"] + ")" if g["reason"] else "") for g in dg.get("graphs", [])))) \
            or r.get("error") or r.get("skipped") or "—"

        def three(key, nd=0):
            return " / ".join(_fmt(e.get(key), nd) for e in (d, ro, dg))
        own = dg.get("dagrun_own_s")
        lines.append("| %s | %s | %s | %s (%s) | %s | %s | %s | %s | %s%s | %s | %s |" % (
            r["model"], _fmt(d.get("ms")), _fmt(ro.get("ms")), _fmt(dg.get("ms")), dg.get("streams", "—"),
            _x(ro.get("ms"), dg.get("ms")), three("compile_peak_mb"), three("steady_peak_mb"), three("held_mb"),
            three("compile_s", 1), " (%.1f)" % own if own is not None else "", r.get("identical", "—"), path[:200]))
    return "\n".join(lines)


def own_graphs(graphs: Sequence[Any]) -> List[Any]:
    """The graphs of ``graphs`` (``backend.CompiledGraph``) that run a
    capture of the backend's own: the dagrun path and the one-stream path
    (``backend.ONE_STREAM``: no plan gains, the one-stream plan's CUDA
    graph). A graph on Inductor's reduce-overhead path is left out."""
    from . import backend as be
    return [g for g in graphs if g.path in ("dagrun", be.ONE_STREAM)]


def dagrun_own_s(graphs: Sequence[Any]) -> float:
    """dagrun's own compile seconds over ``graphs``: each ``own_graphs``
    graph's seconds in the backend less Inductor's compile with its FX
    wrapper (its trace, plans, captures and checks), to 0.1 s."""
    return round(sum(g.compile_s - g.inductor_s for g in own_graphs(graphs)), 1)


def _fresh_cache():
    """Inductor's fresh-cache context (an empty Inductor and Triton cache
    folder and cleared in-process caches for what runs inside), or None
    where torch has none."""
    try:
        from torch._inductor import utils
    except ImportError:
        return None
    return getattr(utils, "fresh_cache", None) or getattr(utils, "fresh_inductor_cache", None)


# A cold compile shorter than this (s) varies by a tenth of itself from one run to the next: the bench
# compiles it COMPILE_RUNS times in all and reports the median.
RECOMPILE_BELOW_S = 5.0
COMPILE_RUNS = 3


def _compile_again(e: dict, model: Any, inputs: Sequence[Any], kw: dict, fresh: Any, own: bool) -> None:
    """Compile ``model`` cold (``fresh`` cache, dynamo reset) COMPILE_RUNS - 1
    more times with torch.compile's ``kw``, each through 3 calls, and make
    ``e["compile_s"]`` (and with ``own``, ``e["dagrun_own_s"]``) the median
    over every run, the first measured one included; ``e["compile_runs_s"]``
    lists each run's seconds. The compiled models are dropped."""
    import warnings
    from . import backend as be
    runs, owns = [e["compile_s"]], [e.get("dagrun_own_s", 0.0)]
    for _ in range(COMPILE_RUNS - 1):
        _reset_compiled_state()
        n0 = len(be.compiled_graphs())
        with fresh() if fresh else _null():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", be.DagrunFallbackWarning)
                t0 = time.time()
                c = torch.compile(model, dynamic=False, **kw)
                with torch.no_grad():
                    for _ in range(3):
                        c(*inputs)
                torch.cuda.synchronize()
                runs.append(round(time.time() - t0, 1))
        owns.append(dagrun_own_s(be.compiled_graphs()[n0:]))
        del c
    e["compile_runs_s"] = runs
    e["compile_s"] = round(statistics.median(runs), 1)
    if own:
        e["dagrun_own_s"] = round(statistics.median(owns), 1)
    _reset_compiled_state()


def _reset_compiled_state() -> None:
    """Forget what earlier torch.compile calls left: dynamo's caches, CUDA
    graph trees, cached cuBLAS workspaces, garbage, free allocator blocks."""
    import gc
    from .inductor import clear_blas_workspaces
    torch._dynamo.reset()
    try:
        from torch._inductor import cudagraph_trees
        cudagraph_trees.reset_cudagraph_trees()
    except (ImportError, AttributeError):
        pass
    gc.collect()
    clear_blas_workspaces()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def _warm_process(opts: dict) -> None:
    """Compile a small model once in each mode (each in its own fresh cache)
    so that no measured mode pays for imports or Inductor's compile workers."""
    import warnings
    m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64)).cuda().eval()
    x = torch.randn(8, 64, device="cuda")
    fresh = _fresh_cache()
    for kw in ({}, {"mode": "reduce-overhead"}, {"backend": "dagrun", "options": opts}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with fresh() if fresh else _null():
                c = torch.compile(m, dynamic=False, **kw)
                with torch.no_grad():
                    for _ in range(3):
                        c(x)
                torch.cuda.synchronize()
                del c
        _reset_compiled_state()


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


def backend(args) -> int:
    """--backend: per model, torch.compile default, reduce-overhead and
    backend="dagrun" in one run: median ms (and in the JSON the host's
    time per call, ``host_ms``, and the time per call when calls are issued
    back to back, ``pipelined_ms``); peak memory during compile and
    in steady replay, and memory held in steady state; compile time, each
    mode cold (its own empty Inductor and Triton cache, dynamo reset; the
    process warmed first by a small compile in every mode)."""
    import warnings
    from . import backend as be
    from .runner import bitwise_equal
    t_start = time.time()
    os.makedirs(args.out, exist_ok=True)
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    from torch import _dynamo
    how = "entry point"
    if "dagrun" not in _dynamo.list_backends(exclude_tags=()):
        be.register()
        how = "registered by dagrun_torch.backend.register (no entry point installed)"
    rows: List[dict] = []
    fresh = _fresh_cache()
    cache_note = ("each mode cold: its own empty Inductor/Triton cache (torch._inductor.utils.%s) after "
                  "torch._dynamo.reset(), the process warmed first by one small compile in every mode" % fresh.__name__
                  if fresh else "Inductor's caches SHARED between modes (this torch has no fresh_cache): not cold")

    def note():
        return ("%s, torch %s, float32, random weights, inference (no_grad); median of %d calls, ms. Peak MB during compile: "
                "most allocated from torch.compile through 3 warm-up calls, over what was allocated before, plus the "
                "weights. Peak MB in steady replay: the same, from a reset of the peak after the warm-up through the "
                "timed calls. Held MB: device memory the allocator keeps reserved after the timed calls and "
                "torch.cuda.empty_cache() (CUDA graph pools, cached workspaces), over what it reserved before, plus "
                "the weights. Compile s: torch.compile and 3 calls, %s; the median of %d such compiles where one takes "
                "under %.0f s; dagrun's own: its trace, plans and captures. "
                "Backend \"dagrun\" found by %s, options=%s; %.0f s in all." % (
                    torch.cuda.get_device_name(), torch.__version__, args.iters, cache_note, COMPILE_RUNS,
                    RECOMPILE_BELOW_S, how, opts,
                    time.time() - t_start))

    def save():
        with open(os.path.join(args.out, "backend.json"), "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cache": cache_note,
                       "options": opts, "rows": rows}, f, indent=1)
        with open(os.path.join(args.out, "backend.md"), "w") as f:
            f.write(note() + "\n\n" + backend_table(rows) + "\n")

    opts = {"max_streams": args.max_streams, "verify": args.verify_trials > 0,
            "verify_trials": args.verify_trials}
    t0 = time.time()
    try:
        _warm_process(opts)
    except Exception:
        traceback.print_exc()
        print("warm-up compile failed (above): the first mode measured pays for imports and compile workers", flush=True)
    print("warm-up compile of a small model in every mode: %.1f s" % (time.time() - t0), flush=True)
    spent = expected = 0.0
    for name in args.models:
        r: dict = {"model": name}
        rows.append(r)
        scale = min(3.0, max(0.5, spent / expected)) if expected else 1.0
        est = backend_estimate_s(name, scale)
        left = args.budget_s - (time.time() - t_start)
        if est > left:
            r["skipped"] = "budget: %.0f s expected, %.0f s left" % (est, left)
            print("%s skipped (%s)" % (name, r["skipped"]), flush=True)
            save()
            continue
        print("%s: %.0f s expected, %.0f s left" % (name, est, left), flush=True)
        t_model = time.time()
        try:
            model, inputs = workload(name)
            wb = weight_bytes(model)
            outs = {}
            for key, kw in (("default", {}), ("reduce-overhead", {"mode": "reduce-overhead"}),
                            ("dagrun", {"backend": "dagrun", "options": opts})):
                c = None
                _reset_compiled_state()
                torch.cuda.reset_peak_memory_stats()
                before = torch.cuda.memory_allocated()
                reserved_before = torch.cuda.memory_reserved()
                n0 = len(be.compiled_graphs())
                e: dict = {}
                r[key] = e
                try:
                    with fresh() if fresh else _null():
                        with warnings.catch_warnings(record=True) as caught:
                            warnings.simplefilter("always", be.DagrunFallbackWarning)
                            t0 = time.time()
                            c = torch.compile(model, dynamic=False, **kw)
                            with torch.no_grad():
                                for _ in range(3):
                                    out = c(*inputs)
                            torch.cuda.synchronize()
                            e["compile_s"] = round(time.time() - t0, 1)
                        e["compile_peak_mb"] = round((wb + torch.cuda.max_memory_allocated() - before) / 1e6, 1)
                        e["warnings"] = [str(w.message)[:300] for w in caught if issubclass(w.category, be.DagrunFallbackWarning)]
                        outs[key] = [t.detach().clone() for t in _flat(out if not hasattr(out, "to_tuple") else out.to_tuple())]
                        del out
                        torch.cuda.synchronize()
                        torch.cuda.reset_peak_memory_stats()
                        with torch.no_grad():
                            e["ms"] = median_ms(lambda: c(*inputs), args.iters)
                            host, pipe = host_and_pipelined_ms(lambda: c(*inputs), args.iters)
                            e["host_ms"], e["pipelined_ms"] = round(host, 4), round(pipe, 4)
                        torch.cuda.synchronize()
                        e["steady_peak_mb"] = round((wb + torch.cuda.max_memory_allocated() - before) / 1e6, 1)
                        torch.cuda.empty_cache()
                        e["held_mb"] = round((wb + torch.cuda.memory_reserved() - reserved_before) / 1e6, 1)
                    if key == "dagrun":
                        gs = be.compiled_graphs()[n0:]
                        e["graphs"] = [{"path": g.path, "reason": g.reason, "streams": g.streams, "launches": g.launches,
                                        "candidates": g.candidates, "identical": g.identical, "verified": g.verified,
                                        "compile_s": g.compile_s, "inductor_s": g.inductor_s, "trace_s": g.trace_s,
                                        "plan_s": g.plan_s, "capture_s": g.capture_s, "verify_s": g.verify_s} for g in gs]
                        for g in gs:
                            if g.traceback:
                                print(g.traceback, flush=True)
                        e["streams"] = "/".join(str(g.streams) for g in own_graphs(gs)) or "1"
                        e["dagrun_own_s"] = dagrun_own_s(gs)
                    if e["compile_s"] < RECOMPILE_BELOW_S:
                        del c
                        c = None
                        _compile_again(e, model, inputs, kw, fresh, key == "dagrun")
                except Exception as ex:
                    e["error"] = "%s: %s" % (type(ex).__name__, str(ex)[:300])
                    traceback.print_exc()
                del c
                print(name, key, json.dumps(e), flush=True)
            if "default" in outs:
                r["identical"] = " / ".join("%s %s" % (k, "yes" if bitwise_equal(outs[k], outs["default"])[0] else "NO")
                                            for k in ("reduce-overhead", "dagrun") if k in outs)
            del model, outs
        except Exception as ex:
            r["error"] = "%s: %s" % (type(ex).__name__, str(ex)[:300])
            traceback.print_exc()
        _reset_compiled_state()
        took = time.time() - t_model
        r["wall_s"] = round(took, 1)
        spent += took
        expected += backend_estimate_s(name)
        print("%s done in %.0f s" % (name, took), flush=True)
        save()
    print()
    print(note())
    print(backend_table(rows))
    save()
    return exit_status(rows)


def _flat(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        out = []
        for e in v:
            out += _flat(e)
        return out
    return []


def main(argv: Optional[List[str]] = None) -> int:
    ap = _cli.bench()
    args = ap.parse_args(argv)
    why = _cli.bench_usage(args)
    if why:
        print(why, file=sys.stderr)
        return 2
    if args.backend or args.inductor:
        run = "bench --backend" if args.backend else "bench --inductor"
        from .backend import require_torch_compile
        try:
            require_torch_compile(run)
        except ImportError as e:
            print(e, file=sys.stderr)
            return 2
        if args.inductor:
            # --backend runs on an older torch too (every graph on Inductor's own path); --inductor reads the FX wrapper
            from .inductor import fx_wrapper_missing
            why = fx_wrapper_missing()
            if why:
                print("%s: %s; install torch 2.9 or later" % (run, why), file=sys.stderr)
                return 2
    if not torch.cuda.is_available():
        print("bench: needs a GPU", file=sys.stderr)
        return 2
    if args.max_streams is None:
        args.max_streams = "auto" if args.backend else 16
    if args.schedules:
        return schedules(args)
    if args.inductor:
        return inductor(args)
    if args.backend:
        return backend(args)
    from .exporter import build_model, export
    from .runner import bitwise_equal, compile as dcompile
    t_start = time.time()
    os.makedirs(args.out, exist_ok=True)
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
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
            model, x = gpu_model(spec, size)
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
                r["compile_s"], r["compile_ms"] = reduce_overhead_ms(model, x, args.iters)
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
    return exit_status(rows)


if __name__ == "__main__":
    sys.exit(main())
