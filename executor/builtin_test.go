package executor_test

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dagrun/dagrun/contract"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
)

// contractBuffers are the buffers every contractCase may name, by size.
var contractBuffers = map[string]int64{"a": 64, "b": 64, "big": 4096}

// contractCase is one launch of a built-in: a stage of a spec and a
// LaunchDesc. want is the rule the launch breaks first, "" if it is valid;
// arg, for argument rules, the argument concerned.
type contractCase struct {
	name          string
	kernel        string
	args          map[string]any // as the loader decodes YAML: int, float64, string
	reads, writes []string       // "buf[start:end]"
	want          contract.Rule
	arg           string
}

func rs(accs ...string) []string { return accs }

var contractCases = []contractCase{
	{"fill value", "fill", map[string]any{"value": 1.5}, nil, rs("a[0:64]"), "", ""},
	{"fill bits", "fill", map[string]any{"bits": 0x3fc00000}, nil, rs("a[4:12]"), "", ""},
	{"fill reads", "fill", map[string]any{"value": 1.0}, rs("b[0:64]"), rs("a[0:64]"), contract.RuleArity, ""},
	{"fill two writes", "fill", map[string]any{"value": 1.0}, nil, rs("a[0:64]", "b[0:64]"), contract.RuleArity, ""},
	{"fill unaligned", "fill", map[string]any{"value": 1.0}, nil, rs("a[2:6]"), contract.RuleAlign, ""},
	{"fill odd length", "fill", map[string]any{"value": 1.0}, nil, rs("a[0:6]"), contract.RuleAlign, ""},
	{"fill no args", "fill", nil, nil, rs("a[0:64]"), contract.RuleArgOneOf, ""},
	{"fill both args", "fill", map[string]any{"value": 1.0, "bits": 2}, nil, rs("a[0:64]"), contract.RuleArgOneOf, ""},
	{"fill value overflow", "fill", map[string]any{"value": 1e40}, nil, rs("a[0:64]"), contract.RuleArgValue, "value"},
	{"fill value string", "fill", map[string]any{"value": "one"}, nil, rs("a[0:64]"), contract.RuleArgValue, "value"},
	{"fill bits negative", "fill", map[string]any{"bits": -1}, nil, rs("a[0:64]"), contract.RuleArgValue, "bits"},
	{"fill bits past uint32", "fill", map[string]any{"bits": 1 << 32}, nil, rs("a[0:64]"), contract.RuleArgValue, "bits"},
	{"fill bits fraction", "fill", map[string]any{"bits": 1.5}, nil, rs("a[0:64]"), contract.RuleArgValue, "bits"},
	{"fill unknown arg", "fill", map[string]any{"value": 1.0, "a": 2}, nil, rs("a[0:64]"), contract.RuleArgUnknown, "a"},

	{"copy", "copy", nil, rs("a[0:64]"), rs("b[0:64]"), "", ""},
	{"copy in place", "copy", nil, rs("a[0:64]"), rs("a[0:64]"), "", ""},
	{"copy two reads", "copy", nil, rs("a[0:64]", "b[0:64]"), rs("big[0:64]"), contract.RuleArity, ""},
	{"copy no write", "copy", nil, rs("a[0:64]"), nil, contract.RuleArity, ""},
	{"copy unaligned read", "copy", nil, rs("a[1:5]"), rs("b[0:4]"), contract.RuleAlign, ""},
	{"copy sizes", "copy", nil, rs("a[0:32]"), rs("b[0:64]"), contract.RuleSameSize, ""},
	{"copy partial overlap", "copy", nil, rs("big[0:64]"), rs("big[32:96]"), contract.RuleInPlace, ""},
	{"copy takes no args", "copy", map[string]any{"a": 1}, rs("a[0:64]"), rs("b[0:64]"), contract.RuleArgUnknown, "a"},

	{"scale", "scale", map[string]any{"a": 2}, rs("a[0:64]"), rs("b[0:64]"), "", ""},
	{"scale in place", "scale", map[string]any{"a": -0.5}, rs("big[64:128]"), rs("big[64:128]"), "", ""},
	{"scale no read", "scale", map[string]any{"a": 2}, nil, rs("b[0:64]"), contract.RuleArity, ""},
	{"scale unaligned", "scale", map[string]any{"a": 2}, rs("a[0:6]"), rs("b[0:6]"), contract.RuleAlign, ""},
	{"scale sizes", "scale", map[string]any{"a": 2}, rs("a[0:64]"), rs("big[0:128]"), contract.RuleSameSize, ""},
	{"scale partial overlap", "scale", map[string]any{"a": 2}, rs("big[0:64]"), rs("big[32:96]"), contract.RuleInPlace, ""},
	{"scale missing a", "scale", nil, rs("a[0:64]"), rs("b[0:64]"), contract.RuleArgMissing, "a"},
	{"scale a overflow", "scale", map[string]any{"a": -1e39}, rs("a[0:64]"), rs("b[0:64]"), contract.RuleArgValue, "a"},
	{"scale a string", "scale", map[string]any{"a": "two"}, rs("a[0:64]"), rs("b[0:64]"), contract.RuleArgValue, "a"},
	{"scale unknown arg", "scale", map[string]any{"a": 2, "b": 1}, rs("a[0:64]"), rs("b[0:64]"), contract.RuleArgUnknown, "b"},

	{"axpy", "axpy", map[string]any{"a": 0.75}, rs("a[0:64]", "b[0:64]"), rs("b[0:64]"), "", ""},
	{"axpy one read", "axpy", map[string]any{"a": 2}, rs("a[0:64]"), rs("a[0:64]"), contract.RuleArity, ""},
	{"axpy unaligned", "axpy", map[string]any{"a": 2}, rs("a[0:62]", "b[0:62]"), rs("b[0:62]"), contract.RuleAlign, ""},
	{"axpy sizes", "axpy", map[string]any{"a": 2}, rs("a[0:32]", "b[0:64]"), rs("b[0:64]"), contract.RuleSameSize, ""},
	{"axpy write is not y", "axpy", map[string]any{"a": 2}, rs("a[0:64]", "b[0:64]"), rs("big[0:64]"), contract.RuleSameRange, ""},
	{"axpy x overlaps y", "axpy", map[string]any{"a": 2}, rs("big[0:64]", "big[32:96]"), rs("big[32:96]"), contract.RuleInPlace, ""},
	{"axpy missing a", "axpy", nil, rs("a[0:64]", "b[0:64]"), rs("b[0:64]"), contract.RuleArgMissing, "a"},
	{"axpy a overflow", "axpy", map[string]any{"a": 1e39}, rs("a[0:64]", "b[0:64]"), rs("b[0:64]"), contract.RuleArgValue, "a"},
	{"axpy unknown arg", "axpy", map[string]any{"a": 2, "us": 1}, rs("a[0:64]", "b[0:64]"), rs("b[0:64]"), contract.RuleArgUnknown, "us"},

	{"mix", "mix", nil, nil, rs("a[0:64]"), "", ""},
	{"mix reads and writes", "mix", map[string]any{"spin_us": 1.5, "max_words": 2}, rs("a[0:64]", "big[0:4096]"), rs("b[0:32]", "b[32:64]"), "", ""},
	{"mix in place", "mix", nil, rs("a[0:64]", "b[0:16]"), rs("a[0:64]"), "", ""},
	{"mix no write", "mix", nil, rs("a[0:64]"), nil, contract.RuleArity, ""},
	{"mix unaligned", "mix", nil, nil, rs("a[2:6]"), contract.RuleAlign, ""},
	{"mix partial overlap", "mix", nil, rs("a[0:32]"), rs("a[16:48]"), contract.RuleInPlace, ""},
	{"mix max_words zero", "mix", map[string]any{"max_words": 0}, nil, rs("a[0:64]"), contract.RuleArgValue, "max_words"},
	{"mix max_words fraction", "mix", map[string]any{"max_words": 1.5}, nil, rs("a[0:64]"), contract.RuleArgValue, "max_words"},
	{"mix spin_us negative", "mix", map[string]any{"spin_us": -3}, nil, rs("a[0:64]"), contract.RuleArgValue, "spin_us"},
	{"mix spin_us string", "mix", map[string]any{"spin_us": "long"}, nil, rs("a[0:64]"), contract.RuleArgValue, "spin_us"},
	{"mix unknown arg", "mix", map[string]any{"spinus": 3}, nil, rs("a[0:64]"), contract.RuleArgUnknown, "spinus"},

	{"spin", "spin", nil, nil, nil, "", ""},
	{"spin us", "spin", map[string]any{"us": 10}, rs("a[0:64]"), rs("a[0:64]"), "", ""},
	{"spin accesses only order", "spin", nil, rs("big[0:64]", "a[0:64]"), rs("big[32:96]"), "", ""},
	{"spin unaligned", "spin", nil, rs("a[1:5]"), nil, contract.RuleAlign, ""},
	{"spin us negative", "spin", map[string]any{"us": -1}, nil, nil, contract.RuleArgValue, "us"},
	{"spin us string", "spin", map[string]any{"us": "long"}, nil, nil, contract.RuleArgValue, "us"},
	{"spin unknown arg", "spin", map[string]any{"spin_us": 1}, nil, nil, contract.RuleArgUnknown, "spin_us"},

	{"checksum", "checksum", nil, rs("big[0:4096]"), rs("a[0:8]"), "", ""},
	{"checksum into the read's buffer", "checksum", nil, rs("a[0:32]"), rs("a[32:64]"), "", ""},
	{"checksum two reads", "checksum", nil, rs("a[0:64]", "big[0:64]"), rs("b[0:8]"), contract.RuleArity, ""},
	{"checksum unaligned", "checksum", nil, rs("a[0:64]"), rs("b[0:10]"), contract.RuleAlign, ""},
	{"checksum small", "checksum", nil, rs("a[0:64]"), rs("b[0:4]"), contract.RuleMinBytes, ""},
	{"checksum overlap", "checksum", nil, rs("a[0:64]"), rs("a[0:8]"), contract.RuleDisjoint, ""},
	{"checksum in place", "checksum", nil, rs("a[0:8]"), rs("a[0:8]"), contract.RuleDisjoint, ""},
	{"checksum takes no args", "checksum", map[string]any{"a": 1}, rs("a[0:64]"), rs("b[0:8]"), contract.RuleArgUnknown, "a"},
	// all_reduce's buffers are on devices of their own (spec puts each on one).
	{"all_reduce", "all_reduce", map[string]any{"op": "sum"}, rs("a[0:64]", "b[0:64]"), rs("a[0:64]", "b[0:64]"), "", ""},
	{"all_reduce out of place", "all_reduce", map[string]any{"op": "sum"}, rs("a[0:32]", "b[0:32]"), rs("a[32:64]", "b[32:64]"), "", ""},
	{"all_reduce no reads", "all_reduce", map[string]any{"op": "sum"}, nil, rs("a[0:64]"), contract.RuleArity, ""},
	{"all_reduce unaligned", "all_reduce", map[string]any{"op": "sum"}, rs("a[0:6]", "b[0:6]"), rs("a[0:6]", "b[0:6]"), contract.RuleAlign, ""},
	{"all_reduce overlap", "all_reduce", map[string]any{"op": "sum"}, rs("a[0:32]", "b[0:32]"), rs("a[4:36]", "b[0:32]"), contract.RuleInPlace, ""},
	{"all_reduce op max", "all_reduce", map[string]any{"op": "max"}, rs("a[0:64]", "b[0:64]"), rs("a[0:64]", "b[0:64]"), contract.RuleArgValue, "op"},
	{"all_reduce op number", "all_reduce", map[string]any{"op": 1}, rs("a[0:64]", "b[0:64]"), rs("a[0:64]", "b[0:64]"), contract.RuleArgValue, "op"},
	{"all_reduce no op", "all_reduce", nil, rs("a[0:64]", "b[0:64]"), rs("a[0:64]", "b[0:64]"), contract.RuleArgMissing, "op"},
	{"all_reduce unknown arg", "all_reduce", map[string]any{"op": "sum", "a": 1}, rs("a[0:64]", "b[0:64]"), rs("a[0:64]", "b[0:64]"), contract.RuleArgUnknown, "a"},
}

