"""Reading Inductor's generated wrapper and issuing a plan over it: the parts that need no GPU."""
import ast

import pytest

torch = pytest.importorskip("torch")

from dagrun_torch import inductor as ind  # noqa: E402
from dagrun_torch.plan import Plan  # noqa: E402

WRAPPER = '''
def call(args):
    primals_1, primals_2 = args
    args.clear()
    assert_size_stride(primals_1, (4, 5), (5, 1))
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        buf0 = empty_strided_cuda((4, 5), (5, 1), torch.float32)
        # Topologically Sorted Source Nodes: [cat], Original ATen: [aten.cat]
        stream0 = get_raw_stream(0)
        triton_poi_fused_cat_0.run(primals_1, primals_2, buf0, 320, grid=grid(320), stream=stream0)
        del primals_1
        buf1 = extern_kernels.convolution(buf0, primals_2, stride=(1, 1), bias=None)
        buf2 = buf1; del buf1  # reuse
        buf19 = reinterpret_tensor(buf2, (4, 4), (4, 1), 0)
        extern_kernels.mm(buf0, buf2, out=buf19)
        buf3 = torch.ops.aten.max_pool2d_with_indices.default(buf2, [3, 3])
        buf4 = buf3[0]
        buf2.zero_()
    return (buf19, buf4, )
'''


def body():
    return ind._flatten_with(ast.parse(WRAPPER).body[0].body)


def test_statements_that_launch():
    got = [(ind._is_host(s), ast.unparse(s).split("(")[0]) for s in body()]
    launches = [text for host, text in got if not host]
    assert launches == ["triton_poi_fused_cat_0.run", "buf1 = extern_kernels.convolution", "extern_kernels.mm",
                        "buf3 = torch.ops.aten.max_pool2d_with_indices.default", "buf4 = buf3[0]", "buf2.zero_", "return "]
    host = [text for h, text in got if h]
    assert "buf0 = empty_strided_cuda" in host and "buf19 = reinterpret_tensor" in host and "stream0 = get_raw_stream" in host
    assert "buf2 = buf1" in host and "del buf1" in host and "args.clear" in host


def test_triton_arguments_by_signature():
    class Fn:
        arg_names = ["in_ptr0", "in_ptr1", "out_ptr0", "xnumel", "XBLOCK"]

    class Kernel:
        fn = Fn()
        inductor_meta = {"mutated_arg_names": []}

        def run(self, *a, **k):
            pass
    s = body()[6]
    k = ind._triton_kernel(s, {"triton_poi_fused_cat_0": Kernel()})
    assert k is not None
    kern, pos = k
    assert ind._arg_names(kern) == Fn.arg_names
    assert [ast.unparse(e) for e in pos][:3] == ["primals_1", "primals_2", "buf0"]
    assert ind._triton_kernel(s, {"triton_poi_fused_cat_0": object()}) is None   # not a kernel object: not Triton


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
    b = body()
    allocs = [ast.unparse(s).split(" =")[0] for s in b if ind._allocates(s)]
    assert allocs == ["buf0"]          # views, aliases and extern outputs allocate nothing here
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


def _graph_of(src, allocs, returned):
    stmts = [(s, None) for s in ind._flatten_with(ast.parse(src).body)]
    return ind.InductorGraph(stmts=stmts, launch={}, graph={"nodes": [], "tensors": []}, globals_={}, args=[],
                             allocs=allocs, returned=returned)


def test_arena_slots_are_allocations_of_one_placed_tensor_that_is_not_returned():
    src = ("buf0 = empty_strided_cuda((4, 5), (5, 1), torch.float32)\n"
           "buf1 = empty_strided((4, 5), (5, 1), device='cuda', dtype=torch.float32)\n"
           "buf2 = empty_strided_cuda((8,), (1,), torch.float32)\n"
           "buf3 = torch.empty_strided((8,), (1,), device='cuda')\n"
           "buf4 = empty_strided_cuda((8,), (1,), torch.float32)\n"
           "buf5 = empty_strided_cuda((8,), (1,), torch.float32)\n")
    ig = _graph_of(src, {0: ["t1"], 1: ["t2"], 2: ["t3"], 3: ["t4"], 4: ["t5"], 5: ["t6", "t7"]}, returned=["t3"])
    plan = Plan(spec="", strategy="", stages={}, stage_order=[], streams=[], issue_order=[], events=0, lifetimes={},
                stats={"arena_bytes": 4096}, arena={"t1": 0, "t2": 256, "t3": 512, "t4": 768, "t6": 1024, "t7": 1280})
    # buf2 is returned, buf3 is torch.empty_strided (an attribute call), t5 has no offset, buf5 allocates two tensors
    assert ind.arena_slots(ig, plan) == {0: 0, 1: 256}


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


TRACED = '''
def call(args):
    arg0_1, arg1_1 = args
    args.clear()
    buf0 = empty_strided_cuda((4, 4), (4, 1), torch.float32)
    stream0 = get_raw_stream(0)
    triton_poi_fused_relu_0.run(arg0_1, buf0, 16, stream=stream0)
    buf1 = extern_kernels.convolution(buf0, arg1_1, stride=(1, 1))
    buf2 = empty_strided_cuda((4, 4), (4, 1), torch.float32)
    extern_kernels.mm(buf1, arg1_1, out=buf2)
    del buf0
    buf3 = empty_strided_cuda((4, 4), (4, 1), torch.float32)
    triton_poi_fused_relu_0.run(buf2, buf3, 16, stream=stream0)
    del buf1
    return (buf3, )
'''


