"""Record what a multi-stream PyTorch program does, as a dagrun spec to check.

    with dagrun_torch.record("trace.yaml"):
        ...  # user code with torch.cuda.Stream, record_stream, wait_event, ...
    # then: dagrun check trace.yaml   (or dagrun_torch.check("trace.yaml"))

The trace is a hand-synchronized spec (``sync: manual``): one stage per ATen
op that ran on the GPU, on the stream it ran on, reading and writing the byte
ranges of the storages the op's schema says it reads and writes (as PyTorch's
CUDA sanitizer does); ``waits:`` from ``Event.record``/``Stream.wait_event``/
``wait_stream`` (seen through the GPU trace callbacks torch.cuda._sanitizer
uses); host stages (``stream: host``) for host synchronizations
(``torch.cuda.synchronize``, ``Stream.synchronize``, ``Event.synchronize``,
``.item()``, blocking copies to the CPU such as ``.cpu()``) and for CPU ops on
pinned host memory. Memory is the device's address space: buffers are the
address ranges the program touched, so a block that the caching allocator
hands to a new tensor is the same buffer bytes as the tensor it held before,
and a kernel still using the old tensor on another stream conflicts with the
new one's kernels. Allocation is not a write (``torch.empty`` launches
nothing). When a block freed after ``record_stream(s)`` is reused, the
allocator has seen the events it recorded on ``s`` at the free complete: that
is a host wait on ``s``'s work up to the free, and the trace has it.

Each stage is named ``kNNN:OP:FILE:LINE`` (host stages ``hNNN:WHAT:FILE:LINE``):
the Python line that launched it, the innermost frame outside torch and
dagrun_torch. Buffers are named ``memN:FILE:LINE`` (device) or
``pinnedN:FILE:LINE`` after the first allocation seen in them. A last comment
line, ``# dagrun_torch-meta: {json}``, carries streams (where each was
created, and the program's expression for it when the line shows one:
``s_copy``, ``streams[2]``), allocations (site, stream, bytes, and the
variable the line assigns) and frees for ``dagrun_torch.check``'s report;
dagrun ignores it. An op of the backward pass is named after the forward
line that made its autograd node.

Every Python thread started during the recording is recorded, each on its
own host thread in the trace, with ``Thread.start``/``Thread.join`` as host
events (a handoff); a CUDA graph's captured ops are its template, each
``replay()`` an instance on the replay stream; an ``Event.query()`` or
``Stream.query()`` that returned True is a host wait; ``.numpy()`` and
``.tolist()`` of pinned memory are host reads; streams are keyed by device
and handle (the default stream of each device is its own). A trace with
several threads ends with a host stage that waits for every thread and
stream, and each thread begins after the previous end, since dagrun checks
a spec as an iteration that repeats.

Not seen: kernels that do not go through the ATen dispatcher (custom CUDA
extensions called outside torch.ops, Triton kernels, torch.cuda._sleep);
handoffs between threads other than start and join (queues, locks: reported
as races, never missed); races inside one CUDA graph (its ops are put in one
order on the replay stream); pageable host memory; reuse of pinned host
blocks (the pinned allocator orders it by its own events). Byte ranges of
strided views are their contiguous hull. Tested with torch 1.13 (CPU, the
builder, the dispatch logic, threads, the bounded trace, the run command)
and 2.11 (CUDA 13, H200 and H100).
"""
from __future__ import annotations

import bisect
import functools
import json
import os
import re
import sys
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

__all__ = ["TraceBuilder", "record", "step", "RecordError", "site_of_caller", "frame_of_caller", "assigned_name"]

DEVICE, PINNED = "device", "host_pinned"
MAIN = "main"  # the main thread's name in a trace
_BAD_NAME_CHARS = set(" \t\r\n[],{}#&*!|>'\"%@`")


class RecordError(RuntimeError):
    """Nothing to write (no GPU op ran inside record()), or recording is unavailable."""


@functools.lru_cache(maxsize=65536)
def _clean(s: str) -> str:
    return "".join("_" if (c in _BAD_NAME_CHARS or ord(c) < 32) else c for c in s) or "_"


@dataclass
class _Stage:
    stream: Any            # stream key, or "host"
    op: str
    site: str
    thread: str = MAIN
    reads: List[Tuple[str, int, int]] = field(default_factory=list)   # (space, start, end)
    writes: List[Tuple[str, int, int]] = field(default_factory=list)
    waits: List[int] = field(default_factory=list)                    # stage numbers
    host_waits: List[str] = field(default_factory=list)               # host events of other threads
    event: Optional[str] = None                                       # host event this host stage records
    lag_waits: List[str] = field(default_factory=list)                # host events of the previous iteration
    allocs: List[Optional[int]] = field(default_factory=list)         # alloc id per access (reads then writes)
    extra: Dict[str, Any] = field(default_factory=dict)               # more for the meta line (a replay's capture site)
    copy: bool = False                                                # a copy between two devices


@dataclass
class _Alloc:
    id: int
    ptr: int
    stream: Any
    site: str
    nbytes: Optional[int] = None
    record_streams: Set[Any] = field(default_factory=set)
    var: Optional[str] = None   # the name the source line assigns it to, when it shows one
    pinned: bool = False        # pinned host memory (else device memory)


@dataclass
class _Graph:
    """A captured CUDA graph: its ops as (op, reads, writes, capture site)."""
    site: str
    ops: List[Tuple[str, List[Tuple[str, int, int]], List[Tuple[str, int, int]], str]] = field(default_factory=list)


def device_space(device: int) -> str:
    """The space name of a device's memory in accesses: ``device`` for device 0, ``device.N`` for device N."""
    return DEVICE if device == 0 else "%s.%d" % (DEVICE, device)


def _space_device(space: str) -> Optional[int]:
    if space == DEVICE:
        return 0
    if space.startswith(DEVICE + "."):
        return int(space[len(DEVICE) + 1:])
    return None


