"""DDP-style gradient bucketing: a hook that runs when a parameter's
gradient is accumulated copies it into a bucket on a communication stream
(where the all-reduce would run). The next iteration's ``grad.zero_()`` on
the default stream must wait for the communication stream; the racy
variant does not, the fixed one calls
``torch.cuda.current_stream().wait_stream(comm)`` first."""
import sys

import torch

from common import fresh, main, sleep

VARIANTS = ("racy", "fixed")


def run(variant, c):
    base = fresh()
    comm = torch.cuda.Stream()
    w = torch.nn.Parameter(torch.zeros(c.n // 4, device="cuda"))
    bucket = torch.empty(c.n // 4, device="cuda")

    def hook(p):
        comm.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(comm):
            sleep(c)                                       # the previous bucket's all-reduce
            bucket.copy_(p.grad)
    if hasattr(w, "register_post_accumulate_grad_hook"):
        w.register_post_accumulate_grad_hook(hook)
    else:  # torch < 2.1
        w.register_hook(lambda g: hook(w) if w.grad is not None else None)
    x = torch.full((c.n // 4,), base, device="cuda")
    (w * x).sum().backward()
    if variant == "fixed":
        torch.cuda.current_stream().wait_stream(comm)
    w.grad.zero_()                                         # the next iteration begins
    torch.cuda.synchronize()
    return bool((bucket == base).all())


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS))
