"""The traces recorded on the H200 (testdata/traces, by `python3 -m
dagrun_torch patterns`): dagrun check flags every *-racy.yaml (exit 1) and
accepts every *-fixed.yaml (exit 0), and the explanation names a fix."""
import glob
import os
import subprocess

import pytest

from conftest import TESTDATA
from dagrun_torch.checker import check

TRACES = sorted(glob.glob(os.path.join(TESTDATA, "traces", "*.yaml")))


def test_there_are_traces():
    assert len([t for t in TRACES if t.endswith("-racy.yaml")]) >= 9
    assert len([t for t in TRACES if t.endswith("-fixed.yaml")]) >= 7


@pytest.mark.parametrize("path", TRACES, ids=[os.path.basename(t) for t in TRACES])
def test_dagrun_check_verdict(path, dagrun_bin):
    racy = path.endswith("-racy.yaml")
    r = subprocess.run([dagrun_bin, "check", path], capture_output=True, text=True)
    assert r.returncode == (1 if racy else 0), r.stdout + r.stderr
    res = check(path, dagrun=dagrun_bin)
    assert res.ok == (not racy)
    if racy:
        assert res.races and res.fixes, res.report()
        for race in res.races:  # each race names two recorded Python lines
            assert ".py:" in race.first and ".py:" in race.second


@pytest.mark.parametrize("path", [t for t in TRACES if t.endswith("-racy.yaml")],
                         ids=[os.path.basename(t) for t in TRACES if t.endswith("-racy.yaml")])
def test_proposed_schedule_is_race_free(path, dagrun_bin, tmp_path):
    from dagrun_torch.checker import auto_spec, propose
    with open(path) as f:
        text = auto_spec(f.read())
    assert "sync: auto" in text and "waits:" not in text
    p = tmp_path / "auto.yaml"
    p.write_text(text)
    r = subprocess.run([dagrun_bin, "check", str(p)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    table = propose(path, dagrun=dagrun_bin)
    assert " wait " in table and "streams=" in table


def test_auto_spec_rejects_other_files():
    from dagrun_torch.checker import auto_spec
    with pytest.raises(ValueError, match="not a trace"):
        auto_spec("version: 1\nstages: []\n")


def test_report_of_a_race_free_trace_is_readable(dagrun_bin):
    """report() of a race-free trace says so, with dagrun's warnings, in
    text (not dagrun check's JSON)."""
    res = check(os.path.join(TESTDATA, "traces", "seed-d-fixed.yaml"), dagrun=dagrun_bin)
    assert res.ok
    text = res.report()
    assert text.splitlines()[0] == "ok: no race", text
    assert "{" not in text.splitlines()[0] and '"source"' not in text, text
    assert any(l.startswith("warning: ") and "redundant" in l for l in text.splitlines()), text
