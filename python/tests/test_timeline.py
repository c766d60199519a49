"""The timeline's decomposition of a replay's GPU work: no torch or GPU needed."""
import gzip
import json
import os

import pytest

from conftest import TESTDATA
from dagrun_torch import timeline as tl


def test_decompose_levels_and_idle():
    # Two kernels overlapping for 5 µs, a 5 µs gap, then one alone.
    d = tl.decompose([(0.0, 10.0), (5.0, 15.0), (20.0, 30.0)])
    assert d["kernels"] == 3
    assert d["makespan_us"] == 30.0
    assert d["kernel_us"] == 30.0
    assert d["busy_us"] == 25.0
    assert d["idle_us"] == 5.0
    assert d["level_us"] == {1: 20.0, 2: 5.0}
    assert d["concurrency"] == pytest.approx(30.0 / 25.0, abs=1e-3)


def test_decompose_back_to_back_is_not_overlap():
    # An end and a start at the same instant: one kernel at a time, no idle.
    d = tl.decompose([(0.0, 4.0), (4.0, 9.0)])
    assert d["level_us"] == {1: 9.0}
    assert d["idle_us"] == 0.0 and d["concurrency"] == 1.0


def test_decompose_nested_and_many():
    # One long kernel with three short ones inside it, two of them together.
    d = tl.decompose([(0.0, 100.0), (10.0, 20.0), (15.0, 25.0), (50.0, 60.0)])
    assert d["level_us"] == {1: 75.0, 2: 20.0, 3: 5.0}
    assert d["busy_us"] == 100.0 and d["idle_us"] == 0.0
    assert d["kernel_us"] == 130.0


def test_decompose_empty_and_bad():
    assert tl.decompose([])["kernels"] == 0
    with pytest.raises(ValueError):
        tl.decompose([(5.0, 1.0)])


def trace(*groups):
    """A Kineto-like trace: per group (correlation, [(ts, dur)]), plus CPU events to ignore."""
    ev = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": 0, "dur": 3, "args": {"correlation": 1}}]
    for corr, ks in groups:
        for i, (ts, dur) in enumerate(ks):
            cat = "gpu_memcpy" if i == 0 else "kernel"
            ev.append({"ph": "X", "cat": cat, "name": "k%d" % i, "ts": ts, "dur": dur, "args": {"correlation": corr}})
    ev.append({"ph": "i", "cat": "kernel", "name": "marker", "ts": 1, "args": {"correlation": 99}})
    return {"traceEvents": ev}


def test_gpu_intervals_groups_by_correlation():
    t = trace((7, [(30.0, 2.0), (10.0, 5.0)]), (8, [(100.0, 1.0)]))
    g = tl.gpu_intervals(t)
    assert set(g) == {7, 8}  # the CPU event and the instant marker are not GPU work
    assert g[7] == [(10.0, 15.0), (30.0, 32.0)]  # sorted by start, memcpy included
    assert g[8] == [(100.0, 101.0)]


def test_median_replay():
    runs = [{"makespan_us": m} for m in (5.0, 1.0, 9.0, 3.0)]
    assert tl.median_replay(runs)["makespan_us"] == 3.0
    assert tl.median_replay(runs[:3])["makespan_us"] == 5.0


def test_load_costs_reads_the_recorded_gzip():
    path = os.path.join(TESTDATA, "h200", "perf", "costmodels.json.gz")
    costs = tl.load_costs(path)
    assert {"googlenet", "nasnetalarge"} <= set(costs)
    with gzip.open(path, "rt") as f:
        assert json.load(f)["googlenet"]["nodes"].keys() == costs["googlenet"]["nodes"].keys()
    assert tl.load_costs(None) == {}


def row():
    d = tl.decompose([(0.0, 10.0), (5.0, 15.0), (20.0, 30.0)])
    one = tl.decompose([(0.0, 10.0), (10.0, 20.0), (20.0, 30.0)])
    return {"model": "toy", "graph_ms": 0.8, "best_ms": 0.4, "best": "prio4", "best_streams": 4,
            "bound": {"cp_us": 300.0, "sm_us": 80.0}, "graph_tl": one, "one_tl": one, "best_tl": d, "identical": True}


