"""Where the dagrun backend's graph memory and compile time go, on the GPU.

For each model: Inductor's kernels traced (the operator graph is written to
OUT/graphs/MODEL.json, for `dagrun plan` on any machine), planned on one stream
and capped at 4, each plan captured with the allocator's history on: with the
wrapper's allocations from the caching allocator ("cap1", "cap4"), every
intermediate held to the end ("cap4-hold"), from the plan's arena
("-arena"), and with the allocator's expandable segments on during the
capture ("-expandable"); prints the private pool each capture reserved,
split by stream and by block size, and the
bytes the traced buffers take by who allocates them (the wrapper's
empty_strided or an extern kernel's own output). Then a cProfile of the
backend's whole compile of the last model.
    DAGRUN=.gpu/dagrun OUT=out python3 python/tests/gpu_backend_memory.py [MODEL...]"""
import collections
import cProfile
import io
import json
import os
import pstats
import sys
import time
import warnings

import torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from dagrun_torch import backend as be, bench as B, inductor as ind
from dagrun_torch.exporter import _flat_tensors

be.register()
warnings.simplefilter("ignore")
out_dir = os.environ.get("OUT", ".")
os.makedirs(os.path.join(out_dir, "graphs"), exist_ok=True)
models = sys.argv[1:] or ["googlenet", "resnet50", "densenet121", "moe-1"]
dagrun = os.environ.get("DAGRUN")


def grab(model, inputs):
    seen = {}

    def backend(gm, ex):
        inner, fx = be._inductor_fx(gm, ex)
        seen["gm"], seen["ex"], seen["inner"], seen["fx"] = gm, list(ex), inner, fx
        return inner
    torch._dynamo.reset()
    c = torch.compile(model, dynamic=False, backend=backend)
    with torch.no_grad():
        c(*inputs)
    return seen


def pool_summary(snap, before_segments):
    by_stream = collections.Counter()
    blocks = collections.Counter()
    for seg in snap["segments"]:
        if (seg.get("address"), seg.get("total_size")) in before_segments:
            continue
        by_stream[seg["stream"]] += seg["total_size"]
        for b in seg["blocks"]:
            if b["state"] == "active_allocated":
                blocks["live %d MB" % round(b["size"] / 2**20)] += 1
    return {"segments_mb_by_stream": {str(k): round(v / 1e6, 1) for k, v in by_stream.items()},
            "live_blocks": dict(blocks.most_common(12))}


def alloc_sizes(snap):
    """Allocations during the capture by stream: count, MB allocated in all, largest sizes."""
    per = collections.defaultdict(list)
    for tr in snap.get("device_traces", [[]])[0]:
        if tr["action"] == "alloc":
            per[tr["stream"]].append(tr["size"])
    return {str(s): {"n": len(v), "sum_mb": round(sum(v) / 1e6, 1), "top_mb": [round(x / 1e6, 1) for x in sorted(v)[-6:]]}
            for s, v in per.items()}


