//go:build linux

package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"kpbench.dev/kpbench/internal/toolroot"
)

func newToolsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "Prepare and list the userspace tools (nft, iptables, ipset, ...) a backend can run",
		Long: `The backends run nft, iptables (nf_tables and legacy), ipset, conntrack and ipvsadm. By
default (--tools host) they are the host's own. 'kpbench tools prepare debian:SUITE' builds,
once, a Debian root holding that release's versions of these tools (mmdebstrap from the
Debian mirror the host's apt uses), cached as /var/cache/kpbench/tools/debian-SUITE/root;
the backends then run them chrooted into that root inside each node's namespace, against the
running kernel (natively, or in the microVM, which sees the cache read-only).`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return badInput("missing subcommand: prepare or list")
		},
	}
	cmd.AddCommand(newToolsPrepareCmd(), newToolsListCmd())
	return cmd
}

func newToolsPrepareCmd() *cobra.Command {
	var cacheDir, mirror string
	cmd := &cobra.Command{
		Use:   "prepare SPEC...",
		Short: "Build the tool roots that are not cached yet (host: nothing to do)",
		Long: `Build each named tool root that is not cached yet: "debian:SUITE" installs Debian SUITE's
nftables, iptables, ipset, conntrack and ipvsadm packages (and their libraries, about 110 MB)
with mmdebstrap into a temporary directory of the cache and renames it into place, so an
interrupted build leaves nothing half done. Concurrent builders of the same root wait for
each other. mmdebstrap is installed with apt-get when missing. "host" is a no-op that shows
the host's own versions.`,
		Example: `  kpbench tools prepare debian:trixie
  kpbench tools prepare host debian:trixie debian:bookworm`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return badInput("give the tools to prepare, e.g. '%s debian:trixie'", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var specs []toolroot.Spec
			for _, a := range args {
				s, err := toolroot.Parse(a)
				if err != nil {
					return usageError{err}
				}
				specs = append(specs, s)
			}
			c := toolroot.Cache{Dir: cacheDir}
			var roots []toolroot.Root
			for _, s := range specs {
				start := time.Now()
				r, err := c.Prepare(cmd.Context(), s, toolroot.PrepareOptions{Mirror: mirror, Progress: cmd.ErrOrStderr()})
				if err != nil {
					return err
				}
				if s.IsHost() {
					v, err := toolroot.ReadVersions(cmd.Context(), "/")
					if err != nil {
						return fmt.Errorf("host tools: %w", err)
					}
					r.Info.Versions = v
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "kpbench tools: %s ready (%s)\n", s, time.Since(start).Round(time.Millisecond))
				roots = append(roots, r)
			}
			return printRoots(cmd.OutOrStdout(), roots)
		},
	}
	cmd.Flags().StringVar(&cacheDir, "cache-dir", toolroot.DefaultCacheDir, "tool roots cache")
	cmd.Flags().StringVar(&mirror, "mirror", "", "Debian archive to build from (default: the one the host's apt sources name, else "+toolroot.DefaultMirror+")")
	return cmd
}

func newToolsListCmd() *cobra.Command {
	var cacheDir string
	var withHost bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Show the cached tool roots with their tools' versions",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			roots, err := toolroot.Cache{Dir: cacheDir}.List()
			if err != nil {
				return err
			}
			if withHost {
				v, err := toolroot.ReadVersions(cmd.Context(), "/")
				if err != nil {
					return fmt.Errorf("host tools: %w", err)
				}
				roots = append([]toolroot.Root{{Spec: toolroot.Host, Dir: "/", Info: toolroot.Info{Versions: v}}}, roots...)
			}
			if len(roots) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "kpbench tools: no tool root in %s; build one with: kpbench tools prepare debian:trixie\n", cacheDir)
				return nil
			}
			return printRoots(cmd.OutOrStdout(), roots)
		},
	}
	cmd.Flags().StringVar(&cacheDir, "cache-dir", toolroot.DefaultCacheDir, "tool roots cache")
	cmd.Flags().BoolVar(&withHost, "host", true, "list the host's own tools first")
	return cmd
}

// printRoots writes one line per root: its spec, directory, size and build date, and the
// version of each tool.
func printRoots(w io.Writer, roots []toolroot.Root) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := []string{"TOOLS", "ROOT", "PREPARED", "SIZE"}
	for _, t := range toolroot.Tools() {
		head = append(head, strings.ToUpper(t.Name))
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, r := range roots {
		prepared, size := "-", "-"
		if !r.Spec.IsHost() {
			prepared = r.Info.Prepared.Format("2006-01-02 15:04")
			size = fmt.Sprintf("%d MB", r.Info.Bytes>>20)
		}
		row := []string{r.Spec.String(), r.Dir, prepared, size}
		for _, t := range toolroot.Tools() {
			row = append(row, shortVersion(r.Info.Versions.Get(t.Name)))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// shortVersion keeps the version word of a tool's version line: "nftables v1.1.3
// (Commodore Bullmoose #4)" -> "v1.1.3", "iptables v1.8.11 (legacy)" -> "v1.8.11"; a dpkg
// version ("ipvsadm 1:1.31-4 (dpkg)") keeps its version and origin; "" is "-".
func shortVersion(v string) string {
	f := strings.Fields(strings.TrimSuffix(v, ","))
	switch {
	case len(f) == 0:
		return "-"
	case strings.HasSuffix(v, "(dpkg)") && len(f) >= 2:
		return f[1] + " (dpkg)"
	}
	for _, w := range f {
		if len(w) > 1 && w[0] == 'v' && w[1] >= '0' && w[1] <= '9' {
			return strings.TrimSuffix(w, ",")
		}
	}
	return v
}
