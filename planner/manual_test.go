package planner

import (
	"errors"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/plan"
	"github.com/dagrun/dagrun/verify"
)

func TestManual(t *testing.T) {
	t.Run("hand-synchronized", func(t *testing.T) {
		s := manual(spec(stage("w1", writes("out"), on("a")), stage("w2", writes("out"), on("b"), waits("w1"))))
		p := build(t, s, Options{})
		// The spec's own ops (w2 waits for w1), inside the barrier between
		// iterations: a waits for b's end of the previous iteration (e2),
		// records the fork (e3) that b waits on, and b records its end.
		if got, want := ops(p), "a: wait2@-1 rec3 w1 rec0\nb: wait3 wait0 w2 rec1 rec2\n"; got != want {
			t.Errorf("ops\n%swant\n%s", got, want)
		}
		if p.Strategy != "manual" || p.Stats.Waits != 2 || p.Stats.Events != 4 || p.Iteration.CrossWaits != 1 {
			t.Errorf("strategy %s, stats %+v, iteration %+v", p.Strategy, p.Stats, p.Iteration)
		}
	})
	t.Run("missing wait is a race", func(t *testing.T) {
		s := manual(spec(stage("w1", writes("out"), on("a")), stage("w2", writes("out"), on("b"))))
		p, err := Build(s, Options{Check: true}) // check mode leaves manual races to Verify
		if err != nil {
			t.Fatal(err)
		}
		var re *verify.RaceError
		if err := verify.Verify(p); !errors.As(err, &re) || len(re.Races) != 1 {
			t.Fatalf("Verify = %v, want one race", err)
		}
	})
	t.Run("wait before record", func(t *testing.T) {
		s := manual(spec(stage("r", reads("x"), on("b"), waits("w")), stage("w", writes("x"), on("a"))))
		p, err := Build(s, Options{})
		if err != nil {
			t.Fatal(err)
		}
		// Issue order is declaration order: the wait is issued before the record.
		wait, rec := -1, -1
		for k, so := range p.IssueOrder {
			switch o := p.Streams[so[0]].Ops[so[1]]; {
			case o.Kind == plan.OpWait && o.Event == 0 && wait < 0:
				wait = k
			case o.Kind == plan.OpRecord && o.Event == 0:
				rec = k
			}
		}
		if wait < 0 || rec < 0 || wait > rec {
			t.Fatalf("wait on e0 issued at %d, its record at %d: want the wait first", wait, rec)
		}
		if err := verify.Verify(p); err == nil {
			t.Fatal("Verify accepted a wait issued before its record")
		}
	})
	t.Run("streams in order of first use", func(t *testing.T) {
		s := manual(spec(stage("a", writes("x"), on("z")), stage("b", writes("y"), on("m")), stage("c", reads("x", "y"), on("z"), waits("b"))))
		p := build(t, s, Options{})
		if p.Streams[0].Name != "z" || p.Streams[1].Name != "m" {
			t.Errorf("streams %s, %s", p.Streams[0].Name, p.Streams[1].Name)
		}
	})
	t.Run("errors", func(t *testing.T) {
		if _, err := Build(manual(spec(stage("a", writes("x")))), Options{}); err == nil || !strings.Contains(err.Error(), "needs a stream") {
			t.Errorf("no stream: %v", err)
		}
		if _, err := Build(manual(spec(stage("a", writes("x"), on("s"), waits("zz")))), Options{}); err == nil || !strings.Contains(err.Error(), `names no stage "zz"`) {
			t.Errorf("unknown wait: %v", err)
		}
	})
}

