"""The prefetcher with ``wait_stream`` but without ``record_stream``: the
batch is allocated on the copy stream and used on the compute stream, so
when the compute stream's last use is still queued and the batch is
dropped, the caching allocator hands its block to the next batch, which
the copy stream overwrites at once. The fixed variant calls
``batch.record_stream(torch.cuda.current_stream())``."""
import sys

import torch

from common import fresh, main, sleep

VARIANTS = ("racy", "fixed")


class Prefetcher:
    def __init__(self, batches, variant):
        self.batches = iter(batches)
        self.variant = variant
        self.stream = torch.cuda.Stream()
        self.preload()

    def preload(self):
        cpu = next(self.batches, None)
        if cpu is None:
            self.batch = None
            return
        with torch.cuda.stream(self.stream):
            self.batch = cpu.cuda(non_blocking=True)

    def next(self):
        torch.cuda.current_stream().wait_stream(self.stream)
        batch = self.batch
        if batch is not None and self.variant == "fixed":
            batch.record_stream(torch.cuda.current_stream())
        self.preload()
        return batch


def run(variant, c):
    base = fresh()
    batches = [torch.full((c.n,), base + i).pin_memory() for i in range(3)]
    pf = Prefetcher(batches, variant)
    oks = []
    batch = pf.next()
    while batch is not None:
        sleep(c)                                           # the model's forward pass
        oks.append((batch == base + len(oks)).all())
        del batch                                          # the last reference: its block goes back
        batch = pf.next()
    torch.cuda.synchronize()
    return len(oks) == 3 and all(bool(ok) for ok in oks)


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS))
