"""Plan parsing and lowering: no torch needed."""
import copy
import json
import os
import subprocess

import pytest

from conftest import TESTDATA
from dagrun_torch.plan import Plan, PlanError, lower, peak_live_bytes


def load(name):
    with open(os.path.join(TESTDATA, name)) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def googlenet():
    return load("googlenet-cpu.json")


def plan_for(dagrun_bin, graph, tmp_path, *args):
    g = tmp_path / "g.json"
    g.write_text(json.dumps(graph))
    subprocess.run([dagrun_bin, "import", str(g), "-o", str(tmp_path / "g.yaml")], check=True)
    out = subprocess.run([dagrun_bin, "plan", str(tmp_path / "g.yaml"), "--json"] + list(args),
                         check=True, capture_output=True, text=True).stdout
    return Plan.from_dict(json.loads(out))


def happens_before(plan):
    """Independent of plan.lower: hb[(stream, launch index)] = set of (stream,
    launch index) known complete before it, by a transitive closure over
    stream order and record→wait edges in issue order."""
    pos_launch = {}
    preds = {}
    last = {}          # stream -> last launch node on it
    pending = {}       # stream -> nodes its next launch waits for
    rec = {}           # event -> node recorded
    counts = [0] * len(plan.streams)
    for s, j in plan.issue_order:
        o = plan.streams[s].ops[j]
        if o.kind == "launch":
            node = (s, counts[s])
            counts[s] += 1
            ps = set(pending.pop(s, set()))
            if s in last:
                ps.add(last[s])
            preds[node] = ps
            last[s] = node
            pos_launch[o.stage] = node
        elif o.kind == "record":
            rec[o.event] = set(pending.get(s, set())) | ({last[s]} if s in last else set())
        elif o.lag == 0:
            pending.setdefault(s, set()).update(rec.get(o.event, set()))
    closure = {}
    order = []
    for s, j in plan.issue_order:
        o = plan.streams[s].ops[j]
        if o.kind == "launch":
            order.append(pos_launch[o.stage])
    for node in order:
        c = set()
        for p in preds[node]:
            c.add(p)
            c |= closure[p]
        closure[node] = c
    return pos_launch, closure, order


def check_frees_safe(plan, graph, actions):
    """Every freed tensor: each stage touching it happens-before every later
    launch on the allocating stream."""
    pos, closure, order = happens_before(plan)
    producer = {}
    touch = {}
    for n in graph["nodes"]:
        for t in n["writes"]:
            if t not in producer and t not in n["reads"]:
                producer[t] = n["id"]
        for t in n["reads"] + n["writes"]:
            touch.setdefault(t, []).append(n["id"])
    freed_at = {}
    counts = [0] * len(plan.streams)
    for a in actions:
        if a.kind == "launch":
            counts[a.stream] += 1
        for t in a.frees:
            freed_at[t] = (a.stream, counts[a.stream])  # later launches on that stream have index >= this
    for t, (s, nxt) in freed_at.items():
        assert plan.stages[producer[t]] == s, "tensor %s freed on a stream other than its allocating one" % t
        later = [node for node in order if node[0] == s and node[1] >= nxt]
        for node in later:
            for user in touch[t]:
                assert pos[user] in closure[node] or pos[user] == node, \
                    "tensor %s freed too early: %s is not ordered before launch %s" % (t, user, node)
    return len(freed_at)


def test_lower_googlenet_frees_are_safe(dagrun_bin, googlenet, tmp_path):
    for args in ([], ["--max-streams", "4"], ["--strategy", "round-robin"]):
        p = plan_for(dagrun_bin, googlenet, tmp_path, *args)
        lw, lr = {}, {}
        for i, n in enumerate(googlenet["nodes"]):
            for t in n["reads"]:
                lr[t] = i
            for t in n["writes"]:
                lw[t] = i
        keep = [t for t in lw if lr.get(t, -1) <= lw[t]]
        acts = lower(p, googlenet, keep=keep)
        launched = [a.stage for a in acts if a.kind == "launch"]
        assert sorted(launched) == sorted(n["id"] for n in googlenet["nodes"])
        n = check_frees_safe(p, googlenet, acts)
        assert n > 50, "expected most intermediates to be freed, got %d" % n
        peak, total = peak_live_bytes(acts, googlenet)
        assert 0 < peak < total
        freed = {t for a in acts for t in a.frees}
        assert not freed & set(keep)


def test_check_frees_safe_catches_an_early_free(dagrun_bin, googlenet, tmp_path):
    # The checker above must be able to fail: move one free to the producer's launch.
    p = plan_for(dagrun_bin, googlenet, tmp_path)
    acts = lower(p, googlenet)
    cross = None
    for i, a in enumerate(acts):
        for t in a.frees:
            users = {p.stages[n["id"]] for n in googlenet["nodes"] if t in n["reads"]}
            if len(users) > 1:
                cross = (i, t)
    assert cross is not None
    i, t = cross
    acts[i].frees.remove(t)
    prod = next(n["id"] for n in googlenet["nodes"] if t in n["writes"])
    j = next(k for k, a in enumerate(acts) if a.stage == prod)
    acts[j].frees.append(t)
    with pytest.raises(AssertionError, match="freed too early"):
        check_frees_safe(p, googlenet, acts)


