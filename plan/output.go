package plan

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/rivo/uniseg"
	"gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/encoding"
	"gonum.org/v1/gonum/graph/encoding/dot"
	"gonum.org/v1/gonum/graph/simple"
)

// Producers returns, per event, the stage launched right before its last
// record (-1 if none): the stage a wait on it waits for.
func (p *Plan) Producers() []int {
	prod := make([]int, p.Events)
	for i := range prod {
		prod[i] = -1
	}
	for _, s := range p.Streams {
		last := -1
		for _, o := range s.Ops {
			switch o.Kind {
			case OpLaunch:
				last = o.Stage
			case OpRecord:
				if o.Event >= 0 && o.Event < len(prod) {
					prod[o.Event] = last
				}
			}
		}
	}
	return prod
}

// StatsLine returns the one-line summary WriteTable ends with, e.g.
// `streams=3 waits=2 lower_bound=2 events=2 critical_path=12.0us ideal_makespan=12.0us planning=0.12ms`.
func (p *Plan) StatsLine() string {
	s := p.Stats
	return fmt.Sprintf("streams=%d waits=%d lower_bound=%d events=%d critical_path=%.1fus ideal_makespan=%.1fus planning=%.2fms",
		s.Streams, s.Waits, s.LowerBoundWaits, s.Events, s.CriticalPathUS, s.IdealMakespanUS, s.PlanningMS)
}

// WriteTable writes the plan as a readable table: a header, one row per op
// grouped by stream (launches by stage name; records and waits with their
// event and the stage it follows; each wait with its reason, WaitReasons:
// hazard kind, buffer and byte range), the buffer lifetimes, the arena, the
// iteration info, each note as "note: …", and the stats line.
// Output is byte-stable except for the planning time.
func (p *Plan) WriteTable(w io.Writer) {
	prod := p.Producers()
	why := p.WaitReasons()
	reason := func(s, j int) string {
		if r := why[s][j]; r != nil {
			return ": " + r.String()
		}
		return ""
	}
	recordedOn := make([]int, max(p.Events, 0)) // stream+1 of each event's last record, 0: none
	for s, str := range p.Streams {
		for _, o := range str.Ops {
			if o.Kind == OpRecord && o.Event >= 0 && o.Event < len(recordedOn) {
				recordedOn[o.Event] = s + 1
			}
		}
	}
	stageOf := func(e int) string {
		switch {
		case e >= 0 && e < len(prod) && prod[e] >= 0:
			return p.Stages[prod[e]].Name
		case e >= 0 && e < len(recordedOn) && recordedOn[e] > 0:
			return "(start of " + p.Streams[recordedOn[e]-1].Name + ")" // recorded before any launch
		}
		return "(nothing)"
	}
	fmt.Fprintf(w, "plan %s: %d stages, strategy %s", p.Spec, len(p.Stages), p.Strategy)
	multi := p.DeviceCount() > 1
	if multi {
		fmt.Fprintf(w, ", %d devices", p.DeviceCount())
	}
	fmt.Fprintln(w)
	var tw columns
	tw.row("stream", "op", "stage/event", "")
	for si, s := range p.Streams {
		after := "(start of " + s.Name + ")" // a record marks the stream's work up to here
		for j, o := range s.Ops {
			name := p.streamLabel(s)
			if j > 0 {
				name = ""
			}
			switch o.Kind {
			case OpLaunch:
				tw.row(name, "launch", p.Stages[o.Stage].Name, "")
				after = p.Stages[o.Stage].Name
			case OpRecord:
				tw.row(name, "record", fmt.Sprintf("e%d", o.Event), "after "+after)
			case OpWait:
				if o.Lag > 0 {
					tw.row(name, "wait", fmt.Sprintf("e%d", o.Event), fmt.Sprintf("for %s, %d iteration(s) back%s", stageOf(o.Event), o.Lag, reason(si, j)))
					continue
				}
				tw.row(name, "wait", fmt.Sprintf("e%d", o.Event), "for "+stageOf(o.Event)+reason(si, j))
			}
		}
	}
	tw.write(w)
	if len(p.Lifetimes) > 0 {
		fmt.Fprintln(w, "lifetimes:")
		for _, l := range p.Lifetimes {
			var b strings.Builder
			for _, d := range l.Done {
				sn := fmt.Sprint(d.Stream)
				if d.Stream >= 0 && d.Stream < len(p.Streams) {
					sn = p.Streams[d.Stream].Name
				}
				fmt.Fprintf(&b, " %s@e%d", sn, d.Event)
			}
			if len(l.Done) == 0 {
				b.WriteString(" (unused)")
			}
			fmt.Fprintf(w, "  %s:%s\n", l.Buffer, b.String())
		}
	}
	p.writeArena(w) // arena.go
	if it := p.Iteration; it != nil {
		barrier := ""
		if it.Barrier {
			barrier = " barrier"
		}
		fmt.Fprintf(w, "iterations: stream_sets=%d cross_waits=%d in_flight=%d slots=%s%s\n", it.StreamSets, it.CrossWaits, it.InFlight, slotsSummary(it.Slots), barrier)
	}
	for _, n := range p.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	fmt.Fprintln(w, p.StatsLine())
}

