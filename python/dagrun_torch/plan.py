"""Reading a dagrun plan file and lowering it to one flat list of actions.

A plan (``dagrun plan --json``) lists streams, each with its ops in stream
order (launch a stage, record an event, wait for an event), and a global host
issue order in which every record comes before each wait on it. ``lower``
turns that into the sequence the runner issues, and adds, after the right
actions, the host-side release of each intermediate tensor: a tensor is let go
only once the stream that allocated it is ordered (by stream order and the
plan's waits) after every launch on every stream that touches it, taken from
the plan's lifetime records. PyTorch's caching allocator hands a freed block
only to later allocations on the stream that allocated it, so from then on
no stream can still be using the bytes when they are reused: the planned
form of ``record_stream``, and safe inside a multi-stream CUDA graph capture.

This module needs no torch: it is plain data, tested on any machine.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

__all__ = ["Plan", "PlanError", "Action", "lower", "peak_live_bytes", "launch_dag", "stream_priorities"]


class PlanError(ValueError):
    """A plan file that is malformed or does not match the graph it is used with."""


@dataclass
class Op:
    kind: str  # "launch", "record" or "wait"
    stage: Optional[str] = None
    event: Optional[int] = None
    lag: int = 0


@dataclass
class Stream:
    id: int
    name: str
    host: bool
    ops: List[Op]


@dataclass
class Plan:
    """A parsed plan file. ``stages`` maps stage name to stream id;
    ``arena`` maps each buffer the planner placed in the device arena to its
    offset in bytes (``stats["arena_bytes"]``: the arena's size): two
    buffers share bytes only where every launch touching one happens-before
    every launch touching the other (docs/design/arena.md)."""

    spec: str
    strategy: str
    stages: Dict[str, int]
    stage_order: List[str]
    streams: List[Stream]
    issue_order: List[Tuple[int, int]]
    events: int
    lifetimes: Dict[str, List[Tuple[int, int]]]
    stats: dict
    arena: Dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict) -> "Plan":
        """Parse a plan from its JSON object. Raises PlanError on a malformed plan."""
        try:
            stages = {}
            order = []
            for i, s in enumerate(d["stages"]):
                stages[s["name"]] = int(s["stream"])
                order.append(s["name"])
            streams = []
            for i, s in enumerate(d["streams"]):
                if int(s["id"]) != i:
                    raise PlanError("plan: stream at index %d has id %s" % (i, s["id"]))
                ops = []
                for j, o in enumerate(s.get("ops") or []):
                    k = o["op"]
                    if k == "launch":
                        ops.append(Op("launch", stage=o["stage"]))
                    elif k in ("record", "wait"):
                        ops.append(Op(k, event=int(o["event"]), lag=int(o.get("lag", 0))))
                    else:
                        raise PlanError("plan: stream %d op %d: unknown op %r (want launch, record or wait)" % (i, j, k))
                streams.append(Stream(i, s.get("name", "s%d" % i), bool(s.get("host", False)), ops))
            issue = [(int(a), int(b)) for a, b in d["issue_order"]]
            lifetimes = {}
            for l in d.get("lifetimes") or []:
                lifetimes[l["buffer"]] = [(int(x["stream"]), int(x["event"])) for x in (l.get("done") or [])]
            p = cls(spec=d.get("spec", ""), strategy=d.get("strategy", ""), stages=stages, stage_order=order,
                    streams=streams, issue_order=issue, events=int(d.get("events", 0)), lifetimes=lifetimes,
                    stats=d.get("stats") or {},
                    arena={b["name"]: int(b["arena_offset"]) for b in d.get("buffers") or [] if b.get("arena_offset") is not None})
        except (KeyError, TypeError, ValueError) as e:
            if isinstance(e, PlanError):
                raise
            raise PlanError("not a dagrun plan file: %s: %s" % (type(e).__name__, e)) from None
        p.validate()
        return p

    @classmethod
    def load(cls, path: str) -> "Plan":
        """Read a plan file written by ``dagrun plan --json``."""
        with open(path) as f:
            try:
                d = json.load(f)
            except json.JSONDecodeError as e:
                raise PlanError("%s: not JSON: %s" % (path, e)) from None
        return cls.from_dict(d)

    def validate(self) -> None:
        """Structural checks (as plan.Plan.Validate): every stage launched once on
        its own stream, events in range, an issue order that lists every op once in
        stream order, and every wait of this iteration issued after a record of its
        event. Raises PlanError."""
        launched: Dict[str, int] = {}
        for s in self.streams:
            for j, o in enumerate(s.ops):
                if o.kind == "launch":
                    if o.stage not in self.stages:
                        raise PlanError("plan: stream %d op %d launches unknown stage %r" % (s.id, j, o.stage))
                    if self.stages[o.stage] != s.id:
                        raise PlanError("plan: stage %s is on stream %d but launched on stream %d" % (o.stage, self.stages[o.stage], s.id))
                    launched[o.stage] = launched.get(o.stage, 0) + 1
                elif not (0 <= o.event < self.events):
                    raise PlanError("plan: stream %d op %d uses event %d, plan has %d events" % (s.id, j, o.event, self.events))
        for name in self.stage_order:
            if launched.get(name, 0) != 1:
                raise PlanError("plan: stage %s launched %d times, want 1" % (name, launched.get(name, 0)))
        nxt = [0] * len(self.streams)
        total = sum(len(s.ops) for s in self.streams)
        if len(self.issue_order) != total:
            raise PlanError("plan: issue_order has %d ops, streams have %d" % (len(self.issue_order), total))
        recorded = set()
        for k, (s, j) in enumerate(self.issue_order):
            if not 0 <= s < len(self.streams):
                raise PlanError("plan: issue_order[%d] names stream %d of %d" % (k, s, len(self.streams)))
            if j != nxt[s]:
                raise PlanError("plan: issue_order[%d] issues stream %d op %d, want op %d (stream order)" % (k, s, j, nxt[s]))
            nxt[s] += 1
            o = self.streams[s].ops[j]
            if o.kind == "record":
                recorded.add(o.event)
            elif o.kind == "wait" and o.lag == 0 and o.event not in recorded:
                raise PlanError("plan: the wait on e%d (stream %s) is issued before any record of it" % (o.event, self.streams[s].name))


@dataclass
class Action:
    """One step of the lowered plan, in host issue order.

    kind: "launch" (run graph node ``stage`` on plan stream ``stream``),
    "record" (record ``event`` on ``stream``) or "wait" (make ``stream`` wait
    for the latest record of ``event``). ``frees`` lists the tensor ids whose
    host references may be dropped right after this action.
    """

    kind: str
    stream: int
    stage: Optional[str] = None
    event: Optional[int] = None
    frees: List[str] = field(default_factory=list)


def _node_access(graph: dict) -> Dict[str, Tuple[List[str], List[str]]]:
    return {n["id"]: (list(n.get("reads") or []), list(n.get("writes") or [])) for n in graph["nodes"]}


def lower(plan: Plan, graph: dict, keep: Iterable[str] = ()) -> List[Action]:
    """Lower ``plan`` for the exported ``graph`` (the JSON object of
    ``dagrun_torch.export``) into actions in issue order, with frees.

    ``keep`` names tensor ids never to free (the model's outputs); input and
    param tensors are never freed either. Lag waits (across iterations) are
    dropped: each call of a compiled model is joined back into the calling
    stream, so iterations never overlap.

    Raises PlanError when the plan's stages are not exactly the graph's nodes,
    when a plan has a host stream, or when a lifetime record does not cover a
    use of its tensor.
    """
    acc = _node_access(graph)
    missing = [n for n in acc if n not in plan.stages]
    extra = [s for s in plan.stages if s not in acc]
    if missing or extra:
        raise PlanError("plan %r does not match graph %r: %d graph nodes have no stage (%s), %d stages no node (%s)" % (
            plan.spec, graph.get("model", "?"), len(missing), ", ".join(missing[:5]), len(extra), ", ".join(extra[:5])))
    for s in plan.streams:
        if s.host:
            raise PlanError("plan %r has a host stream (%s): host stages cannot be replayed on PyTorch" % (plan.spec, s.name))
    kind = {t["id"]: t.get("kind", "activation") for t in graph["tensors"]}
    keep = set(keep)
    S = len(plan.streams)

    # Launch index of each stage on its stream; launches before each record.
    lidx: Dict[str, int] = {}
    rec_pos: Dict[int, Tuple[int, int]] = {}
    for s in plan.streams:
        c = 0
        for o in s.ops:
            if o.kind == "launch":
                lidx[o.stage] = c
                c += 1
            elif o.kind == "record":
                rec_pos[o.event] = (s.id, c)  # the last record wins (manual plans may re-record)

    # Producer (allocating stage) and per-stream last use of each tensor.
    producer: Dict[str, str] = {}
    last_use: Dict[str, Dict[int, int]] = {}
    for n in graph["nodes"]:
        reads, writes = acc[n["id"]]
        st = plan.stages[n["id"]]
        for t in writes:
            if t not in producer and t not in reads:
                producer[t] = n["id"]
        for t in set(reads) | set(writes):
            d = last_use.setdefault(t, {})
            d[st] = max(d.get(st, -1), lidx[n["id"]])

    # need[t][T]: how many launches of stream T the allocating stream must be
    # ordered after before t's bytes may go back to the allocator.
    need: Dict[str, Dict[int, int]] = {}
    for t, prod in producer.items():
        if kind.get(t) != "activation" or t in keep:
            continue
        a = plan.stages[prod]
        req = {T: i + 1 for T, i in last_use[t].items()}
        for T, e in plan.lifetimes.get(t, []):
            if T == a:
                continue  # own stream: stream order after its last use suffices
            if e not in rec_pos or rec_pos[e][0] != T:
                raise PlanError("plan: lifetime of %s names event e%d, which is not recorded on stream %d" % (t, e, T))
            at = rec_pos[e][1]
            if at < req.get(T, 0):
                raise PlanError("plan: lifetime of %s: e%d is recorded on stream %d before its last use there" % (t, e, T))
            req[T] = at
        need[t] = req

    actions: List[Action] = []
    vc = [[0] * S for _ in range(S)]   # vc[s][T]: launches of T that s is ordered after
    ev: Dict[int, List[int]] = {}
    pending: List[List[str]] = [[] for _ in range(S)]
    for s, j in plan.issue_order:
        o = plan.streams[s].ops[j]
        if o.kind == "launch":
            a = Action("launch", s, stage=o.stage)
            vc[s][s] = lidx[o.stage] + 1
            for t in acc[o.stage][1]:
                if producer.get(t) == o.stage and t in need:
                    pending[s].append(t)
        elif o.kind == "record":
            a = Action("record", s, event=o.event)
            ev[o.event] = list(vc[s])
        else:
            if o.lag != 0:
                continue
            a = Action("wait", s, event=o.event)
            src = ev[o.event]
            vc[s] = [max(x, y) for x, y in zip(vc[s], src)]
        if pending[s]:
            still = []
            for t in pending[s]:
                if all(vc[s][T] >= n for T, n in need[t].items()):
                    a.frees.append(t)
                else:
                    still.append(t)
            pending[s] = still
        actions.append(a)
    return actions


def peak_live_bytes(actions: Sequence[Action], graph: dict) -> Tuple[int, int]:
    """Peak bytes of activations alive at once under ``actions`` (allocated at
    their producer's launch, released at their free), and the total bytes of
    all activations. A model of what the allocator will hold, for reports and
    tests; the real figure adds rounding and the weights."""
    size = {t["id"]: int(t["bytes"]) for t in graph["tensors"] if t.get("kind", "activation") == "activation"}
    acc = _node_access(graph)
    seen: Set[str] = set()
    live = peak = 0
    for a in actions:
        if a.kind == "launch":
            reads, writes = acc[a.stage]
            for t in writes:
                if t in size and t not in seen and t not in reads:
                    seen.add(t)
                    live += size[t]
            peak = max(peak, live)
        for t in a.frees:
            live -= size.get(t, 0)
    return peak, sum(size.values())


def launch_dag(plan: Plan) -> Tuple[List[str], Dict[str, Set[str]]]:
    """The plan's happens-before DAG over its launches: (stages in issue
    order, direct predecessors of each stage). A launch follows the previous
    launch on its stream and, through each wait issued on its stream since
    then, the launches that the waited-for record stands for (the last launch
    on the recording stream and what that stream had waited for). Lagged
    waits (across iterations) add no edge: each call is joined back into the
    calling stream. This is the DAG a captured CUDA graph of the plan runs."""
    preds: Dict[str, Set[str]] = {}
    last: Dict[int, str] = {}
    pending: Dict[int, Set[str]] = {}
    rec: Dict[int, Set[str]] = {}
    order: List[str] = []
    for s, j in plan.issue_order:
        o = plan.streams[s].ops[j]
        if o.kind == "launch":
            preds[o.stage] = pending.pop(s, set()) | ({last[s]} if s in last else set())
            last[s] = o.stage
            order.append(o.stage)
        elif o.kind == "record":
            rec[o.event] = ({last[s]} if s in last else set()) | pending.get(s, set())
        elif o.lag == 0:
            pending.setdefault(s, set()).update(rec.get(o.event, set()))
    return order, preds


def stream_priorities(plan: Plan, graph: dict, levels: int) -> List[int]:
    """A scheduling rank per plan stream, 0 (most urgent) to ``levels`` - 1.

    A stream's urgency is the longest path, by the nodes' ``duration_us``
    (0 counts as 1), from its first launch to the end of the plan's
    happens-before DAG (stream order plus record→wait edges): the bottom
    level of list scheduling (HLFET). The stream holding the critical path
    gets 0; the others get ranks in proportion to how far below it they are.
    The runner turns ranks into CUDA stream priorities, and a captured graph
    keeps them per kernel node (PyTorch instantiates graphs with
    cudaGraphInstantiateFlagUseNodePriority), so that when ready kernels
    compete for the GPU, the ones that lead the longest remaining chain start
    first.
    """
    if levels < 1:
        raise ValueError("levels=%d: want ≥ 1" % levels)
    dur = {n["id"]: float(n.get("duration_us") or 0) or 1.0 for n in graph["nodes"]}
    order, preds = launch_dag(plan)
    succ: Dict[str, Set[str]] = {s: set() for s in plan.stages}
    for v, ps in preds.items():
        for p in ps:
            succ[p].add(v)
    bottom: Dict[str, float] = {}
    for v in reversed(order):
        bottom[v] = dur.get(v, 1.0) + max((bottom[w] for w in succ[v]), default=0.0)
    key = []
    for st in plan.streams:
        firsts = [o.stage for o in st.ops if o.kind == "launch"]
        key.append(max((bottom[v] for v in firsts), default=0.0))
    top = max(key) if key else 0.0
    if top <= 0:
        return [0] * len(plan.streams)
    return [min(levels - 1, int(round((1.0 - k / top) * (levels - 1)))) for k in key]
