"""Reading Inductor's FX wrapper graph and issuing a plan over it: the parts that need no GPU.

The wrapper graphs are built by hand with torch.fx: real ATen operators (their schemas say what
they write), a stand-in for the Triton higher-order operator and stand-in autotuners (Inductor's
launchers), as Inductor's FX converter emits them (python/tests/testdata/h100/backend/fx-probe.log)."""
import gc
import operator
import types
import weakref

import pytest

torch = pytest.importorskip("torch")

from dagrun_torch import inductor as ind  # noqa: E402
from dagrun_torch.plan import Plan  # noqa: E402

import torch.fx  # noqa: E402

aten = torch.ops.aten


class Hop:
    """Stands in for the Triton higher-order operator (``triton_kernel_wrapper_mutation``)."""
    __name__ = "triton_kernel_wrapper_mutation"

    def __call__(self, **kw):
        raise AssertionError("a Triton launch goes through Inductor's launcher, not the higher-order operator")


HOP = Hop()


@pytest.fixture(autouse=True)
def triton_hop(monkeypatch):
    monkeypatch.setattr(ind, "triton_hop", lambda: HOP)


class Tuner:
    """Stands in for Inductor's autotuner of one Triton kernel (its launcher):
    ``body(*args)`` runs the kernel on the CPU; ``streams`` the stream handles
    it was launched with. As Inductor's ``cached_autotune`` builds one, the
    kernel metadata's ``mutated_arg_names`` is an attribute, not left in
    ``inductor_meta``; ``custom_kernel`` marks a kernel of the model's own."""

    def __init__(self, name, signature, body, mutated=(), constants=None, tuned=None, custom_kernel=False):
        self.fn = types.SimpleNamespace(__name__=name)
        self.triton_meta = {"signature": {a: "*fp32" for a in signature}, "constants": dict(constants or {})}
        self.inductor_meta = {"kernel_name": name}
        self.mutated_arg_names = list(mutated)
        self.custom_kernel = custom_kernel
        self.launchers = [types.SimpleNamespace(config=types.SimpleNamespace(kwargs=dict(tuned or {"XBLOCK": 16})))]
        self.body = body
        self.streams = []

    def run(self, *args, stream=None):
        self.streams.append(stream)
        self.body(*args)


def call(g, name, target, *args, **kwargs):
    return g.create_node("call_function", target, tuple(args), kwargs, name=name)


def triton(g, name, idx, **kwargs):
    return call(g, name, HOP, kernel_idx=idx, constant_args_idx=None, grid=[(1, 1, 1)], tma_descriptor_metadata={},
                kwargs=kwargs)


def test_node_kinds_and_the_nodes_that_are_not_read_name_themselves():
    g = torch.fx.Graph()
    x = g.placeholder("arg0_1")
    g.get_attr("_tensor_constant0")
    buf0 = call(g, "buf0", torch.empty_strided, [4], [1], dtype=torch.float32, device="cpu")
    triton(g, "k0", 0, in_ptr0=x, out_ptr0=buf0, xnumel=4, XBLOCK=4)
    view = call(g, "buf0_view", torch.as_strided, buf0, [2, 2], [2, 1], 0)
    mm = call(g, "buf1", aten.mm.default, view, view)
    top = call(g, "buf2", aten.topk.default, mm, 1)
    first = call(g, "buf3", operator.getitem, top, 0)
    call(g, "s0", aten.sym_size.int, x, 0)
    g.output((first,))
    tuners = {0: Tuner("triton_poi_0", ["in_ptr0", "out_ptr0", "xnumel"], None)}
    assert [(n.name, ind.node_kind(n, tuners)) for n in g.nodes] == [
        ("arg0_1", "host"), ("_tensor_constant0", "host"), ("buf0", "host"), ("k0", "triton"), ("buf0_view", "host"),
        ("buf1", "aten"), ("buf2", "aten"), ("buf3", "host"), ("s0", "host"), ("output", "host")]

    # an operator of another namespace than aten is named by its own
    prims = call(g, "buf9", torch.ops.prims.convert_element_type.default, x, torch.float16)
    assert (ind.node_kind(prims, tuners), ind.describe(prims, tuners)) == (
        "aten", "buf9 = prims.convert_element_type.default(arg0_1, torch.float16)")

    def extern_mm(a, b, out=None):
        pass
    tuners[1] = Tuner("add_kernel_0", ["x_ptr", "output_ptr"], None, custom_kernel=True)
    bad = [call(g, "buf4", extern_mm, x, x, out=buf0), call(g, "buf5", torch.relu, x),
           triton(g, "k1", 7, in_ptr0=x, out_ptr0=buf0), g.call_method("relu", (x,)), g.call_module("sub", (x,)),
           triton(g, "k2", 1, x_ptr=x, output_ptr=buf0),
           call(g, "k3", HOP, kernel_idx=0, constant_args_idx=None, grid=[(1, 1, 1)],
                tma_descriptor_metadata={"in_ptr0": ("stable", ([4],))}, kwargs={"in_ptr0": x, "out_ptr0": buf0})]
    want = ["Inductor's FX wrapper has a node the dagrun path does not read: buf4 = %s.%s(arg0_1, arg0_1, out=buf0)" % (
                extern_mm.__module__, extern_mm.__name__),
            "Inductor's FX wrapper has a node the dagrun path does not read: buf5 = %s.relu(arg0_1)" % torch.relu.__module__,
            "Inductor's FX wrapper launches a Triton kernel without Inductor's launcher for it (kernel_idx 7): "
            "triton kernel 7(in_ptr0=arg0_1, out_ptr0=buf0)",
            "Inductor's FX wrapper has a node the dagrun path does not read: relu = relu(arg0_1) (a call_method node)",
            "Inductor's FX wrapper has a node the dagrun path does not read: sub = sub(arg0_1) (a call_module node)",
            "Inductor's FX wrapper launches a Triton kernel of the model's own, whose argument names do not say "
            "which it writes: add_kernel_0(x_ptr=arg0_1, output_ptr=buf0)",
            "Inductor's FX wrapper launches a Triton kernel with TMA descriptors made at the launch, which its launcher "
            "does not make: triton_poi_0(in_ptr0=arg0_1, out_ptr0=buf0)"]
    for n, w in zip(bad, want):
        with pytest.raises(ind.InductorError) as e:
            ind.node_kind(n, tuners)
        assert str(e.value) == w


