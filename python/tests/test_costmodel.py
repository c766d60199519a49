"""The cost model, the lower bound and the schedule choice: no torch or GPU needed."""
import gzip
import json
import math
import os
import subprocess

import pytest

from conftest import REPO, TESTDATA, package_env
from dagrun_torch import costmodel as cmod
from dagrun_torch.plan import Plan, launch_dag

GRAPHS = os.path.join(REPO, "specs", "models", "graphs")
H200 = os.path.join(TESTDATA, "h200", "perf")


def diamond():
    """a → (b, c) → d, with c writing a tensor b reads (WAR) and d reading both."""
    return {"model": "diamond", "tensors": [{"id": t, "bytes": 16, "kind": "activation"} for t in "xyzw"],
            "nodes": [{"id": "a", "reads": [], "writes": ["x"], "duration_us": 5},
                      {"id": "b", "reads": ["x"], "writes": ["y"], "duration_us": 10},
                      {"id": "c", "reads": ["x"], "writes": ["z"], "duration_us": 20},
                      {"id": "d", "reads": ["y", "z"], "writes": ["w"], "duration_us": 1}]}


def model(us_occ, **kw):
    return cmod.CostModel("test", 132, {k: cmod.NodeCost(u, o) for k, (u, o) in us_occ.items()}, **kw)


def test_data_dag_raw_war_waw():
    g = {"nodes": [{"id": "w1", "reads": [], "writes": ["t"]},
                   {"id": "r1", "reads": ["t"], "writes": ["u"]},
                   {"id": "w2", "reads": [], "writes": ["t"]},   # WAR on r1, WAW on w1
                   {"id": "r2", "reads": ["t", "u"], "writes": []}]}
    order, preds = cmod.data_dag(g)
    assert order == ["w1", "r1", "w2", "r2"]
    assert preds == {"w1": set(), "r1": {"w1"}, "w2": {"w1", "r1"}, "r2": {"w2", "r1"}}


def test_lower_bound_takes_the_larger():
    g = diamond()
    narrow = cmod.CostModel.uniform(g, occupancy=0.1)
    lb = cmod.lower_bound(g, narrow)
    assert lb["cp_us"] == pytest.approx(26) and lb["cp_nodes"] == 3
    assert lb["sm_us"] == pytest.approx(3.6) and lb["limit"] == "critical path" and lb["bound_us"] == pytest.approx(26)
    full = cmod.CostModel.uniform(g, occupancy=1.0)
    lb = cmod.lower_bound(g, full)
    assert lb["sm_us"] == pytest.approx(36) and lb["limit"] == "SM-time" and lb["bound_us"] == pytest.approx(36)


def test_simulate_processor_sharing():
    order, preds = ["a", "b"], {"a": set(), "b": set()}
    # two kernels that fit together run as if alone
    assert cmod.simulate(order, preds, model({"a": (10, 0.5), "b": (10, 0.5)})) == pytest.approx(10)
    # together they ask for 1.5 GPUs: both run at 1/1.5 until done
    assert cmod.simulate(order, preds, model({"a": (10, 0.75), "b": (10, 0.75)})) == pytest.approx(15)
    # interference slows co-running kernels even when they fit
    assert cmod.simulate(order, preds, model({"a": (10, 0.1), "b": (10, 0.1)}, interference=0.5)) == pytest.approx(15)
    # the capacity parameter scales what fits
    assert cmod.simulate(order, preds, model({"a": (10, 0.75), "b": (10, 0.75)}, capacity=1.5)) == pytest.approx(10)
    # a chain is the sum, whatever the width
    assert cmod.simulate(["a", "b"], {"a": set(), "b": {"a"}}, model({"a": (10, 1), "b": (7, 1)})) == pytest.approx(17)


