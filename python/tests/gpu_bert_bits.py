"""How far apart bert-base's outputs are under eager, torch.compile default,
reduce-overhead and backend="dagrun" (each called twice after warm-up):
max |difference| between every pair and whether the bits are equal.
    DAGRUN=.gpu/dagrun python3 python/tests/gpu_bert_bits.py"""
import os, sys, warnings, torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from dagrun_torch import backend as be, bench as B
be.register(); warnings.simplefilter("ignore")
model, inputs = B.workload("bert-base")
def flat(o):
    if hasattr(o, "to_tuple"): o = o.to_tuple()
    if isinstance(o, torch.Tensor): return [o]
    r = []
    for x in (o.values() if isinstance(o, dict) else o): r += flat(x)
    return r
outs = {}
with torch.no_grad():
    outs["eager"] = [t.clone() for t in flat(model(*inputs))]
    for key, kw in (("default", {}), ("reduce-overhead", {"mode": "reduce-overhead"}), ("dagrun", {"backend": "dagrun", "options": {"dagrun": os.environ.get("DAGRUN")}})):
        torch._dynamo.reset()
        c = torch.compile(model, dynamic=False, **kw)
        for _ in range(3): o = c(*inputs)
        outs[key] = [t.clone() for t in flat(o)]
        outs[key + "#2"] = [t.clone() for t in flat(c(*inputs))]
for a in outs:
    for b in outs:
        if a < b:
            d = max(float((x.float() - y.float()).abs().max()) for x, y in zip(outs[a], outs[b]))
            m = max(float(x.float().abs().max()) for x in outs[a])
            print("%-20s %-20s max|diff| %.3g (max|x| %.3g) equal %s" % (a, b, d, m, all(torch.equal(x, y) for x, y in zip(outs[a], outs[b]))))
print("sdp flash/mem/math", torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.mem_efficient_sdp_enabled(), torch.backends.cuda.math_sdp_enabled(), "tf32", torch.backends.cuda.matmul.allow_tf32)