class TraceBuilder:
    """Turns a stream of program events into a ``sync: manual`` spec.

    Stream keys, event keys and graph keys are opaque hashables (in a real
    recording, a stream is ``(device, cudaStream_t)``, an event its
    ``cudaEvent_t``); the host is the stream ``"host"``. Every method takes
    the Python source location as ``site`` ("file:line") and, where it
    matters, the host ``thread`` that made the call (``"main"`` unless
    told: the name a thread got from ``thread_start``). Call ``to_yaml()``
    at the end.

    ``max_ops``: keep only the last ``max_ops`` stages (a ring); with
    ``max_iterations``, only the stages since the ``max_iterations``-th
    last ``step()``. Dropping the oldest stages loses no order between the
    stages kept (every happens-before edge runs from an earlier stage to a
    later one), only the races between a dropped stage and a kept one; the
    trace says how many were dropped.
    """

    def __init__(self, name: str = "trace", default_stream: Any = 0, max_ops: Optional[int] = None,
                 max_iterations: Optional[int] = None):
        if max_ops is not None and max_ops < 1:
            raise ValueError("max_ops must be at least 1, not %d" % max_ops)
        if max_iterations is not None and max_iterations < 1:
            raise ValueError("max_iterations must be at least 1, not %d" % max_iterations)
        self.name = name
        self.default_stream = default_stream
        self.max_ops = max_ops
        self.max_iterations = max_iterations
        self.stages: List[_Stage] = []
        self.base = 0                      # number of the first stage in self.stages (the ones before were dropped)
        self._steps: List[int] = []        # stage numbers where iterations began (step())
        self._stream_names: Dict[Any, str] = {default_stream: "default"}
        self._stream_sites: Dict[Any, str] = {}
        self._stream_exprs: Dict[Any, str] = {}
        self._stream_device: Dict[Any, int] = {default_stream: 0}
        self._stream_owner: Dict[Any, str] = {default_stream: MAIN}
        self._ndefault = 0
        self._last: Dict[Any, int] = {}
        self._last_thread: Dict[Any, str] = {}
        self._pending: Dict[Any, List[int]] = {}
        self._events: Dict[Any, List[int]] = {}
        self._allocs: Dict[int, _Alloc] = {}
        self._alloc_ptrs: List[int] = []   # the keys of _allocs, sorted
        self.unsized: Set[int] = set()     # allocations whose size no op has shown yet
        self._alloc_log: List[_Alloc] = []
        self._pinned: Dict[int, _Alloc] = {}   # pinned host tensors by address (no free is reported)
        self._pinned_ptrs: List[int] = []       # the keys of _pinned, sorted
        self._freed: List[Tuple[_Alloc, List[int], str]] = []   # (alloc, stages the allocator waited for, free site)
        self._frees: List[dict] = []
        self._threads: Dict[str, dict] = {MAIN: {}}
        self._thread_last: Dict[str, int] = {}       # a thread's last stage
        self._thread_inbox: Dict[str, List[str]] = {}  # host events a thread waits for before its next stage
        self._thread_exit: Dict[str, str] = {}       # the host event a finished thread recorded
        self._joined: Set[str] = set()               # exit events the main thread waited for
        self._host_synced: Set[int] = set()          # stages a host stage waited for
        self._nhandoffs = 0
        self._capturing: Dict[str, Tuple[Any, _Graph]] = {}
        self._graphs: Dict[Any, _Graph] = {}
        self._replays = 0
        self.notes: List[str] = []

    # -- streams and threads ---------------------------------------------
    def stream_name(self, stream: Any) -> str:
        if stream == "host":
            return "host"
        if stream not in self._stream_names:
            self._stream_names[stream] = "s%d" % (len(self._stream_names) - self._ndefault)
        return self._stream_names[stream]

    def default_stream_of(self, stream: Any, device: int) -> None:
        """``stream`` is the default stream of ``device`` (handle 0 on every device: keys must differ)."""
        if stream not in self._stream_names:
            self._stream_names[stream] = "default" if device == 0 else "default.%d" % device
            self._ndefault += 1
        self._stream_device[stream] = device
        self._stream_owner.setdefault(stream, MAIN)

    def stream_created(self, stream: Any, site: str, expr: Optional[str] = None, device: int = 0,
                       thread: str = MAIN) -> None:
        """A ``torch.cuda.Stream`` was created at ``site`` on ``device`` by
        ``thread``; ``expr`` is the program's expression for it where the
        source line shows one (``s_copy``, ``streams[2]``). The first
        creation of a handle counts (the pool hands handles out again)."""
        self.stream_name(stream)
        if stream not in self._stream_sites:
            self._stream_sites[stream] = site
            if expr:
                self._stream_exprs[stream] = expr
        self._stream_device.setdefault(stream, device)
        self._stream_owner.setdefault(stream, thread)

    def _spec_stream(self, stream: Any, thread: str) -> str:
        """The spec's stream for ``stream``'s work issued by ``thread``: in a
        spec a stream has one host thread, so another thread's use of it is a
        stream of its own (``NAME.THREAD``), after the earlier work on it."""
        if stream == "host":
            return "host" if thread == MAIN else "host.%s" % thread
        base = self.stream_name(stream)
        owner = self._stream_owner.setdefault(stream, thread)
        return base if owner == thread else "%s.%s" % (base, thread)

    def thread_start(self, parent: str, child: str, site: str, label: str = "") -> None:
        """``parent`` started thread ``child``: everything ``parent`` issued
        before comes before everything ``child`` issues (a host event)."""
        self._enter(parent)
        self._threads.setdefault(child, {"name": label or child, "site": site})
        self._nhandoffs += 1
        ev = "start%d.%s" % (self._nhandoffs, child)
        self._add(_Stage("host", "thread-start", site, parent, event=ev))
        self._thread_inbox.setdefault(child, []).append(ev)

    def thread_exit(self, thread: str, site: str) -> None:
        """``thread``'s run returned: a host event that ``thread_join`` takes."""
        if thread not in self._thread_last:
            return  # it recorded nothing
        self._nhandoffs += 1
        ev = "exit%d.%s" % (self._nhandoffs, thread)
        self._add(_Stage("host", "thread-exit", site, thread, event=ev))
        self._thread_exit[thread] = ev

    def thread_join(self, parent: str, child: str, site: str) -> None:
        """``parent`` joined ``child`` (it had finished): what ``child`` issued comes before ``parent``'s next work."""
        ev = self._thread_exit.get(child)
        if ev is None:
            return
        self._enter(parent)
        self._add(_Stage("host", "thread-join", site, parent, host_waits=[ev]))
        if parent == MAIN:
            self._joined.add(ev)

    def _enter(self, thread: str) -> None:
        """A thread about to issue: the host events handed to it come first."""
        self._threads.setdefault(thread, {})
        inbox = self._thread_inbox.pop(thread, None)
        if inbox:
            self._add(_Stage("host", "thread-begin", "", thread, host_waits=inbox))

    # -- memory ----------------------------------------------------------
    def alloc(self, ptr: int, stream: Any, site: str, var: Optional[str] = None) -> None:
        """The caching allocator handed block ``ptr`` to a tensor on
        ``stream``; ``var``: the variable the source line assigns it to."""
        a = _Alloc(len(self._alloc_log), ptr, stream, site, var=var)
        if ptr not in self._allocs:
            bisect.insort(self._alloc_ptrs, ptr)
        self._allocs[ptr] = a
        self.unsized.add(ptr)
        self._alloc_log.append(a)
        self.stream_name(stream)

    def pinned_alloc(self, ptr: int, nbytes: int, site: str, var: Optional[str] = None) -> None:
        """A tensor of ``nbytes`` bytes of pinned host memory at ``ptr`` was
        made at ``site`` (``torch.empty(..., pin_memory=True)``,
        ``.pin_memory()``); ``var``: the variable the source line assigns it
        to. The pinned allocator reports no free: a later tensor at the same
        address replaces it."""
        a = _Alloc(len(self._alloc_log), ptr, None, site, nbytes, var=var, pinned=True)
        if ptr not in self._pinned:
            bisect.insort(self._pinned_ptrs, ptr)
        self._pinned[ptr] = a
        self._alloc_log.append(a)

    def note_storage(self, ptr: int, nbytes: int) -> None:
        """The size of the storage at ``ptr`` (learned when an op touches it)."""
        a = self._allocs.get(ptr)
        if a is not None and a.nbytes is None:
            a.nbytes = nbytes
        self.unsized.discard(ptr)

    def record_stream(self, ptr: int, nbytes: int, stream: Any, site: str) -> None:
        """``tensor.record_stream(stream)`` on the storage at ``ptr``."""
        a = self._allocs.get(ptr)
        if a is None:  # allocated before recording started: its stream is unknown
            a = _Alloc(len(self._alloc_log), ptr, None, site, nbytes)
            bisect.insort(self._alloc_ptrs, ptr)
            self._allocs[ptr] = a
            self._alloc_log.append(a)
        if a.nbytes is None:
            a.nbytes = nbytes
        self.unsized.discard(ptr)
        a.record_streams.add(stream)
        self.stream_name(stream)

    def free(self, ptr: int, site: str) -> None:
        """The tensor's block went back to the caching allocator."""
        a = self._allocs.pop(ptr, None)
        if a is None:
            return
        del self._alloc_ptrs[bisect.bisect_left(self._alloc_ptrs, ptr)]
        self.unsized.discard(ptr)
        others = [s for s in a.record_streams if s != a.stream]
        waited: List[int] = []
        for s in others:
            for k in self._covered(s):
                if k not in waited:
                    waited.append(k)
        self._frees.append({"alloc": a.id, "site": site, "record_streams": sorted(self.stream_name(s) for s in a.record_streams)})
        if waited and a.nbytes:
            self._freed.append((a, waited, site))

    def _alloc_at(self, space: str, start: int) -> Optional[int]:
        """The live allocation holding byte ``start`` (live blocks do not overlap)."""
        if space == PINNED:
            allocs, ptrs = self._pinned, self._pinned_ptrs
        elif _space_device(space) is None:
            return None
        else:
            allocs, ptrs = self._allocs, self._alloc_ptrs
        i = bisect.bisect_right(ptrs, start) - 1
        if i < 0:
            return None
        a = allocs[ptrs[i]]
        return a.id if a.nbytes is not None and start < a.ptr + a.nbytes else None

    # -- work --------------------------------------------------------------
    def _covered(self, stream: Any) -> List[int]:
        """Stages whose completion the stream's current position implies."""
        out = list(self._pending.get(stream, ()))
        if stream in self._last:
            out.append(self._last[stream])
        return out

    def _add(self, st: _Stage) -> int:
        idx = self.base + len(self.stages)
        self.stages.append(st)
        self._thread_last[st.thread] = idx
        if self.max_ops is not None and len(self.stages) >= 2 * self.max_ops:
            self._drop(len(self.stages) - self.max_ops)
        return idx

    def step(self) -> None:
        """An iteration begins (for ``max_iterations``)."""
        self._steps.append(self.base + len(self.stages))
        if self.max_iterations is not None and len(self._steps) > 2 * self.max_iterations:
            self._drop(self._steps[-self.max_iterations] - self.base)
            self._steps = self._steps[-self.max_iterations:]

    def _drop(self, n: int) -> None:
        """Forget the oldest ``n`` stages, and the allocations only they used."""
        if n <= 0:
            return
        del self.stages[:n]
        self.base += n
        used = {a for st in self.stages for a in st.allocs if a is not None}
        used |= {a.id for a in self._allocs.values()} | {a.id for a in self._pinned.values()}
        self._alloc_log = [a for a in self._alloc_log if a.id in used]
        self._frees = [f for f in self._frees if f["alloc"] in used]

    def _reuse_waits(self, accesses: Iterable[Tuple[str, int, int]], site: str, thread: str) -> None:
        """A kernel touches bytes of a block freed with record_stream streams:
        the allocator handed it out only after it saw their events complete."""
        hit: List[int] = []
        keep = []
        for entry in self._freed:
            a, waited, _ = entry
            lo, hi = a.ptr, a.ptr + (a.nbytes or 0)
            if any(_space_device(sp) is not None and s < hi and lo < e for sp, s, e in accesses):
                hit += [k for k in waited if k not in hit]
            else:
                keep.append(entry)
        self._freed = keep
        if hit:
            self._host_stage("allocator-waits", site, hit, thread)

    def kernel(self, stream: Any, op: str, reads: Sequence[Tuple[str, int, int]],
               writes: Sequence[Tuple[str, int, int]], site: str, thread: str = MAIN, copy: bool = False) -> Optional[int]:
        """A GPU op on ``stream`` reading and writing (space, start, end) byte
        ranges. Inside a capture (``capture_begin`` on this thread) it joins
        the graph instead: captured work does not run. ``copy``: a copy
        between two devices (it may touch both)."""
        cap = self._capturing.get(thread)
        if cap is not None:
            cap[1].ops.append((op, list(reads), list(writes), site))
            return None
        return self._kernel(stream, op, list(reads), list(writes), site, thread, copy=copy)

    def stream_after(self, stream: Any, stage: int) -> None:
        """``stream``'s next op waits for ``stage`` (a wait ATen makes itself, around a copy between devices)."""
        p = self._pending.setdefault(stream, [])
        if stage not in p:
            p.append(stage)

    def _kernel(self, stream, op, reads, writes, site, thread, copy=False, extra=None) -> int:
        self._enter(thread)
        self._reuse_waits(reads + writes, site, thread)
        st = _Stage(stream, op, site, thread, reads, writes, copy=copy, extra=extra or {})
        st.waits = list(dict.fromkeys(self._pending.pop(stream, [])))
        prev = self._last.get(stream)
        if prev is not None and self._last_thread.get(stream) != thread and prev not in st.waits:
            st.waits.append(prev)  # the stream's earlier work, issued by another thread
        st.allocs = [self._alloc_at(sp, s) for sp, s, _ in reads + writes]
        idx = self._add(st)
        self._last[stream] = idx
        self._last_thread[stream] = thread
        self._spec_stream(stream, thread)
        return idx

    def host_op(self, op: str, reads: Sequence[Tuple[str, int, int]], writes: Sequence[Tuple[str, int, int]],
                site: str, thread: str = MAIN) -> None:
        """A CPU op that reads or writes pinned host memory."""
        if thread in self._capturing:
            return
        self._enter(thread)
        st = _Stage("host", op, site, thread, list(reads), list(writes))
        st.allocs = [self._alloc_at(sp, s) for sp, s, _ in st.reads + st.writes]
        self._add(st)

    def _host_stage(self, what: str, site: str, waits: List[int], thread: str = MAIN) -> None:
        if thread in self._capturing:
            return
        self._enter(thread)
        waits = list(dict.fromkeys(waits))
        k = self._thread_last.get(thread)
        last = self.stages[k - self.base] if k is not None and k >= self.base else None
        self._host_synced.update(waits)
        if last is not None and last.stream == "host" and not last.reads and not last.writes and last.event is None \
                and not last.host_waits:
            for w in waits:
                if w not in last.waits:
                    last.waits.append(w)
            return
        self._add(_Stage("host", what, site, thread, waits=waits))

    def event_record(self, event: Any, stream: Any, thread: str = MAIN) -> None:
        if thread in self._capturing:
            return
        self._events[event] = self._covered(stream)
        self.stream_name(stream)

    def event_wait(self, event: Any, stream: Any, thread: str = MAIN) -> None:
        """A wait on an event never recorded waits for nothing (as in CUDA)."""
        if thread in self._capturing:
            return
        got = self._events.get(event)
        self.stream_name(stream)
        if got:
            p = self._pending.setdefault(stream, [])
            p += [k for k in got if k not in p]

    def event_created(self, event: Any) -> None:
        self._events.pop(event, None)

    def stream_sync(self, stream: Any, site: str, what: str = "stream-synchronize", thread: str = MAIN) -> None:
        """The host waited for everything issued on ``stream`` (``Stream.synchronize``, a ``query()`` that returned True)."""
        self._host_stage(what, site, self._covered(stream), thread)

    def event_sync(self, event: Any, site: str, thread: str = MAIN, what: str = "event-synchronize") -> None:
        """The host waited for the event's work (``Event.synchronize``, a ``query()`` that returned True)."""
        self._host_stage(what, site, list(self._events.get(event, [])), thread)

    def device_sync(self, site: str, thread: str = MAIN) -> None:
        waits: List[int] = []
        for s in list(self._last) + list(self._pending):
            waits += self._covered(s)
        self._host_stage("synchronize", site, waits, thread)

    # -- CUDA graphs -------------------------------------------------------
    def capture_begin(self, graph: Any, site: str, thread: str = MAIN) -> None:
        """``thread`` began capturing ``graph``: its ops until ``capture_end``
        are the graph's (they do not run now)."""
        self._capturing[thread] = (graph, _Graph(site))

    def capture_end(self, graph: Any, thread: str = MAIN) -> None:
        cap = self._capturing.pop(thread, None)
        if cap is not None:
            self._graphs[cap[0]] = cap[1]

    def replay(self, graph: Any, stream: Any, site: str, thread: str = MAIN) -> None:
        """``graph.replay()`` on ``stream``: the captured ops, in capture
        order, after the stream's earlier work and before its later work. The
        graph's own branches are put in one order (a race inside a graph is
        not seen)."""
        g = self._graphs.get(graph)
        if g is None:
            return
        self._replays += 1
        for op, reads, writes, csite in g.ops:
            self._kernel(stream, "replay-" + op, reads, writes, site, thread,
                         extra={"captured_at": csite, "graph": g.site, "replay": self._replays})

    # -- output ------------------------------------------------------------
    def _regions(self):
        spans: Dict[str, List[Tuple[int, int]]] = {}
        for st in self.stages:
            for sp, s, e in st.reads + st.writes:
                spans.setdefault(sp, []).append((s // 4 * 4, (e + 3) // 4 * 4))
        regions: Dict[str, List[List[int]]] = {}
        for sp in sorted(spans):
            lst = sorted(spans[sp])
            merged: List[List[int]] = []
            for s, e in lst:
                if merged and s < merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], e)
                else:
                    merged.append([s, e])
            regions[sp] = merged
        return regions

    def _stage_device(self, st: _Stage) -> int:
        return self._stream_device.get(st.stream, 0) if st.stream != "host" else 0

    def to_yaml(self) -> str:
        """The spec text. Raises RecordError if nothing ran on the GPU."""
        if self.max_ops is not None and len(self.stages) > self.max_ops:
            self._drop(len(self.stages) - self.max_ops)
        if self.max_iterations is not None and len(self._steps) > self.max_iterations:
            self._drop(self._steps[-self.max_iterations] - self.base)
            self._steps = self._steps[-self.max_iterations:]
        if not any(st.stream != "host" for st in self.stages):
            raise RecordError("nothing recorded: no CUDA op ran inside record()")
        regions = self._regions()
        starts = {sp: [lo for lo, _ in rs] for sp, rs in regions.items()}
        names: Dict[Tuple[str, int], str] = {}
        buffers = []
        npinned = nmem = 0
        # each region is named after the first allocation seen in it
        first_site: Dict[Tuple[str, int], str] = {}
        for a in self._alloc_log:
            if not a.nbytes:
                continue
            for sp in regions:
                if (sp == PINNED) != a.pinned or (sp != PINNED and _space_device(sp) is None):
                    continue
                i = max(bisect.bisect_right(starts[sp], a.ptr) - 1, 0)
                while i < len(regions[sp]) and regions[sp][i][0] < a.ptr + a.nbytes:
                    if a.ptr < regions[sp][i][1]:
                        first_site.setdefault((sp, regions[sp][i][0]), a.site)
                    i += 1
        for sp in regions:
            dev = _space_device(sp)
            for s, e in regions[sp]:
                site = first_site.get((sp, s), "")
                if dev is not None:
                    prefix = "mem%d" % nmem if dev == 0 else "mem%d.cuda%d" % (nmem, dev)
                    nmem += 1
                else:
                    prefix = "pinned%d" % npinned
                    npinned += 1
                nm = _clean("%s:%s" % (prefix, site) if site else prefix)
                names[(sp, s)] = nm
                buffers.append((nm, e - s, sp, s))

        def region_of(sp: str, s: int, e: int) -> Tuple[str, int, int]:
            s4, e4 = s // 4 * 4, (e + 3) // 4 * 4
            i = bisect.bisect_right(starts[sp], s4) - 1
            lo, hi = regions[sp][i]
            if i < 0 or not (lo <= s4 and e4 <= hi):
                raise AssertionError("access outside every region")
            return names[(sp, lo)], s4 - lo, e4 - lo

        def merge(acc: List[Tuple[str, int, int]]) -> List[str]:
            by: Dict[str, List[List[int]]] = {}
            for sp, s, e in acc:
                b, lo, hi = region_of(sp, s, e)
                by.setdefault(b, []).append([lo, hi])
            out = []
            for b in by:
                iv = sorted(by[b])
                m: List[List[int]] = []
                for lo, hi in iv:
                    if m and lo <= m[-1][1]:
                        m[-1][1] = max(m[-1][1], hi)
                    else:
                        m.append([lo, hi])
                out += ['"%s[%d:%d]"' % (b, lo, hi) for lo, hi in m]
            return out

        # Host stages that neither wait, touch memory nor hand an event to a
        # thread that waits for it order nothing: leave them out.
        waited = {ev for st in self.stages for ev in st.host_waits}
        kept = [st for st in self.stages
                if not (st.stream == "host" and not st.waits and not st.reads and not st.writes
                        and not st.host_waits and st.event not in waited)]
        # A trace is one run, but dagrun checks a spec as an iteration that
        # repeats, and with several host threads iterations could overlap:
        # the main thread ends the trace waiting for every thread and every
        # stream, and each other thread begins after the previous end.
        if any(st.thread != MAIN for st in kept):
            covered = [k for s in list(self._last) + list(self._pending) for k in self._covered(s)
                       if k not in self._host_synced]
            ended = {st.thread for st in kept if st.op == "thread-exit"}
            for t in dict.fromkeys(st.thread for st in kept):
                if t != MAIN and t not in ended:  # still running when the recording ended
                    kept.append(_Stage("host", "thread-exit", "", t, event="end.%s" % t))
            exits = [st.event for st in kept if st.op == "thread-exit" and st.event and st.event not in self._joined]
            # (a wait on another thread's record counts once an earlier stage took the handoff)
            if exits:
                kept.append(_Stage("host", "trace-join", "", MAIN, host_waits=exits))
            kept.append(_Stage("host", "trace-end", "", MAIN, waits=list(dict.fromkeys(covered)), event="trace-end"))
            waited.update(exits)
            waited.add("trace-end")
            first: Dict[str, int] = {}
            for pos, st in enumerate(kept):
                first.setdefault(st.thread, pos)
            for t, pos in sorted(first.items(), key=lambda kv: -kv[1]):
                if t != MAIN:
                    kept.insert(pos, _Stage("host", "thread-begin", "", t, lag_waits=["trace-end"]))
        present_events = {st.event for st in kept if st.event}
        number = {}
        stage_names = []
        for pos, st in enumerate(kept):
            number[id(st)] = pos
            prefix = "h" if st.stream == "host" else "k"
            stage_names.append(_clean("%s%d:%s:%s" % (prefix, pos, st.op, st.site) if st.site else "%s%d:%s" % (prefix, pos, st.op)))
        by_index = {self.base + i: st for i, st in enumerate(self.stages)}

        spec_streams: Dict[str, Tuple[str, int, str]] = {}   # name -> (thread, device, kind)
        for st in kept:
            nm = self._spec_stream(st.stream, st.thread)
            if nm not in spec_streams:
                kind = "host" if st.stream == "host" else ""
                spec_streams[nm] = (st.thread, self._stage_device(st), kind)
        lines = ["# Recorded by dagrun_torch.record: one stage per GPU op (kNNN:OP:FILE:LINE) on the",
                 "# stream it ran on, host stages (hNNN) for host synchronizations and pinned-memory CPU ops."]
        if self.base:
            lines.append("# Bounded trace: the first %d ops were dropped (max_ops %s, max_iterations %s); races "
                         "with them are not seen." % (self.base, self.max_ops, self.max_iterations))
        lines += ["# Check it with: dagrun check THIS_FILE", "version: 1", "name: %s" % _clean(self.name),
                  "sync: manual", "options: {arena: off}"]
        declared = [(nm, t, d, k) for nm, (t, d, k) in spec_streams.items() if nm != "host" and (t != MAIN or d != 0)]
        if declared:
            lines.append("streams:")
            for nm, t, d, k in declared:
                parts = ['name: %s' % nm]
                if k:
                    parts.append("kind: %s" % k)
                if t != MAIN:
                    parts.append("thread: %s" % _clean(t))
                if d and not k:
                    parts.append("device: %d" % d)
                lines.append("  - {%s}" % ", ".join(parts))
        lines.append("buffers:")
        for nm, nb, sp, _ in buffers:
            dev = _space_device(sp)
            where = ", where: host_pinned" if dev is None else (", device: %d" % dev if dev else "")
            lines.append('  - {name: "%s", bytes: %d%s}' % (nm, nb, where))
        lines.append("stages:")
        meta_stages = []
        for st in kept:
            pos = number[id(st)]
            dev = self._stage_device(st)
            reads, writes = st.reads, st.writes
            kernel = "spin"
            if st.stream != "host":
                own = lambda a: _space_device(a[0]) in (None, dev)
                if st.copy and len(reads) == 1 and len(writes) == 1 and reads[0][2] - reads[0][1] == writes[0][2] - writes[0][1] \
                        and reads[0][1] % 4 == 0 and writes[0][1] % 4 == 0 and (reads[0][2] - reads[0][1]) % 4 == 0:
                    kernel = "copy"
                elif not all(own(a) for a in reads + writes):
                    dropped = [a for a in reads + writes if not own(a)]
                    self.notes.append("%s touches another device's memory (%d accesses left out)" % (stage_names[pos], len(dropped)))
                    reads, writes = [a for a in reads if own(a)], [a for a in writes if own(a)]
            parts = ['name: "%s"' % stage_names[pos], "kernel: %s" % kernel, 'stream: %s' % self._spec_stream(st.stream, st.thread)]
            r, w = merge(reads), merge(writes)
            if r:
                parts.append("reads: [%s]" % ", ".join(r))
            if w:
                parts.append("writes: [%s]" % ", ".join(w))
            waits = ["{event: %s}" % ev for ev in st.host_waits if ev in present_events]
            waits += ["{event: %s, lag: 1}" % ev for ev in st.lag_waits]
            waits += ['"%s"' % stage_names[number[id(by_index[k])]] for k in st.waits
                      if k in by_index and id(by_index[k]) in number]
            if waits:
                parts.append("waits: [%s]" % ", ".join(waits))
            if st.event and st.event in waited:
                parts.append("event: %s" % st.event)
            lines.append("  - {%s}" % ", ".join(parts))
            m = {"op": st.op, "site": st.site, "allocs": st.allocs,
                 "accesses": [list(region_of(sp, s, e)) for sp, s, e in st.reads + st.writes], "nreads": len(st.reads)}
            if st.thread != MAIN:
                m["thread"] = st.thread
            m.update(st.extra)
            meta_stages.append(m)
        meta = {
            "streams": {self.stream_name(s): self._stream_sites.get(s, "") for s in self._stream_names},
            "stream_threads": {nm: t for nm, (t, _, _) in spec_streams.items() if t != MAIN},
            "threads": {t: v for t, v in self._threads.items() if t != MAIN},
            "stream_exprs": {self.stream_name(s): e for s, e in self._stream_exprs.items()},
            "allocs": [dict({"id": a.id, "site": a.site, "stream": self.stream_name(a.stream) if a.stream is not None else None,
                             "bytes": a.nbytes}, **({"var": a.var} if a.var else {}), **({"pinned": True} if a.pinned else {}))
                       for a in self._alloc_log],
            "frees": self._frees,
            "graphs": {g.site: len(g.ops) for g in self._graphs.values()},
            "dropped_ops": self.base,
            "notes": self.notes,
            "stages": meta_stages,
        }
        lines.append("# dagrun_torch-meta: " + json.dumps(meta, separators=(",", ":")))
        return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------
