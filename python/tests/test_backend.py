"""The torch.compile backend's parts that need no GPU: options, the
fallback decisions (with Inductor mocked), the plan choice, the entry point."""
import os
import re
import sys
import warnings
from pathlib import Path

import pytest

from conftest import INSTALLED, REPO

from dagrun_torch import backend as be


def test_options_parse_and_refuse_bad_values(monkeypatch):
    o = be.parse_options({"max_streams": 4, "strategy": "round-robin", "verify": True})
    assert (o.max_streams, o.strategy, o.verify) == (4, "round-robin", True)
    assert be.parse_options(None) == be.Options()
    assert be.parse_options({"max_streams": 0}).max_streams == 0
    assert be.parse_options({"max_streams": "auto"}).max_streams == "auto"
    # the largest cap, a spec's max_streams bound, on both sides
    assert be.parse_options({"max_streams": 2**31 - 1}).max_streams == be.MAX_STREAMS == 2**31 - 1
    with pytest.raises(ValueError, match=re.escape("max_streams=2147483648: want \"auto\", 0 (no cap) or an integer "
                                                   "from 1 to 2147483647")):
        be.parse_options({"max_streams": 2**31})
    for bad, msg in (({"max_streams": -1}, "max_streams=-1"), ({"max_streams": True}, "max_streams=True"),
                     ({"max_streams": "8"}, "max_streams='8'"), ({"strategy": "fast"}, "strategy='fast'"),
                     ({"verify": 1}, "verify=1"), ({"verify_trials": -1}, "verify_trials=-1: want an integer from 0 to 100"),
                     ({"verify_trials": 101}, "verify_trials=101: want an integer from 0 to 100"),
                     ({"streams": 4}, "unknown option 'streams'"), ([("verify", True)], "want a dict"),
                     ({"verify": True, "verify_trials": 0}, "verify=True with verify_trials=0: want at least 1 run"),
                     ({"dagrun": 3}, "dagrun=3: not a path; want the path of an executable"),
                     ({"dagrun": "/nonexistent/dagrun"}, "dagrun='/nonexistent/dagrun': no such file; want the path of an executable"),
                     ({"dagrun": os.path.dirname(__file__)}, ": not a file; want the path of an executable"),
                     ({"dagrun": __file__}, ": not executable; want the path of an executable"),
                     # a value whose repr reads as a good one names its type
                     ({"max_streams": 4.0}, "max_streams=4.0 (a builtins.float)"),
                     ({"verify_trials": 2.0}, "verify_trials=2.0 (a builtins.float)"),
                     ({"strategy": ["default"]}, "strategy=['default'] (a builtins.list): want one of"),
                     ({"verify": Truthy()}, "verify=True (a test_backend.Truthy): want True or False")):
        with pytest.raises(ValueError, match=re.escape(msg)):
            be.parse_options(bad)
    # the sides that pass: one run with delays; no runs without verify; an executable file
    assert be.parse_options({"verify": True, "verify_trials": 1}).verify_trials == 1
    assert be.parse_options({"verify": True, "verify_trials": 100}).verify_trials == be.MAX_VERIFY_TRIALS == 100
    assert be.parse_options({"verify": False, "verify_trials": 0}).verify_trials == 0
    assert be.parse_options({"dagrun": Path(sys.executable)}).dagrun == sys.executable
    # a name without a folder is the file in the current folder that was checked, not a search of PATH
    monkeypatch.chdir(os.path.dirname(sys.executable))
    assert be.parse_options({"dagrun": os.path.basename(sys.executable)}).dagrun == sys.executable


def test_option_errors_show_a_long_value_cut_short():
    """A value's repr up to MAX_SHOWN characters is shown whole; a longer
    one is cut there, with its length."""
    assert be.MAX_SHOWN == 80
    with pytest.raises(ValueError) as e:
        be.parse_options({"max_streams": 10**100})
    assert str(e.value) == ("dagrun backend: max_streams=%s… (101 characters): want \"auto\", 0 (no cap) or an integer "
                            "from 1 to 2147483647" % ("1" + "0" * 79))
    with pytest.raises(ValueError) as e:
        be.parse_options({"dagrun": "/x" * 39 + "yz"})     # a repr of 82 characters
    assert str(e.value).startswith("dagrun backend: dagrun='%s… (82 characters): no such file" % ("/x" * 39 + "y"))
    with pytest.raises(ValueError) as e:
        be.parse_options({"dagrun": "/x" * 39})            # 80: whole
    assert str(e.value).startswith("dagrun backend: dagrun='%s': no such file" % ("/x" * 39))
    with pytest.raises(ValueError, match=re.escape("strategy=%s… (5003 characters) (a builtins.bytes): want one of" %
                                                   repr(b"x" * 5000)[:80])):
        be.parse_options({"strategy": b"x" * 5000})
    with pytest.raises(ValueError, match=re.escape("unknown option '%s… (102 characters) (known: dagrun," % ("k" * 79))):
        be.parse_options({"k" * 100: 1})
    with pytest.raises(ValueError, match=re.escape("options=%s… (3000 characters) (a builtins.list): want a dict" %
                                                   repr([0] * 1000)[:80])):
        be.parse_options([0] * 1000)


class Truthy:
    def __repr__(self):
        return "True"


def test_options_take_numpy_integers_and_name_the_type_of_other_values():
    np = pytest.importorskip("numpy")
    o = be.parse_options({"max_streams": np.int64(4), "verify_trials": np.int32(1), "verify": True})
    assert (o.max_streams, o.verify_trials) == (4, 1) and type(o.max_streams) is int and type(o.verify_trials) is int
    assert be.parse_options({"max_streams": np.int64(0)}).max_streams == 0
    # (numpy 2 writes np.int64(-1) where numpy 1 writes -1: the message has the value's repr)
    for bad, msg in (({"max_streams": np.int64(-1)}, "max_streams=%r (a numpy.int64)" % np.int64(-1)),
                     ({"max_streams": np.bool_(True)}, "max_streams=%r (a numpy.bool" % np.bool_(True)),
                     ({"verify": np.bool_(True)}, "verify=%r (a numpy.bool" % np.bool_(True)),
                     ({"strategy": np.array(["default"])}, "strategy=array(['default'], dtype='<U7') (a numpy.ndarray)"),
                     ({"max_streams": np.array([4, 16])}, "max_streams=array([ 4, 16]) (a numpy.ndarray)")):
        with pytest.raises(ValueError, match=re.escape(msg)):
            be.parse_options(bad)


class T:
    def __init__(self, requires_grad=False):
        self.requires_grad = requires_grad