res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "models": {}}
for name in models:
    t0 = time.time()
    model, inputs = B.workload(name)
    g = grab(model, inputs)
    ex = g["ex"]
    ig = ind.trace_fx(g["fx"], name=name)
    with open(os.path.join(out_dir, "graphs", name + ".json"), "w") as f:
        json.dump(ig.graph, f)
    tb = {t["id"]: t["bytes"] for t in ig.graph["tensors"]}
    by = collections.Counter()
    for i, n in enumerate(ig.nodes):
        kind = "empty_strided" if i in ig.allocs else ("extern output" if ig.kinds[i] == "aten" else None)
        if kind is None:
            continue
        fresh = {t["id"] for t in ig.graph["tensors"] if t.get("alloc") == "producer"}
        for t in ig.name_tids.get(n.name, []):
            if kind == "empty_strided" or t in fresh:
                by[kind] += tb.get(t, 0)
    r = {"launches": len(ig.graph["nodes"]), "traced_mb_by_allocator": {k: round(v / 1e6, 1) for k, v in by.items()},
         "held_to_end_mb": round(sum(tb[t] for t in ind.held_to_end(ig.graph)) / 1e6, 1)}
    tensors = [x for x in ex if isinstance(x, torch.Tensor)]
    static = set(be.static_inputs(g["gm"], ex))
    slots = ind.input_slots(ig.args, tensors)
    copied = {k: v for k, v in slots.items() if k not in static}
    plans = ind.plan_graphs(ig.graph, [(1, "default"), (4, "default")], dagrun)
    with torch.no_grad():
        want = [t.clone() for t in _flat_tensors(g["inner"](*ex))]
    torch.cuda.synchronize()
    for cap in (1, 4):
        p = plans[(cap, "default")]
        r["plan%d" % cap] = {"arena_mb": round(p.stats.get("arena_bytes", 0) / 1e6, 1), "in_arena": len(p.arena),
                             "arena_slots": len(ind.arena_slots(ig, p)), "allocs": len(ig.allocs)}
    for cap, lifetimes, arena, exp in ((1, True, False, False), (4, True, False, False), (4, False, False, False),
                                       (1, True, True, False), (4, True, True, False), (4, True, True, True), (4, True, False, True)):
        ind.clear_blas_workspaces()
        torch.cuda.empty_cache()
        before = {(s["address"], s["total_size"]) for s in torch.cuda.memory._snapshot()["segments"]}
        torch.cuda.memory._record_memory_history(max_entries=500000)
        key = "cap%d%s%s%s" % (cap, "" if lifetimes else "-hold", "-arena" if arena else "", "-expandable" if exp else "")
        try:
            if exp:
                torch.cuda.memory._set_allocator_settings("expandable_segments:True")
            try:
                ci = ind.CompiledInductor(ig, plans[(cap, "default")], copied, lifetimes=lifetimes, arena=arena)
            finally:
                if exp:
                    torch.cuda.memory._set_allocator_settings("expandable_segments:False")
        except Exception as e:
            import traceback
            traceback.print_exc()
            r[key] = {"error": "%s: %s" % (type(e).__name__, e)}
            torch.cuda.memory._record_memory_history(enabled=None)
            continue
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        got = _flat_tensors(ci(*tensors))
        same = len(got) == len(want) and all(torch.equal(a, b) for a, b in zip(got, want))
        ms = be._median_replay_ms(ci)
        r[key] = {"identical": same, "ms": round(ms, 4), "streams": ci.streams, "pool_mb": round(ci.pool_bytes / 1e6, 1), "blas_streams": ind.blas_streams(ci.plan, ig),
                  **pool_summary(snap, before), "allocs": alloc_sizes(snap)}
        del ci, snap
        be._release()
    r["wall_s"] = round(time.time() - t0, 1)
    res["models"][name] = r
    print(name, json.dumps(r, indent=1), flush=True)
    del g, wc, ig, model, inputs, ex, tensors
    torch._dynamo.reset()
    be._release()

# the backend's whole compile of the last model, twice (the first pays for its kernels' compile)
name = models[-1]
model, inputs = B.workload(name)
for trial in range(2):
    torch._dynamo.reset()
    be._release()
    pr = cProfile.Profile()
    t0 = time.time()
    pr.enable()
    c = torch.compile(model, dynamic=False, backend="dagrun", options={"verify": False, "dagrun": dagrun})
    with torch.no_grad():
        c(*inputs)
    torch.cuda.synchronize()
    pr.disable()
    gi = be.compiled_graphs()[-1]
    print("== compile %s trial %d: %.2f s; graph: inductor %.2f trace %.2f plan %.2f capture %.2f verify %.2f" % (
        name, trial, time.time() - t0, gi.inductor_s, gi.trace_s, gi.plan_s, gi.capture_s, gi.verify_s), flush=True)
    sio = io.StringIO()
    st = pstats.Stats(pr, stream=sio).sort_stats("cumulative")
    st.print_stats("dagrun_torch|gc|synchronize|empty_cache|clearCublas", 40)
    print(sio.getvalue()[:9000], flush=True)
    del c
with open(os.path.join(out_dir, "memory.json"), "w") as f:
    json.dump(res, f, indent=1)
