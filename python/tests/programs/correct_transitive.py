"""Correct: a chain of ``wait_stream`` calls orders the last stream after
the first, through a middle stream that never touches the data."""
import sys

import torch

from common import fresh, main, sleep

VARIANTS = ("correct",)


def run(variant, c):
    base = fresh()
    s_a, s_b, s_c = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()
    x = torch.empty(c.n, device="cuda")
    with torch.cuda.stream(s_a):
        sleep(c)
        x.fill_(base)
    s_b.wait_stream(s_a)
    with torch.cuda.stream(s_b):
        marker = torch.ones(1, device="cuda")              # s_b's own work
    s_c.wait_stream(s_b)
    with torch.cuda.stream(s_c):
        y = x * 2.0
    torch.cuda.current_stream().wait_stream(s_c)
    ok = (y == 2 * base).all()
    for t, s in ((x, s_c), (y, s_c), (marker, s_b)):
        t.record_stream(s)
    torch.cuda.synchronize()
    return bool(ok)


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS))