# The torch side: a TorchDispatchMode for ops (one per thread: the mode stack
# is per thread), the GPU trace callbacks for streams, events,
# synchronizations and the allocator, and wrappers, while recording, of the
# Python methods no callback reports (Thread.start/join, CUDAGraph capture
# and replay, Event/Stream.query, Tensor.numpy/tolist).

_SKIP_OPS = {"aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty", "aten::new_empty_strided",
             "aten::empty_permuted", "aten::resize_", "aten::set_", "aten::record_stream", "aten::is_pinned",
             "aten::lift_fresh", "aten::detach", "aten::alias", "aten::_has_compatible_shallow_copy_type",
             "aten::is_same_size", "aten::size", "aten::stride", "aten::sym_size", "aten::sym_stride",
             "aten::sym_numel", "aten::sym_storage_offset"}
# Ops that leave the host waiting for the current stream (a copy to pageable
# memory, or a size only the device knows).
_SYNC_OPS = {"aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::unique_consecutive",
             "aten::_unique2", "aten::unique_dim", "aten::is_nonzero", "aten::equal", "aten::allclose"}
# Ops that make a pinned host tensor without a pin_memory argument.
_PIN_OPS = {"aten::pin_memory", "aten::_pin_memory"}
_COPY_OPS = {"aten::copy_", "aten::_to_copy", "aten::_copy_from", "aten::to", "aten::_copy_from_and_resize"}


