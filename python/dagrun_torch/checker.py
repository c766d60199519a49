"""Check a recorded trace with ``dagrun check`` and say what to change.

    result = dagrun_torch.check("trace.yaml")
    print(result.report())      # races by source line, and the fixes as code
    python3 -m dagrun_torch check trace.yaml    # the same; exit 1 on a race

The verdict is the dagrun binary's (``dagrun check``: happens-before from
stream order and the recorded waits, every conflicting pair of accesses
ordered as the program issued them). The report is by source, not by op:
a race's identity is its site (dagrun's ``sites``: the hazard, the two
lines and their streams, the tensor's allocation line), so that the
iterations of a loop and repeated calls are one entry with a count and an
example. Each of dagrun's fixes is one wait in the program's source, made
at every run of its line, and dagrun verified it on the trace (the trace
with the fixes applied has none of the races they list): it becomes code,
a ``wait_stream`` (or, where a later record would order more than the
races need, an event recorded after the producer and ``wait_event``)
before the consumer's line, an ``Event.synchronize()`` before a host
access to pinned memory, or ``record_stream`` when the bytes belong to a
tensor that was freed while another stream than the one that allocated it
still used it. Streams are named as the program names them (``s_copy``,
``streams[2]``) with the line that created them, tensors by their variable
and allocation line, from the trace's ``dagrun_torch-meta`` line. No
torch needed.
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ._binary import run_dagrun, run_dagrun_json

__all__ = ["check", "CheckResult", "Race", "Site", "TraceError", "read_trace", "parse_races", "auto_spec", "propose"]

# Sites listed in full by report(); the rest are counted.
_MAX_SITES = 10


@dataclass
class Race:
    """One race: ``first`` and ``second`` are stage names in issue order;
    ``site`` indexes CheckResult.sites."""
    kind: str
    buffer: str
    lo: int
    hi: int
    first: str
    first_stream: str
    second: str
    second_stream: str
    why: str = ""
    site: int = 0

    @property
    def first_index(self) -> int:
        return _index(self.first)

    @property
    def second_index(self) -> int:
        return _index(self.second)


@dataclass
class Site:
    """The races of one source site: ``kind`` (RAW, WAR, WAW), the lines of
    the first and second op (``first``, ``second``: FILE:LINE), their
    streams (the trace's names), the tensor (the program's words), the
    number of races and an example race. ``why``: how it happened, when
    the allocator handed a freed block on; ``across_runs``: a hazard of a
    line's later run on bytes an earlier run of the other line still uses
    (no edit other than the fixes' waits is offered for it: dagrun checks
    those on the trace, and a second buffer would need the program's own
    ordering between runs, which a trace does not prove)."""
    kind: str
    first: str
    second: str
    first_stream: str
    second_stream: str
    tensor: str
    count: int
    example: Race
    first_op: str = ""
    second_op: str = ""
    why: str = ""
    across_runs: bool = False


def _index(stage: str) -> int:
    m = re.match(r"[kh](\d+):", stage)
    return int(m.group(1)) if m else -1


def _site(stage: str) -> str:
    parts = stage.split(":")
    return ":".join(parts[-2:]) if len(parts) >= 4 else stage


def _op(stage: str) -> str:
    parts = stage.split(":")
    return parts[1].split(".")[0] if len(parts) >= 4 else stage


def parse_races(report: dict) -> List[Race]:
    """The races of a ``dagrun check --json`` report (its "report" object),
    in dagrun's order (first/second in issue order)."""
    out = []
    for r in (report or {}).get("races") or []:
        out.append(Race(r["kind"], r["buffer"], int(r["offset"]), int(r["offset"]) + int(r["bytes"]),
                        r["first_name"], r["first_stream_name"], r["second_name"], r["second_stream_name"],
                        site=int(r.get("site", 0))))
    return out


class TraceError(ValueError):
    """A file ``check`` cannot read as a trace: not a regular file, larger
    than MAX_TRACE_BYTES, not UTF-8 text, or with a malformed
    ``dagrun_torch-meta`` line. Its text is one line, starting with the
    path (and the line number where there is one)."""


MAX_TRACE_BYTES = 1 << 30  # the largest spec dagrun reads (dag.MaxSpecBytes), in bytes