def test_what_a_launch_reads_and_writes():
    g = torch.fx.Graph()
    a, b, c, d, e = (g.placeholder(n) for n in "abcde")
    tuners = {0: Tuner("k", [], None, mutated=["out_ptr1", "in_ptr1"])}
    # out_ptr: stored, never loaded; in_out_ptr and mutated: loaded and stored; a node in two places: both
    k = triton(g, "k", 0, in_ptr0=a, in_out_ptr0=b, out_ptr0=c, out_ptr1=d, xnumel=4)
    assert ind.node_access(k, "triton", tuners) == ([a, b, d], [b, c, d])
    k2 = triton(g, "k2", 0, in_ptr0=c, out_ptr0=c)
    assert ind.node_access(k2, "triton", tuners) == ([c], [c])
    # an input the launcher lists as mutated is stored too; a template's inputs (arg_*) are only loaded;
    # a workspace, or any tensor argument named otherwise, is loaded and stored
    k3 = triton(g, "k3", 0, in_ptr1=a, arg_A=b, ws_ptr=c, other=d, out_ptr0=e)
    assert ind.node_access(k3, "triton", tuners) == ([a, b, c, d], [a, c, d, e])
    # the metadata's list where a launcher still carries it there
    old = Tuner("k", [], None)
    old.inductor_meta["mutated_arg_names"] = ["in_ptr0"]
    del old.mutated_arg_names
    assert ind.node_access(triton(g, "k4", 0, in_ptr0=a), "triton", {0: old}) == ([a], [a])
    # ATen: the schema's Tensor(a!) arguments are written; out= is stored, not loaded; in place is both
    addmm = call(g, "x", aten.addmm.out, a, b, c, beta=1, alpha=1, out=d)
    assert ind.node_access(addmm, "aten", tuners) == ([a, b, c], [d])
    add_ = call(g, "y", aten.add_.Tensor, a, b)
    assert ind.node_access(add_, "aten", tuners) == ([a, b], [a])
    conv = call(g, "z", aten.convolution.default, a, b, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    assert ind.node_access(conv, "aten", tuners) == ([a, b], [])
    # the result: fresh tensors are written; a view of an argument or the out= tensor is not a new write
    t = torch.ones(2, 2)
    assert [x is t for x in ind.written_result(conv, "aten", t)] == [True]
    assert ind.written_result(call(g, "v", aten.t.default, a), "aten", t) == []
    assert ind.written_result(addmm, "aten", t) == []
    vals = torch.topk(torch.arange(4.0), 2)
    top = call(g, "w", aten.topk.default, a, 2)
    assert [x is y for x, y in zip(ind.written_result(top, "aten", tuple(vals)), vals)] == [True, True]
    assert ind.written_result(k, "triton", None) == []


def test_a_value_dies_after_its_last_use():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    a = call(g, "a", torch.empty_strided, [4], [1])
    k = triton(g, "k", 0, in_ptr0=x, out_ptr0=a)
    b = call(g, "b", aten.relu.default, a)
    unused = call(g, "unused", torch.empty_strided, [4], [1])
    c = call(g, "c", aten.relu.default, b)
    g.output((c, x))
    nodes = list(g.nodes)
    dies = {i: [n.name for n in ns] for i, ns in ind.last_uses(nodes).items()}
    # x is returned: never dies; k (no value used) and unused die after themselves; a after b, b after c
    assert dies == {2: ["k"], 3: ["a"], 4: ["unused"], 5: ["b"]}
    assert nodes[2] is k and nodes[4] is unused


def test_triton_arguments_by_signature():
    tu = Tuner("triton_red_0", ["in_ptr0", "out_ptr0", "ks0", "xnumel", "r0_numel", "XBLOCK", "R0_BLOCK"], None,
               constants={"ks0": 3}, tuned={"XBLOCK": 16, "R0_BLOCK": 32})
    vals = {"in_ptr0": "i", "out_ptr0": "o", "xnumel": 8, "r0_numel": 64, "XBLOCK": 16, "R0_BLOCK": 32}
    # the signature less the tuned block sizes, in the signature's order; a constant is the HOP's value or its own
    assert ind.triton_args(tu, vals) == ["i", "o", 3, 8, 64]
    assert ind.triton_args(tu, dict(vals, ks0=5)) == ["i", "o", 5, 8, 64]
    # a specialized xnumel of 1 (a reduction over one row) stays an argument of the launcher
    one = Tuner("triton_per_0", ["in_ptr0", "out_ptr0", "xnumel", "r0_numel", "XBLOCK"], None,
                constants={"xnumel": 1}, tuned={"XBLOCK": 1})
    assert ind.triton_args(one, {"in_ptr0": "i", "out_ptr0": "o", "xnumel": 1, "r0_numel": 1024}) == ["i", "o", 1, 1024]
    tu.inductor_meta["extra_launcher_args"] = ["ws"]
    with pytest.raises(ind.InductorError, match="Inductor's FX wrapper gives no ws for triton_red_0"):
        ind.triton_args(tu, vals)
    assert ind.triton_args(tu, dict(vals, ws="w")) == ["i", "o", 3, 8, 64, "w"]
    # a signature keyed otherwise than by name (Triton's older form, by position): named, not a TypeError
    old = Tuner("triton_poi_1", [], None)
    old.triton_meta["signature"] = {0: "*fp32", 1: "i32"}
    with pytest.raises(ind.InductorError, match="Inductor's FX wrapper gives no 0, 1 for triton_poi_1"):
        ind.triton_args(old, vals)
    tu.launchers = []
    with pytest.raises(ind.InductorError, match="launcher of triton_red_0 has no compiled configuration"):
        ind.triton_args(tu, vals)


def test_fx_wrapper_missing_says_which_torch_and_what_it_needs():
    class Old:
        size_asserts = True

    class New:
        fx_wrapper = False
    assert ind.fx_wrapper_missing(Old()) == ("torch %s has no Inductor FX wrapper (torch._inductor.config.fx_wrapper, "
                                             "torch 2.9 or later), which the dagrun path reads" % torch.__version__)
    assert ind.fx_wrapper_missing(New()) == ""
    assert ind._has_key(types.SimpleNamespace(triton=types.SimpleNamespace(cudagraphs=True)), "triton.cudagraphs")
    assert not ind._has_key(types.SimpleNamespace(triton=types.SimpleNamespace()), "triton.cudagraphs")

def plan_of(streams, issue, events):
    return Plan.from_dict({"spec": "t", "strategy": "default", "events": events,
                           "stages": [{"name": o["stage"], "stream": i} for i, ops in enumerate(streams) for o in ops if o["op"] == "launch"],
                           "streams": [{"id": i, "name": "s%d" % i, "ops": ops} for i, ops in enumerate(streams)],
                           "issue_order": issue})


def test_issue_steps_keep_records_after_the_waits_they_stand_for():
    # s1: launch k1, wait e0 (for k0 on s0), record e1, launch k3; s2 waits e1 before k4:
    # e1 must be recorded after the wait, so that k4 is ordered after k0 too.
    streams = [[{"op": "launch", "stage": "k0"}, {"op": "record", "event": 0}],
               [{"op": "launch", "stage": "k1"}, {"op": "wait", "event": 0}, {"op": "record", "event": 1},
                {"op": "launch", "stage": "k3"}],
               [{"op": "wait", "event": 1}, {"op": "launch", "stage": "k4"}]]
    issue = [[0, 0], [0, 1], [1, 0], [1, 1], [1, 2], [1, 3], [2, 0], [2, 1]]
    p = plan_of(streams, issue, 2)
    launch = {2: "k0", 5: "k1", 7: "k3", 9: "k4"}
    steps = ind.issue_steps(p, launch)
    assert steps == [("launch", 0, 2), ("record", 0, 0), ("launch", 1, 5), ("wait", 1, 0), ("record", 1, 1),
                     ("launch", 1, 7), ("wait", 2, 1), ("launch", 2, 9)]
    # launches out of program order cannot be run statement by statement
    with pytest.raises(ind.InductorError, match="program order"):
        ind.issue_steps(p, {2: "k1", 5: "k0", 7: "k3", 9: "k4"})


def test_buffers_are_allocated_for_their_first_launch():
    nodes = [{"id": "k6", "reads": ["t0", "t1"], "writes": ["t2"]},
             {"id": "k8", "reads": ["t2"], "writes": ["t3"]},
             {"id": "k9", "reads": ["t4"], "writes": ["t4"]}]
    assert ind.first_uses({5: ["t2"], 7: ["t4", "t3"], 8: ["t9"]}, nodes) == {5: "k6", 7: "k8"}

def test_buffers_read_before_written_are_held_to_the_end():
    # t2: first touched by its producer (released by the plan); t4: read and written by its first
    # toucher, produced by nobody; t5: read by k8 before k9 writes it: allocated for k8, produced by k9
    nodes = [{"id": "k6", "reads": ["t0"], "writes": ["t2"]},
             {"id": "k8", "reads": ["t2", "t5"], "writes": ["t3"]},
             {"id": "k9", "reads": ["t4"], "writes": ["t4", "t5"]}]
    assert ind.held_to_end({"nodes": nodes}) == ["t0", "t4", "t5"]


def test_a_storage_at_a_freed_ones_address_is_another_tensor(monkeypatch):
    import gc
    import torch
    from dagrun_torch import inductor as ind
    monkeypatch.setattr(ind, "storage_key", lambda t: ("cuda:0", 4096))   # every storage at one address
    ids = ind.TensorIds()
    x = torch.zeros(4)
    assert ids.id(x, "input") == "t0" and ids.known(x)
    a = torch.zeros(8)
    b = a.view(2, 4)
    monkeypatch.setattr(ind, "storage_key", lambda t: ("cuda:0", 8192))
    assert ids.id(a, "activation") == "t1" and ids.id(b, "activation") == "t1"
    del a
    gc.collect()
    assert ids.id(b, "activation") == "t1"           # a view keeps the storage alive: the same tensor
    del b
    gc.collect()
    c = torch.zeros(16)
    assert ids.id(c, "activation") == "t2"           # the first storage was freed: a new tensor
    assert ids.tensors[2] == {"id": "t2", "bytes": 64, "kind": "activation"}
    monkeypatch.setattr(ind, "storage_key", lambda t: ("cuda:0", 4096))
    del x
    gc.collect()
    assert ids.id(torch.zeros(4), "input") == "t0"   # inputs outlive the call: never renamed
    monkeypatch.setattr(ind, "storage_key", lambda t: ("cuda:0", 12288))
    assert ids.id(torch.zeros(0), "activation") is None and len(ids.tensors) == 3


def test_plans_of_several_caps_at_once_are_the_plans_made_one_by_one(dagrun_bin, tmp_path):
    import json
    import os
    from conftest import REPO
    from dagrun_torch import run_dagrun
    src = os.path.join(REPO, "specs", "models", "graphs", "inception_v3.json")
    with open(src) as f:
        graph = json.load(f)
    spec = str(tmp_path / "spec.yaml")
    run_dagrun(["import", src, "-o", spec], binary=dagrun_bin)
    caps = [(1, "default"), (4, "default"), (0, "default"), (4, "round-robin"), (4, "default")]
    got = ind.plan_graphs(graph, caps, dagrun_bin)
    assert sorted(got) == sorted(set(caps))
    for c in set(caps):
        r = run_dagrun(["plan", spec, "--json", "--strategy", c[1], "--max-streams", str(c[0])], binary=dagrun_bin)
        one = Plan.from_dict(json.loads(r.stdout))
        assert got[c].stages == one.stages and len(got[c].streams) == len(one.streams), c
    assert got[(4, "round-robin")].stages != got[(4, "default")].stages
    assert len(got[(1, "default")].streams) == 1 and len(got[(4, "default")].streams) == 4
    assert len(got[(0, "default")].streams) > 4


def test_plans_place_temps_in_the_arena_and_never_inputs_or_outputs(dagrun_bin):
    graph = {"model": "t", "tensors": [{"id": "t0", "bytes": 1024, "kind": "input"}] +
             [{"id": "t%d" % i, "bytes": 4096, "kind": "activation"} for i in range(1, 5)],
             "nodes": [{"id": "k0", "reads": ["t0"], "writes": ["t1"], "duration_us": 5},
                       {"id": "k1", "reads": ["t1"], "writes": ["t2"], "duration_us": 5},
                       {"id": "k2", "reads": ["t1"], "writes": ["t3"], "duration_us": 5},
                       {"id": "k3", "reads": ["t2", "t3"], "writes": ["t4"], "duration_us": 5}]}
    p = ind.plan_graph(graph, 4, dagrun_bin)
    assert sorted(p.arena) == ["t1", "t2", "t3"]          # t0 is an input, t4 the output
    size = p.stats["arena_bytes"]
    assert all(0 <= off and off + 4096 <= size and off % 256 == 0 for off in p.arena.values())
    # t2 and t3 run at once on two streams: disjoint bytes
    assert abs(p.arena["t2"] - p.arena["t3"]) >= 4096


def test_arena_slots_are_allocations_of_one_placed_tensor_that_is_not_returned():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    bufs = [call(g, "buf%d" % i, torch.empty_strided, [8], [1]) for i in range(3)]
    call(g, "buf3", aten.convolution.default, x, x, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    call(g, "buf4", torch.as_strided, bufs[0], [4], [1], 0)
    call(g, "buf5", torch.empty_strided, [8], [1])
    call(g, "buf6", torch.empty_strided, [8], [1])
    ig = ind.InductorGraph(nodes=list(g.nodes), kinds=[], dies={}, launch={}, graph={"nodes": [], "tensors": []}, fx=None,
                           args=[], allocs={1: ["t1"], 2: ["t2"], 3: ["t3"], 4: ["t4"], 5: ["t5"], 6: ["t6", "t7"], 7: ["t8"]},
                           returned=["t3"])
    plan = Plan(spec="", strategy="", stages={}, stage_order=[], streams=[], issue_order=[], events=0, lifetimes={},
                stats={"arena_bytes": 4096}, arena={"t1": 0, "t2": 256, "t3": 512, "t4": 768, "t5": 1024, "t6": 1280, "t7": 1536})
    # buf2 is returned, buf3 an operator's output, buf4 a view, buf5 allocates two tensors, buf6's has no offset
    assert ind.arena_slots(ig, plan) == {1: 0, 2: 256}

def test_arena_allocations_are_views_at_their_offsets():
    arena = torch.zeros(4096, dtype=torch.uint8)
    a = ind._arena_alloc(arena, 256, 4096)((4, 5), (5, 1), torch.float32)
    assert a.shape == (4, 5) and a.stride() == (5, 1) and a.dtype == torch.float32
    assert a.data_ptr() == arena.data_ptr() + 256
    b = ind._arena_alloc(arena, 1024, 4096)((2, 3), (1, 2), dtype=torch.float16)   # keyword dtype, column-major
    assert b.data_ptr() == arena.data_ptr() + 1024 and b.stride() == (1, 2)
    a.fill_(1.0)
    assert arena[256:256 + 80].view(torch.float32).eq(1.0).all() and arena[256 + 80:].eq(0).all()
    last = ind._arena_alloc(arena, 4096 - 80, 4096)((4, 5), (5, 1), torch.float32)   # ends at the arena's end
    assert last.data_ptr() == arena.data_ptr() + 4096 - 80
    with pytest.raises(ind.InductorError):
        ind._arena_alloc(arena, 4096 - 76, 4096)((4, 5), (5, 1), torch.float32)    # one element past it
    assert ind._arena_alloc(arena, 0, 4096)((0, 5), (5, 1), torch.float32).numel() == 0
    # before the arena's start, or not at a multiple of the element size: refused, not wrapped or misread
    with pytest.raises(ind.InductorError, match="offset -16 past"):
        ind._arena_alloc(arena, -16, 4096)((4,), (1,), torch.float32)
    assert ind._arena_alloc(arena, 0, 4096)((4,), (1,), torch.float32).data_ptr() == arena.data_ptr()
    with pytest.raises(ind.InductorError, match="offset 4 is not a multiple of torch.float64's 8 bytes"):
        ind._arena_alloc(arena, 4, 4096)((2,), (1,), torch.float64)
    assert ind._arena_alloc(arena, 8, 4096)((2,), (1,), torch.float64).data_ptr() == arena.data_ptr() + 8
    # no more than the bytes the plan placed there: the next buffer's start after them
    assert ind._arena_alloc(arena, 256, 4096, planned=80)((4, 5), (5, 1), torch.float32).data_ptr() == arena.data_ptr() + 256
    with pytest.raises(ind.InductorError, match="a buffer of 84 bytes at arena offset 256, where the plan placed 80 bytes"):
        ind._arena_alloc(arena, 256, 4096, planned=80)((21,), (1,), torch.float32)


def probe_like(w_shape=(1, 1, 1, 1)):
    """The probe's model in small, as Inductor's FX converter writes it: a Triton relu into an allocated
    buffer (out_ptr), a convolution (a fresh result), a view of it, addmm into an allocated buffer
    (out=), topk and getitem (a multi-output fallback), a Triton relu in place (in_out_ptr). Returns
    (FxWrapper, the freed-buffer check's record)."""
    g = torch.fx.Graph()
    x, w, bias, mat = (g.placeholder(n) for n in ("arg0_1", "arg1_1", "arg2_1", "arg3_1"))
    buf0 = call(g, "buf0", torch.empty_strided, [1, 1, 4, 4], [16, 16, 4, 1], dtype=torch.float32, device="cpu")
    triton(g, "relu_0", 0, in_ptr0=x, out_ptr0=buf0, xnumel=16, XBLOCK=16)
    buf1 = call(g, "buf1", aten.convolution.default, buf0, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    view = call(g, "buf1_view", torch.as_strided, buf1, [4, 4], [4, 1], 0)
    buf2 = call(g, "buf2", torch.empty_strided, [4, 4], [4, 1], dtype=torch.float32, device="cpu")
    call(g, "addmm", aten.addmm.out, bias, view, mat, alpha=1, beta=1, out=buf2)
    buf3 = call(g, "buf3", aten.topk.default, buf2, 2)
    buf4 = call(g, "buf4", operator.getitem, buf3, 0)
    triton(g, "relu_1", 1, in_out_ptr0=buf2, xnumel=16, XBLOCK=16)
    g.output((buf2, buf4))
    seen = {}

    def relu0(src, dst, n):
        seen["buf0"] = weakref.ref(dst)
        seen["buf0_ptr"] = dst.data_ptr()
        dst.copy_(src.clamp(min=0))

    def relu1(buf, n):
        gc.collect()
        seen["buf0 alive at relu_1"] = seen["buf0"]() is not None
        buf.clamp_(min=0)
    tuners = {0: Tuner("triton_poi_relu_0", ["in_ptr0", "out_ptr0", "xnumel", "XBLOCK"], relu0),
              1: Tuner("triton_poi_relu_1", ["in_out_ptr0", "xnumel", "XBLOCK"], relu1)}
    args = [torch.randn(1, 1, 4, 4), torch.randn(*w_shape), torch.randn(4), torch.randn(4, 4)]
    return ind.FxWrapper(types.SimpleNamespace(graph=g), args, tuners), seen


def eager(args):
    x, w, bias, mat = args
    z = torch.addmm(bias, torch.conv2d(x.clamp(min=0), w).view(4, 4), mat)
    return z.clamp(min=0), torch.topk(z, 2).values


@pytest.fixture
def cpu_trace(monkeypatch):
    """The tracer on the CPU: every tensor counts as a device tensor, the current stream's handle is 7."""
    monkeypatch.setattr(ind, "_on_device", lambda t: True)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: types.SimpleNamespace(cuda_stream=7))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "test")


def test_trace_reads_writes_allocations_and_frees_of_the_wrapper_graph(cpu_trace):
    fx, seen = probe_like()
    ig = ind.trace_fx(fx, timing=False, name="t")
    t = {x["id"]: x for x in ig.graph["tensors"]}
    names = [n.name for n in ig.nodes]
    at = {n: i for i, n in enumerate(names)}
    assert ig.launch == {at[n]: "k%d" % at[n] for n in ("relu_0", "buf1", "addmm", "buf3", "relu_1")}
    relu, conv, addmm, topk, relu1 = ig.graph["nodes"]
    assert [n["op"] for n in ig.graph["nodes"]] == [s[:80] for s in [
        "triton_poi_relu_0(in_ptr0=arg0_1, out_ptr0=buf0, xnumel=16, XBLOCK=16)",
        "buf1 = aten.convolution.default(buf0, arg1_1, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)",
        "addmm = aten.addmm.out(arg2_1, buf1_view, arg3_1, alpha=1, beta=1, out=buf2)",
        "buf3 = aten.topk.default(buf2, 2)", "triton_poi_relu_1(in_out_ptr0=buf2, xnumel=16, XBLOCK=16)"]]
    assert [x["kind"] for x in ig.graph["tensors"]][:4] == ["input"] * 4 and ig.args == fx.args
    b0, b1, b2, b3 = (ig.name_tids[n] for n in ("buf0", "buf1", "buf2", "buf3"))
    assert len(b0) == len(b1) == len(b2) == 1 and len(b3) == 2
    assert ig.name_tids["buf1_view"] == b1 and ig.name_tids["addmm"] == b2 and ig.name_tids["buf4"] == b3[:1]
    # out_ptr and out= are stored, never loaded; in_out_ptr is both; operators' results are written
    assert (relu["reads"], relu["writes"], relu["inplace"]) == (["t0"], b0, False)
    assert (conv["reads"], conv["writes"]) == (b0 + ["t1"], b1)
    assert (addmm["reads"], addmm["writes"], addmm["inplace"]) == (["t2"] + b1 + ["t3"], b2, False)
    assert (topk["reads"], topk["writes"]) == (b2, b3)
    assert (relu1["reads"], relu1["writes"], relu1["inplace"]) == (b2, b2, True)
    # what an operator returns it allocates itself (never in the arena); the wrapper's allocations are its own
    assert [t[x].get("alloc") for x in b1 + b3] == ["producer"] * 3
    assert ig.allocs == {at["buf0"]: b0, at["buf2"]: b2} and not any(t[x].get("alloc") for x in b0 + b2)
    assert ig.first_use == {at["buf0"]: "k%d" % at["relu_0"], at["buf2"]: "k%d" % at["addmm"]}
    assert ig.returned == b2 + b3[:1]
    # Triton kernels launch through their launcher, with the current stream's handle
    assert fx.tuners[0].streams == [7] and fx.tuners[1].streams == [7]
    # buf0 died after its last use (the convolution), before relu_1 ran
    assert seen["buf0 alive at relu_1"] is False
    assert ig.graph["tracer"] == "torch.compile (inductor fx wrapper)" and ig.graph["sum_node_us"] == 0
    p = Plan(spec="", strategy="", stages={}, stage_order=[], streams=[], issue_order=[], events=0, lifetimes={},
             stats={"arena_bytes": 4096}, arena={b0[0]: 0, b2[0]: 256})
    assert ind.arena_slots(ig, p) == {at["buf0"]: 0}      # buf2 is returned: not in the arena


def test_the_wrapper_graph_runs_through_the_launchers_and_frees_at_last_use(cpu_trace):
    """run_wrapper (what Inductor's compiled callable runs on the dagrun
    path): eager's outputs, Triton kernels through their launchers on the
    current stream (the HOP stand-in raises), each value let go after its
    last use; a call with another argument count is refused."""
    fx, seen = probe_like()
    args = fx.args
    fx.args = None
    got = ind.run_wrapper(fx, args)
    want = eager(args)
    assert len(got) == 2 and all(torch.equal(a, b) for a, b in zip(got, want))
    assert fx.tuners[0].streams == [7] and fx.tuners[1].streams == [7]
    assert seen["buf0 alive at relu_1"] is False
    assert ind.run_wrapper(fx, args)[0].data_ptr() != got[0].data_ptr()      # each call its own buffers
    with pytest.raises(ind.InductorError, match="has 4 placeholders for 3 arguments"):
        ind.run_wrapper(fx, args[:3])


def test_a_wrapper_node_that_fails_is_named(cpu_trace):
    fx, _ = probe_like(w_shape=(1, 2, 1, 1))          # a weight of two channels for an input of one
    with pytest.raises(ind.InductorError) as e:
        ind.trace_fx(fx, timing=False)
    assert str(e.value).startswith("cannot trace Inductor's wrapper graph at node buf1 = aten.convolution.default(buf0, "
                                   "arg1_1, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1): RuntimeError: ")
    # the first run (Inductor's compiled callable, before any trace) names it too, the error chained
    fx, _ = probe_like(w_shape=(1, 2, 1, 1))
    with pytest.raises(ind.InductorError) as e:
        ind.run_wrapper(fx, fx.args)
    assert str(e.value).startswith("cannot run Inductor's wrapper graph at node buf1 = aten.convolution.default(buf0, "
                                   "arg1_1, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1): RuntimeError: ")
    assert isinstance(e.value.__cause__, RuntimeError)
    fx, _ = probe_like()
    fx.args = fx.args[:3]
    with pytest.raises(ind.InductorError, match="4 placeholders for 3 arguments"):
        ind.trace_fx(fx, timing=False)
    # an unknown node stops the trace before anything runs
    fx, seen = probe_like()
    g = fx.gm.graph
    out = list(g.nodes)[-1]
    with g.inserting_before(out):
        call(g, "buf9", torch.relu, list(g.nodes)[0])
    with pytest.raises(ind.InductorError, match="does not read: buf9 = "):
        ind.trace_fx(fx, timing=False)
    assert seen == {}


class Stream:
    def __init__(self, i, log):
        self.i, self.cuda_stream, self.device, self.log = i, 100 + i, torch.device("cpu"), log

    def wait_event(self, e):
        self.log.append(("wait", self.i, e.name))


class Event:
    def __init__(self, name, log):
        self.name, self.log = name, log

    def record(self, s):
        self.log.append(("record", s.i, self.name))


def test_the_plan_is_issued_node_by_node_on_its_streams(cpu_trace, monkeypatch):
    """run_plan (what CompiledInductor captures) on the CPU with stand-in streams and events: launches
    on their planned streams in the plan's order, records and waits between them, the delay before its
    launch, an allocation on the stream of its first launch or in the arena, a value past its last use
    held until the plan releases its tensor, and the outputs of the eager model."""
    import contextlib
    fx, seen = probe_like()
    # the convolution reads buf0 through a view with an explicit storage offset, as Inductor's FX converter
    # writes views: in the arena, the view must start at buf0's offset there, not at the arena's start
    g = fx.gm.graph
    buf0, conv = (next(n for n in g.nodes if n.name == name) for name in ("buf0", "buf1"))
    with g.inserting_before(conv):
        view0 = call(g, "buf0_view", torch.as_strided, buf0, [1, 1, 4, 4], [16, 16, 4, 1], 0)
    conv.args = (view0,) + conv.args[1:]
    ig = ind.trace_fx(fx, timing=False)
    at = {n.name: i for i, n in enumerate(ig.nodes)}
    k = {n: "k%d" % at[n] for n in ("relu_0", "buf1", "addmm", "buf3", "relu_1")}
    # s0: relu_0, buf1, record e0, wait e1, buf3, relu_1; s1: wait e0, addmm, record e1
    streams = [[{"op": "launch", "stage": k["relu_0"]}, {"op": "launch", "stage": k["buf1"]}, {"op": "record", "event": 0},
                {"op": "wait", "event": 1}, {"op": "launch", "stage": k["buf3"]}, {"op": "launch", "stage": k["relu_1"]}],
               [{"op": "wait", "event": 0}, {"op": "launch", "stage": k["addmm"]}, {"op": "record", "event": 1}]]
    plan = plan_of(streams, [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2], [0, 3], [0, 4], [0, 5]], 2)
    b0, b1 = ig.name_tids["buf0"][0], ig.name_tids["buf1"][0]
    plan.arena, plan.stats = {b0: 64}, {"arena_bytes": 1024}
    steps = ind.issue_steps(plan, ig.launch)
    log = []
    cur = [None]

    @contextlib.contextmanager
    def on(s):
        before, cur[0] = cur[0], s.i
        try:
            yield
        finally:
            cur[0] = before
    monkeypatch.setattr(torch.cuda, "stream", on)
    monkeypatch.setattr(torch.cuda, "Event", lambda: Event("fork", log))
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: log.append(("sleep", cur[0], cycles)))
    launch0, host0 = ind.launch_node, ind.run_host

    def launch(n, kind, env, tuners, stream):
        gc.collect()
        log.append(("launch", n.name, cur[0], stream, seen["buf1"]() is not None if "buf1" in seen else None))
        v = launch0(n, kind, env, tuners, stream)
        if n.name == "buf1":
            seen["buf1"] = weakref.ref(v)
        return v

    def host(n, env, args, gm, offsets=None):
        if n.target is torch.empty_strided:
            log.append(("alloc", n.name, cur[0]))
        return host0(n, env, args, gm, offsets)
    monkeypatch.setattr(ind, "launch_node", launch)
    monkeypatch.setattr(ind, "run_host", host)

    def run(frees, lifetimes=True):
        del log[:]
        seen.pop("buf1", None)
        keep = []
        arena_at = ind.arena_slots(ig, plan)
        out = ind.run_plan(ig, steps, frees, [Stream(0, log), Stream(1, log)], [Event("e0", log), Event("e1", log)],
                           fx.args, keep, arena_at=arena_at, arena_planned={i: 64 for i in arena_at}, arena_bytes=1024,
                           first_stream={i: plan.stages[nid] for i, nid in ig.first_use.items()},
                           delays={at["addmm"]: 1234}, lifetimes=lifetimes)
        return out, keep
    frees = [[] for _ in steps]
    frees[steps.index(("launch", 1, at["addmm"]))] = [b1]        # the plan releases buf1 after addmm
    out, keep = run(frees)
    assert all(torch.equal(a, b) for a, b in zip(out, eager(fx.args)))
    assert log == [("record", 0, "fork"), ("wait", 1, "fork"),
                   ("launch", "relu_0", 0, 100, None), ("launch", "buf1", 0, 100, None), ("record", 0, "e0"),
                   ("wait", 1, "e0"), ("alloc", "buf2", 1), ("sleep", 1, 1234), ("launch", "addmm", 1, 101, True),
                   ("record", 1, "e1"), ("wait", 0, "e1"), ("launch", "buf3", 0, 100, False),
                   ("launch", "relu_1", 0, 100, False), ("record", 1, "fork"), ("wait", 0, "fork")]
    # buf0 is in the arena, at its offset (no allocation logged), the arena first in keep
    assert seen["buf0_ptr"] == keep[0].data_ptr() + 64 and keep[0].numel() == 1024
    # without the plan's release buf1 is held to the end of the run
    out, keep = run([[] for _ in steps])
    assert [e[4] for e in log if e[0] == "launch"] == [None, None, True, True, True]
    # lifetimes=False: every value past its last use is kept, with the arena and the arguments
    out, keep = run(frees, lifetimes=False)
    assert [e[4] for e in log if e[0] == "launch"] == [None, None, True, True, True]
    assert any(isinstance(v, torch.Tensor) and v.data_ptr() == seen["buf1"]().data_ptr() for v in keep)