_THREADING = os.sep + "threading.py"


def frame_of_caller(skip_dirs: Sequence[str], allow_dirs: Sequence[str] = ()) -> Any:
    """The innermost Python frame outside ``skip_dirs`` (frames under
    ``allow_dirs`` count even inside a skipped folder), or None."""
    f = sys._getframe(1)
    key = (tuple(skip_dirs), tuple(allow_dirs))
    known = _USER_FILES.setdefault(key, {})
    while f is not None:
        fn = f.f_code.co_filename
        user = known.get(fn)
        if user is None:
            skipped = any(fn.startswith(d) for d in skip_dirs) and not any(fn.startswith(d) for d in allow_dirs)
            user = known[fn] = not fn.startswith("<") and not skipped and "contextlib" not in fn and not fn.endswith(_THREADING)
        if user:
            return f
        f = f.f_back
    return None


_USER_FILES: Dict[Tuple[Tuple[str, ...], Tuple[str, ...]], Dict[str, bool]] = {}


def _frame_site(f: Any) -> str:
    if f is None:
        return "?:0"
    fn, cwd = f.f_code.co_filename, os.getcwd()
    path = os.path.relpath(fn, cwd) if fn.startswith(cwd + os.sep) else os.path.basename(fn)
    return "%s:%d" % (path, f.f_lineno)