def read_trace(path: str) -> str:
    """The text of the trace at ``path``. Raises TraceError, before reading
    anything, for a file that is not a regular file (a fifo would block the
    read for ever, /dev/zero would fill the memory) or is larger than
    MAX_TRACE_BYTES, and for bytes that are not UTF-8; OSError when the file
    cannot be opened. An empty file, or one of white space only, is no
    trace (TraceError); a gzip-compressed one gets a TraceError that says
    to decompress it."""
    import os
    import stat
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a fifo must not block the open
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TraceError("%s: not a regular file: a trace is a file written by dagrun_torch.record" % quote_path(path))
        if st.st_size > MAX_TRACE_BYTES:
            raise TraceError("%s: %d bytes, more than a trace may have (%d bytes)" % (quote_path(path), st.st_size, MAX_TRACE_BYTES))
        chunks, n = [], 0
        while n <= MAX_TRACE_BYTES:
            b = os.read(fd, min(1 << 20, MAX_TRACE_BYTES + 1 - n))
            if not b:
                break
            chunks.append(b)
            n += len(b)
    finally:
        os.close(fd)
    if n > MAX_TRACE_BYTES:
        raise TraceError("%s: more than %d bytes, more than a trace may have" % (quote_path(path), MAX_TRACE_BYTES))
    data = b"".join(chunks)
    if data.startswith(b"\x1f\x8b"):  # gzip's magic bytes (RFC 1952 section 2.3.1)
        raise TraceError("%s: the file is gzip-compressed, not a trace's text: decompress it first "
                         "(gunzip -k FILE writes FILE without its .gz) and check the decompressed file"
                         % quote_path(path))
    if not data or data.isspace():  # no copy of a large file
        raise TraceError("%s: the file is empty: a trace is a file written by dagrun_torch.record "
                         "(or python3 -m dagrun_torch run --trace FILE)" % quote_path(path))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise TraceError("%s:%d: byte 0x%02x is not UTF-8: a trace is UTF-8 text, as dagrun_torch.record writes it"
                         % (quote_path(path), line, data[e.start])) from None


def quote_path(path: str) -> str:
    """path as the checker's messages print it, as dagrun prints paths: as
    it is when every character is printable and none is a space, quote or
    backslash, else in double quotes with Go's escapes (\\x1b, \\a,
    \\u202e), so that control characters never reach a terminal."""
    if path and all(c.isprintable() and c not in ' "\\' for c in path):
        return path
    named = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
    out = []
    for c in path:
        o = ord(c)
        if c in '"\\':
            out.append("\\" + c)
        elif c.isprintable():
            out.append(c)
        elif c in named:
            out.append(named[c])
        elif o < 0x80:
            out.append("\\x%02x" % o)
        elif o < 0x10000:
            out.append("\\u%04x" % o)
        else:
            out.append("\\U%08x" % o)
    return '"' + "".join(out) + '"'


_META = "# dagrun_torch-meta: "


def _meta(text: str, path: str = "trace") -> Optional[dict]:
    """The trace's meta line (the last one), checked for the shape
    dagrun_torch.record writes; None without one. Raises TraceError naming
    path:line for a malformed one."""
    lines = text.splitlines()
    for k in range(len(lines) - 1, -1, -1):
        if lines[k].startswith(_META):
            try:
                raw = lines[k][len(_META):]
                m = json.loads(raw)
                why = _meta_problem(m, raw)
            except ValueError as e:
                why = "not JSON (%s)" % e
            except RecursionError:
                why = "nested deeper than Python's recursion limit (%d)" % sys.getrecursionlimit()
            if why:
                raise TraceError("%s:%d: malformed dagrun_torch-meta line: %s; record the trace again, or delete the line "
                                 "(the report then names stages instead of Python lines)" % (quote_path(path), k + 1, why))
            return m
    return None


def _hidden_string(m) -> str:
    """Where parsed meta line m holds a string (key or value) with a
    character a terminal acts on or shows wrongly (str.isprintable: C0 and
    C1 controls, format characters such as bidi overrides, spaces other
    than ' '), which the report would print; "" when none. Walks m
    without recursion."""
    todo = [("", m)]
    while todo:
        at, v = todo.pop()
        if isinstance(v, dict):
            for key, x in v.items():
                where = "%s.%s" % (at, key) if at else key
                if not key.isprintable():
                    return "key %s holds %s" % (json.dumps(key), _first_hidden(key))
                todo.append((where, x))
        elif isinstance(v, list):
            todo.extend(("%s[%d]" % (at, i), x) for i, x in enumerate(v))
        elif isinstance(v, str) and not v.isprintable():
            return "%s holds %s" % (at, _first_hidden(v))
    return ""


