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

Not seen: kernels that do not go through the ATen dispatcher (custom CUDA
extensions called outside torch.ops, Triton kernels, CUDA graph replays,
torch.cuda._sleep); pageable host memory; reuse of pinned host blocks (the
pinned allocator orders it by its own events). Byte ranges of strided views
are their contiguous hull. Tested with torch 1.13 (CPU, the builder and the
dispatch logic) and 2.11 (CUDA 13, H200).
"""
from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

__all__ = ["TraceBuilder", "record", "RecordError", "site_of_caller", "frame_of_caller", "assigned_name"]

DEVICE, PINNED = "device", "host_pinned"
_BAD_NAME_CHARS = set(" \t\r\n[],{}#&*!|>'\"%@`")


class RecordError(RuntimeError):
    """Nothing to write (no GPU op ran inside record()), or recording is unavailable."""


def _clean(s: str) -> str:
    return "".join("_" if (c in _BAD_NAME_CHARS or ord(c) < 32) else c for c in s) or "_"


@dataclass
class _Stage:
    name: str
    stream: Any            # stream handle, or "host"
    op: str
    site: str
    reads: List[Tuple[str, int, int]] = field(default_factory=list)   # (space, start, end)
    writes: List[Tuple[str, int, int]] = field(default_factory=list)
    waits: List[int] = field(default_factory=list)
    allocs: List[Optional[int]] = field(default_factory=list)         # alloc id per access (reads then writes)


@dataclass
class _Alloc:
    id: int
    ptr: int
    stream: Any
    site: str
    nbytes: Optional[int] = None
    record_streams: Set[Any] = field(default_factory=set)
    var: Optional[str] = None   # the name the source line assigns it to, when it shows one


class TraceBuilder:
    """Turns a stream of program events into a ``sync: manual`` spec.

    Handles are opaque hashables (CUDA stream and event pointers in a real
    recording; anything in tests). Every method takes the Python source
    location as ``site`` ("file:line"). Call ``to_yaml()`` at the end.
    """

    def __init__(self, name: str = "trace", default_stream: Any = 0):
        self.name = name
        self.default_stream = default_stream
        self.stages: List[_Stage] = []
        self._stream_names: Dict[Any, str] = {default_stream: "default"}
        self._stream_sites: Dict[Any, str] = {}
        self._stream_exprs: Dict[Any, str] = {}
        self._last: Dict[Any, int] = {}
        self._pending: Dict[Any, List[int]] = {}
        self._events: Dict[Any, List[int]] = {}
        self._allocs: Dict[int, _Alloc] = {}
        self._alloc_log: List[_Alloc] = []
        self._freed: List[Tuple[_Alloc, List[int], str]] = []   # (alloc, stages the allocator waited for, free site)
        self._frees: List[dict] = []
        self._device_since_host = True

    # -- streams ---------------------------------------------------------
    def stream_name(self, stream: Any) -> str:
        if stream == "host":
            return "host"
        if stream not in self._stream_names:
            self._stream_names[stream] = "s%d" % (len(self._stream_names))
        return self._stream_names[stream]

    def stream_created(self, stream: Any, site: str, expr: Optional[str] = None) -> None:
        """A ``torch.cuda.Stream`` was created at ``site``; ``expr`` is the
        program's expression for it where the source line shows one
        (``s_copy``, ``streams[2]``). The first creation of a handle counts
        (the pool hands handles out again)."""
        self.stream_name(stream)
        if stream not in self._stream_sites:
            self._stream_sites[stream] = site
            if expr:
                self._stream_exprs[stream] = expr

    def _covered(self, stream: Any) -> List[int]:
        """Stages whose completion the stream's current position implies."""
        out = list(self._pending.get(stream, ()))
        if stream in self._last:
            out.append(self._last[stream])
        return out

    # -- memory ----------------------------------------------------------
    def alloc(self, ptr: int, stream: Any, site: str, var: Optional[str] = None) -> None:
        """The caching allocator handed block ``ptr`` to a tensor on
        ``stream``; ``var``: the variable the source line assigns it to."""
        a = _Alloc(len(self._alloc_log), ptr, stream, site, var=var)
        self._allocs[ptr] = a
        self._alloc_log.append(a)
        self.stream_name(stream)

    def note_storage(self, ptr: int, nbytes: int) -> None:
        """The size of the storage at ``ptr`` (learned when an op touches it)."""
        a = self._allocs.get(ptr)
        if a is not None and a.nbytes is None:
            a.nbytes = nbytes

    def record_stream(self, ptr: int, nbytes: int, stream: Any, site: str) -> None:
        """``tensor.record_stream(stream)`` on the storage at ``ptr``."""
        a = self._allocs.get(ptr)
        if a is None:  # allocated before recording started: its stream is unknown
            a = _Alloc(len(self._alloc_log), ptr, None, site, nbytes)
            self._allocs[ptr] = a
            self._alloc_log.append(a)
        if a.nbytes is None:
            a.nbytes = nbytes
        a.record_streams.add(stream)
        self.stream_name(stream)

    def free(self, ptr: int, site: str) -> None:
        """The tensor's block went back to the caching allocator."""
        a = self._allocs.pop(ptr, None)
        if a is None:
            return
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
        if space != DEVICE:
            return None
        best = None
        for a in self._allocs.values():
            if a.nbytes is not None and a.ptr <= start < a.ptr + a.nbytes:
                best = a.id
        return best

    # -- work --------------------------------------------------------------
    def _add(self, st: _Stage) -> int:
        self.stages.append(st)
        return len(self.stages) - 1

    def _reuse_waits(self, accesses: Iterable[Tuple[str, int, int]], site: str) -> None:
        """A kernel touches bytes of a block freed with record_stream streams:
        the allocator handed it out only after it saw their events complete."""
        hit: List[int] = []
        keep = []
        for entry in self._freed:
            a, waited, _ = entry
            lo, hi = a.ptr, a.ptr + (a.nbytes or 0)
            if any(sp == DEVICE and s < hi and lo < e for sp, s, e in accesses):
                hit += [k for k in waited if k not in hit]
            else:
                keep.append(entry)
        self._freed = keep
        if hit:
            self._host_stage("allocator-waits", site, hit)

    def kernel(self, stream: Any, op: str, reads: Sequence[Tuple[str, int, int]],
               writes: Sequence[Tuple[str, int, int]], site: str) -> None:
        """A GPU op on ``stream`` reading and writing (space, start, end) byte ranges."""
        self._reuse_waits(list(reads) + list(writes), site)
        idx = len(self.stages)
        st = _Stage("k%d:%s:%s" % (idx, op, site), stream, op, site, list(reads), list(writes))
        st.waits = list(dict.fromkeys(self._pending.pop(stream, [])))
        st.allocs = [self._alloc_at(sp, s) for sp, s, _ in list(reads) + list(writes)]
        self._add(st)
        self._last[stream] = idx
        self.stream_name(stream)
        self._device_since_host = True

    def host_op(self, op: str, reads: Sequence[Tuple[str, int, int]], writes: Sequence[Tuple[str, int, int]], site: str) -> None:
        """A CPU op that reads or writes pinned host memory."""
        idx = len(self.stages)
        st = _Stage("h%d:%s:%s" % (idx, op, site), "host", op, site, list(reads), list(writes))
        st.allocs = [None] * (len(reads) + len(writes))
        self._add(st)
        self._device_since_host = True

    def _host_stage(self, what: str, site: str, waits: List[int]) -> None:
        waits = list(dict.fromkeys(waits))
        last = self.stages[-1] if self.stages else None
        if last is not None and last.stream == "host" and not last.reads and not last.writes and not self._device_since_host:
            for w in waits:
                if w not in last.waits:
                    last.waits.append(w)
            return
        idx = len(self.stages)
        self._add(_Stage("h%d:%s:%s" % (idx, what, site), "host", what, site, waits=waits))
        self._device_since_host = False

    def event_record(self, event: Any, stream: Any) -> None:
        self._events[event] = self._covered(stream)
        self.stream_name(stream)

    def event_wait(self, event: Any, stream: Any) -> None:
        """A wait on an event never recorded waits for nothing (as in CUDA)."""
        got = self._events.get(event)
        self.stream_name(stream)
        if got:
            p = self._pending.setdefault(stream, [])
            p += [k for k in got if k not in p]

    def event_created(self, event: Any) -> None:
        self._events.pop(event, None)

    def stream_sync(self, stream: Any, site: str, what: str = "stream-synchronize") -> None:
        self._host_stage(what, site, self._covered(stream))

    def event_sync(self, event: Any, site: str) -> None:
        self._host_stage("event-synchronize", site, list(self._events.get(event, [])))

    def device_sync(self, site: str) -> None:
        waits: List[int] = []
        for s in list(self._last) + list(self._pending):
            waits += self._covered(s)
        self._host_stage("synchronize", site, waits)

    # -- output ------------------------------------------------------------
    def _regions(self):
        spans: Dict[str, List[Tuple[int, int]]] = {DEVICE: [], PINNED: []}
        for st in self.stages:
            for sp, s, e in st.reads + st.writes:
                spans[sp].append((s // 4 * 4, (e + 3) // 4 * 4))
        regions: Dict[str, List[List[int]]] = {}
        for sp, lst in spans.items():
            lst.sort()
            merged: List[List[int]] = []
            for s, e in lst:
                if merged and s < merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], e)
                else:
                    merged.append([s, e])
            regions[sp] = merged
        return regions

    def to_yaml(self) -> str:
        """The spec text. Raises RecordError if nothing ran on the GPU."""
        if not any(st.stream != "host" for st in self.stages):
            raise RecordError("nothing recorded: no CUDA op ran inside record()")
        regions = self._regions()
        names: Dict[Tuple[str, int], str] = {}
        buffers = []
        for sp, prefix in ((DEVICE, "mem"), (PINNED, "pinned")):
            for i, (s, e) in enumerate(regions[sp]):
                site = ""
                for a in self._alloc_log:
                    if sp == DEVICE and a.nbytes and a.ptr < e and s < a.ptr + a.nbytes:
                        site = a.site
                        break
                nm = _clean("%s%d:%s" % (prefix, i, site) if site else "%s%d" % (prefix, i))
                names[(sp, s)] = nm
                buffers.append((nm, e - s, sp, s))

        def region_of(sp: str, s: int, e: int) -> Tuple[str, int, int]:
            s4, e4 = s // 4 * 4, (e + 3) // 4 * 4
            for lo, hi in regions[sp]:
                if lo <= s4 and e4 <= hi:
                    return names[(sp, lo)], s4 - lo, e4 - lo
            raise AssertionError("access outside every region")

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

        stage_names = [_clean(st.name) for st in self.stages]
        lines = ["# Recorded by dagrun_torch.record: one stage per GPU op (kNNN:OP:FILE:LINE) on the",
                 "# stream it ran on, host stages (hNNN) for host synchronizations and pinned-memory CPU ops.",
                 "# Check it with: dagrun check THIS_FILE", "version: 1", "name: %s" % _clean(self.name),
                 "sync: manual", "options: {arena: off}", "buffers:"]
        for nm, nb, sp, _ in buffers:
            where = "" if sp == DEVICE else ", where: host_pinned"
            lines.append('  - {name: "%s", bytes: %d%s}' % (nm, nb, where))
        lines.append("stages:")
        for i, st in enumerate(self.stages):
            parts = ['name: "%s"' % stage_names[i], "kernel: spin", "stream: %s" % self.stream_name(st.stream)]
            r, w = merge(st.reads), merge(st.writes)
            if r:
                parts.append("reads: [%s]" % ", ".join(r))
            if w:
                parts.append("writes: [%s]" % ", ".join(w))
            if st.waits:
                parts.append("waits: [%s]" % ", ".join('"%s"' % stage_names[k] for k in st.waits))
            lines.append("  - {%s}" % ", ".join(parts))
        meta = {
            "streams": {self.stream_name(s): self._stream_sites.get(s, "") for s in self._stream_names},
            "stream_exprs": {self.stream_name(s): e for s, e in self._stream_exprs.items()},
            "allocs": [dict({"id": a.id, "site": a.site, "stream": self.stream_name(a.stream) if a.stream is not None else None,
                             "bytes": a.nbytes}, **({"var": a.var} if a.var else {})) for a in self._alloc_log],
            "frees": self._frees,
            "stages": [{"op": st.op, "site": st.site, "allocs": st.allocs,
                        "accesses": [[region_of(sp, s, e)[0], region_of(sp, s, e)[1], region_of(sp, s, e)[2]]
                                     for sp, s, e in st.reads + st.writes],
                        "nreads": len(st.reads)} for st in self.stages],
        }
        lines.append("# dagrun_torch-meta: " + json.dumps(meta, separators=(",", ":")))
        return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------