def site_of_caller(skip_dirs: Sequence[str], allow_dirs: Sequence[str] = ()) -> str:
    """file:line of the innermost Python frame outside ``skip_dirs`` (frames
    under ``allow_dirs`` count even inside a skipped folder); "?:0" when
    there is none."""
    return _frame_site(frame_of_caller(skip_dirs, allow_dirs))


_ASSIGN = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(?::[^=]+)?=(?!=)\s*(\S.*)$")
_TUPLE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)+)\s*,?\s*=(?!=)\s*\S")
_APPEND = re.compile(r"^\s*([A-Za-z_]\w*)\.append\(")
_COMP_VAR = re.compile(r"\bfor\s+([A-Za-z_]\w*)\b")


_ORDINAL = threading.local()


def _ordinal(f: Any, epoch: Any = None) -> int:
    """How many times in a row frame ``f``'s current line has asked before
    (0 the first time): the index of what a comprehension, an ``append``
    loop or a tuple assignment on that line creates. ``epoch``: something
    that changes when the program did anything else in between (the number
    of ops recorded), so that a second run of the same line counts from 0
    again even when its frame has the address of the first one's."""
    key = (id(f), f.f_code, f.f_lineno, epoch)
    last = getattr(_ORDINAL, "last", None)
    if last is not None and last[0] == key:
        last[1] += 1
    else:
        last = [key, 0]
        _ORDINAL.last = last
    return last[1]


def assigned_name(f: Any, index: bool = True, epoch: Any = None) -> Optional[str]:
    """The program's name for what frame ``f``'s line creates, read from the
    source line: ``s_copy`` for ``s_copy = torch.cuda.Stream()``,
    ``streams[2]`` for the third stream of ``streams = [torch.cuda.Stream()
    for _ in range(3)]`` or of ``streams.append(torch.cuda.Stream())`` in a
    loop, ``s_right`` for the second of ``s_left, s_right =
    torch.cuda.Stream(), torch.cuda.Stream()`` (with ``index``: the count of
    creations in a row on that line, see _ordinal; call it once per object
    created); None when the line shows no name (without ``index``, for those
    three forms too) or the source is not readable. It
    never reads the frame's locals: in CPython before 3.13 that keeps a
    snapshot of them alive, and a tensor the program dropped would stay
    allocated, changing what the caching allocator does."""
    import linecache
    if f is None:
        return None
    line = linecache.getline(f.f_code.co_filename, f.f_lineno)
    m = _TUPLE.match(line)
    if m:
        if not index:
            return None
        targets = [t.strip() for t in m.group(1).split(",")]
        k = _ordinal(f, epoch)
        return targets[k] if k < len(targets) else None
    m = _ASSIGN.match(line)
    if m:
        target, rhs = m.groups()
        if rhs.startswith("[") and _COMP_VAR.search(rhs):
            return "%s[%d]" % (target, _ordinal(f, epoch)) if index else None
        return target
    m = _APPEND.match(line)
    if m:
        return "%s[%d]" % (m.group(1), _ordinal(f, epoch)) if index else None
    return None


def _tensors_in(v: Any) -> List[Any]:
    import torch
    out = []
    if isinstance(v, torch.Tensor):
        out.append(v)
    elif isinstance(v, (list, tuple)):
        for e in v:
            out += _tensors_in(e)
    return out


