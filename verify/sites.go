package verify

import (
	"fmt"
	"strings"

	"github.com/dagrun/dagrun/plan"
)

// RaceSite is a group of races with the same identity in the program's
// source: the hazard, the line of each stage, their streams and the
// buffer's allocation. The iterations of a loop (an unrolled plan's
// NAME@iteration, a ring's NAME#copy) and the repeated calls of a recorded
// program (dagrun_torch.record's kNNN:OP:FILE:LINE) are one site; in a spec
// without either every stage is its own site.
type RaceSite struct {
	Kind         string `json:"kind"`
	First        string `json:"first"`  // the first stage's site (SiteOf)
	Second       string `json:"second"` // the second stage's site
	FirstStream  string `json:"first_stream"`
	SecondStream string `json:"second_stream"`
	Buffer       string `json:"buffer"` // the buffer's site (BufferSiteOf)
	// Count is the number of races at the site; Example indexes
	// RaceError.Races: its first race.
	Count   int `json:"count"`
	Example int `json:"example"`
}

// SiteOf is where the program issues stage name: FILE:LINE for a stage of
// a recorded trace (dagrun_torch.record's kNNN:OP:FILE:LINE for a GPU op,
// hNNN:WHAT:FILE:LINE for a host stage), the spec's stage name for an
// iteration of it (NAME@iteration), else name itself.
func SiteOf(name string) string {
	if i := strings.LastIndexByte(name, '@'); i > 0 && isDigits(name[i+1:]) {
		name = name[:i]
	}
	if len(name) < 2 || name[0] != 'k' && name[0] != 'h' {
		return name
	}
	i := strings.IndexByte(name, ':')
	if i < 2 || !isDigits(name[1:i]) {
		return name
	}
	j := strings.IndexByte(name[i+1:], ':')
	if j < 0 {
		return name
	}
	return fileLine(name, name[i+1+j+1:])
}

// recordedDeviceSync reports whether name is the host stage of a recorded
// trace's torch.cuda.synchronize() (dagrun_torch.record's
// hNNN:synchronize:FILE:LINE): the host waits for every stream at once.
func recordedDeviceSync(name string) bool {
	rest, ok := strings.CutPrefix(name, "h")
	if !ok {
		return false
	}
	i := strings.IndexByte(rest, ':')
	if i < 1 || !isDigits(rest[:i]) {
		return false
	}
	site, ok := strings.CutPrefix(rest[i+1:], "synchronize:")
	return ok && fileLine("", site) == site
}

// fileLine is rest when it is FILE:LINE, else name.
func fileLine(name, rest string) string {
	if k := strings.LastIndexByte(rest, ':'); k > 0 && isDigits(rest[k+1:]) {
		return rest
	}
	return name
}

