//go:build linux

package scenarios

import (
	"context"
	"fmt"
	"strings"

	"kpbench.dev/kpbench/backends/all"
	"kpbench.dev/kpbench/internal/toolroot"
	"kpbench.dev/kpbench/reports"
)

// RecordTools records in env the userspace tools the backends run: their --tools spec and,
// for a prepared root, its directory and the versions of its nft, iptables and
// iptables-restore, read the way the backends run them (chrooted into the root inside a
// throwaway namespace: all.ToolVersions). The host's versions, which CollectEnvironment
// read, are replaced: a tool the root lacks or that fails is left empty, never the host's.
// The error says which versions could not be read; env holds the rest.
func RecordTools(ctx context.Context, env *reports.Environment, root toolroot.Root) error {
	if root.Spec.IsHost() {
		env.SetTools(toolroot.HostSpec, "", nil)
		return nil
	}
	versions, err := all.ToolVersions(ctx, root.ChrootDir())
	env.SetTools(root.Spec.String(), root.ChrootDir(), versions)
	var missing []string
	for _, t := range []string{"nft", "iptables", "iptables-restore"} {
		if versions[t] == "" {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		// Other tools (ipvsadm without IPVS in the kernel) may fail without harm.
		return fmt.Errorf("tools %s: no version of %s: %w", root.Spec, strings.Join(missing, ", "), err)
	}
	return nil
}