// yamlValue writes v so that the loader decodes it back to the same Go value.
func yamlValue(t *testing.T, v any) string {
	switch v := v.(type) {
	case int:
		return strconv.Itoa(v)
	case float64:
		s := strconv.FormatFloat(v, 'g', -1, 64)
		if !strings.ContainsAny(s, ".e") {
			s += ".0"
		}
		return s
	case string:
		return strconv.Quote(v)
	}
	t.Fatalf("bad test: argument %#v", v)
	return ""
}

// spec is the case as a spec with the buffers and one stage s.
func (c contractCase) spec(t *testing.T) string {
	var b strings.Builder
	b.WriteString("version: 1\nbuffers:\n")
	for i, name := range slices.Sorted(maps.Keys(contractBuffers)) {
		if contract.IsCollective(c.kernel) { // one rank per device
			fmt.Fprintf(&b, "  - {name: %s, bytes: %d, device: %d}\n", name, contractBuffers[name], i)
			continue
		}
		fmt.Fprintf(&b, "  - {name: %s, bytes: %d}\n", name, contractBuffers[name])
	}
	fmt.Fprintf(&b, "stages:\n  - {name: s, kernel: %s", c.kernel)
	if len(c.args) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(c.args)) {
			kv = append(kv, k+": "+yamlValue(t, c.args[k]))
		}
		fmt.Fprintf(&b, ", args: {%s}", strings.Join(kv, ", "))
	}
	for _, l := range []struct {
		field string
		accs  []string
	}{{"reads", c.reads}, {"writes", c.writes}} {
		if len(l.accs) > 0 {
			fmt.Fprintf(&b, ", %s: [\"%s\"]", l.field, strings.Join(l.accs, `", "`))
		}
	}
	b.WriteString("}\n")
	return b.String()
}

