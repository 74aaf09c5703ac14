package upstream

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// KubernetesVersion is the upstream Kubernetes release built by `make upstream`
// (k8s.io/kubernetes; its staging modules are the matching v0.x.y).
const KubernetesVersion = "v1.37.2"

// EtcdVersion is the etcd release built by `make upstream`: the one k8s.io/kubernetes
// KubernetesVersion itself requires (go.etcd.io/etcd/server/v3 in its go.mod).
const EtcdVersion = "v3.7.0"

// DirEnv overrides BinDir.
const DirEnv = "KPBENCH_UPSTREAM_DIR"

// RequireEnv, set to "1", makes tests that need the upstream binaries fail instead of skip.
const RequireEnv = "KPBENCH_REQUIRE_UPSTREAM"

// The binaries `make upstream` builds.
const (
	KubeAPIServer = "kube-apiserver"
	KubeProxy     = "kube-proxy"
	Etcd          = "etcd"
	// KubeControllerManager, KubeScheduler and Kubectl complete the control plane of
	// `kpbench cluster up` (issue 25) and give its users a client.
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Kubectl               = "kubectl"
)

// Names lists every binary `make upstream` builds, in build order.
func Names() []string {
	return []string{KubeAPIServer, KubeProxy, Etcd, KubeControllerManager, KubeScheduler, Kubectl}
}

// BinDir is the directory holding the upstream binaries: $KPBENCH_UPSTREAM_DIR if set, else
// /var/cache/kpbench/upstream/<KubernetesVersion>/bin.
func BinDir() string {
	if d := os.Getenv(DirEnv); d != "" {
		return d
	}
	return filepath.Join("/var/cache/kpbench/upstream", KubernetesVersion, "bin")
}

// Binary returns the path of the upstream binary name (one of Names) in BinDir, or an error saying to run `make upstream` when it is not there.
func Binary(name string) (string, error) {
	known := false
	for _, n := range Names() {
		known = known || n == name
	}
	if !known {
		return "", fmt.Errorf("upstream binary %q: unknown (have %v)", name, Names())
	}
	p := filepath.Join(BinDir(), name)
	st, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("upstream %s %s: %s not found: run `make upstream` (builds it from source, ~6-20 min)", name, KubernetesVersion, p)
	case err != nil:
		return "", fmt.Errorf("upstream %s: %w", name, err)
	case st.IsDir() || st.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("upstream %s: %s is not an executable file: run `make upstream`", name, p)
	}
	return p, nil
}
