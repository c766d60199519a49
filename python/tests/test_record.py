"""The trace builder with fake callbacks, the dispatch-mode classifier on CPU
tensors standing in for device ones, and dagrun check's verdict on both."""
import json
import subprocess

import pytest

from dagrun_torch.recorder import DEVICE, PINNED, RecordError, TraceBuilder

MB = 1 << 20
N = 64 * MB


def W(p, n=N):
    return (DEVICE, p, p + n)


def check(dagrun_bin, b, tmp_path, name="t"):
    path = tmp_path / ("%s.yaml" % name)
    path.write_text(b.to_yaml())
    r = subprocess.run([dagrun_bin, "check", str(path)], capture_output=True, text=True)
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, r.stdout


def alloc(b, p, stream, site, n=N):
    b.alloc(p, stream, site)
    b.note_storage(p, n)


def seed_a(b):
    alloc(b, 0x10000, 0, "a.py:1")
    b.kernel("s1", "fill_.Scalar", [], [W(0x10000)], "a.py:3")
    b.record_stream(0x10000, N, "s1", "a.py:4")
    b.kernel("s2", "fill_.Scalar", [], [W(0x10000)], "a.py:6")
    b.record_stream(0x10000, N, "s2", "a.py:7")
    b.device_sync("a.py:8")
    b.kernel(0, "eq.Scalar", [W(0x10000)], [W(0x9000000, 16 * MB)], "a.py:9")


def seed_b(b, right_stream=False):
    alloc(b, 0x10000, 0, "b.py:1")
    b.kernel("s1", "fill_.Scalar", [], [W(0x10000)], "b.py:3")
    b.record_stream(0x10000, N, "s1" if right_stream else "s2", "b.py:4")
    b.free(0x10000, "b.py:5")
    alloc(b, 0x10000, 0, "b.py:6")
    b.kernel(0, "fill_.Scalar", [], [W(0x10000)], "b.py:7")


def seed_c(b):
    alloc(b, 0x10000, 0, "c.py:1")
    b.kernel(0, "fill_.Scalar", [], [W(0x10000)], "c.py:1")
    b.event_record("e", 0)
    b.event_wait("e", "s1")
    alloc(b, 0x8000000, "s1", "c.py:5")
    b.kernel("s1", "mul.Tensor", [W(0x10000)], [W(0x8000000)], "c.py:5")
    b.free(0x10000, "c.py:6")
    alloc(b, 0x10000, 0, "c.py:7")
    b.kernel(0, "fill_.Scalar", [], [W(0x10000)], "c.py:7")


def seed_d(b):
    alloc(b, 0x10000, 0, "d.py:1")  # allocated on the default stream, written on s1: not a race
    b.kernel("s1", "fill_.Scalar", [], [W(0x10000)], "d.py:3")
    b.event_record("e", "s1")
    b.event_wait("e", "s2")
    b.kernel("s2", "add_.Scalar", [W(0x10000)], [W(0x10000)], "d.py:6")
    b.record_stream(0x10000, N, "s1", "d.py:7")
    b.record_stream(0x10000, N, "s2", "d.py:8")
    b.free(0x10000, "d.py:9")
    alloc(b, 0x10000, 0, "d.py:10")  # the block reused: the allocator saw s1's and s2's events complete
    b.kernel(0, "fill_.Scalar", [], [W(0x10000)], "d.py:11")


@pytest.mark.parametrize("case, racy", [(seed_a, True), (seed_b, True), (seed_c, True), (seed_d, False),
                                        (lambda b: seed_b(b, right_stream=True), False)])
def test_seed_cases(case, racy, dagrun_bin, tmp_path):
    b = TraceBuilder("seed", default_stream=0)
    case(b)
    rc, out = check(dagrun_bin, b, tmp_path)
    assert rc == (1 if racy else 0), out