def _range(t: Any) -> Optional[Tuple[int, int]]:
    """[start, end) bytes of the contiguous hull of what the tensor views."""
    if t.numel() == 0:
        return None
    n = 1 + sum((sz - 1) * abs(st) for sz, st in zip(t.shape, t.stride()))
    start = t.data_ptr()
    if start == 0:
        return None
    return start, start + n * t.element_size()


def _storage(t: Any) -> Tuple[int, int]:
    try:
        s = t.untyped_storage()
    except AttributeError:
        s = t.storage()
    return int(s.data_ptr()), int(s.nbytes())


class _SchemaInfo:
    """What classify needs of an op's schema, read once per op (the schema's
    objects are slow to read)."""

    def __init__(self, schema: Any):
        self.skip = schema.name in _SKIP_OPS
        self.arguments = [(a.name, a.alias_info is not None and a.alias_info.is_write) for a in schema.arguments]
        self.named = dict(self.arguments)
        self.fresh_returns = [r.alias_info is None for r in schema.returns]
        self.nreturns = len(schema.returns)
        self.returns_tensor = any("Tensor" in str(r.type) for r in schema.returns)


class _Classifier:
    """Reads and writes of one ATen op from its schema (the sanitizer's rule):
    arguments the schema marks as written (``Tensor(a!)``) are writes, other
    tensor arguments reads, returned tensors that alias nothing are writes.
    Views, factory functions that only allocate, and metadata ops launch
    nothing and are skipped. ``device_of(t)``: the device index of a device
    tensor (0 unless told)."""

    def __init__(self, is_device: Callable[[Any], bool], is_pinned: Callable[[Any], bool],
                 device_of: Callable[[Any], int] = lambda t: 0):
        self._schemas: Dict[Any, "_SchemaInfo"] = {}
        self.is_device = is_device
        self.is_pinned = is_pinned
        self.device_of = device_of

    def classify(self, func: Any, args: tuple, kwargs: dict, out: Any):
        """Returns None (no GPU or pinned-memory work) or (where, reads,
        writes, tensors, read tensors, written tensors) with where "device"
        or "host"."""
        info = self._schemas.get(func)
        if info is None:
            info = self._schemas[func] = _SchemaInfo(func._schema)
        if info.skip:
            return None
        written_args = []
        read_args = []
        for (name, write), v in zip(info.arguments, args):
            ts = _tensors_in(v)
            if ts:
                (written_args if write else read_args).extend(ts)
        for k, v in kwargs.items():
            write = info.named.get(k)
            if write is not None:
                ts = _tensors_in(v)
                if ts:
                    (written_args if write else read_args).extend(ts)
        outs = []
        for fresh, v in zip(info.fresh_returns, out if isinstance(out, tuple) and info.nreturns > 1 else (out,)):
            if fresh:
                outs += _tensors_in(v)
        if not written_args and not outs:
            if info.returns_tensor or not info.nreturns:
                return None  # a view, or a metadata op
            # else it reads tensors into a Python value (.item(), equal): a read
        spaces: Dict[int, str] = {}   # id(tensor) -> its memory's space, "" for pageable host memory

        def space(t):
            sp = spaces.get(id(t))
            if sp is None:
                sp = device_space(self.device_of(t)) if self.is_device(t) else PINNED if self.is_pinned(t) else ""
                spaces[id(t)] = sp
            return sp
        tensors = written_args + read_args + outs
        kinds = [space(t) for t in tensors]
        if not any(kinds):
            return None
        where = "device" if any(k and k != PINNED for k in kinds) else "host"

        def acc(ts):
            res = []
            for t in ts:
                sp = space(t)
                if sp:
                    r = _range(t)
                    if r is not None:
                        res.append((sp, r[0], r[1]))
            return res
        return where, acc(read_args), acc(written_args + outs), tensors, read_args, written_args + outs, spaces


def _make_mode(builder: TraceBuilder, classifier: _Classifier, current_stream: Callable[..., Any],
               site: Callable[[], str], stream_handle: Callable[[Any], Any], thread: Callable[[], str] = lambda: MAIN,
               lock: Any = None, active: Callable[[], bool] = lambda: True,
               assigned: Callable[[], Optional[str]] = lambda: None):
    """A TorchDispatchMode that reports each op to ``builder``.
    ``current_stream(device)``: the key of the device's current stream;
    ``assigned()``: the variable the calling line assigns (a pinned
    tensor's name, assigned_name without index);
    ``thread()``: the name of the calling thread; ``lock``: held while the
    builder is called (threads share it); ``active()``: False once the
    recording ended (a thread may outlive it)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    import contextlib
    guard = lock if lock is not None else contextlib.nullcontext()

    class _RecordMode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if not active():
                return func(*args, **kwargs)
            name = func._schema.name
            if name == "aten::record_stream":
                t, s = args[0], args[1]
                ptr, nb = _storage(t)
                with guard:
                    builder.record_stream(ptr, nb, stream_handle(s), site())
                return func(*args, **kwargs)
            out = func(*args, **kwargs)
            if kwargs.get("pin_memory") or name in _PIN_OPS:
                # pinned host memory, which no allocator callback reports
                fresh = [t for t in _tensors_in(out) if classifier.is_pinned(t)]
                if fresh:
                    here, var = site(), assigned()
                    with guard:
                        for t in fresh:
                            ptr, nb = _storage(t)
                            builder.pinned_alloc(ptr, nb, here, var)
            c = classifier.classify(func, args, kwargs, out)
            if c is None:
                return out
            where, reads, writes, tensors, read_ts, write_ts, spaces = c
            here = site()
            me = thread()
            op = "%s.%s" % (name.split("::")[-1], func._overloadname)
            with guard:
                if builder.unsized:  # sizes of fresh allocations, from the first op that touches them
                    for t in tensors:
                        if spaces[id(t)] not in ("", PINNED):
                            ptr, nb = _storage(t)
                            builder.note_storage(ptr, nb)
                if where == "host":
                    builder.host_op(op, reads, writes, here, me)
                    return out
                devs = [_space_device(spaces[id(t)]) for t in read_ts if spaces[id(t)] not in ("", PINNED)]
                wdevs = [_space_device(spaces[id(t)]) for t in write_ts if spaces[id(t)] not in ("", PINNED)]
                # ATen runs a copy between two devices on the source's current
                # stream and makes the destination's current stream wait for it.
                cross = name in _COPY_OPS and devs and wdevs and devs[0] != wdevs[0]
                dev = devs[0] if cross else (wdevs or devs)[0]
                stream = current_stream(dev)
                idx = builder.kernel(stream, op, reads, writes, here, me, copy=bool(cross))
                if cross and idx is not None:
                    builder.stream_after(current_stream(wdevs[0]), idx)
                sync = name in _SYNC_OPS
                if name in _COPY_OPS:
                    nb = kwargs.get("non_blocking", args[2] if name == "aten::copy_" and len(args) > 2 else False)
                    cpu_side = [spaces[id(t)] for t in tensors if spaces[id(t)] in ("", PINNED)]
                    if cpu_side and (not nb or not all(k == PINNED for k in cpu_side)):
                        sync = True
                if sync:
                    builder.stream_sync(stream, here, "host-reads-" + op.split(".")[0].strip("_"), me)
            return out

    return _RecordMode()


def _trace_module():
    import torch
    try:
        import torch.cuda._gpu_trace as gt  # torch ≥ 2.1
        names = dict(event_creation="EventCreationCallbacks", event_record="EventRecordCallbacks",
                     event_wait="EventWaitCallbacks", memory_allocation="MemoryAllocationCallbacks",
                     memory_deallocation="MemoryDeallocationCallbacks", stream_creation="StreamCreationCallbacks",
                     device_synchronization="DeviceSynchronizationCallbacks",
                     stream_synchronization="StreamSynchronizationCallbacks",
                     event_synchronization="EventSynchronizationCallbacks")
        activate = torch._C._activate_gpu_trace
    except ImportError:
        import torch.utils._cuda_trace as gt  # torch 1.13 - 2.0
        names = dict(event_creation="CUDAEventCreationCallbacks", event_record="CUDAEventRecordCallbacks",
                     event_wait="CUDAEventWaitCallbacks", memory_allocation="CUDAMemoryAllocationCallbacks",
                     memory_deallocation="CUDAMemoryDeallocationCallbacks", stream_creation="CUDAStreamCreationCallbacks",
                     device_synchronization="CUDADeviceSynchronizationCallbacks",
                     stream_synchronization="CUDAStreamSynchronizationCallbacks",
                     event_synchronization="CUDAEventSynchronizationCallbacks")
        activate = torch._C._activate_cuda_trace
    return gt, names, activate


def _site_function(torch: Any, skip: Sequence[str], allow: Sequence[str]) -> Callable[[], str]:
    """site(): file:line of the program line that issues what is being
    recorded. An op of the backward pass runs on autograd's thread, with no
    Python frame: its site is the forward line that made its autograd node,
    from anomaly mode's stack of the node when it is on, else from the
    node's sequence number (autograd numbers nodes in creation order; the
    forward ops' sites are kept by the number autograd gave their node)."""
    seq_of = getattr(torch.autograd, "_get_sequence_nr", None)
    current_node = getattr(torch._C, "_current_autograd_node", None)
    forward: Dict[int, str] = {}

    def site() -> str:
        f = frame_of_caller(skip, allow)
        if f is not None:
            here = _frame_site(f)
            if seq_of is not None:
                forward.setdefault(seq_of() - 1, here)
            return here
        node = current_node() if current_node is not None else None
        if node is None:
            return "?:0"
        tb = (getattr(node, "metadata", None) or {}).get("traceback_")
        for entry in reversed(tb or []):
            m = re.match(r'\s*File "([^"]+)", line (\d+)', str(entry))
            if m and not any(m.group(1).startswith(d) for d in skip) and not m.group(1).startswith("<"):
                fn, cwd = m.group(1), os.getcwd()
                return "%s:%s" % (os.path.relpath(fn, cwd) if fn.startswith(cwd + os.sep) else os.path.basename(fn), m.group(2))
        try:
            return forward.get(node._sequence_nr(), "?:0")
        except (AttributeError, RuntimeError):
            return "?:0"
    return site


