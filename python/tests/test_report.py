"""The check's report by source: a loop's races are one entry per site with
a count, one fix per line of the program in its own names, verified on the
trace; the synthetic 60-iteration, 3-camera-stream loop fits a screen."""
import os

import pytest

from conftest import REPO
from dagrun_torch import camera_loop
from dagrun_torch.checker import check
from dagrun_torch.recorder import DEVICE, TraceBuilder

MB = 1 << 20


def W(p, n=MB):
    return (DEVICE, p, p + n)


def written(b, tmp_path, name="t"):
    p = tmp_path / ("%s.yaml" % name)
    p.write_text(b.to_yaml())
    return str(p)


@pytest.fixture(scope="module")
def camera(tmp_path_factory):
    d = tmp_path_factory.mktemp("camera")
    racy, fixed = d / "racy.yaml", d / "fixed.yaml"
    n = camera_loop.write(str(racy))
    camera_loop.write(str(fixed), fixed=True)
    return str(racy), str(fixed), n


def test_camera_loop_fits_a_screen(camera, dagrun_bin):
    """60 iterations × 3 camera streams, the default stream waiting for two
    of them: 3,600 races at two sites, one fix at the consumer's line in
    the program's names (streams[2], created at line 13), verified."""
    racy, fixed, n = camera
    assert n > 30000
    res = check(racy, dagrun=dagrun_bin)
    text = res.report()
    lines = text.splitlines()
    assert 0 < len(lines) <= 20, text
    assert len(res.races) == 3600 and len(res.sites) == 2, text
    assert sorted(s.count for s in res.sites) == [1770, 1830]
    assert len(res.fixes) == 1, text
    fix = res.fixes[0]
    assert fix.startswith("before camera_loop.py:27 (_softmax on the default stream): "
                          "`torch.cuda.current_stream().wait_stream(streams[2])`, at each of its 60 runs"), fix
    assert "removes sites 1, 2 (3600 races)" in fix, fix
    assert "already waits there for streams[0], streams[1], created at camera_loop.py:13 like streams[2]" in fix, fix
    assert "streams: streams[2] created at camera_loop.py:13" in lines, text
    assert "logits (allocated at camera_loop.py:12)" in text, text
    assert "WAR on pinned memory pinned2 (allocated at camera_loop.py:11)" in text, text
    # The host refilling a pinned frame an earlier upload still reads is a
    # hazard across runs; the RAW on logits is not.
    war = [s for s in res.sites if s.kind == "WAR"][0]
    raw = [s for s in res.sites if s.kind == "RAW"][0]
    assert war.across_runs and not raw.across_runs
    # No stream or host waits for streams[2]: a second frame would race too.
    assert "second buffer" not in text, text
    assert "wait_stream(streams[2])" in text and " s3" not in text, text
    ok = check(fixed, dagrun=dagrun_bin)
    assert ok.ok, ok.report()
    # docs/pytorch.md shows this report as it prints it.
    with open(os.path.join(REPO, "docs", "pytorch.md")) as f:
        doc = f.read()
    assert "\n" + text + "\n```" in doc, text


def test_fix_waits_on_the_producers_record(dagrun_bin, tmp_path):
    """The producer is not the latest op of its stream before the consumer:
    the fix records an event right after the producer (wait_stream there
    would also wait for the later op)."""
    b = TraceBuilder("late", default_stream=0)
    b.stream_created("s1", "p.py:1", "s_copy")
    b.stream_created("s2", "p.py:2", "s_comp")
    b.kernel("s1", "fill_.Scalar", [], [W(0x100000)], "p.py:5")
    b.kernel("s1", "fill_.Scalar", [], [W(0x900000)], "p.py:6")
    b.kernel("s2", "sum.default", [W(0x100000)], [W(0x2000000, 4)], "p.py:7")
    res = check(written(b, tmp_path), dagrun=dagrun_bin)
    assert len(res.fixes) == 1, res.report()
    f = res.fixes[0]
    assert f.startswith("after p.py:5 (fill_ on s_copy), `event = torch.cuda.Event(); event.record(s_copy)`, "
                        "and before p.py:7 (sum on s_comp), `s_comp.wait_event(event)`"), f


def test_no_record_stream_on_the_allocating_stream(dagrun_bin, tmp_path):
    """A block freed by the stream that allocated it and handed to a tensor
    another stream writes: record_stream on the allocating stream would do
    nothing; the fix is a wait, never a self-wait."""
    b = TraceBuilder("own", default_stream=0)
    b.stream_created("s1", "p.py:1", "side")
    b.alloc(0x100000, "s1", "p.py:3", var="a")
    b.note_storage(0x100000, MB)
    b.kernel("s1", "fill_.Scalar", [], [W(0x100000)], "p.py:4")
    b.free(0x100000, "p.py:5")
    b.alloc(0x100000, "s1", "p.py:6", var="c")
    b.note_storage(0x100000, MB)
    b.kernel(0, "fill_.Scalar", [], [W(0x100000)], "p.py:7")
    res = check(written(b, tmp_path), dagrun=dagrun_bin)
    assert len(res.fixes) == 1, res.report()
    f = res.fixes[0]
    assert "record_stream" not in f and "side.wait_stream(side)" not in f, f
    assert "before p.py:7 (fill_ on the default stream): `torch.cuda.current_stream().wait_stream(side)`" in f, f


