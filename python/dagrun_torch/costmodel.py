"""A cost model of a model's kernels on one GPU, and schedules chosen with it.

What it holds, per graph node (``NodeCost``): its GPU time alone (µs, the
exporter's CUDA-graph-replay time), the kernels it launches with their launch
configuration (grid, block, registers per thread, shared memory) as the
PyTorch profiler (Kineto, over CUPTI) reports them, and its occupancy: the
fraction of the GPU's warp slots its kernels fill, weighted by kernel time
(Kineto's "est. achieved occupancy %", computed from the launch configuration
and the function's attributes with the CUDA occupancy calculator; when the
profiler gives none, warps per SM over 64). A node's SM-time is its time
alone times its occupancy times the number of SMs (SM·µs).

How concurrent kernels slow each other down (``CostModel.capacity``,
``CostModel.interference``) is calibrated by a short benchmark on the device
(``measure``): pairs of the model's own kernels, each repeated in a chain on
its own stream of one CUDA graph, timed alone and together. The model is
processor sharing: while kernels run together, each progresses at
1 / (max(1, U / capacity) · (1 + interference · min(k − 1, K))) of its alone
rate, U the sum of their occupancies, k their number and K
(``interference_cap``) the co-runners beyond which the slowdown stops
growing. ``fit`` picks the two
parameters that best predict the pairs (least squares on log time).

What it is for:

- ``lower_bound``: the larger of the critical path of the nodes' alone times
  (over the graph's RAW, WAR and WAW dependencies in node order) and the
  total SM-time over the SMs. No schedule of these kernels is faster.
- ``simulate`` / ``predict``: the makespan of a plan's happens-before DAG
  (``plan.launch_dag``, the DAG its captured CUDA graph runs) under the
  model.
- ``choose``: the stream cap whose plan the model predicts fastest. Fewer
  streams give up concurrency, as IOS's stages do (Ding et al., "IOS:
  Inter-Operator Scheduler for CNN Acceleration", MLSys 2021, §4: measured
  stage latencies instead of the greedy widest schedule); the cap is handed
  to dagrun's planner (``--max-streams``), which keeps the critical path on
  one stream and folds the other chains by list scheduling, so the plan keeps
  the planner's fewest waits and passes its verifier.

The model is stored with the exported graph (``attach``: the graph JSON's
``cost_model`` field, which ``dagrun import`` ignores) and read back with
``from_graph``. Everything here but ``measure`` is plain Python (tested
without torch or a GPU).
"""
from __future__ import annotations

import bisect
import json
import math
import os
import random
import statistics
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from .plan import Plan, launch_dag, stream_priorities

__all__ = ["NodeCost", "CostModel", "data_dag", "critical_path_us", "lower_bound", "simulate", "predict",
           "fit", "choose", "measure", "attach", "from_graph", "kernel_occupancy"]

H200_SMS = 132
MIN_OCC = 0.02  # a kernel counts at least this much of the GPU: it holds a queue slot and the block scheduler
# Co-running kernels beyond which the interference slowdown stops growing.
# Pairs cannot tell (they have one co-runner); fitted on an earlier H200
# sweep of googlenet, inception_v3, inception_v4 and nasnetalarge (ten stream
# caps each): unbounded, the model over-predicted nasnetalarge's wide plans by
# up to 13%; at 3–4 its median error over the 40 plans was lowest (8%). On
# the sweep recorded in python/tests/testdata/h200/perf/schedules.json (56
# plans) its median error is 5.3%.
INTERFERENCE_CAP = 4


@dataclass
class NodeCost:
    """One graph node: ``us`` alone (µs), ``occupancy`` (0–1 of the GPU's
    warp slots, kernel-time weighted), ``kernels`` (profiler records: name,
    us, grid, block, registers, shared_bytes, occupancy)."""
    us: float
    occupancy: float
    kernels: List[dict] = field(default_factory=list)

    @property
    def sm_us(self) -> float:
        """SM-time in SM-fractions · µs: ``us × occupancy`` (times the SM count gives SM·µs)."""
        return self.us * self.occupancy


