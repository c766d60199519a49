// Package dag holds dagrun's specs: their types, the strict YAML loader, the
// writer, the hazard analysis and the operator-graph importer.
//
// A spec (Spec) is one YAML file, or a value built in Go, that declares
// buffers (bytes, where they live, their role and initial contents, copies
// for ring buffers), optional user kernels (PTX entry points and their
// parameters) and stages: kernel launches with the byte ranges each one
// reads and writes. Stages are listed in the order one stream would run
// them; that order and the read/write sets are the whole meaning of a
// `sync: auto` spec, from which the planner derives streams, events and
// waits. A `sync: manual` spec also names each stage's stream and its own
// waits, and the verifier checks them.
//
// LoadFile and Load read a spec strictly: unknown fields, wrong types, bad
// names, ranges outside their buffer and the like are reported together as
// an ErrorList, each Error with file:line:column, what is wrong and a hint.
// WriteYAML writes a spec back in a stable form.
//
// Hazards builds the hazard graph: an edge from an earlier to a later
// declared stage for each conflicting pair of accesses to overlapping bytes
// of one buffer, labelled with its kind (HazardKind):
//
//   - RAW, read after write: the later stage reads bytes the earlier wrote;
//   - WAR, write after read: the later stage overwrites bytes the earlier
//     read;
//   - WAW, write after write: both write the same bytes, and the later
//     value must win;
//
// plus an edge for each `after:` entry. Accesses whose bytes were all
// overwritten since are superseded, and a pair that other edges already
// order gets no edge where that is cheap to find (a stage reading what
// every earlier stage appended to a buffer gets one edge), so the graph
// stays near the size of the spec. AllHazards keeps those implied edges:
// the whole hazard DAG, for the planner's hazard-dag strategy.
//
// ReadGraphFile and ImportGraph turn an operator graph exported from
// PyTorch (scripts/export_graph.py) into a spec.
//
// The format, field by field, with an example for each feature, is
// docs/spec.md.
package dag