def test_threads_get_one_handoff(dagrun_bin, tmp_path):
    """Three races between a thread's loads and another thread's reads:
    one handoff, an event passed between the threads, not one per race."""
    b = TraceBuilder("th", default_stream=0)
    b.stream_created("sa", "t.py:3", "s_load")
    b.stream_created("sc", "t.py:4", "s_fetch", thread="worker")
    b.thread_start("main", "worker", "t.py:8")
    for i in range(3):
        b.kernel("sa", "fill_.Scalar", [], [W(MB * (i + 1), 4096)], "t.py:10")
    for i in range(3):
        b.kernel("sc", "sum.default", [W(MB * (i + 1), 4096)], [W(16 * MB, 4)], "t.py:20", thread="worker")
    b.thread_exit("worker", "t.py:21")
    b.thread_join("main", "worker", "t.py:30")
    res = check(written(b, tmp_path), dagrun=dagrun_bin)
    assert len(res.races) == 3 and len(res.fixes) == 1, res.report()
    f = res.fixes[0]
    assert f.startswith("hand over once between the threads: in thread main, after t.py:10 (fill_ on s_load), "
                        "`ev = torch.cuda.Event(); ev.record(s_load)`"), f
    assert "in thread worker, before t.py:20 (sum), take it and `torch.cuda.current_stream().wait_event(ev)`" in f, f


def test_recorded_camera_loop_fits_a_screen(dagrun_bin, tmp_path):
    """The resnet50 camera loop recorded on the GPU (testdata/programs:
    60 iterations, 3 camera streams, the default stream waiting for two):
    the whole report fits in 20 lines, names the stream by the program's
    expression and creation line, and gives one fix at the softmax's line."""
    import gzip
    from conftest import TESTDATA
    with gzip.open(os.path.join(TESTDATA, "programs", "camera-loop-racy.yaml.gz"), "rt") as f:
        text = f.read()
    p = tmp_path / "camera-loop-racy.yaml"
    p.write_text(text)
    res = check(str(p), dagrun=dagrun_bin)
    report = res.report()
    assert len(report.splitlines()) <= 20 and len(res.fixes) == 1, report
    assert res.fixes[0].startswith("before python/tests/programs/camera_loop.py:46 (_softmax on the default stream): "
                                   "`torch.cuda.current_stream().wait_stream(streams[2])`, at each of its 60 runs"), report
    assert "streams[2] created at python/tests/programs/camera_loop.py:31" in report, report


def test_camera_loop_cli_exits_as_check_does(tmp_path, dagrun_bin, capsys, monkeypatch):
    """``python3 -m dagrun_torch.camera_loop OUT --check`` exits as
    ``python3 -m dagrun_torch check`` does: 1 on the race, 0 on the fixed
    loop; its help describes the program and every argument."""
    monkeypatch.setenv("DAGRUN", dagrun_bin)
    out = str(tmp_path / "cam.yaml")
    assert camera_loop.main([out, "--iterations", "2", "--ops", "4", "--check"]) == 1
    assert camera_loop.main([out, "--iterations", "2", "--ops", "4", "--fixed", "--check"]) == 0
    assert camera_loop.main([out, "--iterations", "2", "--ops", "4"]) == 0  # written, not checked
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        camera_loop.main(["--help"])
    assert e.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "check's benchmark: no torch, no GPU" in text, text
    for arg, words in (("out", "the trace file to write"), ("--iterations ITERATIONS", "iterations of the loop"),
                       ("--ops OPS", "kernels of each"), ("--fixed", "wait for every"), ("--check", "then check it")):
        assert " %s %s" % (arg, words) in text, (arg, text)


def test_camera_loop_counts_its_stages_and_bounds_them(tmp_path, capsys, monkeypatch):
    """stages() is the trace's length; the command refuses iterations or ops
    below 1, and a trace longer than a dagrun spec holds, in one line before
    building it."""
    for it, ops in ((1, 1), (2, 10), (3, 5)):
        for fixed in (False, True):
            assert camera_loop.stages(it, ops) == len(camera_loop.build(it, ops, fixed).stages)
    out = str(tmp_path / "t.yaml")
    monkeypatch.setattr(camera_loop, "write", lambda path, iterations, ops, fixed: camera_loop.stages(iterations, ops))
    for argv, says in ((["--iterations", "0"], "argument --iterations: want at least 1, not 0"),
                       (["--ops", "-1"], "argument --ops: want a whole number in digits 0-9, not '-1'"),
                       (["--iterations", "1", "--ops", "1398098"],
                        "--iterations 1 --ops 1398098: 4194307 stages, more than the 4194304 a dagrun spec holds")):
        with pytest.raises(SystemExit) as e:
            camera_loop.main([out] + argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.count("\n") == 1, err
        assert err.startswith("python3 -m dagrun_torch.camera_loop: error: %s (`" % says), err
    assert camera_loop.main([out, "--iterations", "1", "--ops", "1398097"]) == 0     # 4194304 stages: the most
    assert capsys.readouterr().out == "%s: 4194304 stages\n" % out