// columns lays out rows of three aligned cells and a free last one, each
// aligned column as wide as its widest cell on a terminal plus two spaces:
// widths are display columns (uniseg.StringWidth: a CJK character or an
// emoji takes two, a combining mark none), not bytes or runes.
type columns struct{ rows [][4]string }

func (c *columns) row(a, b, d, rest string) { c.rows = append(c.rows, [4]string{a, b, d, rest}) }

// write writes the rows, each line without trailing spaces.
func (c *columns) write(w io.Writer) {
	var width [3]int
	for _, r := range c.rows {
		for i := range width {
			width[i] = max(width[i], uniseg.StringWidth(r[i]))
		}
	}
	var b strings.Builder
	for _, r := range c.rows {
		b.Reset()
		for i := range width {
			b.WriteString(r[i])
			b.WriteString(strings.Repeat(" ", width[i]+2-uniseg.StringWidth(r[i])))
		}
		b.WriteString(r[3])
		io.WriteString(w, strings.TrimRight(b.String(), " "))
		io.WriteString(w, "\n")
	}
}

// WriteDOT writes the plan as a Graphviz digraph through gonum's
// encoding/dot: stages as nodes clustered by stream, solid edges for stream
// order and dashed edges for waits, labelled with the event and the wait's
// reason (WaitReasons), bold lines between the ranks of each collective
// (they meet: no wait orders them), and a key saying so as the graph's
// label. It draws one iteration: waits on an earlier iteration's record
// (Op.Lag > 0) order no two stages of it and are not drawn; WriteTable
// lists them.
func (p *Plan) WriteDOT(w io.Writer) error {
	g := &dotGraph{DirectedGraph: simple.NewDirectedGraph(), name: p.Spec}
	nodes := make([]dotNode, len(p.Stages))
	for i, s := range p.Stages {
		nodes[i] = dotNode{id: int64(i), name: s.Name, label: fmt.Sprintf("%s\n%s %s", s.Name, s.Kernel, durationLabel(s.DurationUS, "us"))}
		g.AddNode(nodes[i])
	}
	for _, s := range p.Streams {
		sub := &dotGraph{DirectedGraph: simple.NewDirectedGraph(), name: fmt.Sprintf("cluster_%d", s.ID), label: p.streamLabel(s)}
		last := -1
		for _, o := range s.Ops {
			switch o.Kind {
			case OpLaunch:
				sub.AddNode(nodes[o.Stage])
				if last >= 0 && last != o.Stage {
					g.SetEdge(dotEdge{f: nodes[last], t: nodes[o.Stage]})
				}
				last = o.Stage
			case OpWait:
				// The wait orders the producer before the next launch on this stream.
			}
		}
		g.clusters = append(g.clusters, sub)
	}
	for _, w := range p.waitEdges() {
		g.SetEdge(dotEdge{f: nodes[w.from], t: nodes[w.to], wait: true, event: w.event, why: w.why})
	}
	rv := p.rendezvousEdges()
	for _, e := range rv {
		g.SetEdge(dotEdge{f: nodes[e.from], t: nodes[e.to], rendezvous: true, why: e.what})
	}
	if len(rv) > 0 {
		g.key = "; bold lines: the ranks of a collective, a rendezvous (no rank completes before every rank has started)"
	}
	b, err := dot.Marshal(g, "", "", "  ")
	if err != nil {
		return err
	}
	b = append(dropTopNodes(b, "  "), '\n')
	_, err = w.Write(b)
	return err
}

