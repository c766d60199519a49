"""Host data uploaded through two pinned staging buffers in turn: the host
fills one while the other's copy to the GPU is queued. Before refilling a
buffer the host must know its previous copy is done; the racy variant
synchronizes on that copy's event only after the refill (the host
refills too early), the fixed one before."""
import sys

import torch

from common import fresh, main, sleep

VARIANTS = ("racy", "fixed")
STEPS = 4


def run(variant, c):
    base = fresh()
    staging = [torch.empty(c.n // 4).pin_memory() for _ in range(2)]
    copied = [torch.cuda.Event() for _ in range(2)]
    outs = []
    for step in range(STEPS):
        k = step % 2
        if variant == "fixed" and step >= 2:
            copied[k].synchronize()                        # the copy out of staging[k] is done
        staging[k].fill_(base + step)                      # the host writes the step's data
        if variant == "racy" and step >= 2:
            copied[k].synchronize()
        sleep(c)                                           # the GPU is busy with the previous step
        outs.append(staging[k].to("cuda", non_blocking=True))
        copied[k].record()
    torch.cuda.synchronize()
    return all(bool((o == base + i).all()) for i, o in enumerate(outs))


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS))
