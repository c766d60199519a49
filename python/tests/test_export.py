"""Export on the CPU (torch.fx; no timing): aliasing, in-place ops, the graph format."""
import json
import os
import subprocess

import pytest

torch = pytest.importorskip("torch")
from conftest import TESTDATA  # noqa: E402
from dagrun_torch.exporter import ExportError, export, main as export_main  # noqa: E402


class Branchy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(3, 4, 1)
        self.b = torch.nn.Conv2d(3, 4, 1)
        self.relu = torch.nn.ReLU(inplace=True)
        self.drop = torch.nn.Dropout(0.5)
        self.fc = torch.nn.Linear(8 * 4 * 4, 2)

    def forward(self, x):
        a = self.relu(self.a(x))          # in-place module
        b = self.b(x)
        b.add_(1.0)                       # in-place method
        y = torch.cat([a, b], 1)
        y = self.drop(y)                  # eval: returns its input (an alias)
        y = y.flatten(1)                  # a view
        return self.fc(y)


def test_export_branchy():
    torch.manual_seed(0)
    m = Branchy().eval()
    x = torch.randn(1, 3, 4, 4)
    ex = export(m, (x,), name="branchy")
    g = ex.graph
    nodes = {n["id"]: n for n in g["nodes"]}
    assert list(nodes) == ["a", "relu", "b", "add_", "cat", "fc"]
    assert g["dropped_view_nodes"] == 2  # drop, flatten
    kind = {t["id"]: t["kind"] for t in g["tensors"]}
    x_id = nodes["a"]["reads"][0]
    assert kind[x_id] == "input"
    assert nodes["relu"]["reads"] == nodes["relu"]["writes"] == nodes["a"]["writes"]
    assert nodes["relu"]["inplace"] and nodes["add_"]["inplace"] and not nodes["cat"]["inplace"]
    assert nodes["add_"]["writes"] == nodes["b"]["writes"]
    assert nodes["cat"]["reads"] == nodes["a"]["writes"] + nodes["b"]["writes"]
    # fc reads the storage cat wrote, through the dropout and flatten aliases
    assert nodes["fc"]["reads"] == nodes["cat"]["writes"]
    assert ex.outputs == nodes["fc"]["writes"]
    assert all(t["bytes"] % 4 == 0 and t["bytes"] > 0 for t in g["tensors"])
    assert nodes["fc"]["param_bytes"] == (2 * 128 + 2) * 4
    assert ex.info["drop"].kind == "view" and ex.info["cat"].kind == "stage"


def test_export_googlenet_matches_the_reference_graph():
    # testdata/googlenet-reference.json is specs/models/graphs/googlenet.json,
    # exported on the H200 by an earlier exporter that kept the eval-mode
    # Dropout (which returns its input) as a node; this export drops it as an
    # alias. Otherwise the nodes and their read/write structure must agree.
    tvm = pytest.importorskip("torchvision.models")
    torch.manual_seed(0)
    m = tvm.googlenet(weights=None, aux_logits=False, init_weights=False).eval()
    ex = export(m, (torch.randn(1, 3, 224, 224),))
    with open(os.path.join(TESTDATA, "googlenet-reference.json")) as f:
        ref = json.load(f)
    alias = {}
    refnodes = []
    for n in ref["nodes"]:
        if n["op"] == "Dropout":
            alias[n["writes"][0]] = n["reads"][0]
            continue
        refnodes.append(dict(n, reads=[alias.get(t, t) for t in n["reads"]]))
    mine = ex.graph["nodes"]
    assert [n["id"] for n in mine] == [n["id"] for n in refnodes]
    tmap = {}
    for a, b in zip(mine, refnodes):
        assert (len(a["reads"]), len(a["writes"]), a["inplace"]) == (len(b["reads"]), len(b["writes"]), b["inplace"]), a["id"]
        for x, y in zip(a["reads"] + a["writes"], b["reads"] + b["writes"]):
            assert tmap.setdefault(x, y) == y, "node %s: tensor %s maps to %s and %s" % (a["id"], x, tmap[x], y)


class WritesInput(torch.nn.Module):
    def forward(self, x):
        return x.relu_()


def test_export_rejects_writing_the_input():
    with pytest.raises(ExportError, match="writes input tensor"):
        export(WritesInput(), (torch.randn(3),))


def test_export_rejects_bad_arguments():
    with pytest.raises(ValueError, match="timing"):
        export(Branchy(), (torch.randn(1, 3, 4, 4),), timing="graph")  # CPU inputs
    with pytest.raises(ValueError, match="nn.Module"):
        export(lambda x: x, (torch.randn(1),))
    with pytest.raises(ValueError, match="repeats"):
        export(Branchy(), (torch.randn(1, 3, 4, 4),), repeats=0)


