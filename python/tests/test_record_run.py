"""dagrun_torch.record's torch side on the CPU: a backend that takes CPU
tensors for device memory stands in for CUDA, so that the per-thread
dispatch modes, the Thread.start/join handoffs, the Tensor.numpy/tolist
host reads, the bounded trace, ``python3 -m dagrun_torch run`` and
DAGRUN_TORCH_CHECK run here as they do on the GPU (streams are names the
test sets per thread)."""
import os
import subprocess
import sys
import textwrap
import threading

import pytest

from conftest import package_env

torch = pytest.importorskip("torch")

from dagrun_torch import launch, recorder  # noqa: E402
from dagrun_torch.recorder import RecordError, record  # noqa: E402


class FakeBackend:
    """CPU tensors are device memory, except those in ``pinned`` (storage
    pointers); each thread's current stream is ``FakeBackend.stream``."""
    fake = True

    def __init__(self):
        self.local = threading.local()
        self.pinned = set()

    def synchronize(self):
        pass

    def is_device(self, t):
        return t.device.type == "cpu" and not self.is_pinned(t)

    def is_pinned(self, t):
        return recorder._storage(t)[0] in self.pinned

    def device_of(self, t):
        return 0

    def current_device(self):
        return 0

    def current_stream(self, device=None):
        return getattr(self.local, "stream", 0)

    def default_stream(self, device):
        return 0

    def stream_key(self, s):
        return s

    def event_key(self, e):
        return e


@pytest.fixture
def fake(monkeypatch):
    be = FakeBackend()
    monkeypatch.setattr(recorder, "_CudaBackend", lambda: be)
    return be


def run_check(dagrun_bin, path):
    r = subprocess.run([dagrun_bin, "check", str(path)], capture_output=True, text=True)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    return r.returncode, r.stdout


def test_every_thread_is_recorded(fake, dagrun_bin, tmp_path):
    """Ops of a thread started inside the recording are recorded (the
    dispatch mode is per thread), on that thread's streams; the thread's
    own stream, reading what main wrote on its stream and writing what
    main reads after the join, with nothing between, is a race; with the
    fix (main synchronizes before the start, the thread before it ends,
    both handed over by start and join) it is clean."""
    for fixed in (False, True):
        x = torch.ones(1 << 10)
        out = {}

        def worker():
            fake.local.stream = "worker"
            out["y"] = x * 2.0
            if fixed:
                rec.builder.stream_sync("worker", "w.py:1", thread=rec.thread())

        path = tmp_path / ("t%d.yaml" % fixed)
        with record(str(path)) as rec:
            x.fill_(3.0)
            if fixed:
                rec.builder.device_sync("m.py:1")
            t = threading.Thread(target=worker)
            t.start()
            t.join()
            s = out["y"].sum()
        ops = [(st.op, st.thread) for st in rec.builder.stages if st.stream != "host"]
        assert ops == [("fill_.Scalar", "main"), ("mul.Tensor", "t1"), ("sum.default", "main")], ops
        text = path.read_text()
        assert "{name: s1, thread: t1}" in text and "test_record_run.py:" in text, text
        rc, rep = run_check(dagrun_bin, path)
        assert rc == (0 if fixed else 1), rep
        assert float(s) == 6.0 * (1 << 10)
    # the hooks are gone after the recording
    assert "start" not in threading.Thread.__dict__ or threading.Thread.start.__module__ == "threading"
    assert threading.Thread.start.__module__ == "threading" and threading.Thread.join.__module__ == "threading"


def test_thread_started_before_the_recording_is_conservative(fake, dagrun_bin, tmp_path):
    """A thread already running when the recording starts has no start
    handoff: its first op on main's stream is not known to come after
    main's earlier op (a race is reported, not missed)."""
    go, done = threading.Event(), threading.Event()
    x = torch.ones(256)

    def worker():
        go.wait()
        x.add_(1.0)   # no dispatch mode in this thread: it was started before
        done.set()

    t = threading.Thread(target=worker)
    t.start()
    with record(str(tmp_path / "pre.yaml")) as rec:
        x.fill_(1.0)
        go.set()
        done.wait()
        x.mul_(2.0)
    t.join()
    assert [st.thread for st in rec.builder.stages] == ["main", "main"]  # documented: not seen