// A wait across iterations and a buffer last used after every record on its
// stream: lifetimes appends an end record, which must get its event slot, so
// that the plan passes its own validation and verifies.
func TestManualLagWithEndRecord(t *testing.T) {
	s := loadSpec(t, `version: 1
sync: manual
streams:
  - {name: d, thread: t2}
  - {name: t2h, kind: host, thread: t2}
buffers:
  - {name: x, bytes: 4096}
stages:
  - {name: gate, kernel: spin, stream: host, waits: [{event: back, lag: 1}]}
  - {name: sig, kernel: spin, stream: host, event: handoff}
  - {name: rcv, kernel: spin, stream: t2h, waits: [{event: handoff}]}
  - {name: r, kernel: fill, args: {value: 1.0}, writes: [x], stream: d}
  - {name: ret, kernel: spin, stream: t2h, event: back}
`)
	p, err := Build(s, Options{})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if len(p.Iteration.Slots) != p.Events {
		t.Fatalf("%d slots for %d events", len(p.Iteration.Slots), p.Events)
	}
	if err := verify.Verify(p); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}

// A race within an iteration is reported first; the report also says how
// many races between iterations the unrolled plan shows, which the first
// report does not list (here the next iteration's write against this one's
// read on another host thread: the barrier does not order threads).
func TestManualRacesAcrossIterationsCounted(t *testing.T) {
	s := loadSpec(t, `version: 1
sync: manual
streams:
  - {name: a, kind: blocking}
  - {name: d, kind: legacy, thread: t2}
buffers:
  - {name: x, bytes: 4096, role: output}
  - {name: y, bytes: 4096, role: output}
stages:
  - {name: w, kernel: fill, args: {value: 1.0}, writes: [x], stream: a}
  - {name: r, kernel: scale, args: {a: 2.0}, reads: [x], writes: [y], stream: d}
`)
	p, err := Build(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var re *verify.RaceError
	if err := verify.Verify(p); !errors.As(err, &re) || len(re.Races) != 1 || re.AcrossIterations == 0 ||
		!strings.Contains(err.Error(), "races between stages of different iterations besides these") {
		t.Fatalf("Verify = %v, want one race and a count of those across iterations", err)
	}
}

// A wait on another thread's event recorded twice, once before the handoff
// and once not ordered with the wait: the check orders the consumer after
// neither record, and its report says so (conservative).
func TestThreadsRerecordReportedConservative(t *testing.T) {
	s := loadSpec(t, `version: 1
sync: manual
streams:
  - {name: s}
  - {name: c, thread: t2}
  - {name: t2h, kind: host, thread: t2}
buffers:
  - {name: x, bytes: 4096}
  - {name: y, bytes: 4096, role: output}
stages:
  - {name: w1, kernel: fill, args: {value: 1.0}, writes: [x], stream: s, event: ev}
  - {name: sig, kernel: spin, args: {us: 0}, stream: host, event: handoff}
  - {name: w2, kernel: fill, args: {value: 2.0}, writes: ["x[0:16]"], stream: s, event: ev}
  - {name: rcv, kernel: spin, args: {us: 0}, stream: t2h, waits: [{event: handoff}]}
  - {name: r, kernel: scale, args: {a: 2.0}, reads: [x], writes: [y], stream: c, waits: [{event: ev}]}
`)
	p, err := Build(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var re *verify.RaceError
	if err := verify.Verify(p); !errors.As(err, &re) || len(re.Races) == 0 || !strings.Contains(re.Races[0].Rule, "conservative: the wait before r") {
		t.Fatalf("Verify = %v, want races whose rule says the check is conservative", err)
	}
	// A plain missing handoff is not called conservative.
	p2, err := Build(loadSpec(t, racyThreads), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.Verify(p2); err == nil || strings.Contains(err.Error(), "conservative") {
		t.Fatalf("Verify = %v, want a race not called conservative", err)
	}
}

const racyThreads = `version: 1
sync: manual
streams:
  - {name: a, kind: blocking}
  - {name: d, kind: legacy, thread: t2}
buffers:
  - {name: x, bytes: 4096, role: output}
  - {name: y, bytes: 4096, role: output}
stages:
  - {name: w, kernel: fill, args: {value: 1.0}, writes: [x], stream: a}
  - {name: r, kernel: scale, args: {a: 2.0}, reads: [x], writes: [y], stream: d}
`
