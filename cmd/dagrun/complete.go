package main

// Shell completion (dagrun completion bash|zsh|fish|powershell): the values
// of the flags that take one of a few words, spec and plan files by
// extension, folders for the flags that take one. The word lists are the
// ones the flags' checks accept (TestCompletionValuesAccepted).

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dagrun/dagrun"
	"github.com/dagrun/dagrun/internal/cmdline"
)

// flagValues are the words each flag takes, by flag name: what the shell
// completes and what oneOf accepts.
var flagValues = map[string][]string{
	"backend":  {string(dagrun.BackendAuto), string(dagrun.BackendSim), string(dagrun.BackendCUDA)},
	"format":   {"table", "json", "dot", "mermaid"},
	"strategy": {string(dagrun.StrategyDefault), string(dagrun.StrategySingle), string(dagrun.StrategyRoundRobin), string(dagrun.StrategyNaive), string(dagrun.StrategyHazardDAG)},
	"mode":     {string(dagrun.ModeStreams), string(dagrun.ModeGraph)},
	"arena":    {dagrun.ArenaPlanned, dagrun.ArenaOff, dagrun.ArenaStreamOrder},
	"alloc":    {dagrun.AllocStatic, dagrun.AllocDynamic},
	"progress": {"auto", "on", "off"},
	"check":    {"auto", "video", "none"},
}

// oneOf returns nil when value is one of the words flag takes
// (flagValues), else a usage error that lists them: "--backend "gpu": want
// auto, sim or cuda".
func oneOf[T ~string](flag string, value T) error {
	words := flagValues[flag]
	if slices.Contains(words, string(value)) {
		return nil
	}
	want := words[len(words)-1]
	if len(words) > 1 {
		want = strings.Join(words[:len(words)-1], ", ") + " or " + want
	}
	return usagef("--%s %q: want %s", flag, value, want)
}

// fileFlags complete file names with these extensions; dirFlags folders.
var (
	fileFlags = map[string][]string{"plan": {"json"}, "trace": {"json"}, "timeline": {"png"}, "output": {"yaml"}, "plot": {"png"}}
	dirFlags  = []string{"frames", "out"}
)

// addCompletions registers the completions of every command under root.
func addCompletions(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			switch {
			case flagValues[f.Name] != nil:
				vals := flagValues[f.Name]
				c.RegisterFlagCompletionFunc(f.Name, cobra.FixedCompletions(vals, cobra.ShellCompDirectiveNoFileComp))
			case f.Name == "dump-after":
				c.RegisterFlagCompletionFunc(f.Name, cobra.FixedCompletions(cmdline.Passes(), cobra.ShellCompDirectiveNoFileComp))
			case fileFlags[f.Name] != nil:
				c.MarkFlagFilename(f.Name, fileFlags[f.Name]...)
			case contains(dirFlags, f.Name):
				c.MarkFlagDirname(f.Name)
			}
		})
		if c.Args != nil && c.ValidArgsFunction == nil && c.HasParent() {
			exts := specExts(c)
			c.ValidArgsFunction = func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
				if exts == nil {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return exts, cobra.ShellCompDirectiveFilterFileExt
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// specExts are the file extensions a command's arguments take: specs
// (YAML or JSON), graphs for import (JSON); nil for commands without file
// arguments.
func specExts(c *cobra.Command) []string {
	switch {
	case c.Name() == "import":
		return []string{"json"}
	case strings.Contains(c.Use, "SPEC"):
		return []string{"yaml", "yml", "json"}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ownDefaults drops pflag's "(default …)" from the help of the flags whose
// usage states the default in words already ("(default: the spec's …)"),
// so no flag prints its default twice.
func ownDefaults(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "(default") {
				f.DefValue = zeroText(f.Value.Type()) // pflag leaves zero defaults out
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// zeroText is the text of a flag type's zero value, as pflag tests it.
func zeroText(typ string) string {
	switch {
	case typ == "bool":
		return "false"
	case typ == "duration":
		return "0s"
	case strings.HasPrefix(typ, "int"), strings.HasPrefix(typ, "uint"), strings.HasPrefix(typ, "float"):
		return "0"
	}
	return ""
}

// pathFlags are the flags that name a file or folder to read or write.
var pathFlags = []string{"out", "trace", "timeline", "frames", "plan", "output", "write", "plot", "graphs"}

// refuseEmptyPaths makes a path flag given an empty value (`--out "$DIR"`
// with DIR unset) a usage error before any work, not the flag left out,
// and likewise an empty argument where a command reads files (`dagrun
// plan "$SPEC"` with SPEC unset), which would otherwise be a file that
// cannot be read, named by a placeholder.
func refuseEmptyPaths(root *cobra.Command) {
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		for _, name := range pathFlags {
			if f := cmd.Flags().Lookup(name); f != nil && f.Changed && f.Value.String() == "" {
				return usagef("--%s '': empty; give a path, or leave the flag out", name)
			}
		}
		switch {
		case cmd.Name() == "help", cmd.Name() == "completion", cmd.HasParent() && cmd.Parent().Name() == "completion",
			cmd.Name() == cobra.ShellCompRequestCmd, cmd.Name() == cobra.ShellCompNoDescRequestCmd:
			return nil // command names, shells, and the word being completed
		}
		for _, a := range args {
			if a == "" {
				return usagef("an empty argument (''): %s reads files; give each one's path", cmd.CommandPath())
			}
		}
		return nil
	}
}

// refuseUnknownShell makes `dagrun completion SHELL` with a shell it has no
// script for a usage error (exit 2), not the help text with exit 0 that a
// `source <(dagrun completion $SHELL)` would load into the shell.
func refuseUnknownShell(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		var shells []string
		for _, sh := range c.Commands() {
			shells = append(shells, sh.Name())
		}
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return usagef("completion: unknown shell %q: want one of %s", args[0], strings.Join(shells, ", "))
		}
	}
}
