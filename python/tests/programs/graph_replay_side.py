"""A CUDA graph captured once and replayed on a side stream each step,
while the default stream writes the graph's static input. The replay must
wait for that write; the racy variant replays without waiting, the fixed
one calls ``side.wait_stream(torch.cuda.current_stream())`` first."""
import sys

import torch

from common import fresh, main, sleep

VARIANTS = ("racy", "fixed")
STEPS = 3


def run(variant, c):
    base = fresh()
    static_in = torch.zeros(c.n, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):                          # warm up before the capture
        warm = static_in * 2.0
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = static_in * 2.0
    ok = True
    for step in range(STEPS):
        sleep(c)                                           # the step's input is being made
        static_in.fill_(base + step)
        if variant == "fixed":
            side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            graph.replay()
        torch.cuda.current_stream().wait_stream(side)
        ok = bool((static_out == 2.0 * (base + step)).all()) and ok
    torch.cuda.synchronize()
    return ok


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS))