def _not_a_file_to_write(path: str) -> str:
    """Why ``path`` cannot be written as a file ("" when it can): it is a
    folder, or the folder it would go in does not exist or is a file."""
    if os.path.isdir(path):
        return "a folder"
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        return "%s is not a folder" % d if os.path.exists(d) else "no folder %s" % d
    return ""


class _CudaBackend:
    """What a recording asks of CUDA: which tensors are device or pinned
    memory, stream keys ``(device, cudaStream_t)``, the GPU trace callbacks."""
    fake = False

    def __init__(self):
        import torch
        if not torch.cuda.is_available():
            raise RecordError("dagrun_torch.record needs CUDA")
        self.torch = torch

    def synchronize(self) -> None:
        self.torch.cuda.synchronize()

    def is_device(self, t) -> bool:
        return t.is_cuda

    def is_pinned(self, t) -> bool:
        return (not t.is_cuda) and t.device.type == "cpu" and t.is_pinned()

    def device_of(self, t) -> int:
        return t.device.index or 0

    def current_device(self) -> int:
        return self.torch.cuda.current_device()

    def current_stream(self, device: Optional[int] = None) -> Any:
        d = self.current_device() if device is None else device
        return (d, self.torch.cuda.current_stream(d).cuda_stream)

    def default_stream(self, device: int) -> Any:
        return (device, self.torch.cuda.default_stream(device).cuda_stream)

    def stream_key(self, s) -> Any:
        if hasattr(s, "cuda_stream"):
            return (s.device_index if s.device_index is not None else self.current_device(), s.cuda_stream)
        t = self.torch.cuda.Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)
        return (s.device_index, t.cuda_stream)

    def event_key(self, e) -> Any:
        return int(e.cuda_event)

    def callbacks(self, rec: "record") -> List[Tuple[Any, Any]]:
        """Register the GPU trace callbacks; returns (registry, callback) pairs to remove."""
        gt, names, activate = _trace_module()
        activate()
        b, key = rec.builder, lambda s: (self.current_device(), s)
        cbs = {
            "event_creation": lambda e: b.event_created(e),
            "event_record": lambda e, s: b.event_record(e, key(s), rec.thread()),
            "event_wait": lambda e, s: b.event_wait(e, key(s), rec.thread()),
            "memory_allocation": lambda p: b.alloc(p, self.current_stream(), rec.site(), rec.assigned(index=False)),
            "memory_deallocation": lambda p: b.free(p, rec.site()),
            "device_synchronization": lambda: b.device_sync(rec.site(), rec.thread()),
            "stream_synchronization": lambda s: b.stream_sync(key(s), rec.site(), thread=rec.thread()),
            "event_synchronization": lambda e: b.event_sync(e, rec.site(), rec.thread()),
        }
        out = []
        for k, cb in cbs.items():
            reg = getattr(gt, names[k])
            g = rec.guarded(k, cb)
            reg.callback_list.append(g)
            out.append((reg, g))
        return out


class _Patch:
    """Replace ``owner.attr`` by ``make(original)`` until ``undo()``."""

    def __init__(self, owner: Any, attr: str, make: Callable[[Any], Any]):
        self.owner, self.attr = owner, attr
        self.had = attr in owner.__dict__
        self.orig = owner.__dict__[attr] if self.had else None
        setattr(owner, attr, make(getattr(owner, attr)))

    def undo(self) -> None:
        if self.had:
            setattr(self.owner, self.attr, self.orig)
        else:
            delattr(self.owner, self.attr)


_ACTIVE: Optional["record"] = None
_ACTIVE_LOCK = threading.Lock()


