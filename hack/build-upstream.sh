#!/usr/bin/env bash
# Builds the upstream binaries kpbench runs as references from their Go modules, with
# the versions pinned in tools/upstream/go.mod and internal/upstream:
#   kube-apiserver, kube-proxy   k8s.io/kubernetes (staging modules replaced by their v0 releases)
#   kube-controller-manager, kube-scheduler, kubectl
#                                the rest of a control plane, for `kpbench cluster up`
#   etcd                         go.etcd.io/etcd/server/v3 (the version kubernetes' go.mod pins)
#   coredns                      the cluster DNS of `cluster up`: tools/coredns (CoreDNS with the
#                                kubernetes plugin, the version internal/upstream pins)
#   agnhost                      the e2e tests' image binary, k8s.io/kubernetes/test/images/agnhost
#                                (its VERSION file gives the version it reports)
#   e2e.test                     only when named: k8s.io/kubernetes/test/e2e, `go test -c`
#                                (make e2e-build; the longest build by far)
#   ginkgo                       only when named: the ginkgo CLI (the version k8s.io/kubernetes
#                                requires), which runs e2e.test in parallel processes
# into $KPBENCH_UPSTREAM_DIR or /var/cache/kpbench/upstream/<version>/bin.
#
#   hack/build-upstream.sh              every binary but e2e.test
#   hack/build-upstream.sh e2e.test ginkgo   only the named ones
#
# Idempotent: a binary that exists, reports the pinned version and (coredns, agnhost, e2e.test,
# whose version does not name all their inputs) was built from the same go.mod, go.sum and
# Go toolchain is not rebuilt (FORCE=1 rebuilds). A cold build needs ~2.4 GB of memory; its
# times are in docs/upstream.md; warm rebuilds take seconds. Each binary is written to a
# temporary name and renamed, so a killed build leaves no half binary.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
mod="$root/tools/upstream"
kver=$(sed -n 's/^const KubernetesVersion = "\(.*\)"/\1/p' "$root/internal/upstream/upstream.go")
ever=$(sed -n 's/^const EtcdVersion = "\(.*\)"/\1/p' "$root/internal/upstream/upstream.go")
[[ -n $kver && -n $ever ]] || { echo "build-upstream: cannot read the pinned versions from internal/upstream/upstream.go" >&2; exit 1; }
grep -q "k8s.io/kubernetes $kver\$" "$mod/go.mod" || { echo "build-upstream: tools/upstream/go.mod does not require k8s.io/kubernetes $kver" >&2; exit 1; }
grep -q "go.etcd.io/etcd/server/v3 $ever" "$mod/go.mod" || { echo "build-upstream: tools/upstream/go.mod does not pin go.etcd.io/etcd/server/v3 $ever" >&2; exit 1; }
dnsmod="$root/tools/coredns"
dver=$(sed -n 's/^const CoreDNSVersion = "\(.*\)"/\1/p' "$root/internal/upstream/upstream.go")
grep -q "github.com/coredns/coredns $dver\$" "$dnsmod/go.mod" || { echo "build-upstream: tools/coredns/go.mod does not require github.com/coredns/coredns $dver" >&2; exit 1; }

bin=${KPBENCH_UPSTREAM_DIR:-/var/cache/kpbench/upstream/$kver/bin}
mkdir -p "$bin"