def test_reuse_race_is_explained(dagrun_bin, tmp_path):
    from dagrun_torch.checker import check as dcheck
    b = TraceBuilder("seed-c", default_stream=0)
    seed_c(b)
    p = tmp_path / "c.yaml"
    p.write_text(b.to_yaml())
    res = dcheck(str(p), dagrun=dagrun_bin)
    assert not res.ok and len(res.races) == 1
    r = res.races[0]
    assert (r.kind, r.first_stream, r.second_stream) == ("WAR", "s1", "default")
    assert "freed at c.py:6" in r.why and "allocated at c.py:7" in r.why
    # s1's creation was not recorded: the code says so rather than invent a name.
    assert len(res.fixes) == 1 and "record_stream(<stream s1>)" in res.fixes[0] and "c.py:1" in res.fixes[0]


def test_fewest_waits(dagrun_bin, tmp_path):
    # Three writes on s1, then three reads on s2 of each: one wait before the
    # first read fixes all three races.
    from dagrun_torch.checker import check as dcheck
    b = TraceBuilder("fan", default_stream=0)
    for i in range(3):
        b.kernel("s1", "fill_.Scalar", [], [W(0x100000 * (i + 1), 4096)], "f.py:%d" % (i + 1))
    for i in range(3):
        b.kernel("s2", "sum.default", [W(0x100000 * (i + 1), 4096)], [W(0x900000 + 64 * i, 4)], "f.py:%d" % (i + 10))
    p = tmp_path / "fan.yaml"
    p.write_text(b.to_yaml())
    res = dcheck(str(p), dagrun=dagrun_bin)
    assert len(res.races) == 3
    assert len(res.fixes) == 1 and "before f.py:10" in res.fixes[0], res.fixes
    assert "torch.cuda.current_stream().wait_stream(<stream s1>)" in res.fixes[0], res.fixes


def test_wait_before_record_waits_for_nothing(dagrun_bin, tmp_path):
    b = TraceBuilder("wbr", default_stream=0)
    b.event_wait("e", "s2")            # issued before the record: waits for nothing
    b.kernel("s1", "fill_.Scalar", [], [W(0x10000, 64)], "w.py:2")
    b.event_record("e", "s1")
    b.kernel("s2", "fill_.Scalar", [], [W(0x10000, 64)], "w.py:4")
    assert check(dagrun_bin, b, tmp_path)[0] == 1


def test_host_syncs(dagrun_bin, tmp_path):
    # device write, then a host sync of that stream, then another stream: ordered.
    for sync, racy in (("stream", False), ("device", False), ("event", False), ("other-stream", True), ("none", True)):
        b = TraceBuilder("h", default_stream=0)
        b.kernel("s1", "fill_.Scalar", [], [W(0x10000, 64)], "h.py:1")
        b.event_record("e", "s1")
        if sync == "stream":
            b.stream_sync("s1", "h.py:2")
        elif sync == "device":
            b.device_sync("h.py:2")
        elif sync == "event":
            b.event_sync("e", "h.py:2")
        elif sync == "other-stream":
            b.stream_sync("s2", "h.py:2")
        b.kernel("s2", "fill_.Scalar", [], [W(0x10000, 64)], "h.py:3")
        assert check(dagrun_bin, b, tmp_path, sync)[0] == (1 if racy else 0), sync


def test_pinned_host_read(dagrun_bin, tmp_path):
    # a non-blocking copy into pinned memory, then a CPU read of it
    for fixed in (False, True):
        b = TraceBuilder("pin", default_stream=0)
        b.kernel(0, "copy_.default", [W(0x10000, 64)], [(PINNED, 0x7000, 0x7040)], "p.py:1")
        b.event_record("e", 0)
        if fixed:
            b.event_sync("e", "p.py:2")
        b.host_op("_local_scalar_dense.default", [(PINNED, 0x703c, 0x7040)], [], "p.py:3")
        rc, out = check(dagrun_bin, b, tmp_path, "pin%d" % fixed)
        assert rc == (0 if fixed else 1), out
        text = (tmp_path / ("pin%d.yaml" % fixed)).read_text()
        assert "where: host_pinned" in text and "stream: host" in text



