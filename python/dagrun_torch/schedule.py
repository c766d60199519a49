"""Staged schedules: which kernels run together, chosen by dynamic programming.

IOS (Ding et al., "IOS: Inter-Operator Scheduler for CNN Acceleration",
MLSys 2021, §4) splits a network into blocks and, within each block, finds
by dynamic programming over the operators still to run the sequence of
*stages* of least total latency: a stage is a set of independent *groups*,
each group a few dependent operators run one after another on its own
stream, and the stage's latency is what the groups take run together. A
stage of one group gives up concurrency where running side by side would
only slow the critical chain down.

``staged`` does this with the cost model's predicted stage latencies
(``costmodel.simulate`` of the stage's groups on their own streams), not
IOS's measured ones: a model of a few hundred nodes has thousands of
candidate stages, and the model's predictions are within 4–13% of what the
H200 measured for whole plans. Blocks are the pieces between single-node
cuts of the data DAG (every path passes through the cut node); a block's
nodes are covered by chains (each node after the predecessor with the
longest remaining path that still ends a chain), a chain's short
consecutive nodes are merged into *units* of at least ``min_unit_us``, and
the DP state is how many units of each chain are done. Groups are a
chain's next units; a stage holds at most ``max_groups`` of them. Blocks
whose state space exceeds ``max_states`` are not staged: their nodes stay
free for the planner (its minimum path cover) and the result says how many.

``apply`` turns the stages into the exported graph the planner reads: nodes
reordered stage by stage (a topological order of the same dependencies, so
``dagrun import`` derives the same RAW/WAR/WAW edges) and each staged node
pinned to a named stream (the graph node's ``stream`` field, a stage's
``stream:`` pin in the spec). A group goes to the stream of the predecessor
it continues when that stream is free in its stage, so that a chain split
over stages needs no wait. dagrun's planner then places the fewest waits
for that assignment and verifies the plan; stages are not barriers there:
a group starts as soon as its own inputs are ready.

``priority_order`` is the other ordering lever: a topological order that
puts, among nodes whose inputs are ready, the one with the longest path to
the end (its bottom level; HLFET list scheduling, Adam, Chandy and
Dickson, CACM 1974) first, so that where the planner folds several chains
onto one stream the most urgent chain's nodes come first.

Plain Python (no torch, no GPU).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

from .costmodel import CostModel, data_dag, simulate

__all__ = ["Staged", "staged", "apply", "priority_order", "bottom_levels", "blocks", "stage_us", "form", "choose", "EXTRA"]

STREAM_PREFIX = "ios"


def bottom_levels(order: Sequence[str], preds: Dict[str, Set[str]], us: Dict[str, float]) -> Dict[str, float]:
    """Each node's longest path (µs, by ``us``) from its start to the end of the DAG."""
    succ: Dict[str, List[str]] = {v: [] for v in order}
    for v in order:
        for p in preds.get(v, ()):
            succ[p].append(v)
    bl: Dict[str, float] = {}
    for v in reversed(order):
        bl[v] = us.get(v, 0.0) + max((bl[w] for w in succ[v]), default=0.0)
    return bl


