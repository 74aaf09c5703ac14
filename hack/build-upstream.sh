#!/usr/bin/env bash
# Builds the upstream binaries kpbench runs as references from their Go modules, with
# the versions pinned in tools/upstream/go.mod and internal/upstream:
#   kube-apiserver, kube-proxy   k8s.io/kubernetes (staging modules replaced by their v0 releases)
#   kube-controller-manager, kube-scheduler, kubectl
#                                the rest of a control plane, for `kpbench cluster up`
#   etcd                         go.etcd.io/etcd/server/v3 (the version kubernetes' go.mod pins)
# into $KPBENCH_UPSTREAM_DIR or /var/cache/kpbench/upstream/<version>/bin. Idempotent: a binary
# that exists and reports the pinned version is not rebuilt (FORCE=1 rebuilds). A cold build
# takes ~6 min on 2 idle cores and ~2.4 GB of memory; warm rebuilds take seconds.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
mod="$root/tools/upstream"
kver=$(sed -n 's/^const KubernetesVersion = "\(.*\)"/\1/p' "$root/internal/upstream/upstream.go")
ever=$(sed -n 's/^const EtcdVersion = "\(.*\)"/\1/p' "$root/internal/upstream/upstream.go")
[[ -n $kver && -n $ever ]] || { echo "build-upstream: cannot read the pinned versions from internal/upstream/upstream.go" >&2; exit 1; }
grep -q "k8s.io/kubernetes $kver\$" "$mod/go.mod" || { echo "build-upstream: tools/upstream/go.mod does not require k8s.io/kubernetes $kver" >&2; exit 1; }
grep -q "go.etcd.io/etcd/server/v3 $ever" "$mod/go.mod" || { echo "build-upstream: tools/upstream/go.mod does not pin go.etcd.io/etcd/server/v3 $ever" >&2; exit 1; }

bin=${KPBENCH_UPSTREAM_DIR:-/var/cache/kpbench/upstream/$kver/bin}
mkdir -p "$bin"

minor=${kver#v*.}; minor=${minor%%.*}
major=${kver#v}; major=${major%%.*}
# Without these the binaries report v0.0.0-master, which kubectl and client-go cannot parse.
vflags() { # vflags PKG: the version variables of one version package
	echo "-X $1.gitVersion=$kver -X $1.gitMajor=$major -X $1.gitMinor=$minor -X $1.gitTreeState=clean -X $1.buildDate=1970-01-01T00:00:00Z"
}
kldflags="-s -w $(vflags k8s.io/component-base/version) $(vflags k8s.io/client-go/pkg/version)"

# have NAME WANT [ARGS]: the binary exists and its version output (ARGS, default --version)
# contains WANT
have() {
	local name=$1 want=$2; shift 2
	[[ ${FORCE:-0} != 1 && -x $bin/$name ]] && "$bin/$name" "${@:---version}" 2>/dev/null | grep -qF -- "$want"
}

build() { # build NAME PACKAGE LDFLAGS [VERSION-ARGS]
	local name=$1 pkg=$2 ldflags=$3 start=$SECONDS; shift 3
	echo "build-upstream: building $name ($pkg) into $bin"
	(cd "$mod" && GOWORK=off CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags "$ldflags" -o "$bin/.$name.tmp" "$pkg")
	mv -f "$bin/.$name.tmp" "$bin/$name"
	echo "build-upstream: $name built in $((SECONDS - start)) s: $("$bin/$name" "${@:---version}" 2>&1 | head -1)"
}

have kube-apiserver "Kubernetes $kver" || build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$kldflags"
have kube-proxy "Kubernetes $kver" || build kube-proxy k8s.io/kubernetes/cmd/kube-proxy "$kldflags"
have etcd "etcd Version: ${ever#v}" || build etcd go.etcd.io/etcd/server/v3 "-s -w"
have kube-controller-manager "Kubernetes $kver" || build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$kldflags"
have kube-scheduler "Kubernetes $kver" || build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$kldflags"
have kubectl "Client Version: $kver" version --client || build kubectl k8s.io/kubernetes/cmd/kubectl "$kldflags" version --client
echo "build-upstream: kube-apiserver, kube-proxy, kube-controller-manager, kube-scheduler, kubectl $kver and etcd $ever in $bin"
