package main

import (
	"strings"

	"github.com/spf13/cobra"

	"kpbench.dev/kpbench/backends/all"
	"kpbench.dev/kpbench/internal/toolroot"
)

// toolsFlag is the --tools flag of run, check and conform: the userspace tools (nft,
// iptables, iptables-restore, ipset, conntrack, ipvsadm) that the backends run inside
// each node's namespace, the host's or a root prepared by `kpbench tools prepare`.
type toolsFlag struct {
	value    string
	cacheDir string
	root     toolroot.Root
}

// addToolsFlag registers --tools (and the hidden --tools-cache-dir) on cmd and resolves
// them before the command's own PreRunE, so that a bad value or a root that is not
// prepared is bad input (exit 2, naming `kpbench tools prepare SPEC`) before anything is
// built.
func addToolsFlag(cmd *cobra.Command) *toolsFlag {
	f := &toolsFlag{root: toolroot.Root{Spec: toolroot.Host, Dir: "/"}}
	cmd.Flags().StringVar(&f.value, "tools", toolroot.HostSpec,
		"userspace tools the backends run: host, or a prepared root such as debian:trixie (kpbench tools prepare debian:trixie)")
	cmd.Flags().StringVar(&f.cacheDir, "tools-cache-dir", toolroot.DefaultCacheDir, "tool roots cache (kpbench tools prepare --cache-dir)")
	_ = cmd.Flags().MarkHidden("tools-cache-dir")
	next := cmd.PreRunE
	cmd.PreRunE = func(cmd *cobra.Command, args []string) error {
		if err := f.resolve(); err != nil {
			return err
		}
		if next != nil {
			return next(cmd, args)
		}
		return nil
	}
	return f
}

// resolve parses the flag and finds its root in the cache.
func (f *toolsFlag) resolve() error {
	spec, err := toolroot.Parse(f.value)
	if err != nil {
		return badInput("--tools: %v", err)
	}
	root, err := toolroot.Cache{Dir: f.cacheDir}.Resolve(spec)
	if err != nil {
		return badInput("--tools: %v", err)
	}
	f.root = root
	return nil
}

// Root is the resolved set of tools (the host's until the command's PreRunE ran).
func (f *toolsFlag) Root() toolroot.Root { return f.root }

// Dir is the root directory the backends chroot into: "" for the host's tools.
func (f *toolsFlag) Dir() string { return f.root.ChrootDir() }

// check refuses, as bad input, backends that cannot run under the chosen tools: upstream
// kube-proxy runs the host's own tools.
func (f *toolsFlag) check(backends []string) error {
	if f.root.Spec.IsHost() {
		return nil
	}
	var refused []string
	for _, b := range backends {
		if fa, ok := all.Lookup(b); ok && fa.Caps.NeedsAPIServer {
			refused = append(refused, b)
		}
	}
	if len(refused) > 0 {
		return badInput("--tools %s: %s run the host's nft, iptables and ipset themselves and cannot take a tool root (use --tools host, or name the backends: --backend ours)",
			f.root.Spec, strings.Join(refused, ", "))
	}
	return nil
}
