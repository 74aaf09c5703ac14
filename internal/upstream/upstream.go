package upstream

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// KubernetesVersion is the upstream Kubernetes release built by `make upstream`
// (k8s.io/kubernetes; its staging modules are the matching v0.x.y).
const KubernetesVersion = "v1.37.2"

// EtcdVersion is the etcd release built by `make upstream`: the one k8s.io/kubernetes
// KubernetesVersion itself requires (go.etcd.io/etcd/server/v3 in its go.mod).
const EtcdVersion = "v3.7.0"

// CoreDNSVersion is the CoreDNS release (github.com/coredns/coredns, tools/coredns) that
// `make upstream` builds as the cluster DNS of `kpbench cluster up`.
const CoreDNSVersion = "v1.15.0"

// AgnhostImage is the agnhost image KubernetesVersion's e2e tests pin
// (test/utils/image/manifest.go): the one a lab kubelet runs as the agnhost binary that
// `make upstream` builds, and the one kpbench's pods use on other clusters.
const AgnhostImage = "registry.k8s.io/e2e-test-images/agnhost:2.66.1"

// DirEnv overrides BinDir.
const DirEnv = "KPBENCH_UPSTREAM_DIR"

// RootEnv overrides Root, the directory of every built version.
const RootEnv = "KPBENCH_UPSTREAM_ROOT"

// DefaultRoot is where `make upstream` builds each version, in <version>/bin.
const DefaultRoot = "/var/cache/kpbench/upstream"

// RequireEnv, set to "1", makes tests that need the upstream binaries fail instead of skip.
const RequireEnv = "KPBENCH_REQUIRE_UPSTREAM"

// The binaries `make upstream` builds.
const (
	KubeAPIServer = "kube-apiserver"
	KubeProxy     = "kube-proxy"
	Etcd          = "etcd"
	// KubeControllerManager, KubeScheduler and Kubectl complete the control plane of
	// `kpbench cluster up` and give its users a client.
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Kubectl               = "kubectl"
	// CoreDNS is the cluster DNS of `kpbench cluster up` (CoreDNSVersion, with the
	// kubernetes plugin); Agnhost the binary of the e2e tests' test image
	// (k8s.io/kubernetes/test/images/agnhost at KubernetesVersion), which the lab kubelet
	// runs for pods of that image.
	CoreDNS = "coredns"
	Agnhost = "agnhost"
)

// E2ETest is the upstream end-to-end test binary (k8s.io/kubernetes/test/e2e at
// KubernetesVersion, `go test -c`), built apart from Names by `make e2e-build` because it is
// by far the longest build (docs/upstream.md) and only `kpbench e2e` needs it.
const E2ETest = "e2e.test"

// Ginkgo is the ginkgo CLI (github.com/onsi/ginkgo/v2/ginkgo, the version k8s.io/kubernetes
// requires), which runs E2ETest in parallel processes; built with it by `make e2e-build`.
const Ginkgo = "ginkgo"

// Names lists every binary `make upstream` builds, in build order.
func Names() []string {
	return []string{KubeAPIServer, KubeProxy, Etcd, KubeControllerManager, KubeScheduler, Kubectl, CoreDNS, Agnhost}
}

// Root is the directory holding one directory per built version, each with its bin/:
// $KPBENCH_UPSTREAM_ROOT if set, else DefaultRoot.
func Root() string {
	if d := os.Getenv(RootEnv); d != "" {
		return d
	}
	return DefaultRoot
}

// BinDir is the directory holding the upstream binaries of KubernetesVersion:
// $KPBENCH_UPSTREAM_DIR if set, else Root()/<KubernetesVersion>/bin.
func BinDir() string {
	if d := os.Getenv(DirEnv); d != "" {
		return d
	}
	return filepath.Join(Root(), KubernetesVersion, "bin")
}

