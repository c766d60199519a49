"""What a torch.compile'd call costs before any backend runs, on the GPU.

For each model: ``torch.compile(model, backend=floor)``, where ``floor``
returns a callable that hands back outputs computed once at compile time and
launches nothing. A call then costs only dynamo's own work: its guards and
gathering the graph's inputs (with nn modules inlined, every weight and
buffer is an input). Prints, per model, the median GPU time between two
events around one call (ms, timed as bench --backend times a call), the
median host time of one call (ms) and the graph's input count. Every
backend, reduce-overhead's included, pays this floor on each call, so a
backend's call can be no faster than floor + its replay.
    python3 python/tests/gpu_call_floor.py [MODEL...]"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from dagrun_torch import bench as B  # noqa: E402

models = sys.argv[1:] or ["googlenet", "inception_v3", "nasnetalarge", "resnet50", "densenet121", "inception_v4",
                          "bert-base", "moe-1", "moe-8"]
print("torch", torch.__version__, torch.cuda.get_device_name(), flush=True)
for name in models:
    torch._dynamo.reset()
    model, inputs = B.workload(name)
    seen = {}

    def floor(gm, example_inputs):
        with torch.no_grad():
            out = gm(*example_inputs)
        seen["inputs"] = len(example_inputs)
        return lambda *args: out

    c = torch.compile(model, backend=floor, dynamic=False)
    with torch.no_grad():
        c(*inputs)
        ms = B.median_ms(lambda: c(*inputs), 200)
        host, _ = B.host_and_pipelined_ms(lambda: c(*inputs), 200)
    print("%-14s inputs %4d  call ms %.4f  host ms %.4f" % (name, seen.get("inputs", -1), ms, host), flush=True)
    del c, model, inputs
