"""Check a recorded trace with ``dagrun check`` and say what to change.

    result = dagrun_torch.check("trace.yaml")
    print(result.report())      # races in the program's terms, and the fixes
    python3 -m dagrun_torch check trace.yaml    # the same; exit 1 on a race

The verdict is the dagrun binary's (``dagrun check``: happens-before from
stream order and the recorded waits, every conflicting pair of accesses
ordered as the program issued them). This module maps each race back to the
two Python lines, their streams, the tensor (by its allocation line) and the
bytes, and turns each of dagrun's fixes (``dagrun check --json``: the fewest
waits that order every race, found over the plan's happens-before) into
code: a ``wait_stream``/``wait_event`` before the second op, an
``Event.synchronize()`` before a host access to pinned memory, or a
``record_stream`` when the bytes belong to a tensor that was freed while a
stream still used it and were handed to another tensor. No torch needed.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ._binary import run_dagrun

__all__ = ["check", "CheckResult", "Race", "TraceError", "read_trace", "parse_races", "auto_spec", "propose"]

@dataclass
class Race:
    """One race: ``first`` and ``second`` are stage names in issue order."""
    kind: str
    buffer: str
    lo: int
    hi: int
    first: str
    first_stream: str
    second: str
    second_stream: str
    why: str = ""

    @property
    def first_index(self) -> int:
        return _index(self.first)

    @property
    def second_index(self) -> int:
        return _index(self.second)


def _index(stage: str) -> int:
    m = re.match(r"[kh](\d+):", stage)
    return int(m.group(1)) if m else -1


def _site(stage: str) -> str:
    parts = stage.split(":")
    return ":".join(parts[-2:]) if len(parts) >= 4 else stage


def _op(stage: str) -> str:
    parts = stage.split(":")
    return parts[1] if len(parts) >= 4 else stage


def parse_races(report: dict) -> List[Race]:
    """The races of a ``dagrun check --json`` report (its "report" object),
    in dagrun's order (first/second in issue order)."""
    out = []
    for r in (report or {}).get("races") or []:
        out.append(Race(r["kind"], r["buffer"], int(r["offset"]), int(r["offset"]) + int(r["bytes"]),
                        r["first_name"], r["first_stream_name"], r["second_name"], r["second_stream_name"]))
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
    cannot be opened."""
    import os
    import stat
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a fifo must not block the open
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TraceError("%s: not a regular file: a trace is a file written by dagrun_torch.record" % path)
        if st.st_size > MAX_TRACE_BYTES:
            raise TraceError("%s: %d bytes, more than a trace may have (%d bytes)" % (path, st.st_size, MAX_TRACE_BYTES))
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
        raise TraceError("%s: more than %d bytes, more than a trace may have" % (path, MAX_TRACE_BYTES))
    data = b"".join(chunks)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise TraceError("%s:%d: byte 0x%02x is not UTF-8: a trace is UTF-8 text, as dagrun_torch.record writes it"
                         % (path, line, data[e.start])) from None


_META = "# dagrun_torch-meta: "


def _meta(text: str, path: str = "trace") -> Optional[dict]:
    """The trace's meta line (the last one), checked for the shape
    dagrun_torch.record writes; None without one. Raises TraceError naming
    path:line for a malformed one."""
    lines = text.splitlines()
    for k in range(len(lines) - 1, -1, -1):
        if lines[k].startswith(_META):
            try:
                m = json.loads(lines[k][len(_META):])
                why = _meta_problem(m)
            except ValueError as e:
                why = "not JSON (%s)" % e
            if why:
                raise TraceError("%s:%d: malformed dagrun_torch-meta line: %s; record the trace again, or delete the line "
                                 "(the report then names stages instead of Python lines)" % (path, k + 1, why))
            return m
    return None


def _meta_problem(m) -> str:
    """What is wrong with a parsed meta line, "" when nothing."""
    def is_int(v):
        return isinstance(v, int) and not isinstance(v, bool)

    if not isinstance(m, dict):
        return "not a JSON object"
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


@dataclass
class CheckResult:
    """``ok``: no race. ``races``: the races (first/second in issue order).
    ``fixes``: suggested changes, each a line of text. ``output``: the raw
    ``dagrun check`` output. ``warnings``: dagrun check's warnings (waits
    that wait for nothing or are redundant, outputs no stage writes)."""
    ok: bool
    races: List[Race] = field(default_factory=list)
    fixes: List[str] = field(default_factory=list)
    output: str = ""
    streams: Dict[str, str] = field(default_factory=dict)
    warnings: List[str] = field(default_factory=list)

    def report(self) -> str:
        """Readable report: each race, then the fixes."""
        if self.ok:
            return "\n".join(["ok: no race"] + ["warning: " + w for w in self.warnings])
        lines = []
        for i, r in enumerate(self.races, 1):
            lines.append("race %d (%s) on %s bytes [%d, %d):" % (i, r.kind, r.buffer, r.lo, r.hi))
            lines.append("    %s %s on stream %s, then %s %s on stream %s: not ordered" % (
                _site(r.first), _op(r.first), r.first_stream, _site(r.second), _op(r.second), r.second_stream))
            if r.why:
                lines.append("    " + r.why)
        if self.fixes:
            lines.append("fix (%d change%s):" % (len(self.fixes), "" if len(self.fixes) == 1 else "s"))
            lines += ["  - " + f for f in self.fixes]
        named = {k: v for k, v in self.streams.items() if v}
        if named:
            lines.append("streams: " + ", ".join("%s created at %s" % kv for kv in sorted(named.items())))
        if not self.races:
            lines.append(self.output.strip())
        return "\n".join(lines)


def _stream_expr(name: str) -> str:
    return "torch.cuda.default_stream()" if name == "default" else name


def _suggest(races: List[Race], report: dict, meta: Optional[dict]) -> List[str]:
    """Code for each of dagrun's fixes (one wait each, the fewest that fix
    every race), in the program's terms; races no wait fixes keep dagrun's
    advice."""
    stages = (meta or {}).get("stages", [])
    allocs = {a["id"]: a for a in (meta or {}).get("allocs", [])}
    frees = {f["alloc"]: f for f in (meta or {}).get("frees", [])}

    def alloc_ids(idx: int, r: Race) -> set:
        if not 0 <= idx < len(stages):
            return set()
        st = stages[idx]
        out = set()
        for (buf, lo, hi), a in zip(st.get("accesses", []), st.get("allocs", [])):
            if buf == r.buffer and lo < r.hi and r.lo < hi and a is not None:
                out.add(a)
        return out

    # Why each race happened, in the program's terms.
    reused = {}
    for k, r in enumerate(races):
        fa, sa = alloc_ids(r.first_index, r), alloc_ids(r.second_index, r)
        if r.second_stream == "host":
            r.why = "the host touches pinned memory that a copy on stream %s may still be using" % r.first_stream
        elif fa and sa and not (fa & sa) and r.first_stream != "host":
            old = min(fa)
            a = allocs.get(old, {})
            f = frees.get(old)
            new = allocs.get(min(sa), {})
            r.why = ("the tensor allocated at %s was freed%s while stream %s still used it; the caching allocator "
                     "gave its block to the tensor allocated at %s (stream %s)") % (
                a.get("site", "?"), " at %s" % f["site"] if f else "", r.first_stream, new.get("site", "?"),
                new.get("stream") or r.second_stream)
            reused[k] = old
    fixes: List[str] = []
    for fx in (report or {}).get("fixes") or []:
        a, b = fx["after_name"], fx["before_name"]
        sf, sg = fx["record_stream"], fx["wait_stream"]
        ks = fx.get("races") or []
        olds = sorted({reused[k] for k in ks if k in reused})
        if sg == "host":
            fixes.append("after %s (%s on stream %s) record an event, `event = torch.cuda.Event(); event.record(%s)`, "
                         "and call `event.synchronize()` before %s (%s on the host)" % (
                             _site(a), _op(a), sf, _stream_expr(sf), _site(b), _op(b)))
        elif olds:
            al = allocs.get(olds[0], {})
            f = frees.get(olds[0])
            fixes.append("call `t.record_stream(%s)` for the tensor t allocated at %s, after its use at %s on stream %s "
                         "(or, before it is freed%s, make its allocating stream wait: `%s.wait_stream(%s)`)" % (
                             _stream_expr(sf), al.get("site", "?"), _site(a), sf,
                             " at %s" % f["site"] if f else "", _stream_expr(al.get("stream") or "default"), _stream_expr(sf)))
        else:
            fixes.append("before %s (%s on stream %s), make %s wait for %s: `%s.wait_stream(%s)`, or record an event "
                         "on %s after %s and `%s.wait_event(event)`" % (
                             _site(b), _op(b), sg, sg, sf, _stream_expr(sg), _stream_expr(sf), sf,
                             _site(a), _stream_expr(sg)))
    for k in (report or {}).get("unfixed") or []:
        r = races[k]
        fixes.append("%s then %s: %s" % (_site(r.first), _site(r.second), (report["races"][k].get("fix") or "")))
    return fixes


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
    status 2), DagrunNotFound without a binary, OSError when the file cannot
    be read.
    """
    text = read_trace(path)
    meta = _meta(text, path)
    r = run_dagrun(["check", "--json", path], ok_codes=(0, 1), binary=dagrun)
    doc = json.loads(r.stdout)
    out = r.stdout + r.stderr
    streams = (meta or {}).get("streams", {})
    if r.returncode == 0:
        return CheckResult(ok=True, output=out, streams=streams, warnings=list(doc.get("warnings") or []))
    report = doc.get("report") or {}
    races = parse_races(report)
    return CheckResult(ok=False, races=races, fixes=_suggest(races, report, meta), output=out, streams=streams)


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
            print("%s: %s" % (p, e), file=sys.stderr)
            worst = 2
            continue
        print("%s: %s" % (p, "ok: no race" if res.ok else "RACE"))
        if not res.ok:
            print(res.report())
            worst = max(worst, 1)
        if args.propose:
            try:
                print(propose(p))
            except (ValueError, DagrunError) as e:
                print("%s: no proposal: %s" % (p, e), file=sys.stderr)
                worst = 2
    return worst