def test_pinned_tensors_named_by_allocation(dagrun_bin, tmp_path):
    """Pinned host tensors are named after the line that allocated them, as
    device tensors are: buffers pinnedN:FILE:LINE (unique, N in address
    order), and the report's tensor is the assigned variable with that line;
    memory pinned before the recording keeps pinnedN."""
    from dagrun_torch.checker import check as check_report
    b = TraceBuilder("pin-names", default_stream=0)
    b.stream_created("s1", "p.py:1", "s_copy")
    b.pinned_alloc(0x7000, 64, "p.py:2", var="staging")
    b.pinned_alloc(0x8000, 64, "p.py:3")     # two tensors from one line ...
    b.pinned_alloc(0x9000, 64, "p.py:3")     # ... get distinct names
    b.host_op("fill_.Scalar", [], [(PINNED, 0x8000, 0x8040)], "p.py:4")
    b.host_op("fill_.Scalar", [], [(PINNED, 0x7000, 0x7040)], "p.py:5")
    b.kernel("s1", "copy_.default", [(PINNED, 0x7000, 0x7040)], [W(0x10000, 64)], "p.py:6")
    b.host_op("fill_.Scalar", [], [(PINNED, 0x7000, 0x7040)], "p.py:7")      # WAR: the copy may still read it
    b.kernel("s1", "copy_.default", [W(0x10000, 64)], [(PINNED, 0x9000, 0x9040)], "p.py:8")
    b.host_op("tolist", [(PINNED, 0x9000, 0x9040)], [], "p.py:9")             # RAW: the copy may not have landed
    b.kernel("s1", "copy_.default", [W(0x10000, 64)], [(PINNED, 0xa000, 0xa040)], "p.py:10")  # pinned earlier
    b.host_op("tolist", [(PINNED, 0xa000, 0xa040)], [], "p.py:11")
    # a new pinned tensor at a freed one's address: the pinned allocator's
    # reuse, not the caching allocator's (which the report explains for device memory)
    b.stream_created("s2", "p.py:12", "s_other")
    b.kernel("s1", "copy_.default", [(PINNED, 0x8000, 0x8040)], [W(0x20000, 64)], "p.py:13")
    b.pinned_alloc(0x8000, 64, "p.py:14", var="again")
    b.kernel("s2", "copy_.default", [W(0x30000, 64)], [(PINNED, 0x8000, 0x8040)], "p.py:15")
    path = tmp_path / "pin.yaml"
    path.write_text(b.to_yaml())
    text = path.read_text()
    for name in ("pinned0:p.py:2", "pinned1:p.py:3", "pinned2:p.py:3"):
        assert '{name: "%s", bytes: 64, where: host_pinned}' % name in text, text
    assert '{name: "pinned3", bytes: 64, where: host_pinned}' in text, text
    res = check_report(str(path), dagrun=dagrun_bin)
    report = res.report()
    assert "WAR on pinned memory staging (allocated at p.py:2): p.py:6" in report, report
    assert "RAW on pinned memory pinned2 (allocated at p.py:3): p.py:8" in report, report
    assert "RAW on pinned memory pinned3: p.py:10" in report, report
    assert "WAR on pinned memory pinned1 (allocated at p.py:3): p.py:13" in report, report
    assert "caching allocator" not in report and "record_stream" not in report, report


def test_dispatch_names_pinned_allocations():
    """The dispatch mode sees a pinned tensor made by a factory with
    pin_memory=True or by _pin_memory, at its line, with the variable the
    line assigns (CPU tensors stand in for pinned ones: no CUDA here)."""
    torch = pytest.importorskip("torch")
    from dagrun_torch.recorder import _Classifier, _make_mode
    made = []

    class Op:
        """An ATen op that makes a CPU tensor, as the pinned one would be."""
        def __init__(self, op, run=None):
            self._schema, self._overloadname, self.op = op._schema, op._overloadname, run or op

        def __call__(self, *args, **kwargs):
            kwargs.pop("pin_memory", None)
            t = self.op(*args, **kwargs)
            made.append(t)
            return t

    b = TraceBuilder("cpu", default_stream=0)
    cl = _Classifier(is_device=lambda t: False, is_pinned=lambda t: any(t is m for m in made))
    mode = _make_mode(b, cl, lambda d=0: 0, lambda: "u.py:7", lambda s: s, assigned=lambda: "staging")
    x = torch.ones(16)
    empty = Op(torch.ops.aten.empty.memory_format)
    pin = Op(torch.ops.aten._pin_memory.default, run=lambda t: t.clone())
    mode.__torch_dispatch__(empty, (), ([16],), {"dtype": torch.float32, "pin_memory": True})
    mode.__torch_dispatch__(empty, (), ([16],), {"dtype": torch.float32, "pin_memory": False})   # not pinned
    mode.__torch_dispatch__(pin, (), (x,), {})
    pinned = [a for a in b._alloc_log if a.pinned]
    assert [(a.ptr, a.nbytes, a.site, a.var) for a in pinned] == \
        [(made[0].data_ptr(), 64, "u.py:7", "staging"), (made[2].data_ptr(), 64, "u.py:7", "staging")]
    # the copy into the pinned tensor points at its allocation
    assert b.stages and b.stages[-1].allocs == [pinned[1].id], b.stages