@dataclass
class CostModel:
    """Per-node costs and the contention parameters (see the module doc).

    ``interference_cap``: co-running kernels beyond which the interference
    slowdown stops growing (0: no bound; INTERFERENCE_CAP says where the
    default comes from). ``launch_us`` is the GPU front end's time per kernel of a CUDA graph
    whose kernels are independent (µs): ready kernels start no faster than
    one per launch_us, measured on a graph of 256 tiny kernels on 32
    streams. ``calibration`` keeps the benchmark's pairs: dicts with a, b (node ids),
    a_us, b_us (one kernel alone, µs), a_occ, b_occ, repeats, together_us
    (both chains together, µs), predicted_us (under the fitted model)."""
    device: str
    sms: int
    nodes: Dict[str, NodeCost]
    capacity: float = 1.0
    interference: float = 0.0
    launch_us: float = 0.0
    calibration: List[dict] = field(default_factory=list)
    interference_cap: int = INTERFERENCE_CAP

    def to_dict(self) -> dict:
        return {"device": self.device, "sms": self.sms, "capacity": self.capacity, "interference": self.interference,
                "launch_us": self.launch_us, "interference_cap": self.interference_cap, "calibration": self.calibration,
                "nodes": {k: {"us": v.us, "occupancy": v.occupancy, "kernels": v.kernels} for k, v in self.nodes.items()}}

    @classmethod
    def from_dict(cls, d: dict) -> "CostModel":
        """Raises ValueError on a malformed record."""
        try:
            nodes = {k: NodeCost(float(v["us"]), float(v["occupancy"]), list(v.get("kernels") or []))
                     for k, v in d["nodes"].items()}
            return cls(device=str(d.get("device", "")), sms=int(d.get("sms", H200_SMS)), nodes=nodes,
                       capacity=float(d.get("capacity", 1.0)), interference=float(d.get("interference", 0.0)),
                       launch_us=float(d.get("launch_us", 0.0)),
                       interference_cap=int(d.get("interference_cap", INTERFERENCE_CAP)), calibration=list(d.get("calibration") or []))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError("not a dagrun_torch cost model: %s: %s" % (type(e).__name__, e)) from None

    @classmethod
    def uniform(cls, graph: dict, occupancy: float = 1.0, sms: int = H200_SMS) -> "CostModel":
        """Every node at its exported duration_us with one occupancy: the
        model of a GPU with no width (occupancy 0 counts as MIN_OCC)."""
        return cls(device=str(graph.get("device", "")), sms=sms,
                   nodes={n["id"]: NodeCost(float(n.get("duration_us") or 0.0), occupancy) for n in graph["nodes"]})


def attach(graph: dict, cost: CostModel) -> dict:
    """Store ``cost`` in the exported graph (its ``cost_model`` field). Returns graph."""
    graph["cost_model"] = cost.to_dict()
    return graph


def from_graph(graph: dict) -> Optional[CostModel]:
    """The cost model stored in an exported graph, or None. Raises ValueError
    when the stored model does not cover the graph's nodes."""
    d = graph.get("cost_model")
    if not d:
        return None
    cm = CostModel.from_dict(d)
    missing = [n["id"] for n in graph["nodes"] if n["id"] not in cm.nodes]
    if missing:
        raise ValueError("the cost model has no cost for %d graph nodes (%s)" % (len(missing), ", ".join(missing[:5])))
    return cm


def data_dag(graph: dict) -> Tuple[List[str], Dict[str, Set[str]]]:
    """The graph's dependencies as ``dagrun import`` reads them: nodes in
    order, each after the last writer of what it reads (RAW) and, for what it
    writes, after the last writer (WAW) and the readers since (WAR).
    Returns (node ids in order, direct predecessors)."""
    writer: Dict[str, str] = {}
    readers: Dict[str, List[str]] = {}
    order, preds = [], {}
    for n in graph["nodes"]:
        v = n["id"]
        ps: Set[str] = set()
        for t in n.get("reads") or []:
            if t in writer:
                ps.add(writer[t])
        for t in n.get("writes") or []:
            if t in writer:
                ps.add(writer[t])
            ps.update(readers.get(t, ()))
        for t in n.get("reads") or []:
            readers.setdefault(t, []).append(v)
        for t in n.get("writes") or []:
            writer[t] = v
            readers[t] = []
        ps.discard(v)
        order.append(v)
        preds[v] = ps
    return order, preds


