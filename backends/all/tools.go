//go:build linux

package all

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"kpbench.dev/kpbench/internal/netns"
)

// VersionCommands are the commands whose first line of output ToolVersions reports, keyed
// by tool: the userspace tools the backends and node states run.
func VersionCommands() map[string]netns.Command {
	out := map[string]netns.Command{}
	for _, t := range []string{"nft", "iptables", "iptables-restore", "ipset", "conntrack", "ipvsadm"} {
		out[t] = netns.Command{Path: t, Args: []string{"--version"}}
	}
	return out
}

// ToolVersions reports the versions of the tools the backends run with a tool root ("":
// the host's tools), for a result's environment: each tool's `--version` run the way the
// backends run it (netns.Tools: chrooted into the root, inside a namespace: a throwaway
// one, kpbt<pid>-tools<random>, removed before it returns, which `kpbench lab down --all`
// sweeps should kpbench die). A tool that is missing or fails is absent from the map, and
// its reason is in the error, which is otherwise nil; the map holds what could be read
// (ipvsadm --version itself fails where the kernel has no IPVS). It needs root.
//
// Equivalent to: `ip netns exec $ns chroot $root nft --version` (and iptables, ipset,
// conntrack, ipvsadm).
func ToolVersions(ctx context.Context, root string) (map[string]string, error) {
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%s%d-tools%s", netns.TestPrefix, os.Getpid(), hex.EncodeToString(rnd[:]))
	nsPath, err := netns.Create(name)
	if err != nil {
		return nil, fmt.Errorf("tool versions: %w", err)
	}
	defer func() { _ = netns.Delete(name) }()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tools := netns.Tools{NSPath: nsPath, Root: root}
	out := map[string]string{}
	var errs []error
	for tool, cmd := range VersionCommands() {
		res, err := tools.Exec(ctx, cmd)
		line, _, _ := strings.Cut(strings.TrimSpace(string(res.Stdout)), "\n")
		if err == nil && line == "" {
			err = errors.New("printed nothing")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("tool versions: %s: %w", cmd, err))
			continue
		}
		out[tool] = strings.TrimSpace(line)
	}
	return out, errors.Join(errs...)
}
