#!/usr/bin/env bash
# Builds the extra kube-proxy versions of the version matrix (docs/environment-matrix.md): one tools module per
# version, tools/upstream-vMAJOR.MINOR (e.g. tools/upstream-v1.33 requires k8s.io/kubernetes
# v1.33.5), each built into $KPBENCH_UPSTREAM_ROOT/<version>/bin/kube-proxy (default root
# /var/cache/kpbench/upstream), beside make upstream's v1.37.2. Only kube-proxy: it talks to
# the lab's v1.37.2 kube-apiserver.
#
#   hack/build-kube-proxy.sh                       every tools/upstream-v* module
#   hack/build-kube-proxy.sh tools/upstream-v1.33  one
#
# Idempotent: a binary that reports its pinned version is not rebuilt (FORCE=1 rebuilds). It
# is written to a temporary name and renamed, so a killed build leaves no half binary. Its
# build times: docs/upstream.md.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dest=${KPBENCH_UPSTREAM_ROOT:-/var/cache/kpbench/upstream}
mods=("$@")
if [[ ${#mods[@]} -eq 0 ]]; then
	mods=("$root"/tools/upstream-v*/)
fi

for mod in "${mods[@]}"; do
	mod=$(cd "$mod" && pwd)
	kver=$(sed -n 's/^\(require\)\{0,1\}[[:space:]]*k8s.io\/kubernetes \(v[0-9][0-9.]*\)\( .*\)\{0,1\}$/\2/p' "$mod/go.mod" | head -1)
	[[ -n $kver ]] || { echo "build-kube-proxy: $mod/go.mod requires no k8s.io/kubernetes vX.Y.Z" >&2; exit 1; }
	bin="$dest/$kver/bin"
	if [[ ${FORCE:-0} != 1 && -x $bin/kube-proxy ]] && "$bin/kube-proxy" --version 2>/dev/null | grep -qF "Kubernetes $kver"; then
		echo "build-kube-proxy: kube-proxy $kver already in $bin"
		continue
	fi
	mkdir -p "$bin"
	minor=${kver#v*.}; minor=${minor%%.*}
	major=${kver#v}; major=${major%%.*}
	vflags() { echo "-X $1.gitVersion=$kver -X $1.gitMajor=$major -X $1.gitMinor=$minor -X $1.gitTreeState=clean -X $1.buildDate=1970-01-01T00:00:00Z"; }
	start=$SECONDS
	echo "build-kube-proxy: building kube-proxy $kver ($mod) into $bin"
	(cd "$mod" && GOWORK=off CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath \
		-ldflags "-s -w $(vflags k8s.io/component-base/version) $(vflags k8s.io/client-go/pkg/version)" \
		-o "$bin/.kube-proxy.tmp" k8s.io/kubernetes/cmd/kube-proxy)
	mv -f "$bin/.kube-proxy.tmp" "$bin/kube-proxy"
	echo "build-kube-proxy: kube-proxy built in $((SECONDS - start)) s: $("$bin/kube-proxy" --version 2>&1 | head -1)"
done
