"""Smoke test of torch.compile(model, backend="dagrun") on the GPU (scripts/gpu-backend.sh runs it): the entry point, graph breaks with verify, a new input shape compiled again under dynamo's guards, autograd's fallback."""
import json, sys, time, warnings
import torch, torchvision
import torch._dynamo
from dagrun_torch import backend as be
from dagrun_torch.runner import bitwise_equal
print("torch", torch.__version__, torch.cuda.get_device_name(), flush=True)
print("dagrun in list_backends:", "dagrun" in torch._dynamo.list_backends(exclude_tags=()), flush=True)


def flat(v):
    return [t.detach().clone() for t in (v if isinstance(v, (list, tuple)) else [v])]


def run(name, model, x, **opts):
    torch._dynamo.reset()
    with torch.no_grad():
        ref = flat(torch.compile(model, dynamic=False)(x))
    torch._dynamo.reset()
    n0 = len(be.compiled_graphs())
    t0 = time.time()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always", be.DagrunFallbackWarning)
        c = torch.compile(model, backend="dagrun", dynamic=False, options=opts)
        with torch.no_grad():
            out = flat(c(x))
            out2 = flat(c(x.clone()))
            x2 = torch.randn_like(x)
            out3 = flat(c(x2))
    torch._dynamo.reset()
    with torch.no_grad():
        ref3 = flat(torch.compile(model, dynamic=False)(x2))
    gs = be.compiled_graphs()[n0:]
    print(name, "compile+3 calls %.1f s" % (time.time() - t0), "graphs", len(gs),
          json.dumps([{"path": g.path, "reason": g.reason, "streams": g.streams, "launches": g.launches,
                       "cands": g.candidates, "identical": g.identical, "verified": g.verified} for g in gs]), flush=True)
    for g in gs:
        if g.traceback:
            print(g.traceback)
    print(name, "warnings:", [str(m.message)[:200] for m in w if issubclass(m.category, be.DagrunFallbackWarning)])
    print(name, "bit-identical to torch.compile default:", bitwise_equal(out, ref), bitwise_equal(out2, ref),
          "new input:", bitwise_equal(out3, ref3), flush=True)


class Broken(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.ModuleList([torch.nn.Conv2d(16, 16, 3, padding=1) for _ in range(4)])
        self.b = torch.nn.ModuleList([torch.nn.Linear(1024, 256) for _ in range(4)])

    def forward(self, x):
        y = sum(torch.relu(c(x)) for c in self.a)
        torch._dynamo.graph_break()
        y = y.flatten(1)
        return sum(l(y) for l in self.b)


m = Broken().eval().cuda()
run("graph-break", m, torch.randn(1, 16, 8, 8, device="cuda"), verify=True)
# a new shape fails dynamo's guards and compiles again (dynamic=False)
torch._dynamo.reset()
x1, x2 = torch.randn(1, 16, 8, 8, device="cuda"), torch.randn(2, 16, 8, 8, device="cuda")
with torch.no_grad():
    r1, r2 = m(x1).clone(), m(x2).clone()
    n0 = len(be.compiled_graphs())
    c = torch.compile(m, backend="dagrun", dynamic=False)
    y1 = c(x1).clone()
    y2 = c(x2).clone()
    y1b = c(x1).clone()
gs = be.compiled_graphs()[n0:]
print("new shape: graphs", len(gs), [(g.path, g.streams, g.reason[:80]) for g in gs],
      "close to eager:", torch.allclose(y1, r1, atol=1e-4), torch.allclose(y2, r2, atol=1e-4), torch.equal(y1, y1b), flush=True)
# autograd: fallback with one warning
torch._dynamo.reset()
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).cuda()
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always", be.DagrunFallbackWarning)
    y = torch.compile(m, backend="dagrun")(torch.randn(4, 8, device="cuda"))
    y.sum().backward()
print("autograd:", [str(x.message)[:160] for x in w if issubclass(x.category, be.DagrunFallbackWarning)], flush=True)
