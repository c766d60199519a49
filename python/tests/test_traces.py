"""The traces recorded on the GPU: testdata/traces (the bug patterns, by
`python3 -m dagrun_torch patterns`, on the H200) and testdata/programs
(python/tests/programs, by its run_all.py, on an H100). dagrun check flags
every *-racy.yaml (exit 1) and accepts every other trace (exit 0), and the
explanation names a fix; each racy program's race is between the two lines
of the program that the bug is about."""
import glob
import json
import os
import subprocess

import pytest

from conftest import HERE, TESTDATA
from dagrun_torch.checker import check

TRACES = sorted(glob.glob(os.path.join(TESTDATA, "traces", "*.yaml")) +
                glob.glob(os.path.join(TESTDATA, "programs", "*.yaml")))

# The racy programs: a race between these two lines (first, second in issue
# order), and what each line says in the program's source.
RACES = {
    "prefetch-no-wait-racy.yaml": (("prefetch_no_wait.py:29", "cpu.cuda(non_blocking=True)"),
                                   ("prefetch_no_wait.py:48", "batch == base")),
    "prefetch-no-record-racy.yaml": (("prefetch_no_record.py:48", "batch == base"),
                                     ("prefetch_no_record.py:29", "cpu.cuda(non_blocking=True)")),
    "pinned-double-buffer-racy.yaml": (("pinned_double_buffer.py:29", 'to("cuda", non_blocking=True)'),
                                       ("pinned_double_buffer.py:25", "staging[k].fill_")),
    "kv-cache-ring-racy.yaml": (("kv_cache_ring.py:35", "cache[step % SLOTS] == base"),
                                ("kv_cache_ring.py:30", "cache[step % SLOTS].fill_")),
    "grad-bucket-hook-racy.yaml": (("grad_bucket_hook.py:26", "bucket.copy_(p.grad)"),
                                   ("grad_bucket_hook.py:35", "w.grad.zero_()")),
    "ema-side-stream-racy.yaml": (("ema_side_stream.py:29", "opt.step()"),
                                  ("ema_side_stream.py:34", "e.mul_(DECAY).add_(p")),
    "event-two-streams-racy.yaml": (("event_two_streams.py:23", "left.fill_(base)"),
                                    ("event_two_streams.py:31", "total = left + right")),
    "two-threads-racy.yaml": (("two_threads.py:31", 'outs["first"] = staging'),
                              ("two_threads.py:42", "staging.fill_(base + 1)")),
    "graph-replay-side-racy.yaml": (("graph_replay_side.py:29", "static_in.fill_"),
                                    ("graph_replay_side.py:33", "graph.replay()")),
    "camera-loop-last5-racy.yaml": (("camera_loop.py:42", "logits[cam].copy_"),
                                    ("camera_loop.py:46", "torch.softmax(logits")),
}


def test_there_are_traces():
    assert len([t for t in TRACES if t.endswith("-racy.yaml")]) >= 19
    assert len([t for t in TRACES if t.endswith("-fixed.yaml")]) >= 16
    assert len([t for t in TRACES if t.endswith("-correct.yaml")]) >= 4
    progs = {os.path.basename(t) for t in TRACES if os.sep + "programs" + os.sep in t}
    assert set(RACES) <= progs and all(n.replace("-racy", "-fixed") in progs for n in RACES if "camera" not in n)


@pytest.mark.parametrize("name", sorted(RACES))
def test_racy_program_names_its_lines(name, dagrun_bin):
    """The race dagrun finds is between the two lines the bug is about, and
    those lines of the committed program say what the trace says."""
    path = os.path.join(TESTDATA, "programs", name)
    (first, first_src), (second, second_src) = RACES[name]
    res = check(path, dagrun=dagrun_bin)
    pairs = {(r.first.split(":", 2)[2], r.second.split(":", 2)[2]) for r in res.races}
    assert ("python/tests/programs/" + first, "python/tests/programs/" + second) in pairs, (pairs, res.report())
    for site, src in ((first, first_src), (second, second_src)):
        fn, line = site.split(":")
        with open(os.path.join(HERE, "programs", fn)) as f:
            assert src in f.read().splitlines()[int(line) - 1], site