def priority_order(graph: dict, cost: CostModel) -> List[str]:
    """The graph's nodes in a topological order of its data DAG that takes,
    among ready nodes, the largest bottom level first (ties: node order)."""
    import heapq
    order, preds = data_dag(graph)
    us = {v: cost.nodes[v].us for v in order}
    bl = bottom_levels(order, preds, us)
    pos = {v: i for i, v in enumerate(order)}
    left = {v: len(preds[v]) for v in order}
    succ: Dict[str, List[str]] = {v: [] for v in order}
    for v in order:
        for p in preds[v]:
            succ[p].append(v)
    heap = [(-bl[v], pos[v], v) for v in order if left[v] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        _, _, v = heapq.heappop(heap)
        out.append(v)
        for w in succ[v]:
            left[w] -= 1
            if left[w] == 0:
                heapq.heappush(heap, (-bl[w], pos[w], w))
    return out


def blocks(order: Sequence[str], preds: Dict[str, Set[str]]) -> List[List[str]]:
    """Split a topological order at single-node cuts: a new block starts after
    position i when every dependency that crosses from positions ≤ i to later
    ones leaves from node i. Returns the blocks, in order."""
    pos = {v: i for i, v in enumerate(order)}
    last_use = [i for i in range(len(order))]  # furthest position that depends on node i
    for v in order:
        for p in preds.get(v, ()):
            last_use[pos[p]] = max(last_use[pos[p]], pos[v])
    out: List[List[str]] = []
    cur: List[str] = []
    reach = -1  # furthest use of any node before position i
    for i, v in enumerate(order):
        cur.append(v)
        if reach <= i:  # nothing before i is used after i: i is a cut
            out.append(cur)
            cur = []
        reach = max(reach, last_use[i])
    if cur:
        out.append(cur)
    return out


def _stage_dag(groups: Sequence[Sequence[str]]) -> Tuple[List[str], Dict[str, Set[str]]]:
    order, preds = [], {}
    for g in groups:
        prev = None
        for v in g:
            order.append(v)
            preds[v] = {prev} if prev else set()
            prev = v
    return order, preds


def stage_us(groups: Sequence[Sequence[str]], cost: CostModel) -> float:
    """Predicted latency (µs) of one stage: each group's nodes one after
    another on a stream of its own, the groups side by side, under ``cost``
    (``costmodel.simulate``)."""
    order, preds = _stage_dag(groups)
    return simulate(order, preds, cost)


@dataclass
class Staged:
    """A staged schedule: ``stages``, each a list of groups (node ids in run
    order); ``free`` the nodes of blocks left to the planner (in priority
    order, with their block's position kept); ``blocks`` how many blocks the
    graph has, ``staged_blocks`` how many the DP scheduled, ``stage_sum_us``
    the sum of the staged blocks' predicted stage latencies (µs) and
    ``greedy_sum_us`` the same blocks' predicted latency with every chain on
    its own stream at once (the greedy widest schedule), ``order`` every node
    in the order ``apply`` writes them, ``stream`` the pin of each staged node."""
    stages: List[List[List[str]]] = field(default_factory=list)
    free: List[str] = field(default_factory=list)
    blocks: int = 0
    staged_blocks: int = 0
    stage_sum_us: float = 0.0
    greedy_sum_us: float = 0.0
    order: List[str] = field(default_factory=list)
    stream: Dict[str, str] = field(default_factory=dict)

    def summary(self) -> dict:
        return {"blocks": self.blocks, "staged_blocks": self.staged_blocks, "stages": len(self.stages),
                "free_nodes": len(self.free), "stage_sum_us": round(self.stage_sum_us, 2),
                "greedy_sum_us": round(self.greedy_sum_us, 2),
                "streams": len(set(self.stream.values())),
                "single_group_stages": sum(1 for s in self.stages if len(s) == 1)}


def _chains(block: Sequence[str], preds: Dict[str, Set[str]], bl: Dict[str, float]) -> List[List[str]]:
    """Cover a block's nodes by chains: in topological order, each node
    continues the chain of its in-block predecessor with the largest bottom
    level among those that still end a chain, else starts a chain."""
    inb = set(block)
    end_of: Dict[str, int] = {}  # node that ends chain i -> i
    chains: List[List[str]] = []
    for v in block:
        ps = sorted((p for p in preds.get(v, ()) if p in inb and p in end_of), key=lambda p: -bl[p])
        if ps:
            i = end_of.pop(ps[0])
            chains[i].append(v)
        else:
            i = len(chains)
            chains.append([v])
        end_of[v] = i
    return chains


def _units(chain: Sequence[str], preds: Dict[str, Set[str]], us: Dict[str, float], min_us: float,
           where: Dict[str, int], ci: int) -> List[List[str]]:
    """Merge consecutive nodes of a chain while the unit is shorter than
    min_us and the next node depends on nothing in another chain of the block."""
    out: List[List[str]] = []
    cur: List[str] = []
    t = 0.0
    for v in chain:
        cross = any(where.get(p, ci) != ci for p in preds.get(v, ()))
        if cur and (t >= min_us or cross):
            out.append(cur)
            cur, t = [], 0.0
        cur.append(v)
        t += us[v]
    if cur:
        out.append(cur)
    return out


def _dp_block(units: List[List[List[str]]], preds: Dict[str, Set[str]], cost: CostModel, max_groups: int,
              memo: Dict[tuple, float], block_order: Sequence[str]) -> Tuple[float, List[List[List[str]]]]:
    """IOS's DP over one block: state = units done per chain; a stage
    advances up to max_groups chains by ≥ 1 unit each, every advanced unit's
    in-block inputs done in earlier stages or earlier in its own group.
    Returns (µs, stages)."""
    C = len(units)
    loc: Dict[str, Tuple[int, int]] = {}
    for i, us_ in enumerate(units):
        for k, u in enumerate(us_):
            for v in u:
                loc[v] = (i, k)
    # need[i][k]: {chain j: units of j that must be done before unit k of chain i runs}
    need: List[List[Dict[int, int]]] = []
    for i, us_ in enumerate(units):
        row = []
        for k, u in enumerate(us_):
            d: Dict[int, int] = {}
            for v in u:
                for p in preds.get(v, ()):
                    if p in loc and loc[p][0] != i:
                        j, kk = loc[p]
                        d[j] = max(d.get(j, 0), kk + 1)
            row.append(d)
        need.append(row)
    start = tuple([0] * C)
    goal = tuple(len(u) for u in units)
    best: Dict[tuple, Tuple[float, Optional[tuple], Optional[tuple]]] = {start: (0.0, None, None)}
    levels: Dict[int, List[tuple]] = {0: [start]}
    total = sum(goal)
    for lev in range(total):
        for F in levels.get(lev, ()):
            base = best[F][0]
            adv = []
            for i in range(C):
                a = 0
                while F[i] + a < goal[i] and all(F[j] >= n for j, n in need[i][F[i] + a].items()):
                    a += 1
                adv.append(a)
            # the rest of the block as one stage, its cross-chain inputs as
            # waits inside it (the greedy schedule of what is left): so the
            # DP is never worse than running the block's chains at once
            rest = [v for i in range(C) for u in units[i][F[i]:] for v in u]
            rset = set(rest)
            key = ("rest",) + tuple(sorted(rest))
            lat = memo.get(key)
            if lat is None:
                order_r = [v for v in block_order if v in rset]
                lat = simulate(order_r, {v: preds[v] & rset for v in order_r}, cost)
                memo[key] = lat
            if goal not in best or base + lat < best[goal][0] - 1e-9:
                if goal not in best:
                    levels.setdefault(total, []).append(goal)
                best[goal] = (base + lat, F, ("rest", tuple(rest)))
            ready = [i for i in range(C) if adv[i] > 0]
            for r in range(1, min(max_groups, len(ready)) + 1):
                for chosen in itertools.combinations(ready, r):
                    for steps in itertools.product(*[range(1, adv[i] + 1) for i in chosen]):
                        groups = tuple(tuple(v for u in units[i][F[i]:F[i] + s] for v in u) for i, s in zip(chosen, steps))
                        key = tuple(sorted(groups))
                        lat = memo.get(key)
                        if lat is None:
                            lat = stage_us(groups, cost)
                            memo[key] = lat
                        G = list(F)
                        for i, s in zip(chosen, steps):
                            G[i] += s
                        G = tuple(G)
                        c = base + lat
                        if G not in best or c < best[G][0] - 1e-9:
                            if G not in best:
                                levels.setdefault(sum(G), []).append(G)
                            best[G] = (c, F, groups)
    stages = []
    cur = goal
    while cur != start:
        _, prev, groups = best[cur]
        if groups and groups[0] == "rest":
            # one stage of dependent groups: the rest of each chain is a group
            rs = set(groups[1])
            stages.append([[v for u in units[i][prev[i]:] for v in u] for i in range(C)
                           if any(v in rs for u in units[i][prev[i]:] for v in u)])
        else:
            stages.append([list(g) for g in groups])
        cur = prev
    return best[goal][0], stages[::-1]


def staged(graph: dict, cost: CostModel, *, max_groups: int = 4, max_states: int = 4096,
           min_unit_us: float = 8.0) -> Staged:
    """The staged schedule of ``graph`` under ``cost`` (module doc).

    ``max_groups``: groups per stage (IOS's r); ``max_states``: the most DP
    states a block may have (the product over its chains of units + 1)
    before it is left to the planner; ``min_unit_us``: a chain's nodes are
    merged into units of at least this many µs (IOS's s bounds a group's
    operators instead). Raises ValueError on max_groups < 1 or max_states < 1."""
    if max_groups < 1 or max_states < 1:
        raise ValueError("staged: max_groups=%d, max_states=%d: want ≥ 1" % (max_groups, max_states))
    order, preds = data_dag(graph)
    us = {v: cost.nodes[v].us for v in order}
    bl = bottom_levels(order, preds, us)
    prio = priority_order(graph, cost)
    res = Staged()
    memo: Dict[tuple, float] = {}
    stream_of: Dict[str, str] = {}
    for blk in blocks(prio, preds):
        res.blocks += 1
        chains = _chains(blk, preds, bl)
        where = {v: i for i, c in enumerate(chains) for v in c}
        units = [_units(c, preds, us, min_unit_us, where, i) for i, c in enumerate(chains)]
        states = 1
        for u in units:
            states *= len(u) + 1
            if states > max_states:
                break
        if len(chains) > 1 and states > max_states:
            res.free.extend(blk)
            res.order.extend(blk)
            continue
        res.staged_blocks += 1
        bpos = {v: i for i, v in enumerate(blk)}
        if len(chains) == 1:
            lat, stages = stage_us([chains[0]], cost), [[list(chains[0])]]
        else:
            lat, stages = _dp_block(units, preds, cost, max_groups, memo, blk)
        res.stage_sum_us += lat
        inb = set(blk)
        res.greedy_sum_us += simulate(blk, {v: preds[v] & inb for v in blk}, cost)
        for stg in stages:
            taken: Set[str] = set()
            # the longest group picks its stream first
            for g in sorted(stg, key=lambda g: -sum(us[v] for v in g)):
                want = [stream_of[p] for p in sorted(preds[g[0]], key=lambda p: -us[p]) if p in stream_of]
                s = next((w for w in want if w not in taken), None)
                if s is None:
                    k = 0
                    while "%s%d" % (STREAM_PREFIX, k) in taken:
                        k += 1
                    s = "%s%d" % (STREAM_PREFIX, k)
                taken.add(s)
                for v in g:
                    stream_of[v] = s
            res.stages.append(stg)
            res.order.extend(sorted((v for g in stg for v in g), key=bpos.get))
    res.stream = {v: s for v, s in stream_of.items()}
    return res


def apply(graph: dict, sched: Staged) -> dict:
    """A copy of ``graph`` with its nodes in ``sched.order`` and each staged
    node's ``stream`` pin set. Raises ValueError when the order is not a
    permutation of the graph's nodes or not topological for its data DAG
    (the reordered graph would have other dependencies)."""
    byid = {n["id"]: n for n in graph["nodes"]}
    if sorted(sched.order) != sorted(byid):
        raise ValueError("the schedule's order is not a permutation of the graph's %d nodes" % len(byid))
    _, preds = data_dag(graph)
    seen: Set[str] = set()
    for v in sched.order:
        missing = preds[v] - seen
        if missing:
            raise ValueError("the schedule runs %s before its input %s" % (v, sorted(missing)[0]))
        seen.add(v)
    nodes = []
    for v in sched.order:
        n = dict(byid[v])
        n.pop("stream", None)
        if v in sched.stream:
            n["stream"] = sched.stream[v]
        nodes.append(n)
    return dict(graph, nodes=nodes)


# Candidates beyond the stream caps: the staged schedule (uncapped: its pins
# set the streams of the blocks it stages) and the priority order under three caps.
EXTRA = ("staged", "prio4", "prio16", "prio0")


def form(graph: dict, cost: CostModel, key: str) -> Tuple[int, Optional[dict], dict]:
    """What to hand the planner for candidate ``key``: (stream cap, 0 for
    none; the graph form to plan, None for ``graph`` as it is; a summary).
    Keys: a cap ("0": uncapped), "staged" (``apply`` of ``staged``,
    uncapped), "prioN" (``priority_order``, cap N). Raises ValueError on
    another key."""
    k = str(key)
    if k.isdigit():
        return int(k), None, {}
    if k == "staged":
        s = staged(graph, cost)
        return 0, apply(graph, s), s.summary()
    if k.startswith("prio") and k[4:].isdigit():
        byid = {n["id"]: n for n in graph["nodes"]}
        return int(k[4:]), dict(graph, nodes=[byid[v] for v in priority_order(graph, cost)]), {}
    raise ValueError("schedule candidate %r: want a stream cap, 'staged' or 'prioN'" % (key,))


def choose(graph: Optional[dict], cost: CostModel, plan_for, keys: Sequence[str]) -> Tuple[str, Dict[str, dict]]:
    """The candidate (``form`` keys) whose plan ``cost`` predicts fastest,
    with and without the planned stream priorities (the better counts; ties
    go to fewer streams; ``graph`` None: caps only, predicted without
    priorities). ``plan_for(cap, graph_form)`` plans one (graph_form
    None: the graph as it is). Returns (key, {key: {"cap", "streams",
    "predicted_us", "predicted_plain_us", "predicted_priority_us", "plan",
    "form" (the graph form or None), "summary"}}); predictions in µs.
    Raises ValueError with no keys or an unknown one."""
    from .costmodel import predict
    if not keys:
        raise ValueError("schedule.choose: no candidates")
    out: Dict[str, dict] = {}
    for k in keys:
        cap, g, summ = form(graph, cost, k)
        p = plan_for(cap, g)
        plain = predict(p, cost)
        prio = predict(p, cost, graph)
        out[str(k)] = {"cap": cap, "streams": len(p.streams), "predicted_us": min(plain, prio), "predicted_plain_us": plain,
                       "predicted_priority_us": prio, "plan": p, "form": g, "summary": summ}
    best = min(out, key=lambda k: (round(out[k]["predicted_us"], 3), out[k]["streams"]))
    return best, out
