"""Probe: does running the critical chain's stream on its own SM partition
(a CUDA green context) shorten a plan's graph replay on real kernels?"""
import ctypes, json, os, statistics, sys, time
import torch
import dagrun_torch.runner as runner
from dagrun_torch.exporter import export
from dagrun_torch.bench import MODELS, gpu_model
from dagrun_torch.runner import plan_model, CompiledModel, bitwise_equal

cu = ctypes.CDLL("libcuda.so.1")
def ck(rc, what):
    if rc != 0:
        s = ctypes.c_char_p()
        cu.cuGetErrorName(rc, ctypes.byref(s))
        raise RuntimeError("%s: %s (%d)" % (what, s.value, rc))

dev = ctypes.c_int()
torch.cuda.init(); torch.zeros(1, device="cuda")
ck(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
SM = 1
def res_buf():
    return ctypes.create_string_buffer(4096)
full = res_buf()
ck(cu.cuDeviceGetDevResource(dev, full, SM), "cuDeviceGetDevResource")
print("SMs:", int.from_bytes(full.raw[96:100], "little"), flush=True)

def green_pair(k):
    """Two green contexts on disjoint SM sets: k SMs and the rest (0: one context of all SMs)."""
    descs = []
    if k == 0:
        parts = [full]
    else:
        grp, rem = res_buf(), res_buf()
        n = ctypes.c_uint(1)
        ck(cu.cuDevSmResourceSplitByCount(grp, ctypes.byref(n), full, rem, 0, k), "split")
        parts = [grp, rem]
    ctxs = []
    for p in parts:
        d = ctypes.c_void_p()
        ck(cu.cuDevResourceGenerateDesc(ctypes.byref(d), p, 1), "desc")
        g = ctypes.c_void_p()
        ck(cu.cuGreenCtxCreate(ctypes.byref(g), d, dev, 1), "cuGreenCtxCreate")
        ctxs.append((g, int.from_bytes(p.raw[96:100], "little")))
    return ctxs

orig_new_streams = runner.new_streams
def green_streams(ctxs):
    def new_streams(n, device, priorities=None):
        prios = list(priorities) if priorities is not None else [0] * n
        urgent = min(prios)
        out = []
        for i in range(n):
            g = ctxs[0][0] if (prios[i] == urgent or len(ctxs) == 1) else ctxs[1][0]
            h = ctypes.c_void_p()
            ck(cu.cuGreenCtxStreamCreate(ctypes.byref(h), g, 1, ctypes.c_int(prios[i])), "cuGreenCtxStreamCreate")
            out.append(torch.cuda.ExternalStream(h.value, device=device))
        return out
    return new_streams

def median_ms(fn, iters):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(10):
        fn()
    for _ in range(iters):
        s.record(); fn(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
    return statistics.median(ts)

results = []
for name in sys.argv[1:]:
    spec, size = MODELS[name]
    model, x = gpu_model(spec, size)
    ex = export(model, (x,))
    with torch.no_grad():
        ref = ex.gm(x)
    for cap in (4, 8):
        plan = plan_model(ex, max_streams=cap)
        for k in [None, 0, 64, 96, 112, 120]:
            row = dict(model=name, cap=cap, streams=len(plan.streams), green_sms=k)
            try:
                runner.new_streams = orig_new_streams if k is None else green_streams(green_pair(k))
                cm = CompiledModel(ex, plan, "graph", (x,), priority=True)
                row["ms"] = round(median_ms(lambda: cm(x), 200), 4)
                row["identical"] = bitwise_equal(cm(x), ref)[0]
                del cm
            except Exception as e:
                row["error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
            finally:
                runner.new_streams = orig_new_streams
            torch.cuda.synchronize()
            print(json.dumps(row), flush=True)
            results.append(row)
json.dump(results, open(os.path.join(os.environ.get("OUT", "."), "green.json"), "w"), indent=1)
