"""Probe: Inductor's FX wrapper (config.fx_wrapper) as dagrun's structured hook. Run: python3 python/tests/gpu_inductor_fx_probe.py (its record: testdata/h100/backend/fx-probe.log)"""
import time, torch, torch.nn as nn; from torch.fx import Node; from torch._inductor.compile_fx import compile_fx
from torch._inductor.codegen import wrapper_fxir as W
from torch._higher_order_ops.triton_kernel_wrap import triton_kernel_wrapper_mutation as HOP, kernel_side_table as KST
print("torch", torch.__version__, torch.cuda.get_device_name(), "has fx_wrapper:", hasattr(torch._inductor.config, "fx_wrapper"))
got, gen0, cg0 = {}, W.FxConverter.generate, W.WrapperFxCodegen.compile_graph
def gen(self):  # keep FxConverter.kernels: kernel_idx -> Inductor's CachingAutotuner
    gm = gen0(self); gm.meta["tuners"] = {k.wrapped.kernel_idx: k.tuner for k in self.kernels.values()}; return gm
def cg(self, gm):  # the documented override point: gets the wrapper GraphModule, returns the callable Inductor runs
    got["gm"], fn = gm, cg0(self, gm)
    def run(*a): got.setdefault("args", list(a)); return fn(*a)
    return run
W.FxConverter.generate, W.WrapperFxCodegen.compile_graph = gen, cg
class M(nn.Module):  # conv (extern alloc), linear (mm/addmm out=), relu/mean/sum (triton), topk (aten fallback, multi-output)
    def __init__(s): super().__init__(); s.c = nn.Conv2d(16, 32, 3, padding=1); s.l = nn.Linear(32, 64)
    def forward(s, x):
        z = s.l(torch.relu(s.c(x)).mean((2, 3)))
        return torch.relu(z).sum(1, keepdim=True) + z, torch.topk(z, 4).values
m, x = M().cuda().eval(), torch.randn(8, 16, 32, 32, device="cuda")
patch = {"fx_wrapper": True, "size_asserts": False, "alignment_asserts": False, "nan_asserts": False, "triton.cudagraphs": False, "triton.autotune_at_compile_time": True}
patch = {k: v for k, v in patch.items() if k.split(".")[0] != "alignment_asserts" or hasattr(torch._inductor.config, k)}
print("patch", patch)
with torch.no_grad():
    t0 = time.time(); out = torch.compile(m, backend=lambda g, ex: compile_fx(g, ex, config_patches=patch), dynamic=False)(x)
    torch.cuda.synchronize(); ref = m(x)
print("compile+run s %.1f" % (time.time() - t0), "max|err|", [float((a - b).abs().max()) for a, b in zip(out, ref)])
gm, args, tuners = got["gm"], got["args"], got["gm"].meta.get("tuners", {})
nm, interp = (lambda v: v.name if isinstance(v, Node) else v), torch.fx.Interpreter(gm, garbage_collect_values=False)
with torch.no_grad(): interp.run(*args); torch.cuda.synchronize(); env, s = interp.env, torch.cuda.Stream()
for n in gm.graph.nodes:
    if n.op != "call_function": print(n.op, n.name, [nm(a) for a in n.args]); continue
    if n.target is not HOP:
        sch = getattr(n.target, "_schema", None)
        w = [a.name for a in sch.arguments if a.alias_info is not None and a.alias_info.is_write] if sch else "no schema"
        print("CALL", getattr(n.target, "__module__", "?"), getattr(n.target, "__name__", n.target), "writes", w,
              [nm(a) for a in n.args], {k: nm(v) for k, v in n.kwargs.items()}); continue
    kw, i = n.kwargs["kwargs"], n.kwargs["kernel_idx"]; tu = tuners.get(i); jit = KST.get_kernel(i)
    print("TRITON", getattr(getattr(jit, "fn", jit), "__name__", jit), {k: nm(v) for k, v in kw.items()}, "grid", n.kwargs["grid"], "const", KST.get_constant_args(n.kwargs["constant_args_idx"]))
    if tu is None: print("  no tuner for kernel_idx", i); continue
    sig, consts, best = list(tu.triton_meta["signature"]), tu.triton_meta.get("constants", {}), tu.launchers[0].config if tu.launchers else None
    print("  cfg0", tu.compile_results[0].config, "| best", best, "| n_launchers", len(tu.launchers), "| mutated", tu.inductor_meta.get("mutated_arg_names"), "| constants", consts)
    vals = {k: env[v] if isinstance(v, Node) else v for k, v in kw.items()}
    wr = [k for k in vals if k.startswith(("out_ptr", "in_out_ptr")) or k in tu.inductor_meta.get("mutated_arg_names", [])]
    base, pos = {k: vals[k].clone() for k in wr}, [a for a in sig if a not in consts and a not in getattr(best, "kwargs", {})]
    def fire(via_tuner):  # one launch on side stream s: Inductor's launcher, or the FX graph's HOP (Triton JIT)
        with torch.cuda.stream(s):
            if via_tuner: tu.run(*[vals[a] for a in pos], stream=s.cuda_stream)
            else: HOP(**{**n.kwargs, "kwargs": {k: vals.get(k, v) for k, v in kw.items()}})
    def launch(via_tuner, reps=1):  # from the same start state; returns (written tensors, us per launch)
        for k in wr: vals[k].copy_(base[k])
        fire(via_tuner); torch.cuda.synchronize(); res = [vals[k].clone() for k in wr]
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True); e0.record(s)
        for _ in range(reps): fire(via_tuner)
        e1.record(s); s.synchronize(); return res, round(e0.elapsed_time(e1) * 1000 / reps, 2)
    try: (a, ta), (b, tb) = launch(False, 20), launch(True, 20); print("  writes", wr, "run args", pos, "| HOP==tuner bitwise:", all(torch.equal(p, q) for p, q in zip(a, b)), "| us HOP/tuner", ta, tb)
    except Exception as e: print("  launch failed:", type(e).__name__, e)
g = torch.cuda.CUDAGraph(); s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s), torch.no_grad():
    try:
        gm(*args); torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=s): o2 = gm(*args)
        g.replay(); torch.cuda.synchronize(); print("gm captured on side stream; replay == eager:", [torch.equal(a, b) for a, b in zip(o2, out)])
    except Exception as e: print("capture failed:", type(e).__name__, e)