def _first_hidden(s: str) -> str:
    c = next(c for c in s if not c.isprintable())
    return "U+%04X, a control, format or space character that a terminal shows wrongly or not at all" % ord(c)


def _meta_problem(m, raw: Optional[str] = None) -> str:
    """What is wrong with a parsed meta line, "" when nothing. ``raw``, the
    line's JSON text: when it is printable and has no backslash, every
    string in it is a piece of it, so none holds a hidden character and
    the walk over them is skipped."""
    def is_int(v):
        return isinstance(v, int) and not isinstance(v, bool)

    if not isinstance(m, dict):
        return "not a JSON object"
    hidden = "" if raw is not None and "\\" not in raw and raw.isprintable() else _hidden_string(m)
    if hidden:
        return hidden
    for key in ("streams", "stream_exprs"):
        v = m.get(key, {})
        if not isinstance(v, dict) or not all(isinstance(x, str) for x in v) or \
                not all(isinstance(x, (str, type(None))) for x in v.values()):
            return "%s is not an object of strings" % key
    for key, need in (("allocs", "id"), ("frees", "alloc")):
        v = m.get(key, [])
        if not isinstance(v, list):
            return "%s is not a list" % key
        for i, a in enumerate(v):
            if not isinstance(a, dict) or not is_int(a.get(need)):
                return "%s[%d] is not an object with an integer %s" % (key, i, need)
            if not isinstance(a.get("site", ""), str) or not isinstance(a.get("stream") or "", str):
                return "%s[%d]: site and stream are strings" % (key, i)
    stages = m.get("stages", [])
    if not isinstance(stages, list):
        return "stages is not a list"
    for i, st in enumerate(stages):
        if not isinstance(st, dict):
            return "stages[%d] is not an object" % i
        acc, al = st.get("accesses", []), st.get("allocs", [])
        if not isinstance(acc, list) or not all(
                isinstance(a, list) and len(a) == 3 and isinstance(a[0], str) and is_int(a[1]) and is_int(a[2]) for a in acc):
            return "stages[%d].accesses is not a list of [buffer, lo, hi]" % i
        if not isinstance(al, list) or not all(a is None or is_int(a) for a in al):
            return "stages[%d].allocs is not a list of integers" % i
    return ""


class _Names:
    """The program's names for the trace's streams and tensors."""

    def __init__(self, meta: Optional[dict]):
        meta = meta or {}
        self.sites: Dict[str, str] = {k: v for k, v in (meta.get("streams") or {}).items() if v}
        self.exprs: Dict[str, str] = dict(meta.get("stream_exprs") or {})
        self.allocs = {a["id"]: a for a in meta.get("allocs") or []}
        self.frees = {f["alloc"]: f for f in meta.get("frees") or []}
        self.stages = meta.get("stages") or []

    def stream(self, name: str) -> str:
        """How the report names a stream: the program's expression, else
        where it was created, else the trace's name."""
        if name == "default":
            return "the default stream"
        if name == "host":
            return "the host"
        if name in self.exprs:
            return self.exprs[name]
        if name in self.sites:
            return "the stream created at %s" % self.sites[name]
        return "stream %s" % name

    def code(self, name: str) -> str:
        """The stream as code (a placeholder when the program's
        expression is not known)."""
        if name == "default":
            return "torch.cuda.default_stream()"
        return self.exprs.get(name) or ("<the stream created at %s>" % self.sites[name] if name in self.sites else "<stream %s>" % name)

    def created(self, names) -> str:
        out = []
        for n in names:
            if n in self.sites and ("%s created at %s" % (self.stream(n), self.sites[n])) not in out:
                out.append("%s created at %s" % (self.stream(n), self.sites[n]))
        return ", ".join(out)

    def alloc_ids(self, idx: int, r: Race) -> set:
        if not 0 <= idx < len(self.stages):
            return set()
        st = self.stages[idx]
        out = set()
        for (buf, lo, hi), a in zip(st.get("accesses", []), st.get("allocs", [])):
            if buf == r.buffer and lo < r.hi and r.lo < hi and a is not None:
                out.add(a)
        return out

    def tensor(self, r: Race) -> str:
        """The race's tensor: its variable (for pinned memory, else the
        buffer's ``pinnedN``) and allocation line, else the buffer's name
        (``memN:FILE:LINE``, ``pinnedN:FILE:LINE``: after the first
        allocation seen in it, unique in the trace)."""
        ids = self.alloc_ids(r.first_index, r) or self.alloc_ids(r.second_index, r)
        pinned = r.buffer.startswith("pinned")
        a = self.allocs.get(min(ids), {}) if ids else {}
        var = a.get("var")
        if pinned:  # its variable, else the buffer's pinnedN, with the line that allocated it
            return "pinned memory %s" % r.buffer if not ids else \
                "pinned memory %s (allocated at %s)" % (var or r.buffer.split(":")[0], a.get("site", "?"))
        if not ids:
            return r.buffer
        return "%s (allocated at %s)" % (var, a.get("site", "?")) if var else "the tensor allocated at %s" % a.get("site", "?")


