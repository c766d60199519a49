"""The lowered plan run on the CPU with stand-in streams: every node runs at
its launch, views and host values are ready when needed, frees drop only
dead values, and the outputs equal the one-stream run bit for bit."""
import contextlib
import json
import subprocess

import pytest

torch = pytest.importorskip("torch")
from dagrun_torch.exporter import export  # noqa: E402
from dagrun_torch.plan import Plan, lower  # noqa: E402
from dagrun_torch.runner import _Program, bitwise_equal  # noqa: E402


class FakeStream:
    def __init__(self, log, i):
        self.log, self.i = log, i

    def wait_event(self, e):
        self.log.append(("wait", self.i, e.i))


class FakeEvent:
    def __init__(self, log, i):
        self.log, self.i = log, i

    def record(self, s=None):
        self.log.append(("record", s.i if s else None, self.i))


def run_on_cpu(ex, plan):
    acts = lower(plan, ex.graph, keep=ex.outputs)
    prog = _Program(ex, acts)
    log = []
    streams = [FakeStream(log, i) for i in range(len(plan.streams))]
    events = [FakeEvent(log, i) for i in range(plan.events)]
    joins = [FakeEvent(log, -2 - i) for i in range(len(streams) - 1)]
    current = []

    @contextlib.contextmanager
    def ctx(s):
        current.append(s.i)
        yield
        current.pop()
    x = ex._x
    with torch.no_grad():
        out = prog.run([x], streams, events, FakeEvent(log, -1), joins, stream_ctx=ctx, delays={0: 5}, sleep=lambda c: log.append(("sleep", current[-1], c)))
    return out, log, acts


def plan_of(dagrun_bin, ex, tmp_path, *args):
    ex.save(str(tmp_path / "g.json"))
    subprocess.run([dagrun_bin, "import", str(tmp_path / "g.json"), "-o", str(tmp_path / "g.yaml")], check=True)
    out = subprocess.run([dagrun_bin, "plan", str(tmp_path / "g.yaml"), "--json"] + list(args), check=True,
                         capture_output=True, text=True).stdout
    return Plan.from_dict(json.loads(out))


@pytest.mark.parametrize("model", ["googlenet", "inception_v3", "densenet121"])
def test_schedule_on_cpu_matches_one_stream(model, dagrun_bin, tmp_path):
    tvm = pytest.importorskip("torchvision.models")
    torch.manual_seed(0)
    kw = {"aux_logits": False, "init_weights": False} if model in ("googlenet", "inception_v3") else {}
    m = getattr(tvm, model)(weights=None, **kw).eval()
    size = 299 if model == "inception_v3" else 96
    x = torch.randn(1, 3, size, size)
    ex = export(m, (x,))
    ex._x = x
    for args in ([], ["--max-streams", "3"]):
        plan = plan_of(dagrun_bin, ex, tmp_path, *args)
        out, log, acts = run_on_cpu(ex, plan)
        with torch.no_grad():
            ok, why = bitwise_equal(out, ex.gm(x))
        assert ok, why
        assert log[0] == ("record", 0, -1)  # fork from the current stream
        assert ("sleep", acts[0].stream, 5) in log
        n_wait = sum(1 for a in acts if a.kind == "wait")
        # the plan's waits, each side stream's wait on the fork, the current stream's wait on each join
        assert sum(1 for e in log if e[0] == "wait") == n_wait + 2 * (len(plan.streams) - 1)


@pytest.mark.parametrize("kw,says", [
    ({"max_streams": -1}, "max_streams=-1: want None or 0 (no cap), an integer from 1 to 2147483647 or 'auto'"),
    ({"max_streams": 2**31}, "max_streams=2147483648: want None or 0 (no cap), an integer from 1 to 2147483647 or 'auto'"),
    ({"max_streams": True}, "max_streams=True: want"),
    ({"max_streams": "Auto"}, "max_streams='Auto': want"),
    ({"strategy": "fast"}, "strategy='fast': want 'default', 'single', 'round-robin' or 'naive'"),
])
def test_compile_refuses_bad_plan_arguments_before_anything(kw, says):
    """On any machine, before the inputs, CUDA or the export are looked at;
    the bounds on both sides (0 and 2**31 - 1 pass on to the CUDA check)."""
    from dagrun_torch.runner import compile as dcompile
    m = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError) as e:
        dcompile(m, (torch.zeros(1, 2),), **kw)
    assert str(e.value).startswith(says), str(e.value)
    for cap in (0, 2**31 - 1, None, "auto"):
        with pytest.raises(ValueError, match="needs CUDA"):
            dcompile(m, (torch.zeros(1, 2),), max_streams=cap)


def test_plan_model_takes_no_auto_and_no_bool():
    from dagrun_torch.runner import plan_model
    for bad in ("auto", True, 2**31):
        with pytest.raises(ValueError, match="max_streams=.*: want None or 0 \\(no cap\\), an integer from 1 to 2147483647$"):
            plan_model(None, max_streams=bad)