def test_a_view_covers_the_same_elements_of_its_buffer_wherever_the_buffer_lies():
    """Inductor's views give their storage offset from the start of the
    buffer's storage; a buffer in the arena starts at its arena offset, so
    run_host moves a view by the difference from the trace (positional or
    keyword offset, a view of a view); without the trace's offsets, or
    without an offset given, the view is as written."""
    g = torch.fx.Graph()
    buf = call(g, "buf0", torch.empty_strided, [8], [1], dtype=torch.float32, device="cpu")
    v = call(g, "v", torch.as_strided, buf, [2], [1], 3)
    vk = call(g, "vk", torch.as_strided, buf, [2], [1], storage_offset=5)
    vv = call(g, "vv", torch.as_strided, v, [1], [1], 4)
    vn = call(g, "vn", torch.as_strided, buf, [2], [1])
    arena = torch.arange(32, dtype=torch.float32).view(torch.uint8)     # the arena is bytes
    env = {buf: ind._arena_alloc(arena, 16, 128)((8,), (1,), torch.float32)}     # elements 4 to 11 of the arena
    traced = {"buf0": 0, "v": 3}
    for node in (v, vk, vv, vn):
        env[node] = ind.run_host(node, env, [], None, traced)
    assert env[v].tolist() == [7.0, 8.0] and env[vk].tolist() == [9.0, 10.0] and env[vv].tolist() == [8.0]
    assert env[vn].tolist() == [4.0, 5.0]
    # a static input that is a copy of a view with an offset: the view moves back by it
    assert ind.run_host(v, {buf: torch.arange(8.0)}, [], None, {"buf0": 2}).tolist() == [1.0, 2.0]
    # as Inductor's wrapper runs it: offsets from the storage's start
    assert ind.run_host(v, env, [], None).tolist() == [3.0, 4.0]


