"""Two worker threads, each with its own stream, share one staging buffer:
the first stages its input and reads it back after a long kernel, the
second (started once the first has issued its work) stages its own input
in the same buffer at once. Nothing orders the second thread's stream
after the first's. The fixed variant hands an event over: the first
thread records it after its last use of the buffer, the second waits on
it (the threads' start and join order the record before the wait)."""
import sys
import threading

import torch

from common import fresh, main, sleep

VARIANTS = ("racy", "fixed")


def run(variant, c):
    base = fresh()
    staging = torch.empty(c.n, device="cuda")
    outs, errors = {}, []
    done_with_staging = torch.cuda.Event()
    torch.cuda.synchronize()

    def first():
        try:
            s_first = torch.cuda.Stream()
            with torch.cuda.stream(s_first):
                staging.fill_(base)
                sleep(c)                                   # the first request's model
                outs["first"] = staging * 1.0
                done_with_staging.record()
        except Exception as e:  # a sanitizer's error, raised on this thread
            errors.append(e)

    def second():
        try:
            s_second = torch.cuda.Stream()
            if variant == "fixed":
                s_second.wait_event(done_with_staging)
            with torch.cuda.stream(s_second):
                staging.fill_(base + 1)
                outs["second"] = staging * 1.0
        except Exception as e:
            errors.append(e)

    for work in (first, second):
        t = threading.Thread(target=work)
        t.start()
        t.join()
    if errors:
        raise errors[0]
    torch.cuda.synchronize()
    return bool((outs["first"] == base).all()) and bool((outs["second"] == base + 1).all())


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS))