// dropTopNodes removes the top graph's node statements from gonum's
// encoding of a graph whose every node is in a cluster: the encoder
// declares each node of the top graph after the clusters that declared it
// (graph.Directed has no node without its edges' graph), so that every
// stage would be declared twice. The block is the top level's "// Node
// definitions." line (indent: one level) and the node lines after it.
func dropTopNodes(b []byte, indent string) []byte {
	head := []byte("\n" + indent + "// Node definitions.\n")
	i := bytes.LastIndex(b, head)
	if i < 0 {
		return b
	}
	j := i + len(head) - 1 // at the newline ending the header
	for {
		rest := b[j+1:]
		end := bytes.IndexByte(rest, '\n')
		if end < 0 || !bytes.HasPrefix(rest, []byte(indent)) || bytes.HasPrefix(rest, []byte(indent+indent)) ||
			bytes.HasPrefix(rest, []byte(indent+"//")) || bytes.HasPrefix(rest, []byte(indent+"}")) {
			break
		}
		j += 1 + end
	}
	return append(b[:i:i], b[j:]...)
}

// rendezvousEdge joins consecutive ranks of a collective in a drawing:
// the ranks order their devices' streams by meeting, not by a wait.
type rendezvousEdge struct {
	from, to int // stage indices, rank r and rank r+1
	what     string
}

// rendezvousEdges lists, per collective in group order, an edge from each
// rank to the next.
func (p *Plan) rendezvousEdges() []rendezvousEdge {
	ranks := map[int][]int{} // group → stage per rank
	var groups []int
	for i, s := range p.Stages {
		c := s.Collective
		if c == nil || c.Rank < 0 || c.Rank >= c.Ranks {
			continue
		}
		if ranks[c.Group] == nil {
			ranks[c.Group] = slices.Repeat([]int{-1}, c.Ranks)
			groups = append(groups, c.Group)
		}
		if c.Rank < len(ranks[c.Group]) {
			ranks[c.Group][c.Rank] = i
		}
	}
	slices.Sort(groups)
	var out []rendezvousEdge
	for _, g := range groups {
		r := ranks[g]
		for k := 0; k+1 < len(r); k++ {
			if r[k] >= 0 && r[k+1] >= 0 {
				out = append(out, rendezvousEdge{from: r[k], to: r[k+1], what: p.Stages[r[k]].Collective.Op})
			}
		}
	}
	return out
}

// waitEdge is a wait of this iteration (lag 0) drawn as an edge from the
// awaited stage to the stage the wait comes before.
type waitEdge struct {
	from, to, event int
	why             string
}

// waitEdges lists the plan's lag-0 waits as edges, in stream and op order
// (cross-iteration waits order earlier iterations: not drawn).
func (p *Plan) waitEdges() []waitEdge {
	prod := p.Producers()
	why := p.WaitReasons()
	var out []waitEdge
	for si, s := range p.Streams {
		var pending []waitEdge
		for j, o := range s.Ops {
			switch o.Kind {
			case OpWait:
				if o.Lag == 0 && o.Event >= 0 && o.Event < len(prod) && prod[o.Event] >= 0 {
					w := waitEdge{from: prod[o.Event], event: o.Event}
					if r := why[si][j]; r != nil {
						w.why = r.String()
					}
					pending = append(pending, w)
				}
			case OpLaunch:
				for _, w := range pending {
					if w.from != o.Stage {
						w.to = o.Stage
						out = append(out, w)
					}
				}
				pending = pending[:0]
			}
		}
	}
	return out
}

type dotGraph struct {
	*simple.DirectedGraph
	name, label string
	key         string // added to the key (the top graph's label)
	clusters    []*dotGraph
}

func (g *dotGraph) DOTID() string { return g.name }

func (g *dotGraph) Structure() []dot.Graph {
	out := make([]dot.Graph, len(g.clusters))
	for i, c := range g.clusters {
		out[i] = c
	}
	return out
}

func (g *dotGraph) DOTAttributers() (gr, n, e encoding.Attributer) {
	var ga attrs
	if g.label != "" {
		ga = attrs{{Key: "label", Value: quote(g.label)}}
	} else {
		ga = attrs{{Key: "rankdir", Value: "TB"}, {Key: "labelloc", Value: "b"},
			{Key: "label", Value: quote("key: boxes are stages (kernel, µs) clustered by stream; solid arrows: stream order; dashed arrows: an event wait, labelled with its event and why (hazard kind RAW/WAR/WAW, buffer[bytes])" + g.key)}}
	}
	return ga, attrs{{Key: "shape", Value: "box"}}, attrs{}
}

type attrs []encoding.Attribute

func (a attrs) Attributes() []encoding.Attribute { return a }

type dotNode struct {
	id          int64
	name, label string
}

func (n dotNode) ID() int64     { return n.id }
func (n dotNode) DOTID() string { return n.name }
func (n dotNode) Attributes() []encoding.Attribute {
	return attrs{{Key: "label", Value: quote(n.label)}}
}

