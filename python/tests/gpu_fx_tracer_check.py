"""GPU check of the dagrun backend on Inductor's FX wrapper (torch 2.9 or later; written for torch 2.11 on an H100,
under 120 s):

    DAGRUN=.gpu/dagrun python3 python/tests/gpu_fx_tracer_check.py [MODEL...]

1. The FX probe's model (python/tests/gpu_inductor_fx_probe.py: conv, linear, Triton kernels, topk), compiled
   through ``inductor.compile_model`` and traced by ``inductor.trace_fx``: prints every launch (its op, reads,
   writes, µs) and the tensors operators allocate; then captures it on one stream and on a plan of 4 streams
   (whatever the planner predicts) and checks both replay bit-identical to each other and close to eager.
2. googlenet and moe-1, or the MODELs given (``dagrun_torch.bench.workload``) through ``torch.compile(backend="dagrun",
   dynamic=False, options={"verify": True, "verify_trials": 1})``: prints, per graph, the path, the reason,
   the streams, the launches, identical, verified and the candidates; then whether the compiled model's output
   is close to eager's.

Exits 1 when a check fails: the probe's captures differ, or a model does not take the dagrun path, or its
graph is not identical or not verified, or an output is not close to eager's."""
import json
import os
import sys
import time
import warnings

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from dagrun_torch import backend as be, bench as B, inductor as ind  # noqa: E402
from dagrun_torch.runner import bitwise_equal  # noqa: E402

t_start = time.time()
dagrun = os.environ.get("DAGRUN")
print("torch", torch.__version__, torch.cuda.get_device_name(), "has fx_wrapper:", ind.fx_wrapper_missing() == "",
      flush=True)
if ind.fx_wrapper_missing():
    print("SKIP:", ind.fx_wrapper_missing())
    sys.exit(1)
be.register()
failed = []


def close(a, b):
    a, b = be._flat_out(a), be._flat_out(b)
    return len(a) == len(b) and all(torch.allclose(x, y, rtol=1e-3, atol=1e-3) for x, y in zip(a, b))


class Probe(nn.Module):  # the FX probe's model
    def __init__(s):
        super().__init__()
        s.c = nn.Conv2d(16, 32, 3, padding=1)
        s.l = nn.Linear(32, 64)

    def forward(s, x):
        z = s.l(torch.relu(s.c(x)).mean((2, 3)))
        return torch.relu(z).sum(1, keepdim=True) + z, torch.topk(z, 4).values


# 1. the probe's model, traced and captured directly
torch.manual_seed(0)
m, x = Probe().cuda().eval(), torch.randn(8, 16, 32, 32, device="cuda")
t0 = time.time()
compiled, fx = ind.compile_model(m, (x,))
ig = ind.trace_fx(fx, name="probe")
print("probe: compile+trace %.1f s, %d wrapper nodes, %d launches, kinds %s" % (
    time.time() - t0, len(ig.nodes), len(ig.launch), json.dumps({k: ig.kinds.count(k) for k in set(ig.kinds)})))
producer = [t["id"] for t in ig.graph["tensors"] if t.get("alloc") == "producer"]
print("probe: tensors", len(ig.graph["tensors"]), "allocated by operators", producer, "by the wrapper",
      sorted(t for ts in ig.allocs.values() for t in ts), "returned", ig.returned)
for n in ig.graph["nodes"]:
    print("  %-5s %-80s reads %s writes %s %.1f us" % (n["id"], n["op"], n["reads"], n["writes"], n["duration_us"]))
slots = ind.input_slots(ig.args, (x,))
with torch.no_grad():
    ref = [t.clone() for t in be._flat_out(m(x))]
one = ind.one_stream(ig, slots, dagrun)
a = [t.clone() for t in be._flat_out(one(x))]
del one
four = ind.CompiledInductor(ig, ind.plan_graph(ig.graph, 4, dagrun), slots)
b = [t.clone() for t in be._flat_out(four(x))]
same, why = bitwise_equal(b, a)
print("probe: 1 stream vs %d streams bit-identical: %s %s; close to eager: %s; arena MB %.2f" % (
    four.streams, same, why, close(a, ref), four.arena_bytes / 1e6), flush=True)
if not same or not close(a, ref):
    failed.append("probe")
del four

# 2. the backend end to end
for name in sys.argv[1:] or ("googlenet", "moe-1"):
    torch._dynamo.reset()
    model, inputs = B.workload(name)
    n0 = len(be.compiled_graphs())
    t0 = time.time()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always", be.DagrunFallbackWarning)
        c = torch.compile(model, backend="dagrun", dynamic=False,
                          options={"verify": True, "verify_trials": 1, "dagrun": dagrun})
        with torch.no_grad():
            out = [t.clone() for t in be._flat_out(c(*inputs))]
            ref = be._flat_out(model(*inputs))
    gs = be.compiled_graphs()[n0:]
    print(name, "compile+call %.1f s, graphs %d" % (time.time() - t0, len(gs)), flush=True)
    for g in gs:
        print(name, json.dumps({"path": g.path, "reason": g.reason, "streams": g.streams, "launches": g.launches,
                                "identical": g.identical, "verified": g.verified, "candidates": g.candidates,
                                "inductor_s": g.inductor_s, "trace_s": g.trace_s, "plan_s": g.plan_s,
                                "capture_s": g.capture_s, "verify_s": g.verify_s}), flush=True)
        if g.traceback:
            print(g.traceback)
        if g.path != "dagrun" or not g.identical or not g.verified:
            failed.append(name)
    print(name, "warnings:", [str(m_.message)[:300] for m_ in w if issubclass(m_.category, be.DagrunFallbackWarning)])
    ok = close(out, ref)
    print(name, "close to eager:", ok, flush=True)
    if not ok or not gs:
        failed.append(name)
    del c, model, inputs
    be._release()

print("total %.1f s; %s" % (time.time() - t_start, "FAILED: " + ", ".join(sorted(set(failed))) if failed else "all passed"))
sys.exit(1 if failed else 0)
