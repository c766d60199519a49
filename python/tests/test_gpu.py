"""Tests that need a GPU (skipped elsewhere): compile a model on its plan and
verify it bit for bit with delays; record real multi-stream programs and
check them with dagrun."""

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs CUDA", allow_module_level=True)

import dagrun_torch  # noqa: E402
from dagrun_torch.patterns import PATTERNS  # noqa: E402
from dagrun_torch.patterns.run import _context, calibrate_sleep  # noqa: E402
from dagrun_torch.runner import bitwise_equal  # noqa: E402


@pytest.fixture(scope="module")
def googlenet():
    tvm = pytest.importorskip("torchvision.models")
    torch.manual_seed(0)
    m = tvm.googlenet(weights=None, aux_logits=False, init_weights=False).eval().cuda()
    return m, torch.randn(1, 3, 224, 224, device="cuda")


@pytest.mark.parametrize("mode, cap", [("graph", None), ("graph", 4), ("eager", None)])
def test_compile_googlenet(googlenet, dagrun_bin, mode, cap):
    m, x = googlenet
    fast = dagrun_torch.compile(m, (x,), max_streams=cap, mode=mode, verify=True, dagrun=dagrun_bin)
    assert fast.streams > 1
    with torch.no_grad():
        ok, why = bitwise_equal(fast(x), m(x))
    assert ok, why
    x2 = torch.randn_like(x)
    with torch.no_grad():
        ok, why = bitwise_equal(fast(x2), m(x2))
    assert ok, why
    with pytest.raises(ValueError, match="compiled for"):
        fast(torch.randn(1, 3, 200, 200, device="cuda"))


@pytest.mark.parametrize("key", ["staged", "prio4"])
def test_schedule_forms_run_bit_identical(googlenet, dagrun_bin, key):
    """The staged schedule's stream pins and the priority order's node order
    go through the planner and run the model bit for bit, with delays."""
    from dagrun_torch import costmodel, schedule
    from dagrun_torch.runner import CompiledModel, plan_model
    m, x = googlenet
    ex = dagrun_torch.export(m, (x,))
    cost = costmodel.CostModel.uniform(ex.graph, occupancy=0.2)
    cap, form, _ = schedule.form(ex.graph, cost, key)
    plan = plan_model(ex, max_streams=cap, graph=form, dagrun=dagrun_bin)
    assert len(plan.streams) > 1
    if key == "staged":
        assert all(plan.streams[plan.stages[n["id"]]].name == n["stream"] for n in form["nodes"] if "stream" in n)
    cm = CompiledModel(ex, plan, "graph", (x,))
    cm.verify(x, trials=2)
    with torch.no_grad():
        ok, why = bitwise_equal(cm(x), m(x))
    assert ok, why


def test_compile_auto_chooses_among_the_schedules(googlenet, dagrun_bin):
    from dagrun_torch import costmodel, schedule
    m, x = googlenet
    ex = dagrun_torch.export(m, (x,))
    costmodel.attach(ex.graph, costmodel.CostModel.uniform(ex.graph, occupancy=0.2))
    fast = dagrun_torch.compile(m, (x,), max_streams="auto", exported=ex, verify=True, dagrun=dagrun_bin)
    s = fast.schedule
    assert set(schedule.EXTRA) <= set(s["predicted_us"])
    assert s["predicted_us"][s["candidate"]] == min(s["predicted_us"].values())
    assert fast.streams == s["streams"][s["candidate"]]


def test_verify_catches_a_missing_wait(googlenet, dagrun_bin):
    # Drop every wait from the lowered program: verify() must see wrong outputs.
    m, x = googlenet
    fast = dagrun_torch.compile(m, (x,), mode="eager", dagrun=dagrun_bin)
    _drop_waits(fast)
    with pytest.raises(AssertionError):
        fast.verify(x, trials=2, max_delay_us=500)


def _drop_waits(fast):
    prog = fast.program
    keep = [i for i, a in enumerate(prog.actions) if a.kind != "wait"]
    prog.actions = [prog.actions[i] for i in keep]
    prog.post = [prog.post[i] for i in keep]
    fast.actions = prog.actions


def test_compile_rejects_cpu_inputs(googlenet):
    m, _ = googlenet
    with pytest.raises(ValueError, match="CUDA"):
        dagrun_torch.compile(m, (torch.randn(1, 3, 224, 224),))


@pytest.mark.parametrize("p", PATTERNS, ids=[p.name for p in PATTERNS])
def test_patterns_recorded_and_checked(p, tmp_path, dagrun_bin):
    c = _context(8.0, 1.0, calibrate_sleep(0.5))
    for v in p.variants:
        path = str(tmp_path / ("%s-%s.yaml" % (p.name, v)))
        with dagrun_torch.record(path):
            p.program(v, c)
        res = dagrun_torch.check(path, dagrun=dagrun_bin)
        assert res.ok == (v == "fixed"), res.report()
        if v == "racy":
            assert res.fixes, res.report()