func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

type dotEdge struct {
	f, t       dotNode
	wait       bool
	rendezvous bool // two ranks of a collective: why is the collective's op
	event      int
	why        string
}

func (e dotEdge) From() graph.Node { return e.f }
func (e dotEdge) To() graph.Node   { return e.t }
func (e dotEdge) ReversedEdge() graph.Edge {
	return dotEdge{f: e.t, t: e.f, wait: e.wait, rendezvous: e.rendezvous, event: e.event, why: e.why}
}
func (e dotEdge) Attributes() []encoding.Attribute {
	if e.rendezvous {
		return attrs{{Key: "style", Value: "bold"}, {Key: "dir", Value: "none"}, {Key: "constraint", Value: "false"}, {Key: "label", Value: quote(e.why + " rendezvous")}}
	}
	if !e.wait {
		return nil
	}
	label := fmt.Sprintf("e%d", e.event)
	if e.why != "" {
		label += "\n" + e.why
	}
	return attrs{{Key: "style", Value: "dashed"}, {Key: "label", Value: quote(label)}}
}

// WriteMermaid writes the plan as a Mermaid flowchart (it renders in
// GitHub's Markdown and many editors): a subgraph per stream with its
// stages in stream order (solid arrows) and a dotted arrow per wait,
// labelled with its event and reason (WaitReasons), a thick line between
// consecutive ranks of each collective; the title is the key. Like
// WriteDOT it draws one iteration, without the waits on an earlier
// iteration's record (Op.Lag > 0).
func (p *Plan) WriteMermaid(w io.Writer) error {
	esc := strings.NewReplacer(`"`, "#quot;", "\n", "<br/>", "<", "#lt;", ">", "#gt;").Replace
	var b strings.Builder
	rv := p.rendezvousEdges()
	key := ""
	if len(rv) > 0 {
		key = "; thick lines: the ranks of a collective, a rendezvous (no rank completes before every rank has started)"
	}
	fmt.Fprintf(&b, "---\ntitle: \"%s\"\n---\nflowchart TB\n", esc(fmt.Sprintf("plan %s. Key: boxes are stages (kernel, µs) in a box per stream; solid arrows: stream order; dotted arrows: an event wait, with its event and why (RAW/WAR/WAW, buffer[bytes])%s", p.Spec, key)))
	var order []string
	for _, s := range p.Streams {
		fmt.Fprintf(&b, "  subgraph s%d[\"stream %s\"]\n", s.ID, esc(p.streamLabel(s)))
		last := -1
		for _, o := range s.Ops {
			if o.Kind != OpLaunch {
				continue
			}
			st := p.Stages[o.Stage]
			fmt.Fprintf(&b, "    n%d[\"%s<br/>%s %s\"]\n", o.Stage, esc(st.Name), esc(st.Kernel), durationLabel(st.DurationUS, " µs"))
			if last >= 0 {
				order = append(order, fmt.Sprintf("  n%d --> n%d\n", last, o.Stage))
			}
			last = o.Stage
		}
		b.WriteString("  end\n")
	}
	for _, l := range order {
		b.WriteString(l)
	}
	for _, e := range p.waitEdges() {
		label := fmt.Sprintf("e%d", e.event)
		if e.why != "" {
			label += ": " + e.why
		}
		fmt.Fprintf(&b, "  n%d -.->|\"%s\"| n%d\n", e.from, esc(label), e.to)
	}
	for _, e := range rv {
		fmt.Fprintf(&b, "  n%d ===|\"%s rendezvous\"| n%d\n", e.from, esc(e.what), e.to)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// slotsSummary writes the events' slot counts for the plan table: the list
// for up to 16 events, else how many events have each count
// ("{1: 48790 events, 2: 3 events}").
func slotsSummary(slots []int) string {
	if len(slots) <= 16 {
		return fmt.Sprint(slots)
	}
	count := map[int]int{}
	for _, n := range slots {
		count[n]++
	}
	keys := slices.Sorted(maps.Keys(count))
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d: %d events", k, count[k])
	}
	b.WriteByte('}')
	return b.String()
}

// durationLabel is a stage's duration in a drawing, in µs (unit is how the
// drawing writes µs): the stage's duration_us, or, where it has none, the
// 1 µs the plan's statistics count for it.
func durationLabel(us float64, unit string) string {
	if us <= 0 {
		return fmt.Sprintf("%.1f%s (no duration_us)", CostUS(us), unit)
	}
	return fmt.Sprintf("%.1f%s", us, unit)
}
