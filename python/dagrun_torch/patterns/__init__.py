"""Small multi-stream PyTorch programs with a known ordering bug, each in a
racy and a fixed variant: the seed's cases and patterns from public reports.

Each pattern is ``Pattern(name, title, source, variants, program)``;
``program(variant, ctx)`` runs the program once and returns True when its
output is right. ``ctx`` holds the streams, the sleep length (GPU cycles of
``torch.cuda._sleep`` put ahead of the work that must finish first, so that a
missing order shows as a wrong output) and buffer sizes. ``python3 -m
dagrun_torch patterns`` records each variant with ``dagrun_torch.record``,
checks it with ``dagrun check``, and counts wrong outputs over many trials.
"""
from dataclasses import dataclass
from typing import Callable, List, Tuple

import torch

__all__ = ["Pattern", "PATTERNS", "Context"]


@dataclass
class Context:
    s1: "torch.cuda.Stream"
    s2: "torch.cuda.Stream"
    cycles: int           # torch.cuda._sleep cycles ahead of the work that should come first
    n: int                # float32 elements of a device buffer (16 Mi = 64 MiB)
    n_pinned: int         # float32 elements of a pinned host buffer
    event: "torch.cuda.Event"
    pinned: "torch.Tensor"  # n_pinned float32 elements of pinned host memory, reused by the host patterns


@dataclass
class Pattern:
    name: str
    title: str
    source: str
    variants: Tuple[str, ...]
    program: Callable[[str, Context], bool]


def _cur():
    return torch.cuda.current_stream()


# -- the seed's cases ---------------------------------------------------------

def seed_a(variant: str, c: Context) -> bool:
    # Two streams fill one buffer; record_stream tells the allocator about
    # both streams, but nothing orders the two fills.
    buf = torch.empty(c.n, device="cuda")
    with torch.cuda.stream(c.s1):
        torch.cuda._sleep(c.cycles)
        buf.fill_(1.0)
    buf.record_stream(c.s1)
    with torch.cuda.stream(c.s2):
        buf.fill_(2.0)
    buf.record_stream(c.s2)
    torch.cuda.synchronize()
    return bool((buf == 2.0).all())


def seed_b(variant: str, c: Context) -> bool:
    # record_stream names the wrong stream: the allocator waits for s2 (idle)
    # and hands the block to the next allocation while s1 still writes it.
    buf = torch.empty(c.n, device="cuda")
    with torch.cuda.stream(c.s1):
        torch.cuda._sleep(c.cycles)
        buf.fill_(1.0)
    buf.record_stream(c.s2)
    del buf
    new = torch.empty(c.n, device="cuda")
    new.fill_(2.0)
    torch.cuda.synchronize()
    return bool((new == 2.0).all())


def seed_c(variant: str, c: Context) -> bool:
    # No record_stream: x is freed on the default stream while s1 still
    # reads it, and the default stream's next allocation gets its block.
    x = torch.full((c.n,), 1.0, device="cuda")
    c.s1.wait_stream(_cur())
    with torch.cuda.stream(c.s1):
        torch.cuda._sleep(c.cycles)
        y = x * 2.0
    del x
    z = torch.full((c.n,), 3.0, device="cuda")
    torch.cuda.synchronize()
    del z
    return bool((y == 2.0).all())


def seed_d(variant: str, c: Context) -> bool:
    # The fixed program: an event recorded on s1 after its fill, s2 waits on
    # it, and record_stream(s1) keeps the block from the next allocation
    # until s1 is done. The buffer is allocated on the default stream and
    # written on s1 with nothing in between: an allocation is not a write.
    buf = torch.empty(c.n, device="cuda")
    with torch.cuda.stream(c.s1):
        torch.cuda._sleep(c.cycles)
        buf.fill_(1.0)
    c.event.record(c.s1)
    c.s2.wait_event(c.event)
    with torch.cuda.stream(c.s2):
        buf.add_(1.0)
        total = buf.sum()
    buf.record_stream(c.s1)
    buf.record_stream(c.s2)
    del buf
    new = torch.empty(c.n, device="cuda")
    new.fill_(3.0)
    torch.cuda.synchronize()
    return float(total) == 2.0 * c.n and bool((new == 3.0).all())


# -- public reports -------------------------------------------------------------

def deepspeed_ipg_overwrite(variant: str, c: Context) -> bool:
    # ZeRO-1/2 with overlap_comm: the reduction stream waits for the default
    # stream and reduces the gradient bucket; the default stream copies the
    # next gradients into the same bucket while the reduction still reads it.
    # Fix: the default stream waits for the reduction stream before reusing it.
    cur, red = _cur(), c.s1
    bucket = torch.empty(c.n, device="cuda")
    g0 = torch.full((c.n,), 1.0, device="cuda")
    g1 = torch.full((c.n,), 2.0, device="cuda")
    bucket.copy_(g0)
    red.wait_stream(cur)
    with torch.cuda.stream(red):
        torch.cuda._sleep(c.cycles)
        reduced = bucket * 0.5                 # stands in for the all-reduce
    if variant == "fixed":
        cur.wait_stream(red)
    bucket.copy_(g1)
    torch.cuda.synchronize()
    return bool((reduced == 0.5).all())


def deepspeed_multi_producer(variant: str, c: Context) -> bool:
    # Gradient slices reach the bucket from two streams; the reduction stream
    # waits only for the current one and reads a slice still being written.
    # Fix: wait for every producer stream.
    cur, side, red = _cur(), c.s2, c.s1
    half = c.n // 2
    bucket = torch.zeros(c.n, device="cuda")   # zeros: a stale bucket must not pass for a fresh one
    ga = torch.full((half,), 1.0, device="cuda")
    gb = torch.full((half,), 2.0, device="cuda")
    side.wait_stream(cur)
    with torch.cuda.stream(side):
        torch.cuda._sleep(c.cycles)
        bucket[half:].copy_(gb)
    bucket[:half].copy_(ga)
    red.wait_stream(cur)
    if variant == "fixed":
        red.wait_stream(side)
    with torch.cuda.stream(red):
        total = bucket.sum()
    torch.cuda.synchronize()
    return float(total) == 3.0 * half