// launch is the case as a LaunchDesc.
func (c contractCase) launch(t *testing.T) *executor.LaunchDesc {
	args := func(accs []string) []executor.Arg {
		var out []executor.Arg
		for _, a := range accs {
			var start, end int64
			name, rng, _ := strings.Cut(strings.TrimSuffix(a, "]"), "[")
			if _, err := fmt.Sscanf(rng, "%d:%d", &start, &end); err != nil || contractBuffers[name] == 0 {
				t.Fatalf("bad test: access %q", a)
			}
			out = append(out, executor.Arg{Name: name, Offset: start, Bytes: end - start})
		}
		return out
	}
	return &executor.LaunchDesc{Name: "s", Kernel: c.kernel, Args: c.args, Reads: args(c.reads), Writes: args(c.writes)}
}

// TestBuiltinContractLoaderAndExecutor runs every case through the spec
// loader and through executor.CheckLaunch: both accept the valid ones, and
// both reject the others for the rule the case names, with the same message.
func TestBuiltinContractLoaderAndExecutor(t *testing.T) {
	for _, c := range contractCases {
		t.Run(c.name, func(t *testing.T) {
			src := c.spec(t)
			spec, loadErr := dag.Load([]byte(src), "contract.yaml", "")
			launchErr := executor.CheckLaunch(c.launch(t))
			if c.want == "" {
				if loadErr != nil {
					t.Errorf("loader rejects a valid launch:\n%s%v", src, loadErr)
				} else if got := spec.Stages[0].Args; !reflect.DeepEqual(got, c.args) && (len(got) > 0 || len(c.args) > 0) {
					t.Errorf("bad test: the spec's args decode to %#v, want %#v", got, c.args)
				}
				if launchErr != nil {
					t.Errorf("CheckLaunch rejects a valid launch: %v", launchErr)
				}
				return
			}
			var v *contract.Violation
			if !errors.As(launchErr, &v) {
				t.Fatalf("CheckLaunch = %v, want a *contract.Violation of rule %s", launchErr, c.want)
			}
			if v.Rule != c.want || v.Arg != c.arg || v.Kernel != c.kernel {
				t.Errorf("CheckLaunch breaks rule %s (kernel %q, arg %q): %v; want rule %s, arg %q", v.Rule, v.Kernel, v.Arg, v, c.want, c.arg)
			}
			var list dag.ErrorList
			if !errors.As(loadErr, &list) {
				t.Fatalf("loader accepts the launch that CheckLaunch rejects with %q:\n%s", v, src)
			}
			want := "stage s: " + v.Msg
			found := false
			for _, e := range list {
				found = found || e.Msg == want
			}
			if !found {
				t.Errorf("loader errors do not include %q:\n%v", want, loadErr)
			}
		})
	}
}

