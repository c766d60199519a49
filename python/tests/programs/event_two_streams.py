"""One event recorded on two producer streams, one wait: a wait takes only
the event's latest record, so the consumer is ordered after the second
producer and not the first. The fixed variant records one event per
producer and waits for both."""
import sys

import torch

from common import fresh, main, sleep

VARIANTS = ("racy", "fixed")


def run(variant, c):
    base = fresh()
    s_left, s_right = torch.cuda.Stream(), torch.cuda.Stream()
    left = torch.empty(c.n, device="cuda")
    right = torch.empty(c.n, device="cuda")
    ready = torch.cuda.Event()
    ready_right = torch.cuda.Event() if variant == "fixed" else ready
    with torch.cuda.stream(s_left):
        sleep(c)
        left.fill_(base)
        ready.record()
    if variant == "fixed":
        torch.cuda.current_stream().wait_event(ready)
    with torch.cuda.stream(s_right):
        right.fill_(base + 1)
        ready_right.record()
    torch.cuda.current_stream().wait_event(ready_right)
    total = left + right
    left.record_stream(s_left)
    right.record_stream(s_right)
    torch.cuda.synchronize()
    return bool((total == 2 * base + 1).all())


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS))