def critical_path_us(order: Sequence[str], preds: Dict[str, Set[str]], us: Dict[str, float]) -> Tuple[float, List[str]]:
    """Longest path by ``us`` through the DAG (order topological). Returns (µs, the path's nodes)."""
    fin: Dict[str, float] = {}
    via: Dict[str, Optional[str]] = {}
    for v in order:
        best, arg = 0.0, None
        for p in preds.get(v, ()):
            if fin[p] > best:
                best, arg = fin[p], p
        fin[v] = best + us.get(v, 0.0)
        via[v] = arg
    if not fin:
        return 0.0, []
    end = max(fin, key=fin.get)
    path = []
    cur: Optional[str] = end
    while cur is not None:
        path.append(cur)
        cur = via[cur]
    return fin[end], path[::-1]


def lower_bound(graph: dict, cost: CostModel) -> dict:
    """The larger of the critical path (µs) of the nodes' alone times and
    the total SM-time over the GPU's SMs (µs). Returns a dict: cp_us, sm_us,
    bound_us, limit ("critical path" or "SM-time"), sum_us (one stream, no
    gaps), cp_nodes (how many nodes the critical path holds)."""
    order, preds = data_dag(graph)
    us = {v: cost.nodes[v].us for v in order}
    cp, path = critical_path_us(order, preds, us)
    sm = sum(cost.nodes[v].sm_us for v in order)
    return {"cp_us": cp, "sm_us": sm, "bound_us": max(cp, sm), "limit": "critical path" if cp >= sm else "SM-time",
            "sum_us": sum(us.values()), "cp_nodes": len(path)}


def simulate(order: Sequence[str], preds: Dict[str, Set[str]], cost: CostModel,
             capacity: Optional[float] = None, interference: Optional[float] = None,
             ranks: Optional[Dict[str, int]] = None) -> float:
    """Makespan (µs) of the DAG under the cost model (module doc): each node
    starts when its predecessors are done and needs its alone time of work.
    While k nodes run, the GPU's ``capacity`` (in occupancy units) goes to
    them by ``ranks`` (lower first; CUDA stream priorities: the block
    scheduler hands free SMs to the most urgent ready work): a rank's nodes
    get their occupancies in full while capacity lasts and share what is left
    in proportion otherwise; each node then advances at its share over
    (1 + interference·min(k−1, interference_cap)) µs of work per µs
    (``interference_cap`` 0: no bound). Without ranks every node has
    one rank: processor sharing, max(1, U/capacity) for U the sum of the
    occupancies. A ready node starts once the front end has dispatched it:
    one kernel per ``launch_us``, in the order nodes become ready.
    ``capacity`` and ``interference`` default to the model's."""
    cap = cost.capacity if capacity is None else capacity
    itf = cost.interference if interference is None else interference
    if cap <= 0:
        raise ValueError("capacity=%g: want > 0" % cap)
    left = {v: len(preds.get(v, ())) for v in order}
    succ: Dict[str, List[str]] = {v: [] for v in order}
    for v in order:
        for p in preds.get(v, ()):
            succ[p].append(v)
    work: Dict[str, float] = {}
    occ: Dict[str, float] = {}
    for v in order:
        c = cost.nodes[v]
        work[v] = max(c.us, 0.0)
        occ[v] = min(1.0, max(c.occupancy, MIN_OCC))
    rank = ranks or {}
    nk = {v: max(1, len(cost.nodes[v].kernels)) for v in order}
    lu = max(cost.launch_us, 0.0)
    running: Dict[str, float] = {}
    queued: List[Tuple[float, str]] = []   # (start time, node), FIFO: the front end dispatches in ready order
    front = 0.0                            # when the front end is next free

    def ready(v: str, at: float) -> None:
        nonlocal front
        start = max(at, front)
        front = start + lu * nk[v]
        queued.append((start, v))

    for v in order:
        if left[v] == 0:
            ready(v, 0.0)
    t = 0.0
    done = 0
    eps = 1e-9
    qi = 0
    while running or qi < len(queued):
        while qi < len(queued) and queued[qi][0] <= t + eps:
            running[queued[qi][1]] = work[queued[qi][1]]
            qi += 1
        if not running:
            t = queued[qi][0]
            continue
        groups: Dict[int, List[str]] = {}
        for v in running:
            groups.setdefault(rank.get(v, 0), []).append(v)
        rate: Dict[str, float] = {}
        free = cap
        others = len(running) - 1
        damp = 1.0 + itf * (min(others, cost.interference_cap) if cost.interference_cap > 0 else others)
        for k in sorted(groups):
            vs = groups[k]
            demand = sum(occ[v] for v in vs)
            f = 1.0 if free >= demand else max(free, 0.0) / demand
            free -= demand
            for v in vs:
                rate[v] = f / damp
        dt = min((running[v] / rate[v] for v in running if rate[v] > 0), default=float("inf"))
        if qi < len(queued) and queued[qi][0] - t < dt:
            dt = queued[qi][0] - t
        t += dt
        fin = []
        for v in list(running):
            running[v] -= dt * rate[v]
            if running[v] <= eps * max(1.0, work[v]):
                fin.append(v)
        for v in fin:
            del running[v]
            done += 1
            for w in succ[v]:
                left[w] -= 1
                if left[w] == 0:
                    ready(w, t)
    if done != len(order):
        raise ValueError("simulate: the DAG has a cycle or a predecessor outside it (%d of %d nodes ran)" % (done, len(order)))
    return t