// TestIntegerArgumentLiterals: an integer argument written as a float
// literal is a spec error (the format writes integers as integers), while
// the same number from Go or a plan file, where 64 and 64.0 are one value,
// passes CheckLaunch.
func TestIntegerArgumentLiterals(t *testing.T) {
	for _, c := range []contractCase{
		{"bits", "fill", map[string]any{"bits": 2.0}, nil, rs("a[0:64]"), "", ""},
		{"max_words", "mix", map[string]any{"max_words": 2.0}, nil, rs("a[0:64]"), "", ""},
	} {
		if err := executor.CheckLaunch(c.launch(t)); err != nil {
			t.Errorf("%s: CheckLaunch: %v", c.name, err)
		}
		_, err := dag.Load([]byte(c.spec(t)), "contract.yaml", "")
		if err == nil || !strings.Contains(err.Error(), "argument "+c.name+" must be") || !strings.Contains(err.Error(), "got 2.0") {
			t.Errorf("%s: loader: %v, want an error for the float literal", c.name, err)
		}
	}
}

// TestHostKernelsRun checks that executor.HostKernel runs every built-in
// the table lets a host stage run, on the table's example arguments.
func TestHostKernelsRun(t *testing.T) {
	for _, name := range contract.HostKernels() {
		var c *contractCase
		for i := range contractCases {
			if k := &contractCases[i]; k.kernel == name && k.want == "" && c == nil {
				c = k
			}
		}
		if c == nil {
			t.Fatalf("no valid case of host kernel %s", name)
		}
		l := c.launch(t)
		in := make([][]byte, len(l.Reads))
		for i, a := range l.Reads {
			in[i] = make([]byte, a.Bytes)
		}
		out, err := executor.HostKernel(l, in)
		if err != nil || len(out) != len(l.Writes) {
			t.Errorf("HostKernel(%s) = %d writes, %v", name, len(out), err)
		}
	}
}