def test_autograd_is_needed_only_with_grad_mode_and_an_input_that_requires_grad():
    assert be.needs_autograd([T(), T(True)], True)
    assert not be.needs_autograd([T(), T(True)], False)
    assert not be.needs_autograd([T(), T()], True)
    assert not be.needs_autograd([3, T()], True)
    # a weight the graph holds as an attribute (dynamo not inlining the module) counts as an input does
    torch = pytest.importorskip("torch")
    lin = torch.nn.Linear(2, 2)
    assert be.needs_autograd([T()], True, lin) and not be.needs_autograd([T()], False, lin)
    lin.requires_grad_(False)
    assert not be.needs_autograd([T()], True, lin)
    lin.register_buffer("running", torch.zeros(2, requires_grad=True))
    assert be.needs_autograd([T()], True, lin)


def cands(one, **others):
    c = {"1": {"streams": 1, "ms": one}}
    for k, (streams, ms) in others.items():
        c[k.lstrip("c")] = {"streams": streams, "ms": ms}
    return c


def test_choose_keeps_a_plan_only_two_percent_faster_than_one_stream():
    # exactly 2% faster: kept; a hair slower than that: Inductor's own path
    assert be.choose(cands(1.0, c4=(4, 0.98), c0=(9, 0.99))) == (4, "")
    best, why = be.choose(cands(1.0, c4=(4, 0.9801), c0=(9, 0.99)))
    assert best is None and "4 streams" in why and "less than 2% gain" in why
    assert be.choose(cands(1.0, c16=(16, 0.5), c0=(30, 0.6))) == (16, "")


def test_choose_takes_the_least_memory_among_plans_within_one_percent_of_the_fastest():
    c = cands(2.0, c4=(4, 1.0101), c16=(16, 1.0), c0=(25, 1.0))
    c["4"]["pool_mb"], c["16"]["pool_mb"], c["0"]["pool_mb"] = 140.0, 540.0, 840.0
    assert be.choose(c) == (16, "")                  # 1.01% slower than the fastest: too slow
    c["4"]["ms"] = 1.01
    assert be.choose(c) == (4, "")                   # exactly 1%: as fast, and the least memory
    c["4"]["ms"] = 1.0102
    assert be.choose(c) == (16, "")                  # a hair over 1%: the lesser of the fastest two
    c["16"]["pool_mb"] = 840.0
    assert be.choose(c) == (16, "")                  # same memory: fewer streams
    # a plan within 1% of the fastest but under the 2% gain over one stream is never taken
    c = cands(1.0, c4=(4, 0.985), c16=(16, 0.976))
    c["4"]["pool_mb"], c["16"]["pool_mb"] = 10.0, 900.0
    assert be.choose(c) == (16, "")


def test_eligible_drops_what_can_no_longer_be_chosen():
    c = cands(2.0, c4=(4, 1.0))
    assert be.eligible(c) == ["4"]
    c["16"] = {"streams": 16, "ms": 1.02}
    assert be.eligible(c) == ["4"]                   # 2% slower than the fastest so far
    c["0"] = {"streams": 30, "ms": 0.995}
    assert sorted(be.eligible(c)) == ["0", "4"]
    c["0"]["ms"] = 0.98
    assert be.eligible(c) == ["0"]
    assert be.eligible(cands(1.0, c4=(4, 0.99))) == []   # under the 2% gain
    assert be.eligible(cands(1.0)) == []


def test_choose_says_one_stream_or_no_predicted_gain():
    c = cands(1.0)
    c["0"] = {"streams": 1}
    assert be.choose(c) == (None, "dagrun's plan has one stream")
    c["0"] = {"streams": 3, "skipped": "no predicted gain"}
    best, why = be.choose(c)
    assert best is None and "predicts no gain" in why


def test_worth_timing_needs_streams_and_a_predicted_gain():
    assert not be.worth_timing({"streams": 1, "sum_us": 100, "ideal_us": 10})
    assert be.worth_timing({"streams": 2, "sum_us": 102, "ideal_us": 100})        # 2%: timed
    c = {"streams": 2, "sum_us": 101.9, "ideal_us": 100}
    assert not be.worth_timing(c) and c["skipped"] == "no predicted gain"
    assert be.worth_timing({"streams": 2})                                         # no prediction: timed


def test_static_inputs_are_weights_by_type_mark_or_source():
    torch = pytest.importorskip("torch")

    class Src:
        def __init__(self, n):
            self.n = n

        def name(self):
            return self.n

    class GA:
        def __init__(self, n):
            self.source = Src(n)

    class Node:
        def __init__(self, meta):
            self.op, self.meta = "placeholder", meta

    class G:
        def __init__(self, nodes):
            self.nodes = nodes

    class GM:
        def __init__(self, nodes):
            self.graph = G(nodes)

    x, w, b, m = torch.zeros(2), torch.nn.Parameter(torch.zeros(2)), torch.zeros(2), torch.zeros(2)
    m._dynamo_static_input_type = "unguarded"
    gm = GM([Node({"grapharg": GA("L['x']")}), Node({}), Node({"grapharg": GA("L['self']._modules['bn']._buffers['running_mean']")}),
             Node({})])
    assert be.static_inputs(gm, [x, w, b, m]) == [1, 2, 3]


def test_dynamic_inputs_are_sizes():
    torch = pytest.importorskip("torch")
    assert be.dynamic_inputs([torch.zeros(1), 3, torch.zeros(2), True]) == [1]


def test_output_form_puts_tensors_back_in_place():
    torch = pytest.importorskip("torch")
    a, b = torch.zeros(1), torch.ones(1)
    form = be._output_form((torch.zeros(1), None, torch.zeros(1)))
    assert form([a, b]) == (a, None, b)
    assert be._output_form([torch.zeros(1)])([b]) == [b]
    with pytest.raises(ValueError, match="not a tuple of tensors"):
        be._output_form({"x": a})


@pytest.fixture
def mocked(monkeypatch):
    """Inductor mocked: _inductor returns ("inductor", cudagraphs), _inductor_fx
    ("fx-inner", "fx"), and both record their calls (cudagraphs, or "fx")."""
    pytest.importorskip("torch")
    calls = []

    def fake_inductor(gm, inputs, cudagraphs):
        calls.append(cudagraphs)
        return ("inductor", cudagraphs)

    def fake_inductor_fx(gm, inputs):
        calls.append("fx")
        return ("fx-inner", "fx")
    monkeypatch.setattr(be, "_inductor", fake_inductor)
    monkeypatch.setattr(be, "_inductor_fx", fake_inductor_fx)
    monkeypatch.setattr(be, "_before_compile", lambda gm, inputs, grad, binary: "")
    monkeypatch.setattr(be, "require_torch_compile", lambda: None)
    return calls


def fallback_warnings(w):
    return [x for x in w if issubclass(x.category, be.DagrunFallbackWarning)]


def test_an_unrecognised_form_falls_back_to_reduce_overhead_with_one_warning(mocked, monkeypatch):
    from dagrun_torch.inductor import InductorError

    def boom(*a):
        raise InductorError("no function call at line 7 of wrapper.py")
    monkeypatch.setattr(be, "_fast_path", boom)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fn = be.dagrun(object(), [], options={"max_streams": 4})
    fw = fallback_warnings(w)
    assert fn == ("inductor", True) and mocked == ["fx", True]
    assert len(fw) == 1 and "reduce-overhead" in str(fw[0].message) and "InductorError: no function call" in str(fw[0].message)
    assert be.compiled_graphs()[-1].path == "reduce-overhead"


