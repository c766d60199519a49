"""The camera loop on the GPU: record it, check it, print the report (needs
CUDA and torchvision).

    python3 -m dagrun_torch.camera_gpu [--iterations 60] [--fixed] [--out trace.yaml]

Three camera streams each run torchvision's resnet50 on their own frame
(refilled on the host in pinned memory, uploaded without blocking) and
copy the logits into one shared tensor; the default stream waits for the
camera streams (for two of the three without --fixed: the wrong loop bound
of ``loop``'s ``streams[:2]``) and post-processes; ``.cpu()`` waits for
it. The loop runs under dagrun_torch.record, then dagrun_torch.check
reports it; the last line gives the report's length and the check's CPU
seconds (this process and the dagrun it runs, from getrusage).
dagrun_torch.camera_loop writes a synthetic trace of the same shape
without a GPU.
"""
from __future__ import annotations

import sys
from typing import List, Optional

from ._cli import _Parser, positive


def loop(model, iterations: int, fixed: bool) -> list:
    """The program: its lines are the report's."""
    import torch
    frames = [torch.empty(1, 3, 224, 224).pin_memory() for _ in range(3)]
    logits = torch.empty(3, 1000, device="cuda")
    streams = [torch.cuda.Stream() for _ in range(3)]
    results = []
    with torch.no_grad():
        for _ in range(iterations):
            for i, s in enumerate(streams):
                frames[i].normal_()
                with torch.cuda.stream(s):
                    x = frames[i].cuda(non_blocking=True)
                    y = model(x)
                    logits[i].copy_(y[0])
            for s in (streams if fixed else streams[:2]):
                torch.cuda.current_stream().wait_stream(s)
            probs = logits.softmax(-1)
            best = probs.argmax(-1)
            results.append(best.cpu())
    return results


def main(argv: Optional[List[str]] = None) -> int:
    ap = _Parser(prog="python3 -m dagrun_torch.camera_gpu",
                                 description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--iterations", type=positive, default=60, help="iterations of the loop (default 60)")
    ap.add_argument("--fixed", action="store_true", help="wait for every camera stream (no race)")
    ap.add_argument("--out", default="camera-loop.yaml", help="the trace to write")
    a = ap.parse_args(argv)
    import torch
    import torchvision
    from .camera_loop import timed_check
    from .recorder import record
    model = torchvision.models.resnet50().cuda().eval()
    torch.cuda.synchronize()
    with record(a.out) as rec:
        loop(model, a.iterations, a.fixed)
    torch.cuda.synchronize()
    print("%s: %d stages" % (a.out, len(rec.builder.stages)))
    return 0 if timed_check(a.out) == a.fixed else 1


if __name__ == "__main__":
    sys.exit(main())