def test_yaml_shape():
    b = TraceBuilder("x y", default_stream=0)
    seed_d(b)
    text = b.to_yaml()
    assert "sync: manual" in text and "name: x_y" in text
    assert '"k0:fill_.Scalar:d.py:3"' in text
    assert "allocator-waits" in text  # the reuse after record_stream is a host wait
    meta = json.loads(text.strip().splitlines()[-1].split(": ", 1)[1])
    assert meta["frees"][0]["record_streams"] == ["s1", "s2"]


def test_nothing_recorded():
    b = TraceBuilder()
    b.device_sync("x.py:1")
    with pytest.raises(RecordError, match="nothing recorded"):
        b.to_yaml()


# -- the dispatch mode on CPU tensors (standing in for CUDA ones) ------------------

def test_dispatch_classification():
    torch = pytest.importorskip("torch")
    from dagrun_torch.recorder import _Classifier, _make_mode
    b = TraceBuilder("cpu", default_stream=0)
    stream = ["s1"]
    cl = _Classifier(is_device=lambda t: True, is_pinned=lambda t: False)
    mode = _make_mode(b, cl, lambda d=0: stream[0], lambda: "u.py:1", lambda s: s)
    x = torch.ones(16)
    with mode:
        y = torch.empty(16)          # allocation only: no stage
        y.fill_(2.0)                 # writes y
        z = x + y                    # reads x, y; writes z
        v = z.view(4, 4)             # view: no stage
        stream[0] = "s2"
        v.add_(1.0)                  # reads and writes z's bytes
        w = torch.cat([x, y])        # reads x and y, writes w
        s = float(w.sum())           # sum (a kernel) and .item() (a read, then a host wait)
    ops = [st.op for st in b.stages]
    assert ops == ["fill_.Scalar", "add.Tensor", "add_.Tensor", "cat.default", "sum.default",
                   "_local_scalar_dense.default", "host-reads-local_scalar_dense"], ops
    fill, add, add_, cat = b.stages[:4]
    assert fill.reads == [] and fill.writes == [(DEVICE, y.data_ptr(), y.data_ptr() + 64)]
    assert sorted(add.reads) == sorted([(DEVICE, x.data_ptr(), x.data_ptr() + 64), (DEVICE, y.data_ptr(), y.data_ptr() + 64)])
    assert add.writes == [(DEVICE, z.data_ptr(), z.data_ptr() + 64)]
    assert add_.writes == [(DEVICE, z.data_ptr(), z.data_ptr() + 64)] and add_.stream == "s2"
    assert b.stages[-1].stream == "host" and b.stages[-1].waits == [5]
    assert s == 48.0


def test_dispatch_strided_view_range():
    torch = pytest.importorskip("torch")
    from dagrun_torch.recorder import _range
    x = torch.zeros(8, 8)
    col = x[:, 2]
    s, e = _range(col)
    assert s == x.data_ptr() + 8 and e == s + (7 * 8 + 1) * 4
    assert _range(torch.zeros(0)) is None


# -- host threads, graphs, host waits by query, devices, bounds (the builder) --------

