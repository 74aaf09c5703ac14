#!/usr/bin/env bash
# Installs the Debian packages kpbench needs, idempotently: nothing is fetched when every
# package is already installed. Used by `make deps` (and so by `make test` and `make bench`),
# by CI and by the Vagrantfile's provisioning, so the three never drift apart.
set -euo pipefail

packages=(
  iptables          # iptables-nft and iptables-legacy, their -restore and -save
  nftables          # nft
  ipset
  conntrack
  iproute2          # ip, for `kpbench lab exec NAME HOST -- ip ...` and debugging
  ipvsadm           # to inspect IPVS (ipvsadm -Ln)
  curl              # the echo servers speak HTTP/1.1
  # the microVM that gives IPVS a kernel (lab/vm): qemu under TCG and a busybox initramfs
  qemu-system-x86
  busybox-static
  cpio
  kmod
  xz-utils
  zstd
  binutils
  chromium          # the report test renders report.html headless
  strace            # the test that kpbench writes only under --out and the cache
)
# Extra packages, asked for by name: KPBENCH_EXTRA_PACKAGES="chromium".
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