def test_trace_marks_what_operators_allocate_and_what_the_wrapper_returns(tmp_path, monkeypatch):
    class Dev(torch.Tensor):   # a CPU tensor that the tracer takes for a CUDA one
        @property
        def is_cuda(self):
            return True

    def dev(t):
        return t.as_subclass(Dev)

    class Fn:
        arg_names = ["in_ptr0", "out_ptr0", "xnumel"]

    class Relu:
        fn = Fn()
        inductor_meta = {}

        def run(self, src, dst, n, stream=None):
            dst.copy_(src.clamp(min=0))

    class Extern:
        @staticmethod
        def convolution(x, w, stride=None):
            return dev(x @ w)

        @staticmethod
        def mm(a, b, out=None):
            out.copy_(a @ b)

    src = tmp_path / "wrapper.py"
    src.write_text(TRACED)
    glb = {"torch": torch, "empty_strided_cuda": lambda size, stride, dtype: dev(torch.empty_strided(size, stride, dtype=dtype)),
           "get_raw_stream": lambda i: 0, "triton_poi_fused_relu_0": Relu(), "extern_kernels": Extern()}
    exec(compile(TRACED, str(src), "exec"), glb)

    class Stream:
        cuda_stream = 0
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: Stream())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "test")
    args = [dev(torch.randn(4, 4)), dev(torch.randn(4, 4))]
    ig = ind.trace_call(ind.WrapperCall(glb["call"].__code__, glb, args, {}), timing=False, name="t")
    t = {x["id"]: x for x in ig.graph["tensors"]}
    nodes = {n["op"].split("(")[0]: n for n in ig.graph["nodes"]}
    conv = nodes["buf1 = extern_kernels.convolution"]
    assert [t[w].get("alloc") for w in conv["writes"]] == ["producer"]      # the convolution allocates its output
    allocated = {w for i in ig.allocs for w in ig.allocs[i]}
    assert len(allocated) == 3 and not any(t[w].get("alloc") for w in allocated)   # the wrapper's own buffers
    assert [x["kind"] for x in ig.graph["tensors"]][:2] == ["input", "input"]
    assert len(ig.returned) == 1 and ig.returned[0] in allocated
    assert nodes["extern_kernels.mm"]["writes"] == ig.name_tids["buf2"]     # out=: the wrapper's buffer
    # out_ptr and out= are stored to, never loaded: the launch does not read them
    assert nodes["extern_kernels.mm"]["reads"] == ig.name_tids["buf1"] + [x["id"] for x in ig.graph["tensors"][1:2]]
    relu = [n for n in ig.graph["nodes"] if n["op"].startswith("triton_poi_fused_relu_0")]
    assert [(n["reads"], n["writes"], n["inplace"]) for n in relu] == [
        ([ig.graph["tensors"][0]["id"]], ig.name_tids["buf0"], False), (ig.name_tids["buf2"], ig.name_tids["buf3"], False)]
    # an in_out_ptr is loaded and stored
    Fn.arg_names = ["in_out_ptr0", "in_ptr0", "xnumel"]
    ig = ind.trace_call(ind.WrapperCall(glb["call"].__code__, glb, [dev(torch.randn(4, 4)), dev(torch.randn(4, 4))], {}),
                        timing=False, name="t")
    relu = [n for n in ig.graph["nodes"] if n["op"].startswith("triton_poi_fused_relu_0")]
    assert len(relu) == 2 and all(n["inplace"] and n["writes"][0] in n["reads"] for n in relu)
    Fn.arg_names = ["in_ptr0", "out_ptr0", "xnumel"]
    assert conv["reads"] == ig.name_tids["buf0"] + [x["id"] for x in ig.graph["tensors"][1:2]]
    p = Plan(spec="", strategy="", stages={}, stage_order=[], streams=[], issue_order=[], events=0, lifetimes={},
             stats={"arena_bytes": 4096}, arena={w: 0 for w in allocated})
    assert sorted(ind.arena_slots(ig, p)) == sorted(i for i, w in ig.allocs.items() if w[0] not in ig.returned)


def test_a_wrapper_statement_that_fails_is_named_with_its_line(tmp_path, monkeypatch):
    class Extern:
        @staticmethod
        def convolution(x, w, stride=None):
            raise RuntimeError("no kernel for this layout\nsecond line")

    class Relu:
        def run(self, src, dst, n, stream=None):
            dst.copy_(src.clamp(min=0))

    src = tmp_path / "wrapper.py"
    src.write_text(TRACED)
    glb = {"torch": torch, "empty_strided_cuda": lambda size, stride, dtype: torch.empty_strided(size, stride, dtype=dtype),
           "get_raw_stream": lambda i: 0, "triton_poi_fused_relu_0": Relu(), "extern_kernels": Extern()}
    exec(compile(TRACED, str(src), "exec"), glb)

    class Stream:
        cuda_stream = 0
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: Stream())
    line = TRACED.splitlines().index("    buf1 = extern_kernels.convolution(buf0, arg1_1, stride=(1, 1))") + 1
    with pytest.raises(ind.InductorError) as e:
        ind.trace_call(ind.WrapperCall(glb["call"].__code__, glb, [torch.randn(4, 4), torch.randn(4, 4)], {}), timing=False)
    assert str(e.value) == ("cannot trace Inductor's wrapper at %s:%d (buf1 = extern_kernels.convolution(buf0, arg1_1, "
                            "stride=(1, 1))): RuntimeError: no kernel for this layout" % (src, line))