minor=${kver#v*.}; minor=${minor%%.*}
major=${kver#v}; major=${major%%.*}
# Without these the binaries report v0.0.0-master, which kubectl and client-go cannot parse.
vflags() { # vflags PKG: the version variables of one version package
	echo "-X $1.gitVersion=$kver -X $1.gitMajor=$major -X $1.gitMinor=$minor -X $1.gitTreeState=clean -X $1.buildDate=1970-01-01T00:00:00Z"
}
kldflags="-s -w $(vflags k8s.io/component-base/version) $(vflags k8s.io/client-go/pkg/version)"

# inputs MODULE-DIR: what a build from that module depends on besides the version it reports
inputs() {
	(cd "$1" && cat go.mod go.sum $(ls ./*.go 2>/dev/null) && go version) | sha256sum | cut -d' ' -f1
}
# stamp NAME: where the inputs of the binary NAME are recorded
stamp() { echo "$bin/.$1.inputs"; }

# have NAME WANT [ARGS]: the binary exists, its version output (ARGS, default --version)
# contains WANT and, when $from is set, it was built from that module's current inputs
have() {
	local name=$1 want=$2; shift 2
	[[ ${FORCE:-0} != 1 && -x $bin/$name ]] || return 1
	[[ -z ${from:-} || "$(cat "$(stamp "$name")" 2>/dev/null)" == "$(inputs "$from")" ]] || return 1
	"$bin/$name" "${@:---version}" 2>/dev/null | grep -qF -- "$want"
}

# build NAME PACKAGE LDFLAGS [VERSION-ARGS]: go build PACKAGE in the module $from (default
# tools/upstream); GOCMD="test -c" builds a test binary instead
build() {
	local name=$1 pkg=$2 ldflags=$3 start=$SECONDS dir=${from:-$mod}; shift 3
	echo "build-upstream: building $name ($pkg) into $bin"
	# shellcheck disable=SC2086 # GOCMD is two words on purpose
	(cd "$dir" && GOWORK=off CGO_ENABLED=0 GOFLAGS=-buildvcs=false go ${GOCMD:-build} -trimpath -ldflags "$ldflags" -o "$bin/.$name.tmp" "$pkg")
	mv -f "$bin/.$name.tmp" "$bin/$name"
	if [[ -n ${from:-} ]]; then inputs "$from" >"$(stamp "$name")"; fi
	echo "build-upstream: $name built in $((SECONDS - start)) s: $("$bin/$name" "${@:---version}" 2>&1 | head -1)"
}

# wanted NAME: NAME was asked for (every default binary when no name was given)
wanted() {
	if [[ ${#names[@]} -eq 0 ]]; then [[ $1 != e2e.test && $1 != ginkgo ]]; return; fi
	local n; for n in "${names[@]}"; do [[ $n == "$1" ]] && return 0; done; return 1
}
names=("$@")
for n in "${names[@]}"; do
	case $n in
	kube-apiserver | kube-proxy | etcd | kube-controller-manager | kube-scheduler | kubectl | coredns | agnhost | e2e.test | ginkgo) ;;
	*) echo "build-upstream: unknown binary $n (kube-apiserver, kube-proxy, etcd, kube-controller-manager, kube-scheduler, kubectl, coredns, agnhost, e2e.test, ginkgo)" >&2; exit 2 ;;
	esac
done

from=
wanted kube-apiserver && { have kube-apiserver "Kubernetes $kver" || build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$kldflags"; }
wanted kube-proxy && { have kube-proxy "Kubernetes $kver" || build kube-proxy k8s.io/kubernetes/cmd/kube-proxy "$kldflags"; }
wanted etcd && { have etcd "etcd Version: ${ever#v}" || build etcd go.etcd.io/etcd/server/v3 "-s -w"; }
wanted kube-controller-manager && { have kube-controller-manager "Kubernetes $kver" || build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$kldflags"; }
wanted kube-scheduler && { have kube-scheduler "Kubernetes $kver" || build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$kldflags"; }
wanted kubectl && { have kubectl "Client Version: $kver" version --client || build kubectl k8s.io/kubernetes/cmd/kubectl "$kldflags" version --client; }
from=$dnsmod
wanted coredns && { have coredns "CoreDNS-${dver#v}" -version || build coredns . "-s -w" -version; }
from=$mod
if wanted agnhost; then
	# agnhost reports the version of its image (test/images/agnhost/VERSION), not Kubernetes'.
	kdir=$(cd "$mod" && GOWORK=off go list -m -f '{{.Dir}}' k8s.io/kubernetes)
	aver=$(cat "$kdir/test/images/agnhost/VERSION")
	have agnhost "$aver" || build agnhost k8s.io/kubernetes/test/images/agnhost "-s -w -X main.Version=$aver"
fi
if wanted ginkgo; then
	gver=$(cd "$mod" && GOWORK=off go list -m -f '{{.Version}}' github.com/onsi/ginkgo/v2)
	have ginkgo "Ginkgo Version ${gver#v}" version || build ginkgo github.com/onsi/ginkgo/v2/ginkgo "-s -w" version
fi
if wanted e2e.test; then
	GOCMD="test -c" have e2e.test "GitVersion:\"$kver\"" --version || GOCMD="test -c" build e2e.test k8s.io/kubernetes/test/e2e "$kldflags" --version
fi
from=
echo "build-upstream: ${names[*]:-kube-apiserver, kube-proxy, kube-controller-manager, kube-scheduler, kubectl $kver, etcd $ever, coredns $dver and agnhost} in $bin"