def test_simulate_priorities_and_front_end():
    order, preds = ["a", "b"], {"a": set(), "b": set()}
    m = model({"a": (10, 1.0), "b": (10, 1.0)})
    # shared: both at half speed, both end at 20
    assert cmod.simulate(order, preds, m) == pytest.approx(20)
    # a first: a ends at 10, b runs alone 10..20: the makespan is the same, a's chain gains
    assert cmod.simulate(order, preds, m, ranks={"a": 0, "b": 1}) == pytest.approx(20)
    chain = ["a", "b", "c"]
    p = {"a": set(), "b": set(), "c": {"a"}}
    m = model({"a": (10, 1.0), "b": (10, 1.0), "c": (10, 1.0)})
    assert cmod.simulate(chain, p, m) == pytest.approx(30)                       # c starts at 20
    assert cmod.simulate(chain, p, m, ranks={"a": 0, "c": 0, "b": 1}) == pytest.approx(30)
    # the front end dispatches one kernel per launch_us: a third start waits
    m = model({"a": (1, 0.1), "b": (1, 0.1), "c": (1, 0.1)}, launch_us=2.0)
    assert cmod.simulate(["a", "b", "c"], {"a": set(), "b": set(), "c": set()}, m) == pytest.approx(5)


def test_simulate_rejects_a_cycle():
    with pytest.raises(ValueError, match="cycle"):
        cmod.simulate(["a", "b"], {"a": {"b"}, "b": {"a"}}, model({"a": (1, 1), "b": (1, 1)}))


def test_fit_recovers_the_parameters():
    pairs = []
    for i, (a, b, oa, ob) in enumerate([(5, 9, 0.2, 0.3), (12, 4, 0.8, 0.6), (7, 7, 0.5, 0.9), (3, 20, 0.05, 0.4),
                                        (10, 11, 1.0, 1.0), (6, 2, 0.3, 0.1)]):
        p = {"a_us": a, "b_us": b, "a_occ": oa, "b_occ": ob, "repeats": 10}
        p["together_us"] = cmod._pair_makespan(p, 1.3, 0.16)
        pairs.append(p)
    c, i, err = cmod.fit(pairs)
    assert c == pytest.approx(1.3, abs=0.051) and i == pytest.approx(0.16, abs=0.021) and err < 0.01
    assert cmod.fit([])[:2] == (1.0, 0.0)


def test_kernels_by_annotation_and_occupancy():
    trace = {"traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "dagrun:conv1", "ts": 10, "dur": 20, "tid": 1},
        {"ph": "X", "cat": "user_annotation", "name": "dagrun:relu", "ts": 40, "dur": 5, "tid": 1},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 12, "dur": 2, "tid": 1, "args": {"correlation": 5}},
        {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "ts": 15, "dur": 2, "tid": 1, "args": {"correlation": 6}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 41, "dur": 2, "tid": 1, "args": {"correlation": 7}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 90, "dur": 2, "tid": 1, "args": {"correlation": 8}},
        {"ph": "X", "cat": "kernel", "name": "k1", "ts": 50, "dur": 8, "tid": 7, "args": {"correlation": 5, "grid": [10, 1, 1], "block": [128, 1, 1],
                                                                                     "registers per thread": 32, "shared memory": 0, "est. achieved occupancy %": 25}},
        {"ph": "X", "cat": "kernel", "name": "k2", "ts": 60, "dur": 2, "tid": 7, "args": {"correlation": 6, "warps per SM": 16.0}},
        {"ph": "X", "cat": "gpu_memset", "name": "memset", "ts": 62, "dur": 1, "tid": 7, "args": {"correlation": 7}},
        {"ph": "X", "cat": "kernel", "name": "outside", "ts": 95, "dur": 1, "tid": 7, "args": {"correlation": 8}},
    ]}
    k = cmod.kernels_by_annotation(trace)
    assert sorted(k) == ["conv1", "relu"]
    assert [x["name"] for x in k["conv1"]] == ["k1", "k2"]
    assert k["conv1"][0]["occupancy"] == 0.25 and k["conv1"][1]["occupancy"] == 0.25 and k["conv1"][0]["grid"] == [10, 1, 1]
    assert k["relu"][0]["occupancy"] == 0.0
    assert cmod.node_occupancy(k["conv1"]) == pytest.approx(0.25)
    assert cmod.node_occupancy([]) == 1.0
    # from grid and block: 132 blocks of 64 threads fill 2 of 64 warp slots per SM
    assert cmod.kernel_occupancy({"grid": [132, 1, 1], "block": [64, 1, 1]}) == pytest.approx(2 / 64)


