//go:build linux

package all

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/kubeproxy"
	"kpbench.dev/kpbench/internal/upstream"
)

// A backend reference is what users write after --backend: a backend's NAME, or
// NAME@VARIANT for a backend that takes variants (Facts.Variants says which):
//
//	kube-proxy-nftables             upstream kube-proxy v1.37.2 (make upstream)
//	kube-proxy-nftables@v1.34.0     the kube-proxy of that release, built under
//	                                /var/cache/kpbench/upstream/v1.34.0/bin
//	kube-proxy-nftables@/abs/path   that kube-proxy binary (its --version decides its
//	                                configuration)
//	iptables@whole-table-cache      the iptables backend with WholeTableCache on
//
// The full reference is the backend's name in results, so two variants of one backend run
// side by side: --backend kube-proxy-nftables@/a,kube-proxy-nftables@/b.

// variantWholeTableCache is the iptables variant with iptables.Options.WholeTableCache.
const variantWholeTableCache = "whole-table-cache"

// Split splits a reference into the backend's name and its variant ("" when none).
func Split(ref string) (name, variant string) {
	name, variant, _ = strings.Cut(ref, "@")
	return name, variant
}

// Reference joins a backend's name and a variant ("" for none) into a reference.
func Reference(name, variant string) string {
	if variant == "" {
		return name
	}
	return name + "@" + variant
}

// Validate checks a reference before anything is built: the name must be registered, and
// a variant must be one the backend takes, whose binary exists for upstream kube-proxy.
// The error says what exists. A bare kube-proxy-* name is valid whether or not `make
// upstream` has built it (New says so; Available leaves it out).
func Validate(ref string) error {
	name, variant := Split(ref)
	e, ok := find(name)
	if !ok {
		return unknownError(ref)
	}
	if variant == "" {
		if strings.Contains(ref, "@") {
			return fmt.Errorf("backend %q: empty variant after @", ref)
		}
		return nil
	}
	if e.variant == nil {
		return fmt.Errorf("backend %q: %s takes no @variant (backends with variants: %s)", ref, name, strings.Join(withVariants(), "; "))
	}
	if err := e.variant(variant); err != nil {
		return fmt.Errorf("backend %q: %w (%s)", ref, err, e.Variants)
	}
	return nil
}

// withVariants describes the variants of every backend that takes some, once for the
// three upstream kube-proxy modes (kube-proxy-*).
func withVariants() []string {
	var out []string
	for _, f := range Registered() {
		v := f.Variants
		if f.Caps.NeedsAPIServer {
			v = strings.ReplaceAll(v, f.Name, "kube-proxy-*")
		}
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func unknownError(ref string) error {
	return fmt.Errorf("unknown backend %q: allowed values are %s, or NAME@VARIANT for %s",
		ref, strings.Join(Names(), ", "), strings.Join(withVariants(), "; "))
}

// FileName turns a reference into something safe in a file name: a variant's slashes are
// escaped (kube-proxy-nftables@%2Fopt%2Fkp%2Fkube-proxy).
func FileName(ref string) string { return url.PathEscape(ref) }

// kubeProxyVariant accepts a release built here (upstream.KubeProxyOf) or an absolute path
// to an executable.
func kubeProxyVariant(v string) error {
	if strings.HasPrefix(v, "/") {
		return checkExecutable(v)
	}
	_, err := upstream.KubeProxyOf(v)
	return err
}

func checkExecutable(p string) error {
	st, err := os.Stat(p)
	switch {
	case err != nil:
		return err
	case st.IsDir() || st.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}

// kubeProxyBinary resolves a kube-proxy variant to its binary and release: "" is
// upstream.KubernetesVersion's (make upstream), vX.Y.Z that release's, /path that binary,
// whose release it reports itself.
func kubeProxyBinary(ctx context.Context, variant string) (bin, version string, err error) {
	switch {
	case variant == "":
		bin, err = upstream.Binary(upstream.KubeProxy)
		return bin, upstream.KubernetesVersion, err
	case filepath.IsAbs(variant):
		if err := checkExecutable(variant); err != nil {
			return "", "", err
		}
		version, err = kubeproxy.BinaryVersion(ctx, variant)
		return variant, version, err
	default:
		bin, err = upstream.KubeProxyOf(variant)
		return bin, variant, err
	}
}

// kubeProxy builds a factory for upstream kube-proxy in mode.
func kubeProxy(mode kubeproxy.Mode) factory {
	return func(n Node, s Settings, variant string) (backends.Backend, error) {
		name := Reference("kube-proxy-"+string(mode), variant)
		if s.ToolRoot != "" {
			return nil, fmt.Errorf("node %s: %s runs the host's nft, iptables and ipset itself: a tool root (%s) is not supported for upstream kube-proxy", n.Name, name, s.ToolRoot)
		}
		bin, version, err := kubeProxyBinary(context.Background(), variant)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if n.NetNSPath != "" && n.Kubeconfig == "" {
			return nil, fmt.Errorf("node %s: %s reads a real API server, and the testbed started none (no kubeconfig for the node)", n.Name, name)
		}
		b, err := kubeproxy.New(kubeproxy.Options{
			Name: name, Binary: bin, NetNSPath: n.NetNSPath, StateDir: n.StateDir, WaitPublished: n.WaitPublished,
			Config: kubeproxy.Config{
				Mode: mode, Version: version, NodeName: n.Name, NodeIP: n.IP, ClusterCIDR: s.ClusterCIDR, Kubeconfig: n.Kubeconfig,
				MinSyncPeriod: s.MinSyncPeriod, SyncPeriod: s.SyncPeriod,
				MasqueradeBit: s.MasqueradeBit, MasqueradeAll: s.MasqueradeAll, Scheduler: s.Scheduler,
			},
		})
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		return b, nil
	}
}
