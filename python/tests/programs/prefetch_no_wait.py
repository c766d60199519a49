"""An Apex-style data prefetcher: the next batch is copied to the GPU on a
side stream while the model works on the current one. The racy variant
hands the batch over without making the compute stream wait for the copy
(apex/examples/imagenet data_prefetcher's ``wait_stream`` left out); the
fixed one waits, and ``record_stream``s the batch for the compute stream."""
import sys

import torch

from common import fresh, main, sleep

VARIANTS = ("racy", "fixed")


class Prefetcher:
    def __init__(self, batches, variant, c):
        self.batches = iter(batches)
        self.variant, self.c = variant, c
        self.stream = torch.cuda.Stream()
        self.preload()

    def preload(self):
        cpu = next(self.batches, None)
        if cpu is None:
            self.batch = None
            return
        with torch.cuda.stream(self.stream):
            sleep(self.c)                                  # a busy copy engine
            self.batch = cpu.cuda(non_blocking=True)

    def next(self):
        if self.variant == "fixed":
            torch.cuda.current_stream().wait_stream(self.stream)
        batch = self.batch
        if batch is not None and self.variant == "fixed":
            batch.record_stream(torch.cuda.current_stream())
        self.preload()
        return batch


def run(variant, c):
    base = fresh()
    batches = [torch.full((c.n,), base + i).pin_memory() for i in range(3)]
    pf = Prefetcher(batches, variant, c)
    oks = []
    batch = pf.next()
    while batch is not None:
        oks.append((batch == base + len(oks)).all())
        batch = pf.next()
    torch.cuda.synchronize()
    return len(oks) == 3 and all(bool(ok) for ok in oks)


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS))