@dataclass
class CheckResult:
    """``ok``: no race. ``races``: the races (first/second in issue order).
    ``sites``: the races grouped by source site (Site), in dagrun's order.
    ``fixes``: the changes to make, each a line of text (one per line of
    the program, with the sites it removes). ``output``: the raw ``dagrun
    check`` output. ``warnings``: dagrun check's warnings (waits that wait
    for nothing or are redundant, outputs no stage writes). ``streams``:
    each stream's creation line; ``stream_names``: the program's names."""
    ok: bool
    races: List[Race] = field(default_factory=list)
    fixes: List[str] = field(default_factory=list)
    output: str = ""
    streams: Dict[str, str] = field(default_factory=dict)
    warnings: List[str] = field(default_factory=list)
    sites: List[Site] = field(default_factory=list)
    stream_names: Dict[str, str] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)

    def report(self) -> str:
        """Readable report: the race sites, then the fixes."""
        if self.ok:
            return "\n".join(["ok: no race"] + ["warning: " + w for w in self.warnings])
        lines = []
        if self.sites:
            n = len(self.races)
            if n == len(self.sites):
                lines.append("%d race%s:" % (n, "" if n == 1 else "s"))
            else:
                lines.append("%d races at %d site%s (a site: one hazard, tensor, pair of lines and streams):" % (
                    n, len(self.sites), "" if len(self.sites) == 1 else "s"))
            for i, st in enumerate(self.sites[:_MAX_SITES], 1):
                lines.append("  %d. %s" % (i, _site_line(st, self.stream_names)))
                if st.why:
                    lines.append("     " + st.why)
            if len(self.sites) > _MAX_SITES:
                rest = self.sites[_MAX_SITES:]
                lines.append("  … and %d more sites (%d races)" % (len(rest), sum(x.count for x in rest)))
        if self.fixes:
            lines.append("fix (%d change%s; dagrun checked each on the trace: with it, the races it lists are gone):" % (
                len(self.fixes), "" if len(self.fixes) == 1 else "s"))
            for f in self.fixes:
                first, *more = f.split("\n")
                lines.append("  - " + first)
                lines += ["    " + m for m in more]
        lines += self.notes
        # The streams the report names by expression, with their lines.
        named = [n for n in sorted(self.stream_names) if self.streams.get(n) and not self.stream_names[n].startswith(("the ", "stream "))]
        if named:
            lines.append("streams: " + ", ".join("%s created at %s" % (self.stream_names[n], self.streams[n]) for n in named))
        if not self.races:
            lines.append(self.output.strip())
        return "\n".join(lines)


def _site_line(st: Site, names: Dict[str, str]) -> str:
    def on(stream):
        return names.get(stream, stream)
    r = st.example
    s = "%s on %s: %s (%s on %s) → %s (%s on %s)" % (
        st.kind, st.tensor, st.first, st.first_op, on(st.first_stream), st.second, st.second_op, on(st.second_stream))
    if st.count > 1:
        s += ", %d races, e.g. ops %s → %s" % (st.count, r.first.split(":")[0], r.second.split(":")[0])
    if st.across_runs:
        s += "; it is a later run of %s on bytes an earlier run of %s still uses" % (
            st.second, st.first)
    return s


