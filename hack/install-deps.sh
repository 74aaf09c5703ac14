#!/usr/bin/env bash
# Installs the Debian packages kpbench needs, idempotently: nothing is fetched when every
# package is already installed. Used by the Makefile, by CI (through make test) and by the
# Vagrantfile's provisioning, so the three never drift apart.
#
#   hack/install-deps.sh bench       what `make bench` runs (make deps): the kernel tools
#   hack/install-deps.sh vm          the microVM that gives IPVS a kernel (make vm-deps)
#   hack/install-deps.sh test        what the tests need besides those (make test-deps
#                                    installs bench, vm and test)
#   hack/install-deps.sh             every group (the Vagrantfile)
#
# Extra packages, asked for by name: KPBENCH_EXTRA_PACKAGES="vagrant".
set -euo pipefail

bench=(
  iptables          # iptables-nft and iptables-legacy, their -restore and -save
  nftables          # nft
  ipset             # the ipvs backend's sets
  conntrack         # the nodes' flows in the state a failed step leaves
  iproute2          # ip, for `kpbench lab exec NAME HOST -- ip ...` and debugging
  ipvsadm           # to count and inspect IPVS rules (ipvsadm -Ln)
  curl              # the echo servers speak HTTP/1.1
)
vm=(
  # the microVM that gives IPVS a kernel (microvm): qemu under TCG and a busybox initramfs
  qemu-system-x86
  busybox-static
  cpio
  kmod
  xz-utils
  zstd
  binutils
)
test=(
  chromium          # the report test renders report.html headless
  strace            # the test that kpbench writes only under --out and the cache
  # What the e2e suite's commands call through `kubectl exec` (the agnhost image's set; a
  # lab pod's exec runs the host's programs): nc, wget, nslookup/dig (curl and ip are in
  # bench).
  netcat-openbsd
  wget
  bind9-dnsutils
)

groups=("$@")
if [ ${#groups[@]} -eq 0 ]; then
  groups=(bench vm test)
fi
packages=()
for g in "${groups[@]}"; do
  case "$g" in
    bench) packages+=("${bench[@]}") ;;
    vm) packages+=("${vm[@]}") ;;
    test) packages+=("${test[@]}") ;;
    *) echo "install-deps: unknown group $g: allowed are bench, vm, test" >&2; exit 2 ;;
  esac
done
read -r -a extra <<< "${KPBENCH_EXTRA_PACKAGES:-}"
missing=()
for pkg in "${packages[@]}" "${extra[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: need root to install: ${missing[*]}" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