def predict(plan: Plan, cost: CostModel, graph: Optional[dict] = None, levels: int = 6, **kw: float) -> float:
    """Predicted makespan (µs) of the plan's captured graph (its launch DAG)
    under ``cost``. With ``graph`` (the exported graph), each launch runs at
    its stream's priority rank (plan.stream_priorities over ``levels``
    levels), as CompiledModel captures it with priorities."""
    order, preds = launch_dag(plan)
    ranks = None
    if graph is not None and len(plan.streams) > 1:
        sr = stream_priorities(plan, graph, levels)
        ranks = {v: sr[plan.stages[v]] for v in order}
    return simulate(order, preds, cost, ranks=ranks, **kw)


def _pair_makespan(p: dict, capacity: float, interference: float) -> float:
    """Two chains of ``repeats`` kernels, a's and b's, under the model: closed form."""
    r = int(p["repeats"])
    wa, wb = p["a_us"] * r, p["b_us"] * r
    oa, ob = min(1.0, max(p["a_occ"], MIN_OCC)), min(1.0, max(p["b_occ"], MIN_OCC))
    slow = max(1.0, (oa + ob) / capacity) * (1.0 + interference)
    first = min(wa, wb)
    return first * slow + (max(wa, wb) - first) * max(1.0, (oa if wa > wb else ob) / capacity)


def fit(pairs: Sequence[dict], capacities: Optional[Iterable[float]] = None,
        interferences: Optional[Iterable[float]] = None) -> Tuple[float, float, float]:
    """Fit (capacity, interference) to measured pairs by grid search, least
    squares on log(predicted / measured). Returns (capacity, interference,
    the median |predicted/measured − 1|). With no pairs: (1, 0, nan)."""
    pairs = [p for p in pairs if p.get("together_us", 0) > 0 and p.get("a_us", 0) > 0 and p.get("b_us", 0) > 0]
    if not pairs:
        return 1.0, 0.0, float("nan")
    caps = list(capacities) if capacities is not None else [0.4 + 0.05 * i for i in range(53)]
    itfs = list(interferences) if interferences is not None else [0.02 * i for i in range(41)]
    best = None
    for c in caps:
        for i in itfs:
            err = sum(math.log(_pair_makespan(p, c, i) / p["together_us"]) ** 2 for p in pairs)
            if best is None or err < best[0] - 1e-12:
                best = (err, c, i)
    _, c, i = best
    rel = statistics.median(abs(_pair_makespan(p, c, i) / p["together_us"] - 1.0) for p in pairs)
    return c, i, rel


def choose(cost: CostModel, plan_for: Callable[[int], Plan], caps: Sequence[int] = (1, 2, 4, 6, 8, 12, 16, 24, 32, 0),
           graph: Optional[dict] = None) -> Tuple[int, Dict[int, dict]]:
    """The stream cap (0: uncapped) whose plan ``cost`` predicts fastest: the
    caps-only case of ``schedule.choose``. ``plan_for(cap)`` plans the graph
    with that cap; with ``graph`` each plan is predicted with and without
    stream priorities and the better counts. Ties go to the fewer streams.
    Returns (cap, {cap: {"streams", "predicted_us", "predicted_plain_us",
    "predicted_priority_us", "plan", ...}}). Raises ValueError with no caps."""
    from .schedule import choose as choose_candidate
    if not caps:
        raise ValueError("choose: no caps to choose from")
    best, out = choose_candidate(graph, cost, lambda cap, _form: plan_for(cap), [str(c) for c in caps])
    return int(best), {int(k): v for k, v in out.items()}