# The torch side: a TorchDispatchMode for ops, the GPU trace callbacks for
# streams, events, synchronizations and the allocator.

_SKIP_OPS = {"aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty", "aten::new_empty_strided",
             "aten::empty_permuted", "aten::resize_", "aten::set_", "aten::record_stream", "aten::is_pinned",
             "aten::lift_fresh", "aten::detach", "aten::alias", "aten::_has_compatible_shallow_copy_type",
             "aten::is_same_size", "aten::size", "aten::stride", "aten::sym_size", "aten::sym_stride",
             "aten::sym_numel", "aten::sym_storage_offset"}
# Ops that leave the host waiting for the current stream (a copy to pageable
# memory, or a size only the device knows).
_SYNC_OPS = {"aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::unique_consecutive",
             "aten::_unique2", "aten::unique_dim", "aten::is_nonzero", "aten::equal", "aten::allclose"}
_COPY_OPS = {"aten::copy_", "aten::_to_copy", "aten::_copy_from", "aten::to", "aten::_copy_from_and_resize"}


def frame_of_caller(skip_dirs: Sequence[str], allow_dirs: Sequence[str] = ()) -> Any:
    """The innermost Python frame outside ``skip_dirs`` (frames under
    ``allow_dirs`` count even inside a skipped folder), or None."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        skipped = any(fn.startswith(d) for d in skip_dirs) and not any(fn.startswith(d) for d in allow_dirs)
        if not fn.startswith("<") and not skipped and "contextlib" not in fn:
            return f
        f = f.f_back
    return None


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
_APPEND = re.compile(r"^\s*([A-Za-z_]\w*)\.append\(")
_COMP_VAR = re.compile(r"\bfor\s+([A-Za-z_]\w*)\b")


def assigned_name(f: Any) -> Optional[str]:
    """The program's name for what frame ``f``'s line creates, read from the
    source line: ``s_copy`` for ``s_copy = torch.cuda.Stream()``,
    ``streams[2]`` for the third stream of ``streams = [torch.cuda.Stream()
    for _ in range(3)]`` (the comprehension's variable, read from the
    frame) or of ``streams.append(torch.cuda.Stream())`` (the list's length);
    None when the line shows no name or the source is not readable."""
    import linecache
    if f is None:
        return None
    line = linecache.getline(f.f_code.co_filename, f.f_lineno)
    m = _ASSIGN.match(line)
    if m:
        target, rhs = m.groups()
        c = _COMP_VAR.search(rhs)
        if rhs.startswith("[") and c:
            v = f.f_locals.get(c.group(1))
            return "%s[%d]" % (target, v) if isinstance(v, int) and not isinstance(v, bool) else None
        return target
    m = _APPEND.match(line)
    if m:
        v = f.f_locals.get(m.group(1))
        return "%s[%d]" % (m.group(1), len(v)) if isinstance(v, list) else None
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


class _Classifier:
    """Reads and writes of one ATen op from its schema (the sanitizer's rule):
    arguments the schema marks as written (``Tensor(a!)``) are writes, other
    tensor arguments reads, returned tensors that alias nothing are writes.
    Views, factory functions that only allocate, and metadata ops launch
    nothing and are skipped."""

    def __init__(self, is_device: Callable[[Any], bool], is_pinned: Callable[[Any], bool]):
        self.is_device = is_device
        self.is_pinned = is_pinned

    def classify(self, func: Any, args: tuple, kwargs: dict, out: Any):
        """Returns None (no GPU or pinned-memory work) or (where, reads,
        writes, tensors) with where "device" or "host"."""
        schema = func._schema
        name = schema.name
        if name in _SKIP_OPS:
            return None
        written_args = []
        read_args = []
        pos = list(zip(schema.arguments, args))
        named = {a.name: a for a in schema.arguments[len(args):]}
        pos += [(named[k], v) for k, v in kwargs.items() if k in named]
        for a, v in pos:
            ts = _tensors_in(v)
            if not ts:
                continue
            if a.alias_info is not None and a.alias_info.is_write:
                written_args += ts
            else:
                read_args += ts
        outs = []
        for r, v in zip(schema.returns, out if isinstance(out, tuple) and len(schema.returns) > 1 else (out,)):
            if r.alias_info is None:
                outs += _tensors_in(v)
        if not written_args and not outs:
            returns_tensor = any("Tensor" in str(r.type) for r in schema.returns)
            if returns_tensor or not schema.returns:
                return None  # a view, or a metadata op
            # else it reads tensors into a Python value (.item(), equal): a read
        tensors = written_args + read_args + outs
        dev = any(self.is_device(t) for t in tensors)
        pinned = [t for t in tensors if not self.is_device(t) and self.is_pinned(t)]
        if not dev and not pinned:
            return None
        where = "device" if dev else "host"

        def acc(ts):
            res = []
            for t in ts:
                if self.is_device(t):
                    sp = DEVICE
                elif self.is_pinned(t):
                    sp = PINNED
                else:
                    continue
                r = _range(t)
                if r is not None:
                    res.append((sp, r[0], r[1]))
            return res
        return where, acc(read_args), acc(written_args + outs), tensors


def _make_mode(builder: TraceBuilder, classifier: _Classifier, current_stream: Callable[[], Any],
               site: Callable[[], str], stream_handle: Callable[[Any], Any]):
    from torch.utils._python_dispatch import TorchDispatchMode

    class _RecordMode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = func._schema.name
            if name == "aten::record_stream":
                t, s = args[0], args[1]
                ptr, nb = _storage(t)
                builder.record_stream(ptr, nb, stream_handle(s), site())
                return func(*args, **kwargs)
            out = func(*args, **kwargs)
            c = classifier.classify(func, args, kwargs, out)
            if c is None:
                return out
            where, reads, writes, tensors = c
            here = site()
            for t in tensors:
                if classifier.is_device(t):
                    ptr, nb = _storage(t)
                    builder.note_storage(ptr, nb)
            op = "%s.%s" % (name.split("::")[-1], func._overloadname)
            if where == "host":
                builder.host_op(op, reads, writes, here)
                return out
            stream = current_stream()
            builder.kernel(stream, op, reads, writes, here)
            sync = name in _SYNC_OPS
            if name in _COPY_OPS:
                nb = kwargs.get("non_blocking", args[2] if name == "aten::copy_" and len(args) > 2 else False)
                cpu_side = [t for t in tensors if not classifier.is_device(t)]
                if cpu_side and (not nb or not all(classifier.is_pinned(t) for t in cpu_side)):
                    sync = True
            if sync:
                builder.stream_sync(stream, here, "host-reads-" + op.split(".")[0].strip("_"))
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


class record:
    """Context manager: record the GPU work of the code inside as a dagrun spec.

    ``path``: the YAML file to write on exit (also when the code raises);
    ``name``: the spec's name (default: the file's base name);
    ``synchronize``: call torch.cuda.synchronize() on entry, so that work
    issued before cannot be in flight (default True).

    After the block, ``.builder`` holds the TraceBuilder and ``.path`` the
    file. Raises RecordError on exit if no CUDA op ran inside, and on entry
    when CUDA is not available.
    """

    def __init__(self, path: str, name: Optional[str] = None, synchronize: bool = True):
        self.path = path
        self.name = name or os.path.splitext(os.path.basename(path))[0]
        self.synchronize = synchronize
        self.builder: Optional[TraceBuilder] = None
        self._cbs: List[Tuple[Any, Any]] = []
        self._mode = None

    def __enter__(self) -> "record":
        import torch
        if not torch.cuda.is_available():
            raise RecordError("dagrun_torch.record needs CUDA")
        if self.synchronize:
            torch.cuda.synchronize()
        import torch as _t
        here = os.path.dirname(os.path.abspath(__file__))
        skip = [os.path.dirname(_t.__file__) + os.sep, here + os.sep]
        allow = [os.path.join(here, "patterns") + os.sep]
        site = _site_function(torch, skip, allow)
        b = TraceBuilder(self.name, default_stream=torch.cuda.default_stream().cuda_stream)
        self.builder = b
        gt, names, activate = _trace_module()
        activate()
        cbs = {
            "event_creation": lambda e: b.event_created(e),
            "event_record": lambda e, s: b.event_record(e, s),
            "event_wait": lambda e, s: b.event_wait(e, s),
            "memory_allocation": lambda p: b.alloc(p, torch.cuda.current_stream().cuda_stream, site(),
                                                   assigned_name(frame_of_caller(skip, allow))),
            "memory_deallocation": lambda p: b.free(p, site()),
            "stream_creation": lambda s: b.stream_created(s, site(), assigned_name(frame_of_caller(skip, allow))),
            "device_synchronization": lambda: b.device_sync(site()),
            "stream_synchronization": lambda s: b.stream_sync(s, site()),
            "event_synchronization": lambda e: b.event_sync(e, site()),
        }
        self._errors: List[str] = []

        def guarded(key, cb):
            def call(*a):
                try:
                    cb(*a)
                except Exception as e:  # the registry would only log it
                    self._errors.append("%s callback: %s: %s" % (key, type(e).__name__, e))
            return call
        for key, cb in cbs.items():
            reg = getattr(gt, names[key])
            g = guarded(key, cb)
            reg.callback_list.append(g)
            self._cbs.append((reg, g))

        def stream_handle(s):
            if hasattr(s, "cuda_stream"):
                return s.cuda_stream
            return torch.cuda.Stream(stream_id=s.stream_id, device_index=s.device_index,
                                     device_type=s.device_type).cuda_stream
        classifier = _Classifier(is_device=lambda t: t.is_cuda,
                                 is_pinned=lambda t: (not t.is_cuda) and t.device.type == "cpu" and t.is_pinned())
        self._mode = _make_mode(b, classifier, lambda: torch.cuda.current_stream().cuda_stream, site, stream_handle)
        self._mode.__enter__()
        return self

    def __exit__(self, et, ev, tb) -> bool:
        self._mode.__exit__(et, ev, tb)
        for reg, cb in self._cbs:
            try:
                reg.callback_list.remove(cb)
            except ValueError:
                pass
        self._cbs = []
        if self._errors and et is None:
            raise RecordError("recording failed: " + "; ".join(self._errors[:3]))
        text = self.builder.to_yaml() if (et is None or any(s.stream != "host" for s in self.builder.stages)) else None
        if text is not None:
            with open(self.path, "w") as f:
                f.write(text)
        return False