class _Trace:
    """The trace's stage lines, for the streams and recorded waits of the
    stages a fix names (one line per stage, after ``stages:``)."""
    _STAGE = re.compile(r'^  - \{name: "([^"]*)", kernel: [^,]*, stream: ([^,}]*)(?:.*, waits: \[([^\]]*)\])?')

    def __init__(self, lines: List[str]):
        self.lines = lines
        try:
            self.start = lines.index("stages:") + 1
        except ValueError:
            self.start = -1

    def stage(self, i: int) -> Tuple[str, str, List[str]]:
        """(name, stream, waited stage names) of stage i, or ("", "", [])."""
        if self.start < 0 or not 0 <= self.start + i < len(self.lines):
            return "", "", []
        m = self._STAGE.match(self.lines[self.start + i])
        if not m or _index(m.group(1)) != i:
            return "", "", []
        waits = re.findall(r'"([^"]*)"', m.group(3) or "")
        return m.group(1), m.group(2), waits


def _explain(races: List[Race], report: dict, names: _Names, trace: _Trace) -> Tuple[List[Site], List[str], Dict[str, str]]:
    """The sites of dagrun's report in the program's terms, and each of its
    fixes as code."""
    label = {}
    for r in races:
        for s in (r.first_stream, r.second_stream):
            label.setdefault(s, names.stream(s))
    sites: List[Site] = []
    reused: Dict[int, int] = {}   # site → the freed tensor's alloc id, when the allocator handed its block on
    stage_sites = [st.get("site", "") for st in names.stages]
    for i, g in enumerate((report or {}).get("sites") or []):
        r = races[g["example"]]
        st = Site(g["kind"], _site(r.first), _site(r.second), r.first_stream, r.second_stream, names.tensor(r),
                  int(g["count"]), r, _op(r.first), _op(r.second))
        fa, sa = names.alloc_ids(r.first_index, r), names.alloc_ids(r.second_index, r)
        if r.second_stream == "host":
            st.why = "the host touches pinned memory that %s may still be using" % label[r.first_stream]
        elif fa and sa and not (fa & sa) and r.first_stream != "host" and not r.buffer.startswith("pinned"):
            # (the caching allocator's reuse: the pinned allocator orders its own)
            old = min(fa)
            a, f, new = names.allocs.get(old, {}), names.frees.get(old), names.allocs.get(min(sa), {})
            st.why = ("the tensor allocated at %s was freed%s while %s still used it; the caching allocator "
                      "gave its block to the tensor allocated at %s (on %s)") % (
                a.get("site", "?"), " at %s" % f["site"] if f else "", label[r.first_stream], new.get("site", "?"),
                names.stream(new.get("stream") or r.second_stream))
            reused[i] = old
        if st.kind in ("WAR", "WAW") and 0 <= r.first_index <= len(stage_sites) and st.second in stage_sites[:r.first_index]:
            st.across_runs = True
        sites.append(st)

    fixes: List[str] = []
    for fx in (report or {}).get("fixes") or []:
        a, b = fx["after_name"], fx["before_name"]
        sf, sg = fx["record_stream"], fx["wait_stream"]
        if sf == sg:
            continue  # never a self-wait (dagrun proposes none)
        ks = fx.get("races") or []
        ids = sorted({races[k].site for k in ks})
        places = int(fx.get("places") or 1)
        runs = ", at each of its %d runs" % places if places > 1 else ""
        removes = "removes site%s %s (%d race%s)" % ("" if len(ids) == 1 else "s", ", ".join(str(i + 1) for i in ids),
                                                   len(ks), "" if len(ks) == 1 else "s")
        olds = sorted({reused[i] for i in ids if i in reused})
        al = names.allocs.get(olds[0], {}) if olds else {}
        if sg == "host":
            fixes.append("after %s (%s on %s), `event = torch.cuda.Event(); event.record(%s)`, and before %s (%s on the host), "
                         "`event.synchronize()`%s; %s" % (_site(a), _op(a), label.get(sf, names.stream(sf)), names.code(sf),
                                                         _site(b), _op(b), runs, removes))
        elif olds and len(olds) == len(ids) and al.get("stream") not in (None, sf):
            # The freed tensor was used on sf, which did not allocate it:
            # record_stream(sf) keeps its block from the allocator until
            # sf's work is done.
            f = names.frees.get(olds[0])
            t = al.get("var") or "t"
            fixes.append("`%s.record_stream(%s)` for the tensor %sallocated at %s, after its use at %s on %s "
                         "(or, before it is freed%s, `%s.wait_stream(%s)`: its allocating stream waits)%s; %s" % (
                             t, names.code(sf), "" if al.get("var") else "t ", al.get("site", "?"), _site(a), label.get(sf, sf),
                             " at %s" % f["site"] if f else "", names.code(al.get("stream") or "default"), names.code(sf), runs, removes))
        else:
            head, *more = _wait_fix(fx, names, trace, label).split("\n")
            fixes.append("\n".join([head + runs + "; " + removes] + more))
    handed = set()
    for h in (report or {}).get("handoffs") or []:
        ks = h.get("races") or []
        handed.update(ks)
        ids = sorted({races[k].site for k in ks})
        after = [a.split(" (")[0] for a in h.get("after") or []]
        firsts = {races[k].first: races[k].first_stream for k in ks}
        streams = {n: firsts.get(n) for n in after}
        before = h.get("before", "").split(" (")[0]
        rec = "; ".join("after %s (%s on %s), `ev = torch.cuda.Event(); ev.record(%s)`" % (
            _site(a), _op(a), label.get(streams[a], names.stream(streams[a] or "?")), names.code(streams[a] or "?")) for a in after)
        fixes.append("hand over once between the threads: in thread %s, %s, and pass the event%s to thread %s (a queue.Queue); "
                     "in thread %s, before %s (%s), take %s and `torch.cuda.current_stream().wait_event(ev)`; removes site%s %s (%d races)" % (
                         h.get("from"), rec, "s" if len(after) > 1 else "", h.get("to"), h.get("to"), _site(before), _op(before),
                         "them" if len(after) > 1 else "it", "" if len(ids) == 1 else "s", ", ".join(str(i + 1) for i in ids), len(ks)))
    seen = set()
    for k in (report or {}).get("unfixed") or []:
        r = races[k]
        if r.site in seen or k in handed:
            continue
        seen.add(r.site)
        fixes.append("site %d, %s then %s: %s (dagrun's advice: no one wait orders it, so it is not checked on the trace)" % (
            r.site + 1, _site(r.first), _site(r.second), (report["races"][k].get("fix") or "")))
    return sites, fixes, label


