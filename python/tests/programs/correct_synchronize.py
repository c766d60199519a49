"""Correct: two streams ordered only by host synchronizations:
``torch.cuda.synchronize()`` and ``Stream.synchronize()``."""
import sys

import torch

from common import fresh, main, sleep

VARIANTS = ("correct",)


def run(variant, c):
    base = fresh()
    s_make, s_use = torch.cuda.Stream(), torch.cuda.Stream()
    x = torch.empty(c.n, device="cuda")
    with torch.cuda.stream(s_make):
        sleep(c)
        x.fill_(base)
    torch.cuda.synchronize()
    with torch.cuda.stream(s_use):
        y = x + 1.0
    s_use.synchronize()
    with torch.cuda.stream(s_make):
        sleep(c)
        x.fill_(0.0)                                       # after s_use read x: the host waited for it
    torch.cuda.synchronize()
    return bool((y == base + 1).all())


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS))
