package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"kpbench.dev/kpbench/internal/version"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print kpbench's version",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprint(cmd.OutOrStdout(), versionLine())
			return nil
		},
	}
}

// versionLine is what `kpbench version` and `kpbench --version` print: the commit and
// the Go version.
func versionLine() string {
	return fmt.Sprintf("kpbench %s (%s)\n", version.Commit, runtime.Version())
}

// addVersionFlag gives root a --version flag that prints versionLine, as the version
// command does (no -v shorthand: that letter means verbose to most tools).
func addVersionFlag(root *cobra.Command) {
	root.Version = version.Commit
	root.Flags().Bool("version", false, "print kpbench's version (as `kpbench version` does)")
	root.SetVersionTemplate(versionLine()) // plain text: a template without actions
}