def test_a_graph_the_fx_converter_cannot_express_falls_back_with_its_error(mocked, monkeypatch):
    """compile_fx_wrapper's InductorError (Inductor's FX converter refused
    the graph): Inductor's own path, one warning with the error's text, and
    the fast path never runs."""
    from dagrun_torch.inductor import InductorError

    def refused(gm, inputs):
        mocked.append("fx")
        raise InductorError("Inductor's FX wrapper cannot express this graph: FX conversion only supports Triton kernels.")
    monkeypatch.setattr(be, "_inductor_fx", refused)
    monkeypatch.setattr(be, "_fast_path", lambda *a: pytest.fail("the fast path ran"))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fn = be.dagrun(object(), [])
    fw = fallback_warnings(w)
    assert fn == ("inductor", True) and mocked == ["fx", True]
    assert [str(x.message) for x in fw] == [
        "dagrun backend: running Inductor's own path (reduce-overhead) for this graph: Inductor's FX wrapper cannot "
        "express this graph: FX conversion only supports Triton kernels."]
    assert be.compiled_graphs()[-1].reason.startswith("Inductor's FX wrapper cannot express")


def test_the_fast_path_gets_the_fx_compile_and_its_wrapper(mocked, monkeypatch):
    got = []
    monkeypatch.setattr(be, "_fast_path", lambda gm, inputs, inner, fx, opts, info: got.append((inner, fx)) or "replay")
    assert be.dagrun(object(), []) == "replay" and got == [("fx-inner", "fx")]


def test_a_graph_the_fast_path_gives_up_falls_back_with_the_reason(mocked, monkeypatch):
    def gives_up(gm, inputs, inner, fx, opts, info):
        info.reason = "the graph writes its inputs in place"
        return None
    monkeypatch.setattr(be, "_fast_path", gives_up)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fn = be.dagrun(object(), [])
    fw = fallback_warnings(w)
    assert fn == ("inductor", True) and len(fw) == 1 and "writes its inputs in place" in str(fw[0].message)
    assert be.compiled_graphs()[-1].path == "reduce-overhead"


def test_the_dagrun_path_warns_nothing(mocked, monkeypatch):
    monkeypatch.setattr(be, "_fast_path", lambda *a: "replay")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert be.dagrun(object(), []) == "replay"
    assert not fallback_warnings(w) and mocked == ["fx"]
    assert be.compiled_graphs()[-1].path == "dagrun"


def test_a_failed_verification_raises(mocked, monkeypatch):
    from dagrun_torch.runner import VerificationError

    def bad(*a):
        raise VerificationError("output 0: 3 of 10 elements differ")
    monkeypatch.setattr(be, "_fast_path", bad)
    with pytest.raises(VerificationError):
        be.dagrun(object(), [], options={"verify": True})


def test_bad_options_and_modes_raise_before_compiling(mocked):
    with pytest.raises(ValueError, match="strategy"):
        be.dagrun(object(), [], options={"strategy": "x"})
    with pytest.raises(ValueError, match="mode='reduce-overhead'"):
        be.dagrun(object(), [], mode="reduce-overhead")
    assert mocked == []


def test_a_torch_without_torch_compile_is_named_with_what_to_do(monkeypatch):
    """torch 1.x has no dynamo: register() and the backend say so (after
    the options are checked), not "No module named 'torch._dynamo'"."""
    torch = pytest.importorskip("torch")
    monkeypatch.delattr(torch, "compile", raising=False)
    for call in (be.register, lambda: be.dagrun(object(), []), be.require_torch_compile):
        with pytest.raises(ImportError, match=r"torch %s has no torch.compile \(dynamo and Inductor: torch 2.0 or later\).*"
                                              r"dagrun_torch.compile\(model, inputs\)" % torch.__version__):
            call()
    with pytest.raises(ValueError, match="max_streams=-1"):
        be.dagrun(object(), [], options={"max_streams": -1})
    monkeypatch.setattr(torch, "compile", lambda *a, **k: None, raising=False)
    be.require_torch_compile()