def test_thread_handoffs(dagrun_bin, tmp_path):
    """A thread's work on a stream main also used comes after main's, in
    the trace as in CUDA, when Thread.start hands the order over; main's
    work after join comes after the thread's. Without a handoff (a thread
    started before the recording) the order is not known: a race."""
    for handoff in (True, False):
        b = TraceBuilder("threads", default_stream=0)
        b.kernel(0, "fill_.Scalar", [], [W(0x10000, 64)], "t.py:1")
        if handoff:
            b.thread_start("main", "t1", "t.py:2")
        b.kernel(0, "mul.Tensor", [W(0x10000, 64)], [W(0x20000, 64)], "t.py:5", thread="t1")
        if handoff:
            b.thread_exit("t1", "t.py:2")
            b.thread_join("main", "t1", "t.py:3")
        b.kernel(0, "sum.default", [W(0x20000, 64)], [W(0x30000, 4)], "t.py:4")
        rc, out = check(dagrun_bin, b, tmp_path, "h%d" % handoff)
        assert rc == (0 if handoff else 1), out
        text = (tmp_path / ("h%d.yaml" % handoff)).read_text()
        assert "{name: default.t1, thread: t1}" in text, text
        if handoff:
            assert "{name: host.t1, kind: host, thread: t1}" in text and "event: start1.t1" in text, text
            assert "{event: exit2.t1}" in text, text


def test_thread_without_join_is_a_race(dagrun_bin, tmp_path):
    """The join is what orders the thread's work before main's later work."""
    b = TraceBuilder("nojoin", default_stream=0)
    b.thread_start("main", "t1", "t.py:2")
    b.kernel(0, "fill_.Scalar", [], [W(0x10000, 64)], "t.py:5", thread="t1")
    b.thread_exit("t1", "t.py:2")
    b.kernel(0, "sum.default", [W(0x10000, 64)], [W(0x30000, 4)], "t.py:4")
    assert check(dagrun_bin, b, tmp_path)[0] == 1


def test_threads_with_their_own_streams(dagrun_bin, tmp_path):
    """Two threads, each on its own stream, sharing a buffer: a race even
    with start and join, fixed by a host synchronization in the first
    thread before the second starts."""
    for fixed in (False, True):
        b = TraceBuilder("own", default_stream=0)
        b.thread_start("main", "t1", "o.py:1")
        b.stream_created("A", "o.py:10", thread="t1")
        b.kernel("A", "fill_.Scalar", [], [W(0x10000, 64)], "o.py:11", thread="t1")
        if fixed:
            b.stream_sync("A", "o.py:12", thread="t1")
        b.thread_exit("t1", "o.py:1")
        b.thread_join("main", "t1", "o.py:2")
        b.thread_start("main", "t2", "o.py:3")
        b.stream_created("B", "o.py:20", thread="t2")
        b.kernel("B", "fill_.Scalar", [], [W(0x10000, 64)], "o.py:21", thread="t2")
        rc, out = check(dagrun_bin, b, tmp_path, "own%d" % fixed)
        assert rc == (0 if fixed else 1), out
        text = (tmp_path / ("own%d.yaml" % fixed)).read_text()
        assert "{name: s1, thread: t1}" in text and "{name: s2, thread: t2}" in text, text


def test_graph_replay_is_an_instance_on_its_stream(dagrun_bin, tmp_path):
    """Ops issued during a capture do not run; each replay runs them on the
    replay stream. A replay on a side stream that does not wait for the
    default stream's write of the static input is a race."""
    for fixed in (False, True):
        b = TraceBuilder("graph", default_stream=0)
        b.capture_begin("g", "g.py:5")
        b.kernel("cap", "mul.Tensor", [W(0x10000, 64)], [W(0x20000, 64)], "g.py:6")
        b.capture_end("g")
        assert not b.stages  # captured: nothing ran
        for i in range(2):
            b.kernel(0, "copy_.default", [W(0x30000, 64)], [W(0x10000, 64)], "g.py:9")
            if fixed:
                b.event_record("e", 0)
                b.event_wait("e", "side")
            b.replay("g", "side", "g.py:11")
            b.stream_sync("side", "g.py:12")
        rc, out = check(dagrun_bin, b, tmp_path, "g%d" % fixed)
        assert rc == (0 if fixed else 1), out
        reps = [st for st in b.stages if st.op.startswith("replay-")]
        assert len(reps) == 2 and all(st.stream == "side" and st.site == "g.py:11" for st in reps)
        assert reps[0].extra["captured_at"] == "g.py:6" and reps[1].extra["replay"] == 2


