"""An exponential moving average of the weights, updated on a side stream
so that it overlaps the next step. The side stream must start after
``optimizer.step()`` has written the weights; the racy variant makes it
wait for the default stream before the step (the weights it averages are
the old ones), the fixed one after."""
import sys

import torch

from common import fresh, main, sleep

VARIANTS = ("racy", "fixed")
DECAY = 0.5


def run(variant, c):
    base = fresh()
    ema_stream = torch.cuda.Stream()
    model = torch.nn.Linear(1024, c.n // (4 * 1024), bias=False).cuda()
    with torch.no_grad():
        model.weight.fill_(base)
    ema = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    x = torch.ones(8, 1024, device="cuda")
    model(x).sum().backward()                              # every gradient is 8
    if variant == "racy":
        ema_stream.wait_stream(torch.cuda.current_stream())
    sleep(c)                                               # the rest of the step's work
    opt.step()                                             # weights: base - 8
    if variant == "fixed":
        ema_stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(ema_stream), torch.no_grad():
        for e, p in zip(ema, model.parameters()):
            e.mul_(DECAY).add_(p, alpha=1 - DECAY)
    torch.cuda.current_stream().wait_stream(ema_stream)
    torch.cuda.synchronize()
    return all(bool((e == base - 8 * (1 - DECAY)).all()) for e in ema)


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS))
