"""How far apart a workload's outputs are (bert-base by default) under
torch.compile default (compiled twice), Inductor's compile with its FX
wrapper and no CUDA graph (twice), reduce-overhead and backend="dagrun",
with Inductor's caches off, so that each compile tunes its kernels anew:
max |difference| between every pair and whether the bits are equal;
last, the backend's path and streams for each of its graphs.
    DAGRUN=.gpu/dagrun python3 python/tests/gpu_bert_bits.py [WORKLOAD]"""
import os, sys, warnings, torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch._inductor.config as icfg
icfg.force_disable_caches = True
from dagrun_torch import backend as be, bench as B
from dagrun_torch import inductor as ind
be.register(); warnings.simplefilter("ignore")
print("torch", torch.__version__, torch.cuda.get_device_name(), flush=True)
model, inputs = B.workload(sys.argv[1] if len(sys.argv) > 1 else "bert-base")


def flat(o):
    if hasattr(o, "to_tuple"): o = o.to_tuple()
    if isinstance(o, torch.Tensor): return [o]
    r = []
    for x in (o.values() if isinstance(o, dict) else o): r += flat(x)
    return r


def fx_wrapper(gm, ex):
    inner, fx = ind.compile_fx_wrapper(gm, ex)
    return inner


outs = {}
with torch.no_grad():
    for key, kw in (("default", {}), ("default-again", {}), ("fx-wrapper", {"backend": fx_wrapper}),
                    ("fx-wrapper-again", {"backend": fx_wrapper}), ("reduce-overhead", {"mode": "reduce-overhead"}),
                    ("dagrun", {"backend": "dagrun", "options": {"dagrun": os.environ.get("DAGRUN")}})):
        torch._dynamo.reset()
        n0 = len(be.compiled_graphs())
        c = torch.compile(model, dynamic=False, **kw)
        for _ in range(3): o = c(*inputs)
        outs[key] = [t.clone() for t in flat(o)]
        if key == "dagrun":
            paths = [(g.path, g.streams) for g in be.compiled_graphs()[n0:]]
keys = list(outs)
for i, a in enumerate(keys):
    for b in keys[i + 1:]:
        d = max(float((x.float() - y.float()).abs().max()) for x, y in zip(outs[a], outs[b]))
        print("%-18s %-18s max|diff| %.3g equal %s" % (a, b, d, all(torch.equal(x, y) for x, y in zip(outs[a], outs[b]))), flush=True)
print("dagrun graphs (path, streams):", paths, flush=True)