def tiny_plan():
    return {
        "version": 1, "spec": "tiny", "strategy": "default",
        "stages": [{"name": "a", "stream": 0}, {"name": "b", "stream": 1}, {"name": "c", "stream": 0}],
        "streams": [
            {"id": 0, "name": "s0", "ops": [{"op": "launch", "stage": "a"}, {"op": "record", "event": 0},
                                            {"op": "wait", "event": 1}, {"op": "launch", "stage": "c"}]},
            {"id": 1, "name": "s1", "ops": [{"op": "wait", "event": 0}, {"op": "launch", "stage": "b"},
                                            {"op": "record", "event": 1}]}],
        "issue_order": [[0, 0], [0, 1], [1, 0], [1, 1], [1, 2], [0, 2], [0, 3]],
        "events": 2,
        "lifetimes": [{"buffer": "x", "done": [{"stream": 0, "event": 0}, {"stream": 1, "event": 1}]}],
    }


TINY_GRAPH = {"model": "tiny", "tensors": [{"id": "in", "bytes": 4, "kind": "input"}, {"id": "x", "bytes": 8, "kind": "activation"},
                                           {"id": "y", "bytes": 16, "kind": "activation"}, {"id": "z", "bytes": 4, "kind": "activation"}],
              "nodes": [{"id": "a", "reads": ["in"], "writes": ["x"]}, {"id": "b", "reads": ["x"], "writes": ["y"]},
                        {"id": "c", "reads": ["y"], "writes": ["z"]}]}


def test_lower_tiny():
    p = Plan.from_dict(tiny_plan())
    acts = lower(p, TINY_GRAPH, keep=["z"])
    assert [(a.kind, a.stream, a.stage or a.event) for a in acts] == [
        ("launch", 0, "a"), ("record", 0, 0), ("wait", 1, 0), ("launch", 1, "b"), ("record", 1, 1), ("wait", 0, 1), ("launch", 0, "c")]
    # x (allocated on s0, read on s1) may go only once s0 has waited for s1's e1.
    assert acts[5].frees == ["x"]
    # y (allocated on s1) would need s1 ordered after c on s0: never.
    assert all("y" not in a.frees for a in acts)
    assert peak_live_bytes(acts, TINY_GRAPH) == (24, 28)  # x goes before z is made


@pytest.mark.parametrize("mutate, msg", [
    (lambda d: d["issue_order"].pop(), "issue_order has"),
    (lambda d: d["issue_order"].__setitem__(0, [0, 1]), "stream order"),
    (lambda d: d["streams"][0]["ops"].__setitem__(0, {"op": "launch", "stage": "zz"}), "unknown stage"),
    (lambda d: d["streams"][1]["ops"].__setitem__(0, {"op": "jump"}), "unknown op"),
    (lambda d: d["issue_order"].__setitem__(slice(1, 3), [[1, 0], [0, 1]]), "before any record"),
    (lambda d: d.pop("stages"), "not a dagrun plan"),
])
def test_plan_errors(mutate, msg):
    d = tiny_plan()
    mutate(d)
    with pytest.raises(PlanError, match=msg):
        Plan.from_dict(d)


def test_lower_rejects_mismatched_graph():
    g = copy.deepcopy(TINY_GRAPH)
    g["nodes"].append({"id": "d", "reads": ["z"], "writes": []})
    with pytest.raises(PlanError, match="does not match"):
        lower(Plan.from_dict(tiny_plan()), g)


def test_lower_rejects_bad_lifetime():
    d = tiny_plan()
    d["lifetimes"][0]["done"][1]["event"] = 0  # e0 is on stream 0, not 1
    with pytest.raises(PlanError, match="not recorded on stream 1"):
        lower(Plan.from_dict(d), TINY_GRAPH)


def test_stream_priorities_tiny():
    from dagrun_torch.plan import stream_priorities
    p = Plan.from_dict(tiny_plan())
    g = dict(TINY_GRAPH, nodes=[dict(n, duration_us=d) for n, d in zip(TINY_GRAPH["nodes"], (10, 1, 10))])
    # s0 starts the longest chain (a, b, c: 21 µs); s1's chain (b, c) is 11 µs
    assert stream_priorities(p, g, 6) == [0, 2]
    assert stream_priorities(p, g, 1) == [0, 0]


def test_stream_priorities_critical_stream_first(dagrun_bin, googlenet, tmp_path):
    from dagrun_torch.plan import stream_priorities
    p = plan_for(dagrun_bin, googlenet, tmp_path)
    r = stream_priorities(p, googlenet, 6)
    assert len(r) == len(p.streams) and r[0] == 0 and max(r) > 0