def test_autograd_falls_back_before_compiling(monkeypatch):
    torch = pytest.importorskip("torch")
    calls = []
    monkeypatch.setattr(be, "_inductor", lambda gm, inputs, cudagraphs: calls.append(cudagraphs) or "ro")
    monkeypatch.setattr(be, "require_torch_compile", lambda: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    x = torch.zeros(2, requires_grad=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with torch.enable_grad():
            assert be.dagrun(object(), [x]) == "ro"
    fw = fallback_warnings(w)
    assert calls == [True] and len(fw) == 1 and "autograd is needed" in str(fw[0].message)
    # without grad mode the same inputs pass the autograd check (and stop at the CPU one)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with torch.no_grad():
            be.dagrun(object(), [x])
    assert "input 0 is not a CUDA tensor" in str(fallback_warnings(w)[0].message)


@pytest.mark.parametrize("case", ["no cuda", "autograd", "autograd of a held weight", "dynamic", "cpu input",
                                  "cpu inputs", "no fx wrapper", "no binary", "bad DAGRUN", "DAGRUN not dagrun",
                                  "no binary: a checkout it cannot build in"])
def test_each_fallback_before_compiling_warns_once_says_why_and_runs_the_model(monkeypatch, tmp_path, case, dagrun_bin):
    """A real FX graph, with Inductor's compile standing in as the graph
    itself: one DagrunFallbackWarning with the reason, the reason in
    compiled_graphs(), and the model's own outputs."""
    torch = pytest.importorskip("torch")
    import torch.fx
    calls = []
    monkeypatch.setattr(be, "_inductor", lambda gm, inputs, cudagraphs: calls.append(cudagraphs) or gm)
    monkeypatch.setattr(be, "require_torch_compile", lambda: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: case != "no cuda")
    from dagrun_torch import inductor as ind
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    gm = torch.fx.symbolic_trace(m)
    x = torch.randn(2, 4)

    class Dev(torch.Tensor):   # a CPU tensor that the checks take for a CUDA one
        @property
        def is_cuda(self):
            return True

    class OldConfig:           # Inductor's config of a torch before 2.9: no fx_wrapper
        size_asserts = False
    class NewConfig:           # a torch 2.9 or later
        fx_wrapper = False
    real = ind.fx_wrapper_missing
    monkeypatch.setattr(ind, "fx_wrapper_missing", lambda: real(NewConfig() if "bin" in case or "DAGRUN" in case
                                                               else OldConfig()))
    monkeypatch.setattr(be, "_inductor_fx", lambda gm, inputs: pytest.fail("compiled with the FX wrapper"))
    # no dagrun binary: none beside the package, no DAGRUN (or a bad one), none on PATH, no Go
    import dagrun_torch._binary as binary
    monkeypatch.setattr(binary, "wheel_binary", lambda: None)
    monkeypatch.setattr(binary, "_cached", None)
    monkeypatch.setattr(binary.shutil, "which", lambda name: None)
    if case == "no binary: a checkout it cannot build in":   # Go, and a checkout whose .cache is a file
        (tmp_path / ".cache").write_text("")
        monkeypatch.setattr(binary, "_repo_root", lambda: tmp_path)
        monkeypatch.setattr(binary.shutil, "which", lambda name: "/usr/bin/go" if name == "go" else None)
    if case == "bad DAGRUN":
        monkeypatch.setenv("DAGRUN", "/nonexistent/dagrun")
    elif case == "DAGRUN not dagrun":
        monkeypatch.setenv("DAGRUN", "/bin/true")
    else:
        monkeypatch.delenv("DAGRUN", raising=False)
    inputs, why = {
        "no cuda": ([x], "no CUDA device (torch.cuda.is_available() is False)"),
        "autograd": ([x, m[0].weight], "autograd is needed (the backend is for inference: call the compiled model "
                                       "under torch.no_grad() or torch.inference_mode())"),
        # the graph's own get_attr weight (symbolic_trace keeps it in gm), no input that requires grad
        "autograd of a held weight": ([x], "autograd is needed (the backend is for inference: call the compiled model "
                                           "under torch.no_grad() or torch.inference_mode())"),
        "dynamic": ([x, 2], "the graph has dynamic shapes (input 1 is a size); torch.compile(..., dynamic=False) "
                            "compiles a graph per shape"),
        "cpu input": ([x], "input 0 is not a CUDA tensor"),
        "cpu inputs": ([x] * 7, "inputs 0, 1, 2, 3, 4 and 2 more are not CUDA tensors"),
        "no fx wrapper": ([x.as_subclass(Dev)], "torch %s has no Inductor FX wrapper (torch._inductor.config.fx_wrapper, "
                                                "torch 2.9 or later), which the dagrun path reads" % torch.__version__),
        # found before Inductor compiles, not after the compile and the trace
        "no binary": ([x.as_subclass(Dev)], "no dagrun binary: install a dagrun_torch wheel (it carries one: "
                                            "`pip install dagrun_torch-*.whl`, built by scripts/build-wheel.sh), set "
                                            "DAGRUN=/path/to/dagrun, put dagrun on PATH, or install Go and use this "
                                            "package from a dagrun checkout (`go build -o dagrun ./cmd/dagrun` builds it)"),
        "bad DAGRUN": ([x.as_subclass(Dev)], "no dagrun binary to plan with (DAGRUN=/nonexistent/dagrun is not an "
                                             "executable file)"),
        # an executable that does not answer `dagrun version` as dagrun does
        "DAGRUN not dagrun": ([x.as_subclass(Dev)], "no dagrun binary to plan with (/bin/true is not a dagrun binary: "
                                                    "`/bin/true version` exited 0 printing '')"),
        "no binary: a checkout it cannot build in": (
            [x.as_subclass(Dev)], "no dagrun binary to plan with (cannot build dagrun with `go build ./cmd/dagrun` in "
                                  "%s: [Errno 20] Not a directory: '%s')" % (tmp_path, tmp_path / ".cache" / "dagrun_torch")),
    }[case]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with torch.set_grad_enabled(case.startswith("autograd")):
            fn = be.dagrun(gm, inputs)
            y = fn(x)
    fw = fallback_warnings(w)
    assert [str(x.message) for x in fw] == ["dagrun backend: running Inductor's own path (reduce-overhead) for this "
                                            "graph: " + why]
    assert calls == [True] and torch.equal(y, m(x))
    info = be.compiled_graphs()[-1]
    assert (info.path, info.reason) == ("reduce-overhead", why)
    if case == "no binary":   # the dagrun option names the binary: nothing to find, but it must be dagrun
        assert be._before_compile(gm, inputs, False, dagrun_bin) == ""
        assert be._before_compile(gm, inputs, False, sys.executable).startswith(
            "no dagrun binary to plan with (%s is not a dagrun binary: `%s version` exited 2 printing ''" % (
                sys.executable, sys.executable))


def test_a_fallback_warning_points_at_the_users_call_not_at_torch(monkeypatch):
    """dynamo calls the backend from torch's own frames; the warning names
    the first frame outside torch and dagrun_torch (here, this file's line
    that calls through a function compiled as if it were torch's)."""
    torch = pytest.importorskip("torch")
    import inspect
    monkeypatch.setattr(be, "_inductor", lambda gm, inputs, cudagraphs: gm)
    monkeypatch.setattr(be, "require_torch_compile", lambda: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    ns = {}
    exec(compile("def call_backend(fn, *a):\n    return fn(*a)\n",
                 os.path.join(os.path.dirname(torch.__file__), "_dynamo", "wrapper_for_the_test.py"), "exec"), ns)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        ns["call_backend"](be.dagrun, object(), [torch.zeros(1)])
    (fw,) = fallback_warnings(w)
    assert (fw.filename, fw.lineno) == (__file__, line)


def test_the_backend_module_is_an_attribute_of_the_package_without_its_own_import():
    """docs/pytorch.md writes dagrun_torch.backend.register() and
    dagrun_torch.backend.compiled_graphs() after `import dagrun_torch`."""
    import subprocess
    from conftest import package_env
    code = ("import sys, dagrun_torch\n"
            "assert 'dagrun_torch.backend' not in sys.modules\n"
            "print(dagrun_torch.backend.compiled_graphs(), dagrun_torch.inductor.__name__, 'torch' in sys.modules)\n"
            "for name in ('nosuch', '_binary_x', '__path__x'):\n"
            "    try:\n"
            "        getattr(dagrun_torch, name)\n"
            "    except AttributeError as e:\n"
            "        print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=package_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("[] dagrun_torch.inductor")
    assert r.stdout.splitlines()[1:] == ["module 'dagrun_torch' has no attribute %r" % n for n in ("nosuch", "_binary_x", "__path__x")]


def test_entry_point_names_the_backend():
    sys.path.insert(0, os.path.join(REPO, "python", "_build"))
    try:
        import dagrun_build
    finally:
        sys.path.pop(0)
    text = dagrun_build.entry_points(Path(REPO) / "python").decode()
    assert "[torch_dynamo_backends]\ndagrun = dagrun_torch.backend:dagrun\n" in text
    assert "[console_scripts]\ndagrun-torch = dagrun_torch.__main__:main\n" in text
    mod, attr = "dagrun_torch.backend:dagrun".split(":")
    assert callable(getattr(__import__(mod, fromlist=[attr]), attr))


@pytest.mark.skipif(not INSTALLED, reason="checks the installed wheel's metadata (scripts/test-wheel.sh)")
def test_the_installed_wheel_declares_the_backend():
    from importlib.metadata import entry_points
    eps = entry_points()
    group = eps.select(group="torch_dynamo_backends") if hasattr(eps, "select") else eps.get("torch_dynamo_backends", [])
    found = {e.name: e.value for e in group}
    assert found.get("dagrun") == "dagrun_torch.backend:dagrun", found
    assert callable(next(e for e in group if e.name == "dagrun").load())


try:
    import torch as _torch
    HAS_COMPILE = hasattr(_torch, "compile")
except ImportError:
    HAS_COMPILE = False


@pytest.mark.skipif(not HAS_COMPILE, reason="torch < 2 (or no torch) has no torch.compile")
def test_torch_compile_on_the_cpu_falls_back_and_runs():
    import torch
    be.register()
    m = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with torch.no_grad():
            y = torch.compile(m, backend="dagrun")(x)
    assert torch.allclose(y, m(x)) and "no CUDA device" in str(fallback_warnings(w)[0].message)


def test_bench_backend_budget_estimate_and_table_labels():
    pytest.importorskip("torch")
    from dagrun_torch import bench
    assert bench.backend_estimate_s("googlenet") == 3 * 21 + 5       # three cold compiles
    assert bench.backend_estimate_s("unknown-model", 2.0) == 2 * (3 * 30 + 5)
    rows = [{"model": "googlenet",
             "default": {"ms": 4.0, "compile_peak_mb": 86.0, "steady_peak_mb": 60.0, "held_mb": 90.0, "compile_s": 21.0},
             "reduce-overhead": {"ms": 1.0, "compile_peak_mb": 60.0, "steady_peak_mb": 30.0, "held_mb": 70.0, "compile_s": 20.0},
             "dagrun": {"ms": 0.5, "streams": "4", "compile_peak_mb": 70.0, "steady_peak_mb": 30.0, "held_mb": 80.0,
                        "compile_s": 23.0, "dagrun_own_s": 2.5, "graphs": [{"path": "dagrun", "reason": ""}]},
             "identical": "reduce-overhead yes / dagrun yes"},
            {"model": "nasnetalarge", "skipped": "budget: 275 s expected, 40 s left"}]
    t = bench.backend_table(rows).splitlines()
    assert "peak MB during compile" in t[0] and "peak MB in steady replay" in t[0] and "cold compile s" in t[0]
    assert "| 86 / 60 / 70 | 60 / 30 / 30 | 90 / 70 / 80 | 21.0 / 20.0 / 23.0 (2.5) |" in t[2]
    assert "2.00×" in t[2] and t[3].endswith("| budget: 275 s expected, 40 s left |")


def test_bench_refuses_bad_usage_and_a_torch_without_torch_compile_before_the_gpu(monkeypatch, capsys):
    """Exit 2 and one line for each, on the CPU as on a GPU machine: the
    figures' bounds on both sides (a value that passes reaches the next
    check: here, that there is no GPU)."""
    torch = pytest.importorskip("torch")
    from dagrun_torch import bench
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch, "compile", lambda *a, **k: None, raising=False)

    def err(*argv):
        assert bench.main(list(argv)) == 2
        return capsys.readouterr().err.strip()
    assert err("--backend", "--inductor", "--schedules") == "bench: --schedules and --inductor and --backend are different runs; give one"
    assert err("--backend", "--models", "bert-base", "nosuch") == (
        "bench: unknown model 'nosuch' (known with --backend: googlenet, inception_v3, inception_v4, nasnetalarge, "
        "resnet50, densenet121, bert-base, moe-1, moe-8)")
    # a transformer workload outside --backend is named as such, for every other run
    for run in ([], ["--schedules"], ["--inductor"]):
        assert err(*run, "--models", "moe-8") == (
            "bench: model 'moe-8': only with --backend (known without it: googlenet, inception_v3, inception_v4, "
            "nasnetalarge, resnet50, densenet121)")
    assert err("--inductor", "--compile-models", "bert-base").startswith("bench: model 'bert-base': only with --backend")
    assert err("--models", "bert").startswith("bench: unknown model 'bert' (known: googlenet,")
    for flag, bad, good in (("--iters", "0", "1"), ("--max-streams", "-1", "0"), ("--verify-trials", "-1", "0")):
        high = {"--iters": 100000, "--max-streams": 2147483647, "--verify-trials": 100}[flag]
        assert err("--backend", flag, bad) == "bench: %s %s: want an integer from %s to %d" % (flag, bad, good, high)
        assert err("--backend", flag, good) == "bench: needs a GPU"
    # the upper bounds, on both sides: a run's time is bounded before it starts
    for flag, top in (("--iters", 100000), ("--verify-trials", 100)):
        assert err("--backend", flag, str(top + 1)) == "bench: %s %d: want an integer from %d to %d" % (
            flag, top + 1, 1 if flag == "--iters" else 0, top)
        assert err("--backend", flag, str(top)) == "bench: needs a GPU"
    for bad in ("0", "-1", "86400.5", "86400.0000001"):   # the seconds as given, not rounded to 86400
        assert err("--backend", "--budget-s", bad) == "bench: --budget-s %s: want seconds > 0 and at most 86400 (a day)" % bad
    assert err("--backend", "--budget-s", "86400") == "bench: needs a GPU"
    assert err("--backend", "--no-compile", "--compile-models", "googlenet") == (
        "bench: --no-compile, --compile-models: not with --backend, which times torch.compile's modes on every model")
    assert err("--backend", "--only-compile").startswith("bench: --only-compile: not with --backend")
    assert err("--backend", "--compile", "--compile-models") == "bench: needs a GPU"
    assert err("--backend", "--budget-s", "0.5") == "bench: needs a GPU"
    seen = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(bench, "backend", lambda args: seen.append(args.max_streams) or 0)
    assert bench.main(["--backend"]) == 0 and bench.main(["--backend", "--max-streams", "4"]) == 0
    assert bench.main(["--backend", "--max-streams", "auto"]) == 0
    assert seen == ["auto", 4, "auto"]                               # the backend's default, or the cap given
    assert err("--max-streams", "auto") == (
        "bench: --max-streams auto: only with --backend (the backend's max_streams option); want an integer ≥ 0")
    with pytest.raises(SystemExit):
        bench.main(["--backend", "--max-streams", "Auto"])
    assert "argument --max-streams: want \"auto\" (with --backend) or an integer ≥ 0, not 'Auto'" in capsys.readouterr().err
    # integers in ASCII digits only: Python's int() would also take these
    for bad in ("+4", " 4", "1_000", "\u0664", "4.0"):
        for flag, why in (("--iters", "want an integer in digits 0-9"),
                          ("--max-streams", "want \"auto\" (with --backend) or an integer ≥ 0")):
            with pytest.raises(SystemExit):
                bench.main(["--backend", flag, bad])
            assert "argument %s: %s, not %r" % (flag, why, bad) in capsys.readouterr().err
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    # --inductor reads Inductor's FX wrapper: a torch without one is refused before the GPU
    from dagrun_torch import inductor as ind
    monkeypatch.setattr(ind, "fx_wrapper_missing", lambda: "torch 2.8 has no Inductor FX wrapper")
    assert err("--inductor") == "bench --inductor: torch 2.8 has no Inductor FX wrapper; install torch 2.9 or later"
    assert err("--backend") == "bench: needs a GPU"                  # the backend falls back there: it runs
    monkeypatch.setattr(ind, "fx_wrapper_missing", lambda: "")
    assert err("--inductor") == "bench: needs a GPU"
    monkeypatch.delattr(torch, "compile")
    for run in ("--backend", "--inductor"):
        assert err(run).startswith("bench %s: torch %s has no torch.compile" % (run, torch.__version__))
    assert err("--no-compile") == "bench: needs a GPU"


BENCH_USAGE = [
    # (arguments, the one line bench answers): options a run does not use, or that contradict
    (["--schedules", "--no-compile"],
     "bench: --no-compile: not with --schedules (--compile-models names the models it compiles)"),
    (["--inductor", "--only-compile"],
     "bench: --only-compile: not with --inductor (--compile-models names the models it compiles)"),
    (["--compile-models", "googlenet"],
     "bench: --compile-models: only with --schedules or --inductor (this run compiles every model)"),
    (["--only-compile", "--no-compile"],
     "bench: --only-compile and --no-compile contradict: the first times torch.compile, the second leaves it out"),
    (["--schedules", "--max-streams", "4"], "bench: --max-streams: not with --schedules, which plans under stream caps "
                                            "of its own"),
    (["--inductor", "--max-streams", "0"], "bench: --max-streams: not with --inductor, which plans under stream caps "
                                           "of its own"),
    # the largest stream cap, a spec's bound, for every run
    (["--max-streams", "2147483648"], "bench: --max-streams 2147483648: want an integer from 0 to 2147483647"),
    (["--backend", "--max-streams", "2147483648"],
     "bench: --max-streams 2147483648: want an integer from 0 to 2147483647"),
    (["--backend", "--inductor"], "bench: --inductor and --backend are different runs; give one"),
    (["--models", "googlenet", "resnet50", "googlenet"],
     "bench: --models names googlenet more than once; name each model once"),
    (["--inductor", "--compile-models", "resnet50", "resnet50"],
     "bench: --compile-models names resnet50 more than once; name each model once"),
]


@pytest.mark.parametrize("argv,line", BENCH_USAGE)
def test_bench_usage_errors_are_one_line_before_torch(argv, line):
    """python3 -m dagrun_torch answers bench's usage errors before it
    imports torch: the same line with torch or without."""
    import subprocess
    from conftest import package_env
    code = ("import sys\nsys.modules['torch'] = None   # import torch fails, as where it is not installed\n"
            "from dagrun_torch.__main__ import main\nsys.exit(main(['bench'] + sys.argv[1:]))\n")
    r = subprocess.run([sys.executable, "-c", code] + argv, capture_output=True, text=True, env=package_env())
    assert (r.returncode, r.stderr, r.stdout) == (2, line + "\n", "")


def test_bench_out_must_be_a_folder_it_can_make(tmp_path, capsys):
    from dagrun_torch import _cli
    f = tmp_path / "file"
    f.write_text("")
    for out, why in ((f, "not a folder"), (f / "sub", "%s is not a folder" % f)):
        args = _cli.bench().parse_args(["--backend", "--out", str(out)])
        assert _cli.bench_usage(args) == "bench: --out %s: %s; want a folder to write bench's tables in" % (out, why)
    for out in (tmp_path, tmp_path / "new" / "sub"):                 # a folder, or one to make: fine, nothing made
        assert _cli.bench_usage(_cli.bench().parse_args(["--out", str(out)])) == ""
    assert not (tmp_path / "new").exists()


def test_a_wider_plan_with_no_predicted_gain_over_a_timed_narrower_one_is_not_captured():
    cs = {"1": {"streams": 1, "ms": 2.0}, "4": {"streams": 4, "blas_streams": 4, "ideal_us": 1000.0, "ms": 1.0}}
    c = {"streams": 25, "blas_streams": 25, "ideal_us": 990.0}      # exactly 1% better predicted: captured
    assert not be.wider_for_nothing(c, cs) and "skipped" not in c
    c["ideal_us"] = 990.1
    assert be.wider_for_nothing(c, cs)
    assert c["skipped"] == "no predicted gain over the plan capped at 4 streams (4 streams, which holds 4 cuBLAS workspaces against 25)"
    cs["4"]["blas_streams"] = 1                                      # one workspace, said in the singular
    c = {"streams": 25, "blas_streams": 1, "ideal_us": 1000.0}
    assert be.wider_for_nothing(c, cs)
    assert c["skipped"] == "no predicted gain over the plan capped at 4 streams (4 streams, which holds 1 cuBLAS workspace against 1)"
    cs["4"]["blas_streams"] = 4
    c = {"streams": 16, "ideal_us": 1000.0}                          # no workspace counts: still skipped, said without them
    assert be.wider_for_nothing(c, cs) and c["skipped"] == "no predicted gain over the plan capped at 4 streams (4 streams)"
    c = {"streams": 4, "blas_streams": 4, "ideal_us": 1000.0}        # as wide, no gain (two caps, one plan): skipped
    assert be.wider_for_nothing(c, cs) and c["skipped"].startswith("no predicted gain over the plan capped at 4 streams")
    c = {"streams": 4, "blas_streams": 4, "ideal_us": 990.0}         # as wide, 1% better predicted: captured
    assert not be.wider_for_nothing(c, cs)
    c = {"streams": 3, "ideal_us": 1000.0}                           # narrower: captured
    assert not be.wider_for_nothing(c, cs)
    cs["4"].pop("ms")                                                 # only timed plans count
    assert not be.wider_for_nothing({"streams": 25, "blas_streams": 25, "ideal_us": 1000.0}, cs)
    cs["0"] = {"streams": 70, "ideal_us": 1000.0, "ms": 1.0}          # nor wider ones
    assert not be.wider_for_nothing({"streams": 25, "ideal_us": 1000.0}, cs)


def test_blas_calls_are_found_in_wrapper_nodes():
    """cuBLAS operators by their ATen name, out=, functional or in place;
    convolutions, Triton launches and allocations are not."""
    torch = pytest.importorskip("torch")
    import torch.fx
    from dagrun_torch.inductor import runs_blas
    aten = torch.ops.aten
    g = torch.fx.Graph()
    a = g.placeholder("a")
    yes = [g.call_function(op, (a, a, a)) for op in (aten.mm.out, aten.addmm.out, aten.bmm.default, aten.baddbmm_.default)]
    no = [g.call_function(aten.convolution.default, (a, a)), g.call_function(torch.empty_strided, ([1], [1])),
          g.call_function(aten.add.Tensor, (a, a)), g.call_function(print, (a,)), a]
    assert all(runs_blas(n) for n in yes)
    assert not any(runs_blas(n) for n in no)


def test_the_fast_path_releases_candidates_once_they_cannot_be_chosen_and_keeps_the_chosen_one(monkeypatch):
    """Inductor's trace and the captures mocked: the one-stream reference is
    released once timed, a plan is released as soon as a faster one puts it
    out of reach, and the chosen graph is the one timed (no second
    capture)."""
    torch = pytest.importorskip("torch")
    import gc
    import weakref
    from dagrun_torch import inductor as ind

    ms = {1: 2.0, 4: 1.0, 16: 0.95, 0: 0.955}
    blas = {1: 1, 4: 2, 16: 2, 0: 2}
    made, alive_at_timing = [], {}

    class Plan:
        def __init__(self, cap):
            self.cap = cap
            self.streams = [0] * {1: 1, 4: 4, 16: 12, 0: 30}[cap]
            self.stats = {"sum_us": 1000.0, "ideal_makespan_us": {1: 1000.0, 4: 500.0, 16: 480.0, 0: 470.0}[cap]}

    arenas, releases, cycle = [], [], []

    class CI:
        def __init__(self, ig, plan, copied, delays=None, arena=True):
            self.cap, self.pool_bytes = plan.cap, 1e6 * blas[plan.cap]
            self.arena = arena
            arenas.append((plan.cap, arena))
            if plan.cap == 0 and cycle:
                self.me = self                    # alive until a garbage collection
            self._out = (torch.ones(2),)
            made.append(weakref.ref(self))

        def __call__(self, *a):
            return self._out

    def timing(ci, n=20):
        gc.collect()
        alive_at_timing[ci.cap] = sorted(r().cap for r in made if r() is not None)
        return ms[ci.cap]

    class IG:
        graph = {"nodes": [{"id": "k0", "reads": [], "writes": []}], "tensors": []}
        args, launch = [], {0: "k0"}

    monkeypatch.setattr(ind, "trace_fx", lambda fx, name: IG())
    monkeypatch.setattr(ind, "input_slots", lambda args, tensors: {0: 0})
    monkeypatch.setattr(ind, "clear_blas_workspaces", lambda: True)
    monkeypatch.setattr(ind, "plan_graphs", lambda g, caps, dagrun: {c: Plan(c[0]) for c in caps})
    monkeypatch.setattr(ind, "blas_streams", lambda plan, ig: blas[plan.cap])
    monkeypatch.setattr(ind, "CompiledInductor", CI)
    monkeypatch.setattr(be, "_median_replay_ms", timing)
    monkeypatch.setattr(be, "_release", lambda gc_first=True: (releases.append(gc_first), gc_first and gc.collect()))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    info = be.CompiledGraph()
    fn = be._fast_path(object(), [torch.zeros(3)], lambda *a: (torch.ones(2),), "fx", be.Options(), info)
    assert info.reason == "" and info.streams == 12 and info.identical
    # cap 4 lives until cap 16 is timed, not after; uncapped is as fast as 16 within 1%, with as much memory
    # and more streams: 16 is chosen
    assert alive_at_timing == {1: [1], 4: [4], 16: [4, 16], 0: [0, 16]}
    assert len(made) == 4                                         # the chosen plan is not captured again
    # the one-stream reference takes no buffer from an arena; every candidate takes the plan's
    assert arenas == [(1, False), (4, True), (16, True), (0, True)]
    gc.collect()
    assert [r().cap for r in made if r() is not None] == [16] and fn.ci.cap == 16
    assert releases == [False] * 5                                # no capture left alive: no full collection
    # a discarded capture in a reference cycle: the last release collects it
    cycle.append(True)
    del releases[:], made[:]
    fn = be._fast_path(object(), [torch.zeros(3)], lambda *a: (torch.ones(2),), "fx", be.Options(), be.CompiledGraph())
    assert releases == [False] * 4 + [True] and [r().cap for r in made if r() is not None] == [16]
    cycle.clear()
    # a cap of 1: the reference alone, no candidate; the graph runs the one-stream plan with its arena, one
    # warning, no second compile
    info = be.CompiledGraph()
    del arenas[:]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fn = be._fast_path(object(), [torch.zeros(3)], lambda *a: (torch.ones(2),), "fx", be.Options(max_streams=1), info)
    assert (info.path, info.reason, info.streams, info.identical, info.verified) == (
        be.ONE_STREAM, "dagrun's plan has one stream", 1, True, None)
    assert list(info.candidates) == ["1"] and arenas == [(1, False), (1, True)] and fn.ci.cap == 1
    # one stream is what the cap asks for: no warning
    assert not [m for m in w if issubclass(m.category, be.DagrunFallbackWarning)]
    # no plan 2% faster than one stream: the same
    ms.update({4: 1.99, 16: 1.985, 0: 1.99})
    info = be.CompiledGraph()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fn = be._fast_path(object(), [torch.zeros(3)], lambda *a: (torch.ones(2),), "fx", be.Options(), info)
    assert info.path == be.ONE_STREAM and "less than 2% gain" in info.reason and fn.ci.cap == 1 and info.streams == 1
    fw = [m for m in w if issubclass(m.category, be.DagrunFallbackWarning)]
    assert len(fw) == 1 and "on one stream, as one CUDA graph" in str(fw[0].message) and "less than 2% gain" in str(fw[0].message)
    # a one-stream graph whose outputs differ from the reference's: Inductor's own path (None), saying both
    differ = [True]
    orig_init = CI.__init__

    def init(self, ig, plan, copied, delays=None, arena=True):
        orig_init(self, ig, plan, copied, delays, arena)
        if plan.cap == 1 and arena and differ:
            self._out = (torch.zeros(2),)
    monkeypatch.setattr(CI, "__init__", init)
    info = be.CompiledGraph()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert be._fast_path(object(), [torch.zeros(3)], lambda *a: (torch.ones(2),), "fx", be.Options(), info) is None
    assert "less than 2% gain" in info.reason and "1-stream graph's outputs differ" in info.reason
    assert not [m for m in w if issubclass(m.category, be.DagrunFallbackWarning)]   # dagrun() warns once, falling back


def backend_doc_rows():
    """docs/pytorch.md's table of the H100 backend run: {model: [cells]}."""
    text = (Path(REPO) / "docs" / "pytorch.md").read_text()
    head = text.index("| model | torch.compile default | reduce-overhead | backend=\"dagrun\" (streams) |")
    rows = {}
    for line in text[head:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


def test_the_docs_backend_table_is_the_records():
    """Every cell of docs/pytorch.md's backend table, recomputed from
    testdata/h100/backend/backend.json as bench formats figures (ratios from
    the unrounded times; the chosen plan is the one choose() keeps)."""
    pytest.importorskip("torch")
    import json
    from conftest import TESTDATA
    from dagrun_torch.bench import _fmt, _x
    with open(os.path.join(TESTDATA, "h100", "backend", "backend.json")) as f:
        records = {r["model"]: r for r in json.load(f)["rows"]}
    doc = backend_doc_rows()
    assert sorted(doc) == sorted(records)
    for name, r in records.items():
        d, ro, dg = r["default"], r["reduce-overhead"], r["dagrun"]
        (g,) = dg["graphs"]
        best, why = be.choose(g["candidates"])
        assert why == "" and g["candidates"][str(best)]["streams"] == g["streams"], name
        one, chosen = g["candidates"]["1"]["ms"], g["candidates"][str(best)]["ms"]

        def three(key, nd=0):
            return " / ".join(_fmt(e[key], nd) for e in (d, ro, dg))
        want = [_fmt(d["ms"]), _fmt(ro["ms"]), "%s (%s)" % (_fmt(dg["ms"]), dg["streams"]), _x(ro["ms"], dg["ms"]),
                "%s / %s (%s)" % (_fmt(one), _fmt(chosen), _x(one, chosen)),
                "%s / %s (%s)" % (_fmt(ro["pipelined_ms"]), _fmt(dg["pipelined_ms"]), _x(ro["pipelined_ms"], dg["pipelined_ms"])),
                three("steady_peak_mb"), three("compile_peak_mb"), three("held_mb"),
                three("compile_s", 1) + " (%.1f)" % dg["dagrun_own_s"]]
        assert doc[name] == want, name


def test_bench_compile_time_is_the_median_of_cold_compiles(monkeypatch):
    """A short compile is compiled again, cold each time, and its compile
    time (and dagrun's own part) is the median of all runs, the measured
    one included."""
    torch = pytest.importorskip("torch")
    from dagrun_torch import bench
    clock = [100.0]
    takes = iter([1.4, 0.9, 1.1, 2.0])        # the runs after the first
    owns = iter([0.5, 0.2, 0.3, 0.9])
    resets, freshes = [], []
    path = ["dagrun"]

    class Fresh:
        def __enter__(self):
            freshes.append(1)

        def __exit__(self, *a):
            return False

    def compile_(model, **kw):
        assert kw == {"backend": "dagrun", "dynamic": False}
        took, own = next(takes), next(owns)

        def call(*a):
            if not call.ran:
                call.ran = True
                clock[0] += took
                be._COMPILED.append(be.CompiledGraph(path=path[0], compile_s=own + 1.0, inductor_s=1.0))
        call.ran = False
        return call
    monkeypatch.setattr(torch, "compile", compile_, raising=False)
    monkeypatch.setattr(bench.time, "time", lambda: clock[0])
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(bench, "_reset_compiled_state", lambda: resets.append(1))
    monkeypatch.setattr(bench, "COMPILE_RUNS", 5)
    e = {"compile_s": 1.2, "dagrun_own_s": 0.4}
    bench._compile_again(e, object(), (1,), {"backend": "dagrun"}, Fresh, True)
    assert e["compile_runs_s"] == [1.2, 1.4, 0.9, 1.1, 2.0]
    assert e["compile_s"] == 1.2 and e["dagrun_own_s"] == 0.4       # medians of five
    assert len(freshes) == 4 and len(resets) == 5                   # each run cold, and the state left clean
    e = {"compile_s": 3.0}
    takes, owns = iter([1.0, 2.0, 4.0, 5.0]), iter([0.0] * 4)
    bench._compile_again(e, object(), (1,), {"backend": "dagrun"}, Fresh, False)
    assert e["compile_s"] == 3.0 and "dagrun_own_s" not in e
    # a graph on the one-stream path is the backend's own capture: its own seconds count; on
    # Inductor's reduce-overhead path they do not
    for p, want in ((be.ONE_STREAM, 0.4), ("reduce-overhead", 0.0)):
        path[0] = p
        e = {"compile_s": 1.2, "dagrun_own_s": want}
        takes, owns = iter([1.4, 0.9, 1.1, 2.0]), iter([0.5, 0.2, 0.3, 0.9])
        bench._compile_again(e, object(), (1,), {"backend": "dagrun"}, Fresh, True)
        assert e["dagrun_own_s"] == want, p


def test_bench_backend_counts_one_stream_graphs_as_the_backends_own():
    """A graph on the one-stream path runs the backend's own capture: its
    streams (1) and its own compile seconds count in the bench's JSON and
    table, and its path shows as "one stream", not as reduce-overhead."""
    pytest.importorskip("torch")
    from dagrun_torch import bench
    gs = [be.CompiledGraph(path=be.ONE_STREAM, reason="less than 2% gain", streams=1, compile_s=4.2, inductor_s=3.5),
          be.CompiledGraph(path="dagrun", streams=4, compile_s=2.0, inductor_s=1.5),
          be.CompiledGraph(path="reduce-overhead", reason="autograd is needed", streams=0, compile_s=9.0, inductor_s=0.0)]
    assert [g.path for g in bench.own_graphs(gs)] == [be.ONE_STREAM, "dagrun"]
    assert bench.dagrun_own_s(gs) == 1.2 and bench.dagrun_own_s(gs[2:]) == 0.0
    row = {"model": "chain", "dagrun": {"ms": 0.2, "streams": "1/4", "compile_s": 4.4, "dagrun_own_s": 1.2,
                                        "graphs": [{"path": g.path, "reason": g.reason} for g in gs]}}
    line = bench.backend_table([row]).splitlines()[2]
    assert "| 0.200 (1/4) |" in line and "(1.2) |" in line
    assert line.endswith("| dagrun; one stream (less than 2% gain); reduce-overhead (autograd is needed) |")


def test_a_bench_run_with_a_failed_model_exits_1_naming_it(capsys):
    """bench's exit status: 0 when every model ran (a skipped one included,
    and one whose backend graphs took the one-stream or reduce-overhead
    path), 1 with one line naming each model whose row or one of whose
    modes holds an error."""
    pytest.importorskip("torch")
    from dagrun_torch.bench import exit_status
    ok = [{"model": "googlenet", "default": {"ms": 1.0}, "dagrun": {"ms": 0.5}},
          {"model": "resnet50", "skipped": "budget: 30 s expected, 10 s left"},
          # --backend: graphs on the one-stream and reduce-overhead paths ran (the failure that made one
          # fall back is its reason, not the model's error)
          {"model": "chain", "dagrun": {"ms": 0.2, "graphs": [
              {"path": be.ONE_STREAM, "reason": "less than 2% gain"},
              {"path": "reduce-overhead", "reason": "RuntimeError: z (inductor.py:1)"}]}}]
    assert exit_status(ok) == 0 and capsys.readouterr().err == ""
    rows = ok + [{"model": "bert-base", "dagrun": {"error": "RuntimeError: x"}},
                 {"model": "moe-1", "error": "ImportError: no transformers"},
                 {"model": "densenet121", "compile_ms": "failed", "compile_error": "RuntimeError: y"}]
    assert exit_status(rows) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["bench: 3 of 6 models failed (tracebacks above): bert-base, moe-1, densenet121"]