// TestAllocModes checks that the executor's allocation modes are the
// contract's.
func TestAllocModes(t *testing.T) {
	if executor.AllocStatic != string(contract.AllocStatic) || executor.AllocDynamic != string(contract.AllocDynamic) {
		t.Errorf("executor alloc modes %q, %q; contract %q, %q", executor.AllocStatic, executor.AllocDynamic, contract.AllocStatic, contract.AllocDynamic)
	}
}

// TestBuiltinContractCasesCoverTable checks that contractCases exercise
// every rule of the built-in table: a valid launch of each built-in, its
// arity and alignment, each access rule, each argument's schema, unknown
// and missing arguments and OneOf.
func TestBuiltinContractCasesCoverTable(t *testing.T) {
	type key struct {
		kernel string
		rule   contract.Rule
		arg    string
	}
	have := map[key]bool{}
	for _, c := range contractCases {
		have[key{c.kernel, c.want, c.arg}] = true
	}
	for _, b := range contract.Builtins() {
		need := []key{{b.Name, "", ""}, {b.Name, contract.RuleAlign, ""}, {b.Name, contract.RuleArgUnknown, ""}}
		if b.Reads != (contract.Arity{Min: 0, Max: -1}) || b.Writes != (contract.Arity{Min: 0, Max: -1}) {
			need = append(need, key{b.Name, contract.RuleArity, ""})
		}
		for _, r := range b.Rules {
			need = append(need, key{b.Name, r.Rule, ""})
		}
		for _, a := range b.Args {
			need = append(need, key{b.Name, contract.RuleArgValue, a.Name})
			if a.Required {
				need = append(need, key{b.Name, contract.RuleArgMissing, a.Name})
			}
		}
		if len(b.OneOf) > 0 {
			need = append(need, key{b.Name, contract.RuleArgOneOf, ""})
		}
		for _, k := range need {
			if k.rule == contract.RuleArgUnknown {
				found := false
				for h := range have {
					found = found || h.kernel == k.kernel && h.rule == k.rule
				}
				if found {
					continue
				}
			}
			if !have[k] {
				t.Errorf("no case of built-in %s for rule %q (arg %q)", k.kernel, k.rule, k.arg)
			}
		}
	}
}