def deepspeed_reduce_lifetime(variant: str, c: Context) -> bool:
    # allreduce_and_copy: the flat buffer is made on the default stream and
    # reduced and copied out on the reduction stream, then dropped without
    # record_stream; the allocator recycles it while the copy is queued.
    # Fix: flat.record_stream(reduction_stream).
    cur, red = _cur(), c.s1
    dst = torch.empty(c.n, device="cuda")
    flat = torch.full((c.n,), 1.0, device="cuda")
    red.wait_stream(cur)
    with torch.cuda.stream(red):
        torch.cuda._sleep(c.cycles)
        flat.mul_(0.5)                         # stands in for the in-place all-reduce
        dst.copy_(flat)
    if variant == "fixed":
        flat.record_stream(red)
    del flat
    other = torch.full((c.n,), 7.0, device="cuda")
    torch.cuda.synchronize()
    del other
    return bool((dst == 0.5).all())


def vllm_d2h_read(variant: str, c: Context) -> bool:
    # A non-blocking device-to-host copy into pinned memory, read by the CPU
    # in the next step with no synchronization. Fix: record an event after
    # the copy and synchronize on it before reading.
    host = c.pinned
    host.fill_(-1.0)
    dev = torch.full((c.n_pinned,), 5.0, device="cuda")
    torch.cuda._sleep(c.cycles)                # the step's model work
    host.copy_(dev, non_blocking=True)
    if variant == "fixed":
        c.event.record()
        c.event.synchronize()
    v = float(host[c.n_pinned - 1])
    torch.cuda.synchronize()
    return v == 5.0


def vllm_pinned_staging(variant: str, c: Context) -> bool:
    # A reused pinned staging buffer: step N's non-blocking host-to-device
    # copy is still queued when the CPU writes step N+1's data into it.
    # Fix: wait for the copy's event before refilling (or a fresh buffer).
    host = c.pinned
    d0 = torch.empty(c.n_pinned, device="cuda")
    d1 = torch.empty(c.n_pinned, device="cuda")
    host.fill_(1.0)
    torch.cuda._sleep(c.cycles)
    d0.copy_(host, non_blocking=True)
    if variant == "fixed":
        c.event.record()
        c.event.synchronize()
    host.fill_(2.0)
    d1.copy_(host, non_blocking=True)
    torch.cuda.synchronize()
    return bool((d0 == 1.0).all()) and bool((d1 == 2.0).all())


def torchrec_stash(variant: str, c: Context) -> bool:
    # Memory stashing: an activation is copied to the host on a side stream
    # and its storage released with resize_(0); the default stream's next
    # allocation reuses the block under the in-flight copy.
    # Fix: act.record_stream(d2h_stream) before releasing.
    cur, d2h = _cur(), c.s1
    host = c.pinned
    host.zero_()
    act = torch.full((c.n_pinned,), 1.0, device="cuda")
    d2h.wait_stream(cur)
    with torch.cuda.stream(d2h):
        torch.cuda._sleep(c.cycles)
        host.copy_(act, non_blocking=True)
    if variant == "fixed":
        act.record_stream(d2h)
    act.untyped_storage().resize_(0)
    nxt = torch.full((c.n_pinned,), 9.0, device="cuda")
    torch.cuda.synchronize()
    del nxt
    return bool((host == 1.0).all())


PATTERNS: List[Pattern] = [
    Pattern("seed-a", "two streams fill one buffer; record_stream but no wait", "the seed", ("racy",), seed_a),
    Pattern("seed-b", "record_stream for the wrong stream; the block is reused under a side-stream write", "the seed", ("racy",), seed_b),
    Pattern("seed-c", "no record_stream; freed on the default stream while a side stream reads it", "the seed", ("racy",), seed_c),
    Pattern("seed-d", "fixed: event on s1, s2.wait_event, record_stream(s1)", "the seed", ("fixed",), seed_d),
    Pattern("deepspeed-ipg-overwrite", "ZeRO overlap_comm: next gradients copied into the bucket under the reduction",
            "https://github.com/deepspeedai/DeepSpeed/issues/5545 (fix: pull/5606)", ("racy", "fixed"), deepspeed_ipg_overwrite),
    Pattern("deepspeed-multi-producer", "bucket written from two streams, reduction waits for one",
            "https://github.com/deepspeedai/DeepSpeed/issues/8061", ("racy", "fixed"), deepspeed_multi_producer),
    Pattern("deepspeed-reduce-lifetime", "reduction buffer dropped without record_stream, recycled under the copy",
            "https://github.com/deepspeedai/DeepSpeed/pull/7965", ("racy", "fixed"), deepspeed_reduce_lifetime),
    Pattern("vllm-d2h-read", "CPU reads a pinned buffer before its non-blocking D2H copy lands",
            "https://github.com/vllm-project/vllm/pull/36013", ("racy", "fixed"), vllm_d2h_read),
    Pattern("vllm-pinned-staging", "pinned staging buffer refilled while the previous H2D copy is queued",
            "https://github.com/vllm-project/vllm/pull/32799", ("racy", "fixed"), vllm_pinned_staging),
    Pattern("torchrec-stash", "storage released (resize_(0)) under an in-flight D2H copy on a side stream",
            "https://github.com/meta-pytorch/torchrec/pull/4231", ("racy", "fixed"), torchrec_stash),
]
