"""A synthetic recorded trace the size of a real program's, for tests and the
check's benchmark: no torch, no GPU.

    python3 -m dagrun_torch.camera_loop OUT.yaml [--iterations 60] [--ops 170] [--fixed] [--check]

It feeds dagrun_torch.recorder.TraceBuilder what recording this program on
the GPU would (the program's lines are the sites; ``LINES`` is its text):
three camera streams, each running a model of ``ops`` kernels on its own
frame (copied from pinned memory) and copying its logits into one shared
tensor; the default stream waits for the camera streams (all but the last
with ``fixed`` false: the wrong loop bound of line 25) and post-processes;
``.cpu()`` waits for the default stream. With the defaults: 60 iterations,
30,955 ops. The one missing wait is, each iteration, a RAW race on the
shared logits (camera stream 3's copy, then the softmax) and a WAR race on
stream 3's pinned frame (its upload, then the host refilling it in the next
iteration): 119 races, one fix at line 25's loop bound.
"""
from __future__ import annotations

import sys
from typing import List, Optional

from ._cli import _Parser, positive
from .recorder import DEVICE, PINNED, TraceBuilder

FILE = "camera_loop.py"
# The most stages a dagrun spec holds (dag.MaxStages).
MAX_STAGES = 1 << 22
# The program the trace stands for (line numbers are the sites).
LINES = {
    10: "model = resnet50().cuda().eval()",
    11: "frames = [torch.empty(3, 224, 224).pin_memory() for _ in range(3)]",
    12: "logits = torch.empty(3, 1000, device='cuda')",
    13: "streams = [torch.cuda.Stream() for _ in range(3)]",
    17: "for it in range(iterations):",
    18: "    for i, s in enumerate(streams):",
    19: "        frames[i].copy_(camera[i].read())",
    20: "        with torch.cuda.stream(s):",
    21: "            x = frames[i].cuda(non_blocking=True)",
    22: "            y = model(x)",
    23: "            logits[i].copy_(y[0])",
    25: "    for s in streams[:2]:",
    26: "        torch.cuda.current_stream().wait_stream(s)",
    27: "    probs = logits.softmax(-1)",
    28: "    best = probs.argmax(-1)",
    29: "    results.append(best.cpu())",
}

_MODEL_OPS = ("convolution.default", "native_batch_norm.default", "relu_.default", "convolution.default",
              "native_batch_norm.default", "add_.Tensor", "relu_.default")


def site(line: int) -> str:
    return "%s:%d" % (FILE, line)


def build(iterations: int = 60, ops: int = 170, fixed: bool = False) -> TraceBuilder:
    """The trace builder after the program ran ``iterations`` times, each
    camera stream's model ``ops`` kernels long."""
    b = TraceBuilder("camera-loop", default_stream=0)
    streams = ["cam0", "cam1", "cam2"]
    for k, s in enumerate(streams):
        b.stream_created(s, site(13), "streams[%d]" % k)
    weights, wbytes = 0x10000000, 100 << 20
    b.alloc(weights, 0, site(10))
    b.note_storage(weights, wbytes)
    frame_bytes = 3 * 224 * 224 * 4
    pinned = [0x7f0000000000 + k * (1 << 20) for k in range(3)]
    for p in pinned:
        b.pinned_alloc(p, frame_bytes, site(11))
    logits = 0x20000000
    b.alloc(logits, 0, site(12), var="logits")
    b.note_storage(logits, 3 * 4000)
    act = 1 << 20  # bytes of one activation
    # Each camera stream's pool: the caching allocator reuses a stream's
    # freed blocks on that stream.
    pools = [0x30000000 + k * (64 << 20) for k in range(3)]
    probs, best = 0x40000000, 0x40100000
    ev = 0
    for it in range(iterations):
        for k, s in enumerate(streams):
            b.host_op("copy_.default", [], [(PINNED, pinned[k], pinned[k] + frame_bytes)], site(19))
            x = pools[k]
            b.alloc(x, s, site(21), var="x")
            b.note_storage(x, act)
            b.kernel(s, "copy_.default", [(PINNED, pinned[k], pinned[k] + frame_bytes)], [(DEVICE, x, x + frame_bytes)], site(21))
            cur = x
            for j in range(ops):
                nxt = pools[k] + ((j + 1) % 4) * act
                b.alloc(nxt, s, site(22))
                b.note_storage(nxt, act)
                b.kernel(s, _MODEL_OPS[j % len(_MODEL_OPS)], [(DEVICE, cur, cur + act), (DEVICE, weights, weights + wbytes)],
                         [(DEVICE, nxt, nxt + act)], site(22))
                b.free(cur, site(22))
                cur = nxt
            b.kernel(s, "copy_.default", [(DEVICE, cur, cur + 4000)], [(DEVICE, logits + 4000 * k, logits + 4000 * (k + 1))], site(23))
            b.free(cur, site(23))
        for s in streams if fixed else streams[:2]:
            b.event_created(ev)
            b.event_record(ev, s)
            b.event_wait(ev, 0)
            ev += 1
        b.alloc(probs, 0, site(27), var="probs")
        b.note_storage(probs, 3 * 4000)
        b.kernel(0, "_softmax.default", [(DEVICE, logits, logits + 3 * 4000)], [(DEVICE, probs, probs + 3 * 4000)], site(27))
        b.alloc(best, 0, site(28), var="best")
        b.note_storage(best, 24)
        b.kernel(0, "argmax.default", [(DEVICE, probs, probs + 3 * 4000)], [(DEVICE, best, best + 24)], site(28))
        b.free(probs, site(28))
        b.kernel(0, "_to_copy.default", [(DEVICE, best, best + 24)], [], site(29))
        b.stream_sync(0, site(29), "host-reads-to_copy")
        b.free(best, site(29))
    return b