def _wait_fix(fx: dict, names: _Names, trace: _Trace, label: Dict[str, str]) -> str:
    """A wait before the consumer's line: ``wait_stream`` when the
    producer is the latest op of its stream issued before the consumer
    (then the two are the same order), else an event recorded right after
    the producer (``wait_stream`` would also wait for the work the stream
    was given after it)."""
    a, b = fx["after_name"], fx["before_name"]
    sf, sg = fx["record_stream"], fx["wait_stream"]
    ia, ib = _index(a), _index(b)
    waiter = names.exprs.get(sg) or "torch.cuda.current_stream()"
    later = any(trace.stage(i)[1] == sf for i in range(ia + 1, ib)) if 0 <= ia < ib else False
    if later:
        text = ("after %s (%s on %s), `event = torch.cuda.Event(); event.record(%s)`, and before %s (%s on %s), "
                "`%s.wait_event(event)` (`%s.wait_stream(%s)` there would also wait for what %s runs after %s)" % (
                    _site(a), _op(a), label.get(sf, names.stream(sf)), names.code(sf), _site(b), _op(b), label.get(sg, names.stream(sg)),
                    waiter, waiter, names.code(sf), label.get(sf, sf), _site(a)))
    else:
        text = "before %s (%s on %s): `%s.wait_stream(%s)`" % (_site(b), _op(b), label.get(sg, names.stream(sg)), waiter, names.code(sf))
    # The waiting stage already waits for streams created where sf was:
    # a loop over them that leaves sf out.
    where = names.sites.get(sf)
    if where:
        _, _, waited = trace.stage(ib)
        peers = []
        for w in waited:
            st = trace.stage(_index(w))[1]
            if st and st != sf and names.sites.get(st) == where and names.stream(st) not in peers:
                peers.append(names.stream(st))
        if peers and sf in names.exprs:
            text += ("\n%s already waits there for %s, created at %s like %s: the code that makes those waits leaves %s out" % (
                label.get(sg, names.stream(sg)), ", ".join(peers), where, names.stream(sf), names.stream(sf)))
        elif peers:
            text += ("\n%s already waits there for %d other stream%s created at %s: the code that makes those waits leaves this one out" % (
                label.get(sg, names.stream(sg)), len(peers), "" if len(peers) == 1 else "s", where))
    return text


_WAITS = re.compile(r', waits: \[[^\]]*\]')