def kernel_occupancy(args: dict, max_warps_per_sm: int = 64) -> float:
    """The fraction of the GPU's warp slots a kernel fills, from a Kineto
    kernel record's args: "est. achieved occupancy %" when present, else
    "warps per SM" / ``max_warps_per_sm`` (capped at 1), else from grid and
    block over ``H200_SMS`` SMs."""
    v = args.get("est. achieved occupancy %")
    if isinstance(v, (int, float)) and v > 0:
        return min(1.0, v / 100.0)
    w = args.get("warps per SM")
    if isinstance(w, (int, float)) and w > 0:
        return min(1.0, w / max_warps_per_sm)
    g, b = args.get("grid"), args.get("block")
    if isinstance(g, list) and isinstance(b, list) and g and b:
        blocks = g[0] * (g[1] if len(g) > 1 else 1) * (g[2] if len(g) > 2 else 1)
        threads = b[0] * (b[1] if len(b) > 1 else 1) * (b[2] if len(b) > 2 else 1)
        return min(1.0, blocks * math.ceil(threads / 32) / (H200_SMS * max_warps_per_sm))
    return 1.0


def kernels_by_annotation(trace: dict, prefix: str = "dagrun:") -> Dict[str, List[dict]]:
    """From a Kineto chrome trace: the kernels (and memsets/copies) launched
    inside each user annotation named PREFIX+node. Each kernel: name, us,
    grid, block, registers, shared_bytes, occupancy (memcpy/memset: 0)."""
    ev = trace.get("traceEvents") or []
    ann: Dict[Any, List[Tuple[float, float, str]]] = {}
    for e in ev:
        if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(prefix) and e.get("ph") == "X":
            ann.setdefault(e.get("tid"), []).append((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), e["name"][len(prefix):]))
    for v in ann.values():
        v.sort()
    starts = {k: [a[0] for a in v] for k, v in ann.items()}
    corr: Dict[Any, str] = {}
    for e in ev:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and e.get("ph") == "X":
            c = (e.get("args") or {}).get("correlation")
            tid = e.get("tid")
            if c is None or tid not in ann:
                continue
            ts = float(e["ts"])
            i = bisect.bisect_right(starts[tid], ts) - 1
            if i >= 0 and ann[tid][i][0] <= ts <= ann[tid][i][1]:
                corr[c] = ann[tid][i][2]
    out: Dict[str, List[dict]] = {}
    for e in ev:
        cat = e.get("cat")
        if cat not in ("kernel", "gpu_memset", "gpu_memcpy") or e.get("ph") != "X":
            continue
        a = e.get("args") or {}
        node = corr.get(a.get("correlation"))
        if node is None:
            continue
        k = {"name": str(e.get("name", ""))[:120], "us": float(e.get("dur", 0.0))}
        if cat == "kernel":
            k.update(grid=a.get("grid"), block=a.get("block"), registers=a.get("registers per thread"),
                     shared_bytes=a.get("shared memory"), occupancy=round(kernel_occupancy(a), 4))
        else:
            k["occupancy"] = 0.0
        out.setdefault(node, []).append(k)
    return out


def node_occupancy(kernels: Sequence[dict]) -> float:
    """Kernel-time-weighted occupancy of a node's kernels (1.0 when none were seen)."""
    tot = sum(k["us"] for k in kernels)
    if tot <= 0:
        return 1.0
    return sum(k["us"] * k["occupancy"] for k in kernels) / tot


# ---------------------------------------------------------------- on the GPU