def test_event_query_true_is_a_host_wait(dagrun_bin, tmp_path):
    """A polling loop ends with a query() that returned True: the host then
    knows the event's work is done."""
    for polled in (False, True):
        b = TraceBuilder("poll", default_stream=0)
        b.kernel("s1", "copy_.default", [W(0x10000, 64)], [(PINNED, 0x7000, 0x7040)], "q.py:1")
        b.event_record("e", "s1")
        if polled:
            b.event_sync("e", "q.py:3", what="event-query")
        b.host_op("tolist", [(PINNED, 0x7000, 0x7040)], [], "q.py:4")
        rc, out = check(dagrun_bin, b, tmp_path, "q%d" % polled)
        assert rc == (0 if polled else 1), out


def test_default_streams_of_two_devices_do_not_merge(dagrun_bin, tmp_path):
    b = TraceBuilder("dev", default_stream=(0, 0))
    b.default_stream_of((1, 0), 1)
    b.kernel((0, 0), "copy_.default", [W(0x10000, 64)], [(PINNED, 0x7000, 0x7040)], "d.py:1")
    b.kernel((1, 0), "copy_.default", [("device.1", 0x90000, 0x90040)], [(PINNED, 0x7000, 0x7040)], "d.py:2")
    rc, out = check(dagrun_bin, b, tmp_path)
    assert rc == 1 and "default.1" in out, out  # WAW on the pinned buffer: two streams, no wait
    text = (tmp_path / "t.yaml").read_text()
    assert "{name: default.1, device: 1}" in text and "device: 1}" in text.split("stages:")[0].split("buffers:")[1]


def test_copy_between_devices(dagrun_bin, tmp_path):
    """A copy between devices runs on the source's stream; ATen makes the
    destination's stream wait for it: reading the copy there is ordered."""
    b = TraceBuilder("peer", default_stream=(0, 0))
    b.default_stream_of((1, 0), 1)
    b.kernel((0, 0), "fill_.Scalar", [], [W(0x10000, 64)], "p.py:1")
    k = b.kernel((0, 0), "copy_.default", [W(0x10000, 64)], [("device.1", 0x90000, 0x90040)], "p.py:2", copy=True)
    b.stream_after((1, 0), k)
    b.kernel((1, 0), "sum.default", [("device.1", 0x90000, 0x90040)], [("device.1", 0x99000, 0x99004)], "p.py:3")
    rc, out = check(dagrun_bin, b, tmp_path)
    assert rc == 0, out
    assert "kernel: copy" in (tmp_path / "t.yaml").read_text()


@pytest.mark.parametrize("n, dropped", [(6, 0), (7, 1), (20, 14)])
def test_bounded_trace_keeps_the_last_ops(n, dropped, dagrun_bin, tmp_path):
    """max_ops=6: the last six ops, and the trace says how many went."""
    b = TraceBuilder("ring", default_stream=0, max_ops=6)
    for i in range(n):
        b.kernel("s%d" % (i % 2), "fill_.Scalar", [], [W(0x10000 + 0x1000 * i, 64)], "r.py:%d" % (i + 1))
    text = b.to_yaml()
    assert text.count('kernel: spin') == min(n, 6)
    assert ("the first %d ops were dropped" % dropped in text) == (dropped > 0), text
    assert json.loads(text.strip().splitlines()[-1].split(": ", 1)[1])["dropped_ops"] == dropped
    assert check(dagrun_bin, b, tmp_path)[0] == 0


def test_bounded_trace_keeps_order_and_races(dagrun_bin, tmp_path):
    """Stages kept stay ordered through waits on stages kept; a race inside
    the window is still found, one with a dropped op is not."""
    b = TraceBuilder("ring2", default_stream=0, max_ops=3)
    b.kernel("s1", "fill_.Scalar", [], [W(0x50000, 64)], "r.py:1")     # dropped
    b.kernel("s1", "fill_.Scalar", [], [W(0x10000, 64)], "r.py:2")
    b.event_record("e", "s1")
    b.event_wait("e", "s2")
    b.kernel("s2", "add_.Scalar", [W(0x10000, 64)], [W(0x10000, 64)], "r.py:3")
    b.kernel("s3", "fill_.Scalar", [], [W(0x50000, 64)], "r.py:4")     # races with the dropped r.py:1
    rc, out = check(dagrun_bin, b, tmp_path)
    assert rc == 0, out
    b.kernel("s3", "fill_.Scalar", [], [W(0x10000, 64)], "r.py:5")     # races with r.py:3, both kept
    rc, out = check(dagrun_bin, b, tmp_path)
    assert rc == 1 and "r.py:5" in out, out


