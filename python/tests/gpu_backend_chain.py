"""A chain model (16 convolutions with ReLU, 64 channels at 56x56, batch 1)
through torch.compile default, reduce-overhead and backend="dagrun", each
compiled cold: compile s (torch.compile and 3 calls), median ms of 50
calls, the backend's path per graph, and whether the outputs are
bit-identical to default's. No plan gains over one stream here, so the
backend runs the one-stream plan without a second compile.
    DAGRUN=.gpu/dagrun python3 python/tests/gpu_backend_chain.py"""
import os, sys, time, warnings, torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from dagrun_torch import backend as be, bench as B
from dagrun_torch.runner import bitwise_equal
be.register()
print("torch", torch.__version__, torch.cuda.get_device_name(), flush=True)
torch.manual_seed(0)
layers = []
for _ in range(16):
    layers += [torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU()]
m = torch.nn.Sequential(*layers).eval().cuda()
x = torch.randn(1, 64, 56, 56, device="cuda")
fresh = B._fresh_cache()
outs = {}
with torch.no_grad():
    for key, kw in (("default", {}), ("reduce-overhead", {"mode": "reduce-overhead"}),
                    ("dagrun", {"backend": "dagrun", "options": {"dagrun": os.environ.get("DAGRUN")}})):
        torch._dynamo.reset()
        n0 = len(be.compiled_graphs())
        with fresh():
            t0 = time.time()
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                c = torch.compile(m, dynamic=False, **kw)
                for _ in range(3):
                    o = c(x)
                torch.cuda.synchronize()
            cs = time.time() - t0
            outs[key] = o.clone()
            ms = B.median_ms(lambda: c(x), 50)
        gs = be.compiled_graphs()[n0:]
        print("chain", key, "compile %.1f s" % cs, "ms %.3f" % ms,
              [(g.path, g.streams, g.reason[:120], g.candidates.get("1"), g.compile_s, g.inductor_s) for g in gs],
              [str(q.message)[:160] for q in w if issubclass(q.category, be.DagrunFallbackWarning)], flush=True)
        del c
    for k in ("reduce-overhead", "dagrun"):
        print("chain", k, "bit-identical to default:", bitwise_equal([outs[k]], [outs["default"]]), flush=True)