def measure(exported: Any, inputs: Sequence[Any], *, pairs: int = 24, repeats: int = 10, seed: int = 0,
            sms: Optional[int] = None) -> CostModel:
    """Measure the cost model of an exported graph on the current GPU.

    1. Run the traced module node by node under the PyTorch profiler, each
       graph node inside a ``record_function`` annotation, and read each
       node's kernels and their launch configuration from the trace.
    2. Calibrate contention: ``pairs`` random pairs of nodes that write no
       input in place and run ≥ 3 µs, each repeated ``repeats`` times in a
       chain on its own stream of one CUDA graph, timed alone and together
       (median of 5 replays); ``fit`` gives capacity and interference.
    3. The front end's time per kernel: a graph of 32 streams of
       ``repeats`` one-element adds, its replay time over its kernels.

    Profiling leaves CUPTI attached to the process, and CUDA graph replays
    in it run slower afterwards (seen on an H200: a dagrun googlenet graph
    went from 0.49 to 0.55–0.62 ms): time plans in another process, as
    ``python3 -m dagrun_torch costmodel`` and the bench do.

    Node times alone are the exporter's (``duration_us``). Needs CUDA.
    Raises RuntimeError when the profiler records no kernels."""
    import torch
    import torch.fx
    from torch.profiler import ProfilerActivity, profile, record_function

    gm = exported.gm
    stages = {n for n, ni in exported.info.items() if ni.kind == "stage"}
    gnodes = {n["id"]: n for n in exported.graph["nodes"]}
    dev = inputs[0].device
    props = torch.cuda.get_device_properties(dev)
    nsm = sms or int(props.multi_processor_count)

    class Annotated(torch.fx.Interpreter):
        def run_node(self, n):
            if n.name in stages:
                with record_function("dagrun:" + n.name):
                    return super().run_node(n)
            return super().run_node(n)

    with torch.no_grad():
        Annotated(gm).run(*inputs)  # warm-up: cuDNN handles, workspaces
        torch.cuda.synchronize(dev)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            interp = Annotated(gm, garbage_collect_values=False)
            interp.run(*inputs)
            torch.cuda.synchronize(dev)
    with tempfile.TemporaryDirectory(prefix="dagrun_torch-prof-") as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    kern = kernels_by_annotation(trace)
    if not kern:
        raise RuntimeError("the profiler recorded no kernels for the graph's nodes (is CUPTI available?)")
    nodes = {}
    for v, n in gnodes.items():
        ks = kern.get(v, [])
        nodes[v] = NodeCost(float(n.get("duration_us") or 0.0), round(node_occupancy(ks), 4), ks)
    cm = CostModel(device=torch.cuda.get_device_name(dev), sms=nsm, nodes=nodes)

    # Contention calibration on the model's own kernels.
    env = {n.name: v for n, v in interp.env.items()}
    by_name = {n.name: n for n in gm.graph.nodes}

    def call_of(name):
        n = by_name[name]
        a = torch.fx.node.map_arg(n.args, lambda m: env[m.name])
        kw = torch.fx.node.map_arg(n.kwargs, lambda m: env[m.name])
        if n.op == "call_module":
            mod = gm.get_submodule(n.target)
            return lambda: mod(*a, **kw)
        if n.op == "call_method":
            return lambda: getattr(a[0], n.target)(*a[1:], **kw)
        return lambda: n.target(*a, **kw)

    cand = [v for v, n in gnodes.items() if not n.get("inplace") and (n.get("duration_us") or 0) >= 3.0 and v in by_name]
    rng = random.Random(seed)
    chosen = []
    if len(cand) >= 2:
        cand.sort(key=lambda v: nodes[v].occupancy)  # spread the pairs over the occupancy range
        for i in range(pairs):
            a = cand[rng.randrange(len(cand))]
            b = cand[rng.randrange(len(cand))]
            if a != b:
                chosen.append((a, b))

    def timed(chains):
        s0 = torch.cuda.Stream(dev)
        side = [torch.cuda.Stream(dev) for _ in chains]
        s0.wait_stream(torch.cuda.current_stream(dev))
        g = torch.cuda.CUDAGraph()
        with torch.cuda.stream(s0):
            for fn in chains:
                fn()
            torch.cuda.synchronize(dev)
            g.capture_begin()
            try:
                for s, fn in zip(side, chains):
                    s.wait_stream(s0)
                    with torch.cuda.stream(s):
                        for _ in range(repeats):
                            fn()
                for s in side:
                    s0.wait_stream(s)
            finally:
                g.capture_end()
        torch.cuda.current_stream(dev).wait_stream(s0)
        g.replay()
        st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ts = []
        for _ in range(5):
            st.record()
            g.replay()
            en.record()
            en.synchronize()
            ts.append(st.elapsed_time(en) * 1000.0)
        del g
        return statistics.median(ts)

    alone: Dict[str, float] = {}
    cal = []
    with torch.no_grad():
        for a, b in chosen:
            try:
                fa, fb = call_of(a), call_of(b)
                for v, f in ((a, fa), (b, fb)):
                    if v not in alone:
                        alone[v] = timed([f]) / repeats
                tog = timed([fa, fb])
            except Exception:  # a node that cannot be captured alone: leave it out of the calibration
                torch.cuda.synchronize(dev)
                continue
            cal.append({"a": a, "b": b, "a_us": round(alone[a], 3), "b_us": round(alone[b], 3),
                        "a_occ": nodes[a].occupancy, "b_occ": nodes[b].occupancy, "repeats": repeats,
                        "together_us": round(tog, 3)})
    with torch.no_grad():
        tiny = [torch.zeros(1, device=dev) for _ in range(32)]
        wide = timed([(lambda t: lambda: t.add_(1.0))(t) for t in tiny])
        chain = timed([(lambda t: lambda: t.add_(1.0))(tiny[0])])
    cm.launch_us = round(wide / (32 * repeats), 3)
    c, i, _ = fit(cal)
    cm.capacity, cm.interference = c, i
    cal.append({"launch_probe": True, "wide_us": round(wide, 3), "chain_us": round(chain, 3), "kernels_wide": 32 * repeats,
                "kernels_chain": repeats})
    for p in cal:
        if "repeats" in p:
            p["predicted_us"] = round(_pair_makespan(p, c, i), 3)
    cm.calibration = cal
    del env, interp
    return cm