def test_table_row():
    md = tl.table([row(), {"model": "bad", "error": "RuntimeError: no GPU"}])
    lines = md.splitlines()
    assert lines[1].count("---") == lines[0].count("|") - 1
    assert "| toy | 0.800 | 0.400 (priority order, 4; 4 streams) | 2.00× | 300 / 80 | 30 / 30 / 30 |" in lines[2]
    assert "0 (0%) / 5 (17%)" in lines[2]  # no kernel running: one-stream plan, then the plan
    assert "30 / 30 (1.00×) | 1.20 |" in lines[2]
    assert "67% / 17% / 0% / 0% | yes |" in lines[2]
    assert lines[3] == "| bad | error: RuntimeError: no GPU |"


def test_recorded_h200_timeline():
    """The H200 run's table is the one its rows give, and each recorded
    replay adds up: the time at each number of running kernels is the busy
    time, busy plus idle the makespan, and the kernels' time is the busy
    time weighted by how many ran."""
    d = os.path.join(TESTDATA, "h200", "perf", "timeline")
    with open(os.path.join(d, "timeline.json")) as f:
        rec = json.load(f)
    with open(os.path.join(d, "timeline.md")) as f:
        md = f.read()
    rows = rec["rows"]
    assert [r["model"] for r in rows] == ["googlenet", "inception_v3", "inception_v4", "nasnetalarge"]
    assert tl.table(rows) in md
    for r in rows:
        assert r["identical"] and r["best"] in rec["keys"]
        assert r["best_ms"] == min(r["cands"][k]["ms"] for k in rec["keys"])
        for label in ("graph_tl", "one_tl", "best_tl"):
            t = r[label]
            levels = {int(k): v for k, v in t["level_us"].items()}
            assert sum(levels.values()) == pytest.approx(t["busy_us"], abs=0.01)
            assert t["busy_us"] + t["idle_us"] == pytest.approx(t["makespan_us"], abs=0.01)
            assert sum(k * v for k, v in levels.items()) == pytest.approx(t["kernel_us"], abs=0.05)
            assert t["makespan_us"] == sorted(r[label + "_makespans"])[(len(r[label + "_makespans"]) - 1) // 2]
        assert r["one_tl"]["concurrency"] == 1.0  # one stream: one kernel at a time


@pytest.mark.parametrize("argv, says", [
    (["--models"], "--models"),
    (["--costs", "COSTS"], "--costs"),
])
def test_main_argument_errors_before_the_gpu(tmp_path, capsys, monkeypatch, argv, says):
    """Arguments the run cannot use are exit status 2 before torch or the
    GPU is asked: no models (a run of nothing), a --costs file that is not
    a cost-model JSON (every model's child would fail on it)."""
    def no_run(args):
        raise AssertionError("ran the models with %r" % (args,))
    monkeypatch.setattr(tl, "run", no_run)
    monkeypatch.setattr(tl, "run_each", no_run)
    bad = tmp_path / "costs.json"
    bad.write_text("stages: [not json\n")
    argv = [str(bad) if a == "COSTS" else a for a in argv]
    with pytest.raises(SystemExit) as e:
        tl.main(argv + ["--out", str(tmp_path / "out")])
    assert e.value.code == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_write_outputs(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "TestGPU")
    args = type("A", (), {"out": str(tmp_path), "iters": 7, "replays": 3})()
    tl.write(args, [row()], "a note")
    with open(tmp_path / "timeline.json") as f:
        rec = json.load(f)
    assert rec["device"] == "TestGPU" and rec["iters"] == 7 and rec["replays"] == 3 and rec["keys"] == list(tl.KEYS)
    assert rec["rows"][0]["model"] == "toy"
    md = (tmp_path / "timeline.md").read_text()
    assert md.startswith("a note\n\n") and tl.table(rec["rows"]) in md


@pytest.mark.parametrize("flag,high", [("--iters", 100000), ("--replays", 1000)])
def test_timeline_bounds_its_calls_before_the_gpu(flag, high, tmp_path, capsys, monkeypatch):
    """Both sides of each bound: a run's time (and the profiler trace's
    memory) is bounded before it starts."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for bad in (0, high + 1):
        with pytest.raises(SystemExit) as e:
            tl.main(["--out", str(tmp_path), flag, str(bad)])
        assert e.value.code == 2
        assert "timeline: error: %s %d: want an integer from 1 to %d (`" % (flag, bad, high) in capsys.readouterr().err
    for good in ("1", str(high)):
        assert tl.main(["--out", str(tmp_path), flag, good]) == 2
        assert capsys.readouterr().err == "timeline: needs a GPU\n"