@pytest.fixture
def fake_inductor(monkeypatch):
    """Stand-ins for the Inductor modules compile_fx_wrapper uses (torch 1.13 has none): a config with
    fx_wrapper and without alignment_asserts, an FX converter with one kernel, the FX wrapper codegen,
    and compile_fx, which converts ``state["graphs"]`` wrapper graphs (or raises ``state["raise"]``)
    and returns Inductor's callable."""
    import sys
    state = {"graphs": 1, "raise": None, "patches": None}
    config = types.ModuleType("torch._inductor.config")
    config.fx_wrapper, config.size_asserts, config.nan_asserts = False, True, True
    config.triton = types.SimpleNamespace(cudagraphs=True, autotune_at_compile_time=False)
    W = types.ModuleType("torch._inductor.codegen.wrapper_fxir")

    class FxConverter:
        def __init__(self):
            self.kernels = {"triton_poi_0": types.SimpleNamespace(tuner="tuner0", wrapped=types.SimpleNamespace(kernel_idx=3))}

        def generate(self):
            # a wrapper graph that returns its two arguments swapped
            g = torch.fx.Graph()
            a, b = g.placeholder("a"), g.placeholder("b")
            g.output((b, a))
            return types.SimpleNamespace(meta={}, graph=g)

    class WrapperFxCodegen:
        def compile_graph(self, gm):
            return lambda *a: ("ran", a)
    W.FxConverter, W.WrapperFxCodegen = FxConverter, WrapperFxCodegen
    C = types.ModuleType("torch._inductor.compile_fx")

    def compile_fx(gm, inputs, config_patches=None):
        state["patches"] = config_patches
        if state["raise"] is not None:
            raise state["raise"]
        fns = [WrapperFxCodegen().compile_graph(FxConverter().generate()) for _ in range(state["graphs"])]
        return lambda *a: fns[0](*a) if fns else a
    C.compile_fx = compile_fx
    pkg, codegen = types.ModuleType("torch._inductor"), types.ModuleType("torch._inductor.codegen")
    pkg.config, pkg.codegen, pkg.compile_fx, codegen.wrapper_fxir = config, codegen, C, W
    for name, mod in (("torch._inductor", pkg), ("torch._inductor.config", config), ("torch._inductor.codegen", codegen),
                      ("torch._inductor.codegen.wrapper_fxir", W), ("torch._inductor.compile_fx", C)):
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(torch, "_inductor", pkg, raising=False)
    state["W"], state["config"] = W, config
    state["originals"] = (FxConverter.generate, WrapperFxCodegen.compile_graph)
    return state