def test_attach_and_from_graph():
    g = diamond()
    c = cmod.CostModel.uniform(g, occupancy=0.3)
    c.capacity, c.interference, c.launch_us = 1.4, 0.2, 0.4
    back = cmod.from_graph(json.loads(json.dumps(cmod.attach(g, c))))
    assert back.to_dict() == c.to_dict()
    g["cost_model"]["nodes"].pop("d")
    with pytest.raises(ValueError, match="no cost for 1 graph nodes"):
        cmod.from_graph(g)
    assert cmod.from_graph(diamond()) is None
    with pytest.raises(ValueError, match="not a dagrun_torch cost model"):
        cmod.CostModel.from_dict({"nodes": {"a": {}}})


def recorded_costs():
    with gzip.open(os.path.join(H200, "costmodels.json.gz"), "rt") as f:
        return {m: cmod.CostModel.from_dict(d) for m, d in json.load(f).items()}


def test_recorded_h200_cost_models_read_back():
    costs = recorded_costs()
    assert sorted(costs) == ["googlenet", "inception_v3", "inception_v4", "nasnetalarge"]
    for c in costs.values():
        assert len(c.nodes) > 100 and 0 < c.launch_us < 5 and c.capacity > 0
        assert all(0.0 <= n.occupancy <= 1.0 for n in c.nodes.values())
        assert sum(len(n.kernels) for n in c.nodes.values()) >= len(c.nodes)


def recorded_graph(model, cost):
    """The graph the recorded run planned: the repository's traced graph of
    the model without the eval-mode dropouts (the exporter now drops them as
    views of their input), with the recorded node times."""
    with open(os.path.join(GRAPHS, model + ".json")) as f:
        g = json.load(f)
    alias, nodes = {}, []
    for n in g["nodes"]:
        reads = [alias.get(t, t) for t in n["reads"]]
        writes = [alias.get(t, t) for t in n["writes"]]
        if n["id"] not in cost.nodes:
            alias[n["writes"][0]] = reads[0]
            continue
        nodes.append(dict(n, reads=reads, writes=writes, duration_us=cost.nodes[n["id"]].us))
    used = {t for n in nodes for t in n["reads"] + n["writes"]}
    return dict(g, nodes=nodes, tensors=[t for t in g["tensors"] if t["id"] in used])