// Binary returns the path of the upstream binary name (one of Names, or E2ETest) in BinDir,
// or an error saying which make target builds it when it is not there.
func Binary(name string) (string, error) {
	target := "make upstream"
	known := name == E2ETest || name == Ginkgo
	if known {
		target = "make e2e-build"
	}
	for _, n := range Names() {
		known = known || n == name
	}
	if !known {
		return "", fmt.Errorf("upstream binary %q: unknown (have %v, %s and %s)", name, Names(), E2ETest, Ginkgo)
	}
	p := filepath.Join(BinDir(), name)
	switch err := executable(p); {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("upstream %s %s: %s not found: run `%s` (builds it from source, ~6-20 min)", name, KubernetesVersion, p, target)
	case errors.Is(err, errNotExecutable):
		return "", fmt.Errorf("upstream %s: %s is not an executable file: run `%s`", name, p, target)
	case err != nil:
		return "", fmt.Errorf("upstream %s: %w", name, err)
	}
	return p, nil
}

var errNotExecutable = errors.New("not an executable file")

// executable checks that p is an executable regular file (fs.ErrNotExist when absent).
func executable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.IsDir() || st.Mode().Perm()&0o111 == 0 {
		return errNotExecutable
	}
	return nil
}

// versionPattern is a Kubernetes release: vMAJOR.MINOR.PATCH, with an optional pre-release
// (v1.34.0-rc.1).
var versionPattern = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?$`)

// ValidVersion reports whether v has the form of a Kubernetes release (v1.34.0).
func ValidVersion(v string) bool { return versionPattern.MatchString(v) }

// KubeProxyOf returns the kube-proxy binary of an upstream version: KubernetesVersion's
// is Binary(KubeProxy); another version's is Root()/<version>/bin/kube-proxy, built by
// `make upstream-matrix` (envmatrix). A malformed version, or one not built here, is an
// error that lists the versions that are.
func KubeProxyOf(version string) (string, error) {
	if version == "" || version == KubernetesVersion {
		return Binary(KubeProxy)
	}
	if !ValidVersion(version) {
		return "", fmt.Errorf("kube-proxy version %q: want vMAJOR.MINOR.PATCH (built here: %s)", version, builtList())
	}
	p := filepath.Join(Root(), version, "bin", KubeProxy)
	switch err := executable(p); {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("kube-proxy %s: %s not found (built here: %s)", version, p, builtList())
	case err != nil:
		return "", fmt.Errorf("kube-proxy %s: %s: %w", version, p, err)
	}
	return p, nil
}

// Versions returns the upstream versions whose kube-proxy is built here, oldest first:
// every Root()/<version>/bin/kube-proxy, and KubernetesVersion's Binary(KubeProxy).
func Versions() []string {
	var out []string
	if _, err := Binary(KubeProxy); err == nil {
		out = append(out, KubernetesVersion)
	}
	entries, _ := os.ReadDir(Root())
	for _, e := range entries {
		v := e.Name()
		if v == KubernetesVersion || !ValidVersion(v) {
			continue
		}
		if executable(filepath.Join(Root(), v, "bin", KubeProxy)) == nil {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, CompareVersions)
	return out
}

func builtList() string {
	if v := Versions(); len(v) > 0 {
		return strings.Join(v, ", ")
	}
	return "none: run `make upstream`"
}

// CompareVersions orders two versions of the form ValidVersion accepts by major, minor and
// patch (a pre-release before its release); malformed ones compare as strings.
func CompareVersions(a, b string) int {
	pa, oka := versionParts(a)
	pb, okb := versionParts(b)
	if !oka || !okb {
		return strings.Compare(a, b)
	}
	if c := slices.Compare(pa[:3], pb[:3]); c != 0 {
		return c
	}
	switch {
	case pa[3] == pb[3]:
		return strings.Compare(a, b)
	case pa[3] == 0: // a is the release, b a pre-release of it
		return 1
	case pb[3] == 0:
		return -1
	}
	return strings.Compare(a, b)
}

// versionParts returns major, minor, patch and 1 when v has a pre-release (else 0).
func versionParts(v string) ([4]int, bool) {
	var out [4]int
	if !ValidVersion(v) {
		return out, false
	}
	core, pre, _ := strings.Cut(strings.TrimPrefix(v, "v"), "-")
	for i, f := range strings.Split(core, ".") {
		out[i], _ = strconv.Atoi(f)
	}
	if pre != "" {
		out[3] = 1
	}
	return out, true
}