// BufferSiteOf is the buffer's identity in the program: the allocation
// line (FILE:LINE) of a recorded trace's buffer (dagrun_torch.record's
// memN:FILE:LINE, after the allocation that first held its bytes), the
// spec's buffer for a ring copy (NAME#copy) or an unrolled iteration's
// (NAME@iteration), else name itself.
func BufferSiteOf(name string) string {
	for _, c := range [...]byte{'@', '#'} { // a ring copy, an unrolled iteration's own buffer
		if i := strings.LastIndexByte(name, c); i > 0 && isDigits(name[i+1:]) {
			name = name[:i]
		}
	}
	for _, pre := range [...]string{"mem", "pinned"} {
		if rest, ok := strings.CutPrefix(name, pre); ok {
			if i := strings.IndexByte(rest, ':'); i > 0 && isDigits(rest[:i]) {
				return fileLine(name, rest[i+1:])
			}
		}
	}
	return name
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// raceSites groups races by site, in order of their first race, and sets
// each race's Site.
func raceSites(races []Race) []RaceSite {
	type key struct{ kind, first, second, fs, ss, buf string }
	at := map[key]int{}
	var sites []RaceSite
	for k := range races {
		r := &races[k]
		fs, ss := streamLabel(r.FirstStreamName, r.FirstStream), streamLabel(r.SecondStreamName, r.SecondStream)
		id := key{r.Kind, SiteOf(r.FirstName), SiteOf(r.SecondName), fs, ss, BufferSiteOf(r.Buffer)}
		i, ok := at[id]
		if !ok {
			i = len(sites)
			at[id] = i
			sites = append(sites, RaceSite{Kind: id.kind, First: id.first, Second: id.second, FirstStream: fs, SecondStream: ss, Buffer: id.buf, Example: k})
		}
		sites[i].Count++
		r.Site = i
	}
	return sites
}

// siteLineOf describes site i in a line: the hazard, the buffer, the two
// lines and streams, n (its races in the group at hand) and an example.
func (e *RaceError) siteLineOf(i, n int) string {
	s := e.Sites[i]
	r := e.Races[s.Example]
	return fmt.Sprintf("%s on %s: %s (stream %s) → %s (stream %s): %d race%s, e.g. %s[%d:%d]: %s → %s", s.Kind, s.Buffer,
		s.First, s.FirstStream, s.Second, s.SecondStream, n, plural(n), r.Buffer, r.Offset, r.Offset+r.Bytes, r.FirstName, r.SecondName)
}

// stageSites interns SiteOf of every stage of p: stage i's site is
// ids[i]; repeated is false when every stage is its own site.
func stageSites(p *plan.Plan) (ids []int32, repeated bool) {
	at := make(map[string]int32, len(p.Stages))
	ids = make([]int32, len(p.Stages))
	for i := range p.Stages {
		s := SiteOf(p.Stages[i].Name)
		id, ok := at[s]
		if !ok {
			id = int32(len(at))
			at[s] = id
		} else {
			repeated = true
		}
		ids[i] = id
	}
	return ids, repeated
}

// siteWaits turns a wait "before stage y, wait on a record after stage
// x", y the start of a run of its line on its stream (launches of the line
// on the stream with no other launch issued between them), into the same wait in the program's
// source: before each run of y's line on y's stream, a wait on a record
// after the latest launch of x's line on x's stream issued before it.
// Every stage its own site (site nil), or y inside a run, it is the wait
// itself.
type siteWaits struct {
	site      []int32
	launchPos []int   // per stage, its position in IssueOrder
	launches  [][]int // per stream, its launched stages in stream order
	runStart  []bool  // per stage: it starts a run of its line on its stream
	memo      map[[2]int][][2]int
}

func newSiteWaits(p *plan.Plan, launchPos []int) *siteWaits {
	site, repeated := stageSites(p)
	if !repeated || p.Unrolled {
		return &siteWaits{}
	}
	sw := &siteWaits{site: site, launchPos: launchPos, launches: make([][]int, len(p.Streams)), runStart: make([]bool, len(p.Stages))}
	// A run of a line: launches of it on one stream with no other launch
	// issued between them.
	rank := make([]int, len(p.Stages)) // per stage, its launch's rank among the launches in issue order
	n := 0
	for _, so := range p.IssueOrder {
		if o := p.Streams[so[0]].Ops[so[1]]; o.Kind == plan.OpLaunch {
			rank[o.Stage] = n
			n++
		}
	}
	for s, str := range p.Streams {
		prev := -1
		for _, o := range str.Ops {
			if o.Kind == plan.OpLaunch {
				sw.launches[s] = append(sw.launches[s], o.Stage)
				sw.runStart[o.Stage] = prev < 0 || site[o.Stage] != site[prev] || rank[o.Stage] != rank[prev]+1
				prev = o.Stage
			}
		}
	}
	return sw
}

// places returns the waits w stands for (w itself among them).
func (sw *siteWaits) places(p *plan.Plan, w [2]int) [][2]int {
	if sw.site == nil {
		return [][2]int{w}
	}
	if at, ok := sw.memo[w]; ok {
		return at
	}
	at := sw.placesOf(p, w)
	if sw.memo == nil {
		sw.memo = map[[2]int][][2]int{}
	}
	sw.memo[w] = at
	return at
}

func (sw *siteWaits) placesOf(p *plan.Plan, w [2]int) [][2]int {
	x, y := w[0], w[1]
	xs, ys := sw.launches[p.Stages[x].Stream], sw.launches[p.Stages[y].Stream]
	sx, sy := sw.site[x], sw.site[y]
	var out [][2]int
	j, last := 0, -1 // j: next launch of xs; last: the latest of x's line issued so far
	for _, y2 := range ys {
		if y2 != y && (sw.site[y2] != sy || !sw.runStart[y2] || !sw.runStart[y]) {
			continue
		}
		for j < len(xs) && sw.launchPos[xs[j]] < sw.launchPos[y2] {
			if sw.site[xs[j]] == sx {
				last = xs[j]
			}
			j++
		}
		if y2 == y {
			out = append(out, w)
		} else if last >= 0 {
			out = append(out, [2]int{last, y2})
		}
	}
	return out
}

// key is w's identity in the source: x's line and stream, y's line and
// stream (w itself when every stage is its own site, or y does not start
// a run of its line).
func (sw *siteWaits) key(p *plan.Plan, w [2]int) [4]int {
	if sw.site == nil || !sw.runStart[w[1]] {
		return [4]int{w[0], -1, w[1], -1}
	}
	return [4]int{int(sw.site[w[0]]), p.Stages[w[0]].Stream, int(sw.site[w[1]]), p.Stages[w[1]].Stream}
}

// first returns the first wait seen with w's key (rep keeps them), w
// itself when it is the first: the candidate that stands for w.
func (sw *siteWaits) first(p *plan.Plan, rep map[[4]int][2]int, w [2]int) [2]int {
	k := sw.key(p, w)
	if r, ok := rep[k]; ok {
		return r
	}
	rep[k] = w
	return w
}

// all is the waits ws stand for, each at its places.
func (sw *siteWaits) all(p *plan.Plan, ws [][2]int) [][2]int {
	if sw.site == nil {
		return ws
	}
	var out [][2]int
	for _, w := range ws {
		out = append(out, sw.places(p, w)...)
	}
	return out
}

// count is len(all(p, ws)).
func (sw *siteWaits) count(p *plan.Plan, ws [][2]int) int {
	if sw.site == nil {
		return len(ws)
	}
	n := 0
	for _, w := range ws {
		n += len(sw.places(p, w))
	}
	return n
}

// Handoff is one host event handed from thread From to thread To that
// orders every race of Races, races between stages those threads issue
// that no device wait orders (a wait on another thread's record captures
// it only after a host event hands it over): thread From's host waits
// for each stage of After (the latest first stage of the races on each of
// its streams), then records the event on its host stream; thread To's
// host stream waits on it before Before (the earliest second stage). Each
// race's first stage is then done before the record, and its second stage
// issued after the wait: ordered, by the same happens-before rules Verify
// uses. One handoff instead of one per race.
type Handoff struct {
	From   string   `json:"from"`
	To     string   `json:"to"`
	After  []string `json:"after"`  // stage names, with file:line:col where the plan has one
	Before string   `json:"before"` // stage name, with file:line:col
	Races  []int    `json:"races"`  // indexes RaceError.Races
}

func (h Handoff) String() string {
	return fmt.Sprintf("hand over once, with one host event: thread %s's host waits for %s, then records an event on its host stream; thread %s's host stream waits on it before %s (every race below: its first stage is done before the record, its second issued after the wait)",
		h.From, strings.Join(h.After, " and "), h.To, h.Before)
}

// handoffs groups the races of unfixed that are ordered by nothing
// between two host threads (Rule RuleThreads) by (first thread, second
// thread): one Handoff per pair of threads with two races or more.
func handoffs(p *plan.Plan, races []Race, unfixed []int) []Handoff {
	launchPos := plan.LaunchPositions(p)
	type pair struct{ from, to string }
	type group struct {
		last   map[int]int // per stream of From, its latest first stage
		before int
		races  []int
	}
	var keys []pair
	groups := map[pair]*group{}
	for _, k := range unfixed {
		r := races[k]
		if r.Reversed || !strings.HasPrefix(r.Rule, RuleThreads) {
			continue
		}
		key := pair{plan.ThreadLabel(p.Streams[r.FirstStream].Thread), plan.ThreadLabel(p.Streams[r.SecondStream].Thread)}
		g := groups[key]
		if g == nil {
			g = &group{last: map[int]int{}, before: r.Second}
			groups[key] = g
			keys = append(keys, key)
		}
		if x, ok := g.last[r.FirstStream]; !ok || launchPos[r.First] > launchPos[x] {
			g.last[r.FirstStream] = r.First
		}
		if launchPos[r.Second] < launchPos[g.before] {
			g.before = r.Second
		}
		g.races = append(g.races, k)
	}
	var out []Handoff
	for _, key := range keys {
		g := groups[key]
		if len(g.races) < 2 {
			continue
		}
		h := Handoff{From: key.from, To: key.to, Before: stageAt(p, int32(g.before)), Races: g.races}
		for s := range p.Streams {
			if x, ok := g.last[s]; ok {
				h.After = append(h.After, stageAt(p, int32(x)))
			}
		}
		out = append(out, h)
	}
	return out
}
