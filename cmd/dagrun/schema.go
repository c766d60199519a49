package main

import (
	"io"

	"github.com/dagrun/dagrun/internal/schema"
	"github.com/spf13/cobra"
)

func newSchemaCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of specs (for editors: docs/spec.md, Editor support)",
		Long: `schema prints a JSON Schema (draft 2020-12) of the spec format, generated
from the loader's own field tables; docs/spec.schema.json is the same
schema. Editors that validate YAML against a JSON Schema (VS Code's YAML
extension, JetBrains IDEs, yaml-language-server) use it to check and
complete specs as you type.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			b, err := schema.Spec()
			if err != nil {
				return failure{err}
			}
			_, err = stdout.Write(b)
			return err
		},
	}
}