def test_recorded_h200_sweep(dagrun_bin, tmp_path):
    """The H200 run's ten capped plans per model, replanned here: the
    recorded cost model reproduces the predictions the run printed, its
    choice among the caps is within 3% of the fastest cap measured, and its
    median error over the plans is under 9%."""
    with open(os.path.join(H200, "schedules.json")) as f:
        rows = {r["model"]: r for r in json.load(f)["rows"]}
    errs = []
    for model, cost in recorded_costs().items():
        g = recorded_graph(model, cost)
        (tmp_path / "g.json").write_text(json.dumps(g))
        subprocess.run([dagrun_bin, "import", str(tmp_path / "g.json"), "-o", str(tmp_path / "g.yaml")], check=True)
        cands = {k: v for k, v in rows[model]["cands"].items() if k.isdigit()}
        assert len(cands) == 10
        plans = {}
        for cap, rec in cands.items():
            out = subprocess.run([dagrun_bin, "plan", str(tmp_path / "g.yaml"), "--json", "--max-streams", cap],
                                 check=True, capture_output=True, text=True).stdout
            plans[cap] = Plan.from_dict(json.loads(out))
            if len(plans[cap].streams) != rec["streams"]:
                pytest.skip("the planner's plans changed since the recorded run (%s cap %s: %d streams, recorded %d)" % (
                    model, cap, len(plans[cap].streams), rec["streams"]))
        for cap in ("2", "16", "0"):
            assert cmod.predict(plans[cap], cost, g) == pytest.approx(cands[cap]["predicted_priority_us"], rel=1e-3)
            assert cmod.predict(plans[cap], cost) == pytest.approx(cands[cap]["predicted_plain_us"], rel=1e-3)
        best, pred = cmod.choose(cost, lambda c: plans[str(c)], caps=[int(c) for c in cands], graph=g)
        measured = {c: v["ms"] * 1000 for c, v in cands.items()}
        assert measured[str(best)] <= 1.03 * min(measured.values()), (model, best)
        errs += [abs(math.log(pred[int(c)]["predicted_us"] / measured[c])) for c in cands]
    assert sorted(errs)[len(errs) // 2] < 0.09


@pytest.fixture(scope="module")
def googlenet_plans(dagrun_bin, tmp_path_factory):
    d = tmp_path_factory.mktemp("gn")
    with open(os.path.join(GRAPHS, "googlenet.json")) as f:
        g = json.load(f)
    (d / "g.json").write_text(json.dumps(g))
    subprocess.run([dagrun_bin, "import", str(d / "g.json"), "-o", str(d / "g.yaml")], check=True)

    def plan_for(cap):
        out = subprocess.run([dagrun_bin, "plan", str(d / "g.yaml"), "--json", "--max-streams", str(cap)],
                             check=True, capture_output=True, text=True).stdout
        return Plan.from_dict(json.loads(out))
    return g, plan_for


def test_launch_dag_orders_every_dependency(googlenet_plans):
    g, plan_for = googlenet_plans
    order, deps = cmod.data_dag(g)
    for cap in (1, 4, 0):
        porder, preds = launch_dag(plan_for(cap))
        assert sorted(porder) == sorted(order)
        reach = {}
        for v in porder:
            r = set(preds[v])
            for p in preds[v]:
                r |= reach[p]
            reach[v] = r
        missing = [(u, v) for v in order for u in deps[v] if u not in reach[v]]
        assert not missing, "cap %d: the plan's DAG misses %s" % (cap, missing[:3])


def test_choose_predicts_and_picks_the_fastest(googlenet_plans):
    g, plan_for = googlenet_plans
    wide = cmod.CostModel.uniform(g, occupancy=0.0)
    wide.capacity = 1e9
    cp = cmod.lower_bound(g, wide)["cp_us"]
    best, cands = cmod.choose(wide, plan_for, caps=(1, 4, 0), graph=g)
    # one stream runs every node in turn; without width, the uncapped plan
    # (a minimum path cover adds no order between independent chains) runs at the critical path
    assert cands[1]["predicted_us"] == pytest.approx(sum(n["duration_us"] for n in g["nodes"]))
    assert cands[0]["predicted_us"] == pytest.approx(cp)
    assert cands[best]["predicted_us"] == min(c["predicted_us"] for c in cands.values())
    # a GPU one kernel wide gains nothing from streams: every plan takes the sum
    narrow = cmod.CostModel.uniform(g, occupancy=1.0)
    best, cands = cmod.choose(narrow, plan_for, caps=(1, 4, 0))
    assert best == 1 and all(c["predicted_us"] == pytest.approx(cands[1]["predicted_us"]) for c in cands.values())
    with pytest.raises(ValueError):
        cmod.choose(wide, plan_for, caps=())


def test_choose_cap_uses_the_stored_model(dagrun_bin):
    torch = pytest.importorskip("torch")
    from dagrun_torch.exporter import export
    from dagrun_torch.runner import choose_cap

    class Branches(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(8, 8)
            self.b = torch.nn.Linear(8, 8)
            self.c = torch.nn.Linear(8, 8)

        def forward(self, x):
            return torch.relu(self.a(x)) + torch.sigmoid(self.b(x)) + torch.tanh(self.c(x))
    x = torch.randn(2, 8)
    ex = export(Branches().eval(), (x,))
    for n in ex.graph["nodes"]:
        n["duration_us"] = 10.0
    cmod.attach(ex.graph, cmod.CostModel.uniform(ex.graph, occupancy=0.2))
    cap, info = choose_cap(ex, (x,), caps=(1, 2, 0), dagrun=dagrun_bin)
    assert info["predicted_us"][1] == pytest.approx(10.0 * len(ex.graph["nodes"]))
    assert cap != 1 and info["predicted_us"][cap] == min(info["predicted_us"].values())
    # kernels that each fill the GPU gain nothing from streams: the single stream is kept
    cmod.attach(ex.graph, cmod.CostModel.uniform(ex.graph, occupancy=1.0))
    cap, info = choose_cap(ex, (x,), caps=(1, 2, 0), dagrun=dagrun_bin)
    assert cap == 1
    # with the staged schedule and the priority order among the candidates
    from dagrun_torch.schedule import EXTRA
    cmod.attach(ex.graph, cmod.CostModel.uniform(ex.graph, occupancy=0.2))
    cap, info = choose_cap(ex, (x,), caps=(1, 0), extra=EXTRA, dagrun=dagrun_bin)
    assert set(info["predicted_us"]) == {1, 0} | set(EXTRA)
    assert info["predicted_us"][info["candidate"]] == min(info["predicted_us"].values()) and cap != 1
    with pytest.raises(ValueError):
        choose_cap(ex, (x,), caps=(1,), extra=("fastest",), dagrun=dagrun_bin)


def test_bench_and_costmodel_refuse_bad_options():
    pytest.importorskip("torch")
    import sys

    def run(*args):
        return subprocess.run([sys.executable, "-m", "dagrun_torch"] + list(args), env=package_env(),
                              capture_output=True, text=True)
    r = run("bench", "--schedules", "--inductor")
    assert r.returncode == 2 and "--schedules and --inductor are different runs; give one" in r.stderr
    r = run("bench", "--inductor", "--compile-models", "lenet")
    assert r.returncode == 2 and "unknown model 'lenet'" in r.stderr
    r = run("costmodel", "--model", "googlenet", "--out", "x.json", "--size", "0")
    assert r.returncode == 2 and "--size" in r.stderr


def test_bench_tables_render_the_recorded_runs():
    pytest.importorskip("torch")
    from dagrun_torch import bench
    for js, md, table in (("schedules.json", "schedules.md", bench.schedule_table),
                          ("inductor.json", "inductor.md", bench.inductor_table)):
        with open(os.path.join(H200, js)) as f:
            rows = json.load(f)["rows"]
        with open(os.path.join(H200, md)) as f:
            recorded = f.read().split("\n\n", 1)[1].strip()
        assert table(rows) == recorded, js


def test_costmodel_refuses_an_out_it_cannot_write_before_the_gpu(tmp_path, capsys, monkeypatch):
    """--out is checked before the GPU and the model: not a traceback after
    minutes of measuring."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: pytest.fail("asked for the GPU"))
    for out, why in ((tmp_path, "a folder"), (tmp_path / "no" / "g.json", "folder %s does not exist" % (tmp_path / "no"))):
        with pytest.raises(SystemExit) as e:
            cmod.main(["--model", "googlenet", "--out", str(out)])
        assert e.value.code == 2
        assert "costmodel: error: --out %s: %s; want the path of the graph JSON file to write (`" % (out, why) in \
            capsys.readouterr().err


def test_costmodel_input_larger_than_memory_or_one_the_model_cannot_take_is_one_line(tmp_path, capsys, monkeypatch):
    torch = pytest.importorskip("torch")
    from dagrun_torch import exporter

    class Model:
        def eval(self):
            return self

        def cuda(self):
            return self

    def export(model, inputs):
        raise exporter.ExportError("node conv (Conv2d) fails on the example inputs: too small")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(exporter, "_memory_bytes", lambda device: 3 * 64 * 64 * 4)
    monkeypatch.setattr(exporter, "build_model", lambda name: (Model(), "test"))
    monkeypatch.setattr(exporter, "export", export)
    monkeypatch.setattr(torch, "randn", lambda *a, **k: None)
    out = str(tmp_path / "g.json")
    with pytest.raises(SystemExit) as e:
        cmod.main(["--model", "m", "--out", out, "--size", "65"])
    assert e.value.code == 2
    assert ("costmodel: error: --size 65: the input alone is 50700 bytes, more than the cuda's 49152 bytes of memory (`"
            in capsys.readouterr().err)
    assert cmod.main(["--model", "m", "--out", out, "--size", "64"]) == 2          # fits, to the byte
    assert capsys.readouterr().err == "costmodel: m: node conv (Conv2d) fails on the example inputs: too small\n"


def test_costmodel_figures_are_named_one_by_one_before_the_gpu(tmp_path, capsys, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = str(tmp_path / "g.json")
    for argv, says in ((["--size", "0"], "--size 0: want an integer ≥ 1"),
                       (["--pairs", "-1"], "--pairs -1: want an integer from 0 to 1000"),
                       (["--pairs", "1001"], "--pairs 1001: want an integer from 0 to 1000")):
        with pytest.raises(SystemExit) as e:
            cmod.main(["--model", "googlenet", "--out", out] + argv)
        assert e.value.code == 2
        assert "costmodel: error: %s (`" % says in capsys.readouterr().err
    for argv in (["--size", "1"], ["--pairs", "0"], ["--pairs", "1000"]):
        assert cmod.main(["--model", "googlenet", "--out", out] + argv) == 2
        assert capsys.readouterr().err == "costmodel: needs a GPU\n"