def stages(iterations: int, ops: int) -> int:
    """The stages of ``build(iterations, ops)``'s trace, counted without
    building it: per iteration, each camera stream's frame upload, ``ops``
    kernels and logits copy, and the default stream's post-processing."""
    return iterations * (3 * ops + 13)


def write(path: str, iterations: int = 60, ops: int = 170, fixed: bool = False) -> int:
    """Writes the trace to ``path``; returns its number of stages."""
    b = build(iterations, ops, fixed)
    with open(path, "w") as f:
        f.write(b.to_yaml())
    return len(b.stages)


def timed_check(path: str) -> bool:
    """Checks the trace at ``path`` as ``python3 -m dagrun_torch check``
    does and prints the report ("ok: no race" when there is none), then a
    line with its length and the check's CPU seconds: this process's and
    the dagrun it runs (getrusage). Returns whether the trace is race-free."""
    import resource
    from .checker import check
    t0, c0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    res = check(path)
    text = "ok: no race" if res.ok else res.report()
    t1, c1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    own = (t1.ru_utime + t1.ru_stime) - (t0.ru_utime + t0.ru_stime)
    kid = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
    print(text)
    print("check: %d report lines, %.2f s of CPU (Python %.2f s, dagrun %.2f s)" % (
        len(text.splitlines()), own + kid, own, kid))
    return res.ok


def main(argv: Optional[List[str]] = None) -> int:
    """Exit status: 0 written (and with --check race-free), 1 with --check
    and a race, 2 on bad arguments."""
    ap = _Parser(prog="python3 -m dagrun_torch.camera_loop",
                                 description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("out", help="the trace file to write (YAML, as dagrun_torch.record writes it)")
    ap.add_argument("--iterations", type=positive, default=60, help="iterations of the loop (default 60)")
    ap.add_argument("--ops", type=positive, default=170, help="kernels of each camera stream's model per iteration (default 170)")
    ap.add_argument("--fixed", action="store_true", help="wait for every camera stream (no race)")
    ap.add_argument("--check", action="store_true",
                    help="then check it as python3 -m dagrun_torch check does (exit 1 on a race), print the report "
                         "and the check's CPU seconds (this process and the dagrun it runs, from getrusage)")
    a = ap.parse_args(argv)
    if stages(a.iterations, a.ops) > MAX_STAGES:
        ap.error("--iterations %d --ops %d: %d stages, more than the %d a dagrun spec holds" % (
            a.iterations, a.ops, stages(a.iterations, a.ops), MAX_STAGES))
    n = write(a.out, a.iterations, a.ops, a.fixed)
    print("%s: %d stages" % (a.out, n))
    if a.check and not timed_check(a.out):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
