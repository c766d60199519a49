package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagIs is a condition on one flag: given on the command line (value ""),
// or given with that value (a bool flag: "true").
type flagIs struct{ name, value string }

func (f flagIs) holds(fs *pflag.FlagSet) bool {
	fl := fs.Lookup(f.name)
	if fl == nil || !fl.Changed {
		return false
	}
	return f.value == "" || fl.Value.String() == f.value
}

func (f flagIs) String() string {
	if f.value == "" || f.value == "true" {
		return "--" + f.name
	}
	return "--" + f.name + " " + f.value
}

// conflict is a pair of flag conditions that cannot hold together, and why.
type conflict struct {
	a, b flagIs
	why  string
}

// plannerFlags are the flags of planFlags: they plan a spec, so a plan file
// (--plan) cannot take them.
var plannerFlags = []string{"strategy", "max-streams", "check-passes", "stream-sets", "dump-after", "arena", "memory-budget"}

// planFileConflicts rejects planner flags with --plan (check and run).
var planFileConflicts = func() []conflict {
	var cs []conflict
	for _, f := range plannerFlags {
		cs = append(cs, conflict{flagIs{"plan", ""}, flagIs{f, ""}, "a plan file is planned already; plan the spec with it instead"})
	}
	return cs
}()

// runConflicts are run's flag pairs that contradict each other.
var runConflicts = append([]conflict{
	{flagIs{"mode", "graph"}, flagIs{"sync-each", "true"}, "a graph capture cannot synchronize after each op; use --mode streams to find a faulting stage"},
	{flagIs{"alloc", "dynamic"}, flagIs{"mode", "graph"}, "a graph is captured once, with every buffer allocated before it; use --mode streams"},
	{flagIs{"frames", ""}, flagIs{"mode", "graph"}, "a stream of inputs runs in stream mode, with host waits between iterations that a graph replay cannot make"},
	{flagIs{"frames", ""}, flagIs{"json", ""}, "a streamed run prints its figures as text; use --out DIR for its outputs"},
	{flagIs{"alloc", "dynamic"}, flagIs{"arena", "planned"}, "dynamic allocation gives every temp its own stream-ordered allocation, so no arena is used"},
	{flagIs{"alloc", "dynamic"}, flagIs{"arena", "stream-order"}, "dynamic allocation gives every temp its own stream-ordered allocation, so no arena is used"},
	{flagIs{"seed", ""}, flagIs{"backend", "cuda"}, "--seed seeds the simulator's delays"},
	{flagIs{"devices", ""}, flagIs{"backend", "sim"}, "--devices maps plan devices onto GPU ordinals; the simulator simulates every plan device"},
}, planFileConflicts...)

// checkConflicts returns a usage error for the first pair of cs that the
// command line of cmd sets, before any work is done.
func checkConflicts(cmd *cobra.Command, cs []conflict) error {
	fs := cmd.Flags()
	for _, c := range cs {
		if c.a.holds(fs) && c.b.holds(fs) {
			return usagef("%s conflicts with %s: %s", c.a, c.b, c.why)
		}
	}
	return nil
}