def auto_spec(text: str) -> str:
    """The trace as a ``sync: auto`` spec: the same stages, on the same streams
    (``stream:`` pins), in the same order, without the recorded waits and
    without the host stages that only waited. ``dagrun plan`` of it proposes
    the fewest waits that order every conflicting pair as the program issued
    them (the minimal-sync schedule for the program's own streams). Raises
    ValueError when the text is not a trace written by dagrun_torch.record,
    or is one of several host threads (dagrun plans from one thread)."""
    if "sync: manual" not in text or "# Recorded by dagrun_torch.record" not in text:
        raise ValueError("not a trace written by dagrun_torch.record")
    if re.search(r"^  - \{name: [^,]+, (kind: host, )?thread: ", text, re.M):
        raise ValueError("the trace has several host threads, and dagrun plans from one: no proposal")
    out = []
    for line in text.splitlines():
        if line == "sync: manual":
            out.append("sync: auto")
            continue
        if line.startswith("  - {name: \"h") and "stream: host" in line and "reads:" not in line and "writes:" not in line:
            continue
        out.append(_WAITS.sub("", line))
    return "\n".join(out) + "\n"


def propose(path: str, dagrun: Optional[str] = None) -> str:
    """``dagrun plan`` (table) of ``auto_spec`` of the trace at ``path``: the
    streams as recorded, and the waits dagrun would place. Raises ValueError
    for a file that is not a trace, DagrunError when dagrun rejects it."""
    import os
    import tempfile
    text = auto_spec(read_trace(path))
    fd, tmp = tempfile.mkstemp(suffix=".yaml", prefix="dagrun_torch-auto-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        return run_dagrun(["plan", tmp], binary=dagrun).stdout
    finally:
        os.remove(tmp)


def check(path: str, dagrun: Optional[str] = None) -> CheckResult:
    """Run ``dagrun check`` on a recorded trace (or any spec) and explain it.

    Returns a CheckResult (``ok`` false when dagrun found a race). Raises
    TraceError for a file that is no trace (read_trace; a malformed
    dagrun_torch-meta line), DagrunError when dagrun rejects the file (exit
    status 2), DagrunNotFound without a binary or with one that is not
    dagrun (``run_dagrun``), OSError when the file cannot be read.
    """
    text = read_trace(path)
    names = _Names(_meta(text, path))
    r, doc = run_dagrun_json(["check", "--json", path], ok_codes=(0, 1), binary=dagrun)
    out = r.stdout + r.stderr
    lines = text.splitlines()
    if r.returncode == 0:
        return CheckResult(ok=True, output=out, streams=names.sites, warnings=list(doc.get("warnings") or []))
    report = doc.get("report") or {}
    races = parse_races(report)
    sites, fixes, label = _explain(races, report, names, _Trace(lines))
    for r in races:
        if 0 <= r.site < len(sites):
            r.why = sites[r.site].why
    notes = []
    if report.get("fixes_partial"):
        notes.append("note: dagrun's fix search stopped at its work bound: the fixes are not the fewest")
    return CheckResult(ok=False, races=races, fixes=fixes, output=out, streams=names.sites, sites=sites,
                       stream_names=label, notes=notes)


def main(argv: Optional[List[str]] = None) -> int:
    """``python3 -m dagrun_torch check TRACE.yaml...``: exit 0 if every file
    is race-free, 1 if any has a race, 2 on bad input."""
    import sys
    from ._binary import DagrunError, DagrunNotFound
    from ._cli import check as parser
    ap = parser()
    args = ap.parse_args(argv)
    worst = 0
    for p in args.traces:
        try:
            res = check(p)
        except TraceError as e:
            print(e, file=sys.stderr)
            worst = 2
            continue
        except (DagrunError, DagrunNotFound, OSError) as e:
            why = str(e)
            if isinstance(e, OSError) and e.strerror and e.filename == p:
                why = e.strerror   # the OS's words ("No such file or directory"), not the path again
            print("%s: %s" % (quote_path(p), why), file=sys.stderr)
            worst = 2
            continue
        print("%s: %s" % (quote_path(p), "ok: no race" if res.ok else "RACE"))
        if not res.ok:
            print(res.report())
            worst = max(worst, 1)
        if args.propose:
            try:
                print(propose(p))
            except (ValueError, DagrunError) as e:
                print("%s: no proposal: %s" % (quote_path(p), e), file=sys.stderr)
                worst = 2
    return worst
