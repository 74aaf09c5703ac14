package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"kpbench.dev/kpbench/lab"
)

// What `lab` and `cluster` share: both build something that records itself in a registry
// (lab.Records), keep it until Ctrl-C or in the background, and show, list and remove it.

// labRegistryFlag adds --registry, the directory of lab records, to fs.
func labRegistryFlag(fs *pflag.FlagSet, dir *string) {
	fs.StringVar(dir, "registry", lab.DefaultRegistryDir, "directory of lab records")
}

// holdUntilDone keeps what this process built (kind name) until ctx ends (Ctrl-C,
// SIGTERM), then tears it down with down.
func holdUntilDone(ctx context.Context, out io.Writer, kind, name string, down func(context.Context) error) error {
	fmt.Fprintln(out, "Ctrl-C tears it down.")
	<-ctx.Done()
	fmt.Fprintf(out, "tearing down %s %s\n", kind, name)
	return down(context.WithoutCancel(ctx))
}

// printWarnings prints what was built short of what was asked.
func printWarnings(out io.Writer, warnings []string) {
	for _, w := range warnings {
		fmt.Fprintln(out, "warning:", w)
	}
}

// checkOutput refuses an -o other than table and json.
func checkOutput(output string) error {
	if output != "table" && output != "json" {
		return badInput("-o %q: allowed values are table, json", output)
	}
	return nil
}

// printAs writes v as indented JSON with -o json, else calls table.
func printAs(out io.Writer, output string, v any, table func() error) error {
	if output != "json" {
		return table()
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newStatusCmd is `<kind> status --name NAME [-o json]`: status reads the named record
// into its JSON form, which table prints as a table. The caller adds its directory flags.
func newStatusCmd[S any](kind, short, example string, status func(name string) (S, error), table func(io.Writer, S) error) *cobra.Command {
	var name, output string
	cmd := &cobra.Command{
		Use:     "status --name NAME [-o json]",
		Short:   short,
		Example: example,
		Args:    exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			st, err := status(name)
			if err != nil {
				return unknownIsBadInput(err)
			}
			return printAs(cmd.OutOrStdout(), output, st, func() error { return table(cmd.OutOrStdout(), st) })
		},
	}
	cmd.Flags().StringVar(&name, "name", "", kind+" name (required)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

// unknownIsBadInput makes a name with no record a usage error (exit 2).
func unknownIsBadInput(err error) error {
	if errors.Is(err, lab.ErrNotRegistered) {
		return usageError{err}
	}
	return err
}

// listRecords writes a table with header and the row of every record of recs; a record
// that does not read (removed or being replaced meanwhile) is left out.
func listRecords[R any](out io.Writer, recs lab.Records, header string, row func(rec *R) string) error {
	names, err := recs.List()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, n := range names {
		if rec, err := lab.ReadRecord[R](recs, n); err == nil {
			fmt.Fprintln(tw, row(rec))
		}
	}
	return tw.Flush()
}

// newListCmd is `<kind> list`: a table with header and the row of every record of
// records() (read when the command runs, after its flags).
func newListCmd[R any](short, header string, records func() lab.Records, row func(rec *R) string) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: short,
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listRecords(cmd.OutOrStdout(), records(), header, row)
		},
	}
}

// newDownCmd is `<kind> down (--name NAME | --all [--force])`, run by downFlags.run with
// byName and downAll; allDoc says what --all removes. The caller adds its directory flags.
func newDownCmd(kind, short, example, allDoc string, byName func(string) error,
	downAll func(force bool) (removed, refused []string, more string, err error)) *cobra.Command {
	var f downFlags
	cmd := &cobra.Command{
		Use:     "down (--name NAME | --all [--force])",
		Short:   short,
		Example: example,
		Args:    exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd, kind, byName, downAll)
		},
	}
	f.add(cmd.Flags(), kind, allDoc)
	return cmd
}

// downFlags are the flags of `lab down` and `cluster down`.
type downFlags struct {
	name       string
	all, force bool
}

// add adds --name, --all and --force for things of kind; allDoc says what --all removes.
func (f *downFlags) add(fs *pflag.FlagSet, kind, allDoc string) {
	fs.StringVar(&f.name, "name", "", fmt.Sprintf("the %s to remove (its owner process is stopped first)", kind))
	fs.BoolVar(&f.all, "all", false, allDoc)
	fs.BoolVar(&f.force, "force", false, fmt.Sprintf("with --all: also stop and remove %ss whose owner is running", kind))
}

// run removes the named one with byName, or every one whose owner is gone (every one,
// with --force) with downAll, and says what it did; more is added to the --all summary.
func (f downFlags) run(cmd *cobra.Command, kind string, byName func(string) error,
	downAll func(force bool) (removed, refused []string, more string, err error)) error {
	if (f.name == "") == !f.all {
		return badInput("give exactly one of --name NAME or --all")
	}
	if err := requireRoot(cmd, nil); err != nil { // after the input's checks: bad input says so first
		return err
	}
	out := cmd.OutOrStdout()
	if f.name != "" {
		if err := byName(f.name); err != nil {
			return unknownIsBadInput(err)
		}
		fmt.Fprintf(out, "%s %s removed\n", kind, f.name)
		return nil
	}
	removed, refused, more, err := downAll(f.force)
	fmt.Fprintf(out, "removed %d %ss %v%s\n", len(removed), kind, removed, more)
	if len(refused) > 0 {
		fmt.Fprintf(out, "left %d live %ss alone (owner running): %s; use --force to stop them\n", len(refused), kind, strings.Join(refused, ", "))
	}
	return err
}
