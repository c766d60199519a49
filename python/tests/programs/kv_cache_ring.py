"""A KV cache as a ring of slots: a writer stream stores step i's keys in
slot i % SLOTS while attention on the default stream reads the slots of
earlier steps. Before overwriting a slot the writer must wait for the
attention that read it SLOTS steps ago; the racy variant waits for the
read one step earlier than that (a wait one step short of the ring), the
fixed one for the right step."""
import sys

import torch

from common import fresh, main, sleep

VARIANTS = ("racy", "fixed")
SLOTS = 3
STEPS = 6


def run(variant, c):
    base = fresh()
    writer = torch.cuda.Stream()
    attention = torch.cuda.current_stream()
    cache = torch.empty(SLOTS, c.n // 8, device="cuda")
    written, read = [], []
    outs = []
    for step in range(STEPS):
        lag = SLOTS if variant == "fixed" else SLOTS + 1
        if step - lag >= 0:
            writer.wait_event(read[step - lag])            # the slot's last reader is done
        with torch.cuda.stream(writer):
            cache[step % SLOTS].fill_(base + step)         # the step's keys
            written.append(torch.cuda.Event())
            written[-1].record()
        attention.wait_event(written[step])
        sleep(c)                                           # attention over the earlier steps
        outs.append((cache[step % SLOTS] == base + step).all())
        read.append(torch.cuda.Event())
        read[-1].record()
    torch.cuda.synchronize()
    return all(bool(o) for o in outs)


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS))