def test_compile_fx_wrapper_catches_the_wrapper_graph_its_tuners_and_arguments(fake_inductor):
    st = fake_inductor
    W = st["W"]
    inner, fx = ind.compile_fx_wrapper("gm", [1, 2])
    # the patches this config has (no alignment_asserts here), the FX wrapper on, no CUDA graph, tuning at compile
    assert st["patches"] == {"fx_wrapper": True, "size_asserts": False, "nan_asserts": False, "triton.cudagraphs": False,
                             "triton.autotune_at_compile_time": True}
    assert fx.tuners == {3: "tuner0"} and fx.args is None and isinstance(fx.gm.graph, torch.fx.Graph)
    assert (W.FxConverter.generate, W.WrapperFxCodegen.compile_graph) == st["originals"]   # restored
    # each call runs the wrapper graph itself (run_wrapper), not the callable Inductor's codegen made of it
    assert inner(5, 6) == (6, 5) and fx.args == [5, 6]
    assert inner(7, 8) == (8, 7) and fx.args == [5, 6]     # the first call's arguments


@pytest.mark.parametrize("case", ["two graphs", "no graph", "converter refuses", "compile fails", "no fx_wrapper",
                                  "no generate", "no codegen class"])
def test_compile_fx_wrapper_says_why_the_fx_path_is_not_taken(fake_inductor, case, monkeypatch):
    st = fake_inductor
    want = {"two graphs": "Inductor made 2 wrapper graphs for this graph (graph partitions or subgraphs); the dagrun "
                          "path reads one",
            "no graph": "Inductor's compile made no FX wrapper graph in this process (another wrapper took over, "
                        "such as torch._inductor.config.cpp_wrapper, or the compile came from a cache or ran in "
                        "another process); the dagrun path reads one",
            "converter refuses": "Inductor's FX wrapper cannot express this graph: FX conversion only supports Triton kernels.",
            "compile fails": "Inductor's compile with its FX wrapper failed: AssertionError: a raw line",
            "no fx_wrapper": "torch %s has no Inductor FX wrapper (torch._inductor.config.fx_wrapper, torch 2.9 or later), "
                             "which the dagrun path reads" % torch.__version__,
            # an FX wrapper without the methods the path hooks: a fallback that names them, never a crash
            "no generate": "torch %s's Inductor FX wrapper has no FxConverter.generate, which the dagrun path hooks to "
                           "catch the wrapper graph (written against torch 2.11)" % torch.__version__,
            "no codegen class": "torch %s's Inductor FX wrapper has no torch._inductor.codegen.wrapper_fxir."
                                "WrapperFxCodegen, which the dagrun path hooks to catch the wrapper graph (written "
                                "against torch 2.11)" % torch.__version__}[case]
    if case == "two graphs":
        st["graphs"] = 2
    elif case == "no graph":
        st["graphs"] = 0
    elif case == "converter refuses":
        st["raise"] = NotImplementedError("FX conversion only supports Triton kernels.\nSee the issue.")
    elif case == "compile fails":
        st["raise"] = AssertionError("a raw line")
    elif case == "no generate":
        monkeypatch.delattr(st["W"].FxConverter, "generate")
    elif case == "no codegen class":
        monkeypatch.delattr(st["W"], "WrapperFxCodegen")
    else:
        del st["config"].fx_wrapper
    with pytest.raises(ind.InductorError) as e:
        ind.compile_fx_wrapper("gm", [1])
    assert str(e.value) == want
    if case not in ("no generate", "no codegen class"):
        assert (st["W"].FxConverter.generate, st["W"].WrapperFxCodegen.compile_graph) == st["originals"]
    # no compile without the FX wrapper or its hooks
    assert (st["patches"] is None) == (case in ("no fx_wrapper", "no generate", "no codegen class"))
