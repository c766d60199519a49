"""Correct: the host polls ``Event.query()`` until the copy to pinned
memory is done, then reads the pinned buffer (``.tolist()``,
``.numpy()``) and hands it to another stream."""
import sys

import torch

from common import fresh, main, sleep

VARIANTS = ("correct",)


def run(variant, c):
    base = fresh()
    s_copy = torch.cuda.Stream()
    dev = torch.full((1 << 16,), base, device="cuda")
    host = torch.empty(1 << 16).pin_memory()
    done = torch.cuda.Event()
    s_copy.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s_copy):
        sleep(c)
        host.copy_(dev, non_blocking=True)
        done.record()
    while not done.query():                                # the host polls
        pass
    first = host[:4].tolist()
    last = float(host.numpy()[-1])
    back = host.to("cuda", non_blocking=True)              # the default stream reads it too
    dev.record_stream(s_copy)
    torch.cuda.synchronize()
    return first == [base] * 4 and last == base and bool((back == base).all())


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS))