def test_numpy_and_tolist_of_pinned_memory_are_host_reads(fake, dagrun_bin, tmp_path):
    host = torch.zeros(64)
    fake.pinned.add(recorder._storage(host)[0])
    dev = torch.ones(64)
    for read in ("numpy", "tolist"):
        path = tmp_path / ("%s.yaml" % read)
        with record(str(path)) as rec:
            fake.local.stream = "copy"
            host.copy_(dev, non_blocking=True)
            fake.local.stream = 0
            getattr(host, read)()
        st = rec.builder.stages[-1]
        assert (st.stream, st.op) == ("host", read) and st.reads
        rc, rep = run_check(dagrun_bin, path)
        assert rc == 1 and ".py:" in rep, rep
    assert "numpy" not in torch.Tensor.__dict__ or torch.Tensor.numpy.__module__ != recorder.__name__


def test_bounded_recording(fake, tmp_path):
    x = torch.zeros(16)
    path = tmp_path / "ring.yaml"
    with record(str(path), max_ops=5) as rec:
        for i in range(40):
            x.add_(1.0)
    text = path.read_text()
    assert text.count("kernel: spin") == 5 and "the first 35 ops were dropped" in text
    with record(str(tmp_path / "it.yaml"), max_iterations=2) as rec:
        for i in range(10):
            recorder.step()
            x.add_(1.0)
            x.mul_(1.0)
    assert (tmp_path / "it.yaml").read_text().count("kernel: spin") == 4


def test_one_recording_at_a_time(fake, tmp_path):
    x = torch.zeros(4)
    with record(str(tmp_path / "a.yaml")):
        with pytest.raises(RecordError, match="one at a time"):
            record(str(tmp_path / "b.yaml")).__enter__()
        x.add_(1.0)
    with record(str(tmp_path / "c.yaml")):  # the first one ended: allowed
        x.add_(1.0)


SCRIPT = textwrap.dedent('''\
    import sys, threading, torch
    from dagrun_torch import recorder
    rec = recorder._ACTIVE
    x = torch.ones(1024)
    if sys.argv[2] == "sync":
        rec.builder.device_sync("s.py:1")
    def worker():
        rec._be.local.stream = "side"
        x.mul_(float(sys.argv[1]))
        if sys.argv[2] == "sync":
            rec.builder.stream_sync("side", "s.py:2", thread=rec.thread())
    t = threading.Thread(target=worker)
    t.start(); t.join()
    y = x + 1.0
    if sys.argv[2] == "fail":
        sys.exit(3)
''')


@pytest.mark.parametrize("mode, want", [("sync", 0), ("race", 1), ("fail", 3)])
def test_run_command(mode, want, fake, dagrun_bin, tmp_path, capsys, monkeypatch):
    """python3 -m dagrun_torch run script.py ARGS: the script runs as
    __main__ with its arguments, every thread recorded; exit 1 on a race,
    0 when clean, the script's own status when it fails; the trace is kept
    only where --trace names it."""
    monkeypatch.setenv("DAGRUN", dagrun_bin)
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    trace = tmp_path / "kept.yaml"
    argv = ["--trace", str(trace)] if mode == "sync" else []
    before = set(os.listdir(tmp_path))
    code = launch.main(argv + [str(script), "2.0", mode])
    err = capsys.readouterr().err
    assert code == want, err
    if mode == "race":
        assert "RACE" in err and "prog.py:9" in err, err
    if mode == "sync":
        assert "ok: no race" in err and trace.exists() and "prog.py:9" in trace.read_text()
    else:
        assert set(os.listdir(tmp_path)) == before  # nothing written that was not named
    assert recorder._ACTIVE is None


def test_run_command_bad_input(capsys, tmp_path):
    assert launch.main(["/nonexistent/x.py"]) == 2
    assert "no such file" in capsys.readouterr().err
    assert launch.main([str(tmp_path)]) == 2     # exists, not a script
    assert capsys.readouterr().err == "dagrun_torch run: %s: not a regular file (a Python script to run)\n" % tmp_path
    with pytest.raises(SystemExit) as e:
        launch.main(["--max-ops", "0", "x.py"])
    assert e.value.code == 2
    with pytest.raises(SystemExit):
        launch.main(["--no-check", "x.py"])
    capsys.readouterr()
    # no script: one line that says what to give, not argparse's list of missing arguments
    want = "dagrun_torch run: give the Python script to run, then its arguments (`python3 -m dagrun_torch run --help` lists the options)\n"
    for argv in ([], ["--trace", str(tmp_path / "t.yaml")]):
        assert launch.main(argv) == 2 and capsys.readouterr().err == want
    from dagrun_torch.__main__ import main as cli
    assert cli(["run"]) == 2 and capsys.readouterr().err == want
    assert not os.path.exists(tmp_path / "t.yaml")


