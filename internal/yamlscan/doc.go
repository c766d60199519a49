// Package yamlscan is a streaming parser for JSON and for the plain subset
// of YAML that machine-written specs (dag.WriteYAML's output) and most
// hand-written ones use: block mappings and lists, flow lists and
// mappings, one-line plain and quoted scalars, comments. It builds the
// same yaml.Node trees as gopkg.in/yaml.v3 (kinds, tags, values,
// line:column), but hands each item of the root mapping's lists named in
// Options.Stream (a spec's buffers, kernels and stages) to a callback once
// it is parsed, and reuses the item's nodes for later ones: only the nodes
// of a few batches of items are alive at a time, where yaml.v3 holds the
// whole document's (about 4 KB per stage). The callback runs on a
// goroutine of its own, Batch items at a time in file order, while the
// scanner parses the next batch; Scan returns once it has taken every
// item, whether the scan succeeded or not.
//
// The text has LF line endings (the loader reads CRLF ones as LF ones,
// which keeps every line:column), and one document start marker (---) may
// head it. For YAML, anything outside the subset (anchors and aliases,
// tags, block scalars, multi-line scalars, other document markers and
// directives, tabs, a CR that does not end a line, characters yaml.v3
// does not take as printable, JSON's escapes that yaml.v3 refuses, syntax
// errors) makes Scan give up with ErrOutsideSubset, and the caller parses
// the text with yaml.v3 instead, so that every YAML file means what
// yaml.v3 says and gets its messages. For JSON (RFC 8259) the scanner is
// the parser and reports syntax errors itself (*JSONError).
//
// The contract is yaml.v3's: the package's tests parse every spec and
// operator graph of the repository (the specs also after a document start
// marker) and a list of constructs outside the subset with both parsers
// and require the same tree or a give-up, streamed items included, and
// FuzzScan does so on arbitrary text. The loader's own tests (dag) hold
// Load through the scanner to Load through yaml.v3, errors included, and
// with CRLF line endings.
//
// BenchmarkScan measures the scanner against yaml.v3 on the same
// machine-written spec of 10,000 and 100,000 stages
// (go test -bench . -benchtime 1x ./internal/yamlscan); docs/performance.md
// ("How the command keeps up with the planner") has its figures.
package yamlscan