def test_bounded_trace_by_iterations(dagrun_bin, tmp_path):
    b = TraceBuilder("it", default_stream=0, max_iterations=2)
    for it in range(5):
        b.step()
        for j in range(3):
            b.kernel(0, "fill_.Scalar", [], [W(0x10000 + 0x1000 * j, 64)], "i.py:%d" % (10 * it + j))
    text = b.to_yaml()
    assert text.count("kernel: spin") == 6 and "i.py:40" in text and "i.py:30" in text and "i.py:22" not in text
    with pytest.raises(ValueError):
        TraceBuilder(max_ops=0)


def _made_here(make):
    """assigned_name of the frame that calls make (its caller's line)."""
    import sys
    from dagrun_torch.recorder import assigned_name
    got = []
    make(lambda: got.append(assigned_name(sys._getframe(1))))
    return got


def test_assigned_name_reads_the_source_line():
    """The program's names: a plain assignment, each element of a list
    comprehension, appends to a list; none for a line that shows no name."""
    def plain(new):
        s_copy = new()  # noqa: F841

    def comprehension(new):
        streams = [new() for _ in range(3)]  # noqa: F841

    def appended(new):
        streams = []
        for _ in range(2):
            streams.append(new())

    def bare(new):
        new()
    assert _made_here(plain) == ["s_copy"]
    assert _made_here(comprehension) == ["streams[0]", "streams[1]", "streams[2]"]
    assert _made_here(appended) == ["streams[0]", "streams[1]"]
    assert _made_here(bare) == [None]


def test_meta_has_stream_expressions_and_tensor_names():
    b = TraceBuilder("t", default_stream=0)
    b.stream_created("s", "p.py:13", "streams[2]")
    b.stream_created("s", "p.py:40", "other")  # a pool handle handed out again: the first creation counts
    alloc(b, 0x10000, "s", "p.py:14")
    b.alloc(0x20000, "s", "p.py:15", var="buf")
    b.note_storage(0x20000, N)
    b.kernel("s", "fill_.Scalar", [], [W(0x10000), W(0x20000)], "p.py:16")
    meta = json.loads(b.to_yaml().splitlines()[-1].split(": ", 1)[1])
    assert meta["streams"]["s1"] == "p.py:13" and meta["stream_exprs"] == {"s1": "streams[2]"}
    assert [a.get("var") for a in meta["allocs"]] == [None, "buf"]


def test_assigned_name_keeps_no_local_alive():
    """Naming a stream made on a line that appends it to a list must not keep
    the frame's other locals alive (a snapshot of f_locals would, before
    Python 3.13, and the caching allocator would then not reuse a block the
    program freed)."""
    import sys
    import weakref
    from dagrun_torch.recorder import assigned_name

    class Big:
        pass
    dead = []

    def program(new):
        streams = []
        x = Big()
        gone = weakref.ref(x)
        streams.append(new())
        del x
        dead.append(gone() is None)
        return streams
    assert program(lambda: assigned_name(sys._getframe(1))) == ["streams[0]"]
    assert dead == [True]


def test_assigned_name_of_tuples_and_of_a_line_run_again():
    """``a, b = new(), new()`` names a then b; a line run again after other
    work (another call of the function, its frame perhaps at the same
    address) counts from 0 again."""
    import sys
    from dagrun_torch.recorder import assigned_name
    epoch = [0]

    def pair(new):
        s_left, s_right = new(), new()  # noqa: F841

    def ring(new):
        streams = [new() for _ in range(2)]  # noqa: F841
    for program, names in ((pair, ["s_left", "s_right"]), (ring, ["streams[0]", "streams[1]"])):
        got = []
        for _ in range(3):
            program(lambda: got.append(assigned_name(sys._getframe(1), epoch=epoch[0])))
            epoch[0] += 1   # the program did something else between the calls
        assert got == names * 3