def test_run_nothing_recorded(fake, tmp_path, capsys):
    script = tmp_path / "cpu.py"
    script.write_text("print('no gpu work')\n")
    assert launch.main([str(script)]) == 2
    assert "nothing recorded" in capsys.readouterr().err


def test_env_variable_records_until_exit(fake, dagrun_bin, tmp_path, monkeypatch, capsys):
    """DAGRUN_TORCH_CHECK=1: recording from the call on, checked at exit
    (here: the exit hook called by hand)."""
    monkeypatch.setenv("DAGRUN", dagrun_bin)
    registered = []
    monkeypatch.setattr(launch.atexit, "register", registered.append)
    trace = tmp_path / "env.yaml"
    rec = launch.start_from_env({"DAGRUN_TORCH_CHECK": "1", "DAGRUN_TORCH_TRACE": str(trace),
                                 "DAGRUN_TORCH_MAX_OPS": "100"})
    assert rec is not None and rec.max_ops == 100
    x = torch.ones(64)
    fake.local.stream = "a"
    x.fill_(1.0)
    fake.local.stream = 0
    x.add_(1.0)
    registered[0]()
    err = capsys.readouterr().err
    assert "RACE" in err and trace.exists(), err
    assert recorder._ACTIVE is None
    assert launch.start_from_env({"DAGRUN_TORCH_CHECK": "0"}) is None
    assert launch.start_from_env({}) is None
    assert launch.start_from_env({"DAGRUN_TORCH_CHECK": "1", "DAGRUN_TORCH_MAX_OPS": "x"}) is None
    assert "DAGRUN_TORCH_MAX_OPS" in capsys.readouterr().err


def test_env_variable_without_cuda_says_so(tmp_path):
    """On a machine without CUDA, DAGRUN_TORCH_CHECK=1 says it records
    nothing and the program runs on."""
    env = dict(package_env(), DAGRUN_TORCH_CHECK="1")
    r = subprocess.run([sys.executable, "-c", "import dagrun_torch; print('ran')"], env=env, capture_output=True, text=True)
    if "ran" in r.stdout and not r.stderr:
        pytest.skip("this machine has CUDA")
    assert r.returncode == 0 and r.stdout.strip() == "ran", r.stdout + r.stderr
    assert "DAGRUN_TORCH_CHECK: not recording: dagrun_torch.record needs CUDA" in r.stderr


def test_run_command_replaces_the_env_recording(fake, dagrun_bin, tmp_path, monkeypatch, capsys):
    """With DAGRUN_TORCH_CHECK=1 set too, `python3 -m dagrun_torch run`
    discards the recording the import started and records the script on
    its own (one recording at a time)."""
    monkeypatch.setenv("DAGRUN", dagrun_bin)
    monkeypatch.setattr(launch.atexit, "register", lambda f: None)
    env_rec = launch.start_from_env({"DAGRUN_TORCH_CHECK": "1"})
    assert env_rec is not None and recorder._ACTIVE is env_rec
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    assert launch.main([str(script), "2.0", "sync"]) == 0, capsys.readouterr().err
    assert not env_rec._active and recorder._ACTIVE is None


@pytest.mark.parametrize("where", ["folder", "no folder", "under a file"])
def test_a_trace_path_that_cannot_be_written_stops_run_before_the_script(fake, tmp_path, where, capsys):
    """python3 -m dagrun_torch run --trace PATH: a PATH that is no file to
    write is exit 2 before the script runs, not a traceback at its end."""
    from dagrun_torch import launch
    script = tmp_path / "s.py"
    ran = tmp_path / "ran"
    script.write_text("open(%r, 'w').close()\n" % str(ran))
    f = tmp_path / "file"
    f.write_text("")
    trace, says = {"folder": (tmp_path, "a folder"),
                   "no folder": (tmp_path / "none" / "t.yaml", "no folder %s" % (tmp_path / "none")),
                   "under a file": (f / "t.yaml", "%s is not a folder" % f)}[where]
    assert launch.main(["--trace", str(trace), str(script)]) == 2
    assert capsys.readouterr().err == ("dagrun_torch: trace %s: %s; want the path of a trace file to write\n"
                                       % (trace, says))
    assert not ran.exists()
    with pytest.raises(RecordError, match="want the path of a trace file"):
        with record(str(trace)):
            pytest.fail("the block ran")
