"""What the programs share: the context (how long the GPU sleeps ahead of
the work that must come first, buffer sizes) and the entry point that runs
one program once from the command line:

    python3 python/tests/programs/NAME.py VARIANT
    python3 -m dagrun_torch run python/tests/programs/NAME.py VARIANT
"""
import random
import sys
from dataclasses import dataclass

import torch


@dataclass
class Context:
    cycles: int      # torch.cuda._sleep cycles ahead of the work that must come first
    n: int           # float32 elements of a device buffer


def calibrate(ms: float) -> int:
    """torch.cuda._sleep cycles that take about ``ms`` milliseconds here."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1000)
    torch.cuda.synchronize()
    probe = 1_000_000
    start.record()
    torch.cuda._sleep(probe)
    end.record()
    end.synchronize()
    return int(probe / start.elapsed_time(end) * ms)


def sleep(c: Context) -> None:
    """Keep the current stream busy, so that work not ordered after what
    follows runs first."""
    torch.cuda._sleep(c.cycles)


def fresh() -> float:
    """A value no earlier run left in memory (a reused block must not pass for a fresh one)."""
    return float(random.randint(1, 1 << 20) * 4)


def default_context() -> Context:
    return Context(cycles=calibrate(5.0), n=1 << 22)


def main(run, variants) -> int:
    """Run the program once with the variant named on the command line and
    print whether its output was right (exit 0 either way: the status of
    ``python3 -m dagrun_torch run`` is the check's)."""
    variant = sys.argv[1] if len(sys.argv) > 1 else variants[0]
    if variant not in variants:
        print("variant %r: want one of %s" % (variant, ", ".join(variants)), file=sys.stderr)
        return 2
    ok = run(variant, default_context())
    torch.cuda.synchronize()
    print("%s: output %s" % (variant, "right" if ok else "WRONG"))
    return 0
