package planner

import (
	"errors"
	"strings"
	"testing"
)

func TestManual(t *testing.T) {
	t.Run("hand-synchronized", func(t *testing.T) {
		s := manual(spec(stage("w1", writes("out"), on("a")), stage("w2", writes("out"), on("b"), waits("w1"))))
		p := build(t, s, Options{})
		if got, want := ops(p), "a: w1 rec0\nb: wait0 w2 rec1\n"; got != want {
			t.Errorf("ops\n%swant\n%s", got, want)
		}
		if p.Strategy != "manual" || p.Stats.Waits != 1 || p.Stats.Events != 2 {
			t.Errorf("strategy %s, stats %+v", p.Strategy, p.Stats)
		}
	})
	t.Run("missing wait is a race", func(t *testing.T) {
		s := manual(spec(stage("w1", writes("out"), on("a")), stage("w2", writes("out"), on("b"))))
		p, err := Build(s, Options{Check: true}) // check mode leaves manual races to Verify
		if err != nil {
			t.Fatal(err)
		}
		var re *RaceError
		if err := Verify(p); !errors.As(err, &re) || len(re.Races) != 1 {
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
		first := p.Streams[p.IssueOrder[0][0]].Ops[p.IssueOrder[0][1]]
		if first.Kind != OpWait {
			t.Fatalf("first issued op %v, want the wait", first)
		}
		if err := Verify(p); err == nil {
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