def test_program_traces_show_what_the_recorder_sees():
    """Threads on their own host threads, a graph replay as an instance on
    its stream, Event.query and .tolist()/.numpy() as host stages, a bounded
    trace saying so, stream creation sites in the meta line."""
    def text(name):
        with open(os.path.join(TESTDATA, "programs", name)) as f:
            return f.read()
    threads = text("two-threads-fixed.yaml")
    assert "{name: s1, thread: t1}" in threads and "{name: host.t2, kind: host, thread: t2}" in threads
    assert "event: start1.t1" in threads and "{event: exit2.t1}" in threads
    graph = text("graph-replay-side-racy.yaml")
    replays = [l for l in graph.splitlines() if l.startswith('  - {name: "k') and ":replay-mul.Tensor:" in l.split(",")[0]]
    assert len(replays) == 3 and all("graph_replay_side.py:33" in l and "stream: s1" in l for l in replays), replays
    assert "graph_replay_side.py:26" not in graph.split("# dagrun_torch-meta")[0]  # the capture ran nothing
    poll = text("correct-query-poll-correct.yaml")
    assert ":event-query:python/tests/programs/correct_query_poll.py:24" in poll
    assert ":tolist:python/tests/programs/correct_query_poll.py:26" in poll
    assert ":numpy:python/tests/programs/correct_query_poll.py:27" in poll
    assert "# Bounded trace: the first" in text("camera-loop-last5-racy.yaml")
    meta = json.loads(text("event-two-streams-racy.yaml").splitlines()[-1].split(": ", 1)[1])
    assert meta["streams"]["s1"] == "python/tests/programs/event_two_streams.py:16"


def test_run_record_matches_the_traces():
    """run.json (the GPU run that recorded testdata/programs): every racy
    program went wrong on the GPU, every other never, and dagrun's verdict
    is the trace's."""
    with open(os.path.join(TESTDATA, "programs", "run.json")) as f:
        run = json.load(f)
    assert run["rows"]
    for r in run["rows"]:
        racy = r["variant"] == "racy"
        assert (r["wrong"] > 0) == racy and r["dagrun"] == ("race" if racy else "ok"), r


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
        src = f.read()
    if "thread: t1" in src:  # dagrun plans from one host thread
        with pytest.raises(ValueError, match="several host threads"):
            auto_spec(src)
        return
    text = auto_spec(src)
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
    text (not dagrun check's JSON). The trace's redundant wait is a
    wait_stream of the program's, not one inside torch.cuda.synchronize()
    (dagrun does not warn about those)."""
    res = check(os.path.join(TESTDATA, "programs", "prefetch-no-wait-fixed.yaml"), dagrun=dagrun_bin)
    assert res.ok
    text = res.report()
    assert text.splitlines()[0] == "ok: no race", text
    assert "{" not in text.splitlines()[0] and '"source"' not in text, text
    assert any(l.startswith("warning: ") and "redundant" in l for l in text.splitlines()), text


@pytest.mark.parametrize("name", ["pinned-double-buffer-racy.yaml", "kv-cache-ring-racy.yaml",
                                  "prefetch-no-record-racy.yaml"])
def test_report_claims_no_edit_it_did_not_check(name, dagrun_bin):
    """A hazard of a line's later run is marked as such, but the report
    offers no second buffer: dagrun checks its waits on the trace, not a
    buffer the program does not have. Here it would be wrong: the pinned
    staging and the KV cache already alternate between buffers, the
    prefetcher's batch is a new tensor each run (the allocator reuses its
    block) (test_report: the camera loop's frame, refilled by the host
    while a stream that nothing waits for still reads it, races with any
    number of frames)."""
    res = check(os.path.join(TESTDATA, "programs", name), dagrun=dagrun_bin)
    text = res.report()
    assert not res.ok and "it is a later run of" in text, text
    assert "second buffer" not in text and "without any wait" not in text, text