class Untraceable(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # data-dependent control flow: fx cannot trace it
            return x * 2
        return x


def test_export_trace_failure_is_explained():
    with pytest.raises(ExportError, match="symbolic_trace failed"):
        export(Untraceable(), (torch.randn(3),), tracer="fx")


def test_cli_and_dagrun_import(tmp_path, dagrun_bin):
    out = tmp_path / "r.json"
    assert export_main(["--model", "resnet18", "--out", str(out), "--device", "cpu", "--size", "64"]) == 0
    g = json.loads(out.read_text())
    assert g["model"] == "resnet18" and g["tracer"] == "torch.fx.symbolic_trace" and len(g["nodes"]) > 40
    r = subprocess.run([dagrun_bin, "import", str(out), "-o", str(tmp_path / "r.yaml")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([dagrun_bin, "plan", str(tmp_path / "r.yaml")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_export_out_that_is_a_folder_is_a_usage_error_before_the_export(tmp_path, capsys, monkeypatch):
    """exit 2 and the folder named, before the model is built (not a
    traceback after the export)."""
    from dagrun_torch import exporter
    monkeypatch.setattr(exporter, "build_model", lambda name: pytest.fail("built the model"))
    with pytest.raises(SystemExit) as e:
        exporter.main(["--model", "resnet50", "--out", str(tmp_path)])
    assert e.value.code == 2
    assert "export: error: --out %s: a folder; want the path of the graph JSON file to write" % tmp_path in \
        capsys.readouterr().err


@pytest.mark.parametrize("argv,says", [
    (["--device", "cuda"], "--device cuda: needs a GPU, and torch.cuda.is_available() is False"),
    (["--timing", "graph"], "--timing graph: needs a GPU, and torch.cuda.is_available() is False"),
    (["--device", "cuda", "--timing", "events"],
     "--device cuda and --timing events: needs a GPU, and torch.cuda.is_available() is False"),
    (["--device", "cpu", "--timing", "graph"], "--timing graph times kernels on the GPU: not with --device cpu (--timing none)"),
])
def test_export_options_that_need_a_gpu_are_usage_errors_before_the_model(argv, says, capsys, monkeypatch, tmp_path):
    """exit 2 with one line, before the model is built, not a traceback
    after it."""
    from dagrun_torch import exporter
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(exporter, "build_model", lambda name: pytest.fail("built the model"))
    with pytest.raises(SystemExit) as e:
        exporter.main(["--model", "resnet18", "--out", str(tmp_path / "g.json")] + argv)
    assert e.value.code == 2
    assert "export: error: %s (`" % says in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--size", "--batch", "--repeats"])
def test_export_names_the_figure_below_1(flag, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        export_main(["--model", "resnet18", "--out", str(tmp_path / "g.json"), flag, "0"])
    assert e.value.code == 2
    assert "export: error: %s 0: want an integer ≥ 1 (`" % flag in capsys.readouterr().err


def test_export_repeats_are_bounded_before_the_model(tmp_path, capsys, monkeypatch):
    from dagrun_torch import exporter
    monkeypatch.setattr(exporter, "build_model", lambda name: (Branchy(), "test"))
    out = str(tmp_path / "g.json")
    with pytest.raises(SystemExit) as e:
        exporter.main(["--model", "branchy", "--out", out, "--device", "cpu", "--size", "4", "--repeats", "100001"])
    assert e.value.code == 2
    assert "export: error: --repeats 100001: want an integer from 1 to 100000 (calls captured in each node's timed " \
        "CUDA graph) (`" in capsys.readouterr().err
    assert exporter.main(["--model", "branchy", "--out", out, "--device", "cpu", "--size", "4", "--repeats", "100000"]) == 0


def test_export_of_an_input_the_model_cannot_take_is_one_line(tmp_path, capsys):
    """A --size too small for the model's kernels: exit 2, the node and
    torch's reason in one line, nothing written."""
    out = tmp_path / "g.json"
    assert export_main(["--model", "googlenet", "--out", str(out), "--device", "cpu", "--size", "8"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("export: googlenet: node maxpool3 (MaxPool2d) fails on the example inputs: ") and \
        err.count("\n") == 1, err
    assert not out.exists()


def test_export_of_an_input_larger_than_memory_is_refused_before_the_model(tmp_path, capsys, monkeypatch):
    from dagrun_torch import exporter
    monkeypatch.setattr(exporter, "build_model", lambda name: pytest.fail("built the model"))
    monkeypatch.setattr(exporter, "_memory_bytes", lambda device: 3 * 64 * 64 * 4)
    with pytest.raises(SystemExit) as e:
        exporter.main(["--model", "resnet18", "--out", str(tmp_path / "g.json"), "--device", "cpu", "--size", "65"])
    assert e.value.code == 2
    assert ("export: error: --batch 1 --size 65: the input alone is 50700 bytes, more than the cpu's 49152 bytes of "
            "memory (`") in capsys.readouterr().err
    # 64×64 fits (to the byte): the model is built and run, and Branchy's fc takes 4×4 inputs only
    monkeypatch.setattr(exporter, "build_model", lambda name: (Branchy(), "test"))
    assert exporter.main(["--model", "branchy", "--out", str(tmp_path / "g.json"), "--device", "cpu", "--size", "64"]) == 2
    assert capsys.readouterr().err.startswith("export: branchy: node fc (Linear) fails on the example inputs: ")


def test_the_export_tracer_on_a_torch_without_torch_export_says_only_that(monkeypatch):
    from dagrun_torch.exporter import trace
    monkeypatch.delattr(torch, "export", raising=False)
    with pytest.raises(ExportError) as e:
        trace(torch.nn.Linear(2, 2), (torch.zeros(1, 2),), tracer="export")
    assert str(e.value) == "this torch (%s) has no torch.export" % torch.__version__
