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
			fmt.Fprintf(cmd.OutOrStdout(), "kpbench %s (%s)\n", version.Commit, runtime.Version())
			return nil
		},
	}
}