def main(argv: Optional[List[str]] = None) -> int:
    """python3 -m dagrun_torch costmodel --model NAME [--size N] [--cudnn-benchmark] --out GRAPH.json

    Export a torchvision/timm model (random weights, seed 0, batch 1), measure
    its cost model on the GPU, and write the exported graph with the model in
    its ``cost_model`` field. Exit 2 on bad arguments and without a GPU."""
    import sys
    from ._cli import MAX_PAIRS, costmodel as parser, out_file_error
    ap = parser()
    args = ap.parse_args(argv)
    if args.size < 1:
        ap.error("--size %d: want an integer ≥ 1" % args.size)
    if not 0 <= args.pairs <= MAX_PAIRS:
        ap.error("--pairs %d: want an integer from 0 to %d" % (args.pairs, MAX_PAIRS))
    why = out_file_error(args.out)
    if why:
        ap.error("--out %s: %s; want the path of the graph JSON file to write" % (args.out, why))
    import torch
    if not torch.cuda.is_available():
        print("costmodel: needs a GPU", file=sys.stderr)
        return 2
    from .exporter import ExportError, build_model, export, input_memory_error
    why = input_memory_error("--size %d" % args.size, 1, args.size, "cuda")
    if why:
        ap.error(why)
    torch.manual_seed(0)
    try:
        model, _ = build_model(args.model)
    except (ValueError, KeyError, AttributeError, ImportError, RuntimeError) as e:
        print("costmodel: --model %s: %s" % (args.model, e), file=sys.stderr)
        return 2
    model = model.eval().cuda()
    x = torch.randn(1, 3, args.size, args.size, device="cuda")
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    try:
        ex = export(model, (x,))
    except ExportError as e:
        print("costmodel: %s: %s" % (args.model, e), file=sys.stderr)
        return 2
    cost = measure(ex, [x], pairs=args.pairs)
    attach(ex.graph, cost)
    ex.save(args.out)
    lb = lower_bound(ex.graph, cost)
    print("%s: %d nodes, %d kernels; capacity %.2f, interference %.2f, launch %.2f µs; critical path %.1f µs, "
          "SM-time %.1f µs -> %s" % (args.model, len(cost.nodes), sum(len(n.kernels) for n in cost.nodes.values()),
                                     cost.capacity, cost.interference, cost.launch_us, lb["cp_us"], lb["sm_us"], args.out))
    return 0
