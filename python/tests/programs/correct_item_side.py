"""Correct: ``.item()`` on a side stream makes the host wait for that
stream, so work the default stream issues afterwards comes after it."""
import sys

import torch

from common import fresh, main, sleep

VARIANTS = ("correct",)


def run(variant, c):
    base = fresh()
    side = torch.cuda.Stream()
    x = torch.empty(c.n, device="cuda")
    with torch.cuda.stream(side):
        sleep(c)
        x.fill_(base)
        first = x[0].item()                                # the host waits for side
    y = x + 1.0                                            # issued after the wait
    x.record_stream(side)
    torch.cuda.synchronize()
    return first == base and bool((y == base + 1).all())


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS))
