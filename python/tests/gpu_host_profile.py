"""Where a model's per-call host time goes on the GPU: torch.compile(backend="dagrun") against
mode="reduce-overhead", each compiled in this process (dagrun first, verify off). Prints the host
time per call of each, of dagrun's callable and its parts (the weight-pointer check, the graph
launch with the input copy), and a cProfile of 200 calls of each.
    DAGRUN=.gpu/dagrun python3 python/tests/gpu_host_profile.py [MODEL]   (default nasnetalarge)"""
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
import warnings

import torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from dagrun_torch import backend as be, bench as B
be.register()
warnings.simplefilter("ignore")
name = sys.argv[1] if len(sys.argv) > 1 else "nasnetalarge"
model, x = B.gpu_model(*B.MODELS[name])
res = {"device": torch.cuda.get_device_name(), "model": name,
       "params_and_buffers": len(list(model.parameters())) + len(list(model.buffers()))}

def host(fn, n=100):
    for _ in range(5): fn()
    hs = []
    for _ in range(n):
        torch.cuda.synchronize(); t0 = time.perf_counter(); fn(); hs.append((time.perf_counter() - t0) * 1e3)
    torch.cuda.synchronize()
    return round(statistics.median(hs), 4)

def prof(fn, key, n=200):
    pr = cProfile.Profile(); pr.enable()
    for _ in range(n): fn()
    pr.disable(); torch.cuda.synchronize()
    sio = io.StringIO(); pstats.Stats(pr, stream=sio).sort_stats("tottime").print_stats(14)
    print("== cProfile", key, n, "calls\n", sio.getvalue()[:3500], flush=True)

with torch.no_grad():
    t0 = time.time()
    c = torch.compile(model, dynamic=False, backend="dagrun", options={"verify": False})
    c(x); torch.cuda.synchronize()
    res["dagrun_compile_s"] = round(time.time() - t0, 1)
    res["dagrun_call_host_ms"] = host(lambda: c(x))
    seen = {}
    orig = be._Replay.__call__
    def grab(self, *a):
        seen["r"], seen["a"] = self, a
        return orig(self, *a)
    be._Replay.__call__ = grab
    c(x); torch.cuda.synchronize()
    be._Replay.__call__ = orig
    r, a = seen["r"], seen["a"]
    res["args"] = len(a); res["static"] = len(r._static_idx); res["copies"] = len(r._copies)
    res["replay_callable_host_ms"] = host(lambda: r(*a))
    res["moved_host_ms"] = host(lambda: r._moved(a))
    res["list_args_host_ms"] = host(lambda: list(a))
    la = list(a)
    res["same_host_ms"] = host(lambda: r._same(la, r._ptr_at, r._static_idx))
    res["ci_replay_host_ms"] = host(lambda: r.ci.replay([(a[i], s) for i, s in r._copies]))
    prof(lambda: c(x), "dagrun")
    print(json.dumps(res), flush=True)
    del c, r, a, la, seen
    B._reset_compiled_state()
    t0 = time.time()
    c = torch.compile(model, dynamic=False, mode="reduce-overhead")
    for _ in range(3): c(x)
    torch.cuda.synchronize()
    res["ro_compile_s"] = round(time.time() - t0, 1)
    res["ro_call_host_ms"] = host(lambda: c(x))
    prof(lambda: c(x), "reduce-overhead")
print(json.dumps(res, indent=1), flush=True)