class record:
    """Context manager: record the GPU work of the code inside as a dagrun spec.

    ``path``: the YAML file to write on exit (also when the code raises);
    ``name``: the spec's name (default: the file's base name);
    ``synchronize``: call torch.cuda.synchronize() on entry, so that work
    issued before cannot be in flight (default True);
    ``max_ops``: keep only the last ``max_ops`` ops (a ring, for a
    long-running server); ``max_iterations``: keep only the ops of the
    last ``max_iterations`` iterations, each begun by ``step()``.

    Threads started inside are recorded too, each on its own host thread
    in the trace (``Thread.start`` and ``Thread.join`` hand over order);
    threads started before are recorded from their first op, with no
    handoff. One recording at a time. After the block, ``.builder`` holds
    the TraceBuilder and ``.path`` the file. Raises RecordError on exit if
    no CUDA op ran inside, and on entry when ``path`` cannot be written as a
    file (a folder, or in a folder that does not exist), when CUDA is not
    available or another recording is active; ValueError for a bound
    below 1.
    """

    def __init__(self, path: str, name: Optional[str] = None, synchronize: bool = True,
                 max_ops: Optional[int] = None, max_iterations: Optional[int] = None, _backend: Any = None):
        self.path = path
        self.name = name or os.path.splitext(os.path.basename(path))[0]
        self.synchronize = synchronize
        self.max_ops, self.max_iterations = max_ops, max_iterations
        self.builder: Optional[TraceBuilder] = None
        self._backend = _backend
        self._cbs: List[Tuple[Any, Any]] = []
        self._patches: List[_Patch] = []
        self._mode = None
        self._errors: List[str] = []
        self._active = False
        self._lock = threading.RLock()
        self._names: "weakref.WeakKeyDictionary[threading.Thread, str]" = weakref.WeakKeyDictionary()
        self._nthreads = 0

    # -- what the hooks share ----------------------------------------------
    def thread(self) -> str:
        """The calling thread's name in the trace: ``main``, or ``tN`` in the
        order threads started. A thread Python did not start (the autograd
        engine's) counts as the main thread, which waits for it."""
        t = threading.current_thread()
        if t is threading.main_thread() or isinstance(t, getattr(threading, "_DummyThread", ())):
            return MAIN
        n = self._names.get(t)
        if n is None:
            n = self._name_thread(t)
        return n

    def _name_thread(self, t: threading.Thread) -> str:
        with self._lock:
            n = self._names.get(t)
            if n is None:
                self._nthreads += 1
                n = "t%d" % self._nthreads
                self._names[t] = n
            return n

    def site(self) -> str:
        return self._site()

    def assigned(self, index: bool = True) -> Optional[str]:
        """The program's name for what the calling line creates (assigned_name)."""
        b = self.builder
        return assigned_name(frame_of_caller(self._skip, self._allow), index, b.base + len(b.stages))

    def guarded(self, what: str, cb: Callable) -> Callable:
        """``cb`` under the recording's lock, its errors kept for ``__exit__``."""
        def call(*a):
            if not self._active:
                return None
            try:
                with self._lock:
                    return cb(*a)
            except Exception as e:  # a registry would only log it
                self._errors.append("%s: %s: %s" % (what, type(e).__name__, e))
            return None
        return call

    def step(self) -> None:
        """Mark the start of an iteration (for ``max_iterations``)."""
        with self._lock:
            self.builder.step()

    def _new_mode(self):
        be = self._be
        classifier = _Classifier(is_device=be.is_device, is_pinned=be.is_pinned, device_of=be.device_of)
        return _make_mode(self.builder, classifier, be.current_stream, self.site, be.stream_key, self.thread,
                          self._lock, lambda: self._active, lambda: self.assigned(index=False))

    # -- the wrappers ----------------------------------------------------------
    def _patch_all(self) -> None:
        import torch
        rec, b, be = self, self.builder, self._be
        P = self._patches

        def thread_start(orig):
            def start(t, *a, **k):
                if rec._active and not getattr(t, "_dagrun_torch_wrapped", False):
                    me, child, here = rec.thread(), rec._name_thread(t), rec.site()
                    with rec._lock:
                        b.thread_start(me, child, here, label=t.name)
                    run = t.run

                    def recorded_run():
                        mode = rec._new_mode()
                        mode.__enter__()
                        try:
                            run()
                        finally:
                            mode.__exit__(None, None, None)
                            rec.guarded("thread exit", b.thread_exit)(child, here)
                    t.run = recorded_run
                    t._dagrun_torch_wrapped = True
                return orig(t, *a, **k)
            return start

        def thread_join(orig):
            def join(t, *a, **k):
                r = orig(t, *a, **k)
                if rec._active and not t.is_alive() and t in rec._names:
                    rec.guarded("join", b.thread_join)(rec.thread(), rec._names[t], rec.site())
                return r
            return join
        P.append(_Patch(threading.Thread, "start", thread_start))
        P.append(_Patch(threading.Thread, "join", thread_join))

        def numpy_read(what):
            def make(orig):
                def read(t, *a, **k):
                    if rec._active and be.is_pinned(t):
                        r = _range(t)
                        if r is not None:
                            rec.guarded(what, b.host_op)(what, [(PINNED, r[0], r[1])], [], rec.site(), rec.thread())
                    return orig(t, *a, **k)
                return read
            return make
        P.append(_Patch(torch.Tensor, "numpy", numpy_read("numpy")))
        P.append(_Patch(torch.Tensor, "tolist", numpy_read("tolist")))
        if be.fake:
            return

        def event_query(orig):
            def query(e):
                done = orig(e)
                if done and rec._active:
                    rec.guarded("Event.query", b.event_sync)(be.event_key(e), rec.site(), rec.thread(), "event-query")
                return done
            return query

        def stream_query(orig):
            def query(s):
                done = orig(s)
                if done and rec._active:
                    rec.guarded("Stream.query", b.stream_sync)(be.stream_key(s), rec.site(), "stream-query", rec.thread())
                return done
            return query
        def stream_new(orig):
            def new(cls, *a, **k):
                s = orig(cls, *a, **k)
                if rec._active and "stream_id" not in k:  # not a wrapper of an existing stream
                    rec.guarded("Stream", b.stream_created)(be.stream_key(s), rec.site(), rec.assigned(),
                                                            s.device_index or 0, rec.thread())
                return s
            return staticmethod(new)
        P.append(_Patch(torch.cuda.Stream, "__new__", stream_new))
        P.append(_Patch(torch.cuda.Event, "query", event_query))
        P.append(_Patch(torch.cuda.Stream, "query", stream_query))

        G = torch.cuda.CUDAGraph

        def capture_begin(orig):
            def begin(g, *a, **k):
                r = orig(g, *a, **k)
                rec.guarded("capture_begin", b.capture_begin)(g, rec.site(), rec.thread())
                return r
            return begin

        def capture_end(orig):
            def end(g, *a, **k):
                rec.guarded("capture_end", b.capture_end)(g, rec.thread())
                return orig(g, *a, **k)
            return end

        def replay(orig):
            def rep(g, *a, **k):
                r = orig(g, *a, **k)
                rec.guarded("replay", b.replay)(g, be.current_stream(), rec.site(), rec.thread())
                return r
            return rep
        P.append(_Patch(G, "capture_begin", capture_begin))
        P.append(_Patch(G, "capture_end", capture_end))
        P.append(_Patch(G, "replay", replay))

    def __enter__(self) -> "record":
        global _ACTIVE
        import torch
        why = _not_a_file_to_write(self.path)
        if why:
            # found before the program runs, not when the trace is written at its end
            raise RecordError("trace %s: %s; want the path of a trace file to write" % (self.path, why))
        be = self._backend if self._backend is not None else _CudaBackend()
        self._be = be
        with _ACTIVE_LOCK:
            if _ACTIVE is not None:
                raise RecordError("another dagrun_torch recording is active (%s): one at a time" % _ACTIVE.path)
            _ACTIVE = self
        try:
            if self.synchronize:
                be.synchronize()
            here = os.path.dirname(os.path.abspath(__file__))
            self._skip = [os.path.dirname(torch.__file__) + os.sep, here + os.sep]
            self._allow = [os.path.join(here, "patterns") + os.sep]
            self._site = _site_function(torch, self._skip, self._allow)
            b = TraceBuilder(self.name, default_stream=be.default_stream(0), max_ops=self.max_ops,
                             max_iterations=self.max_iterations)
            self.builder = b
            self._active = True
            if not be.fake:
                for d in range(torch.cuda.device_count()):
                    b.default_stream_of(be.default_stream(d), d)
                self._cbs = be.callbacks(self)
            self._patch_all()
            self._mode = self._new_mode()
            self._mode.__enter__()
        except BaseException:
            self._stop()
            raise
        return self

    def _stop(self) -> None:
        global _ACTIVE
        self._active = False
        for reg, cb in self._cbs:
            try:
                reg.callback_list.remove(cb)
            except ValueError:
                pass
        self._cbs = []
        for p in reversed(self._patches):
            p.undo()
        self._patches = []
        with _ACTIVE_LOCK:
            if _ACTIVE is self:
                _ACTIVE = None

    def __exit__(self, et, ev, tb) -> bool:
        if self._mode is not None:
            self._mode.__exit__(et, ev, tb)
        with self._lock:
            self._stop()
        if self._errors and et is None:
            raise RecordError("recording failed: " + "; ".join(self._errors[:3]))
        text = self.builder.to_yaml() if (et is None or any(s.stream != "host" for s in self.builder.stages)) else None
        if text is not None:
            with open(self.path, "w") as f:
                f.write(text)
        return False


def step() -> None:
    """Mark the start of an iteration in the active recording (for
    ``max_iterations``, ``--max-iterations`` of ``python3 -m dagrun_torch
    run``, ``DAGRUN_TORCH_MAX_ITERATIONS``); nothing without one."""
    r = _ACTIVE
    if r is not None and r._active:
        r.step()


_ENV: Optional[Tuple["record", Callable[[], None]]] = None


def set_env_recording(rec: "record", finish: Callable[[], None]) -> None:
    """The recording DAGRUN_TORCH_CHECK started (launch.start_from_env)."""
    global _ENV
    _ENV = (rec, finish)


def stop_env_recording() -> None:
    """Discard the recording DAGRUN_TORCH_CHECK started, if any (``python3 -m
    dagrun_torch run`` records the script on its own)."""
    global _ENV
    if _ENV is None:
        return
    rec, finish = _ENV
    _ENV = None
    if rec._active:
        rec._mode.__exit__(None, None, None)
        with rec._lock:
            rec._stop()
    finish()
