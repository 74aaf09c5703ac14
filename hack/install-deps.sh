#!/usr/bin/env bash
# Installs the Debian packages kpbench needs, idempotently: nothing is fetched when every tool
# is already present. Used by `make deps` (and so by `make test` and `make bench`), by CI and by
# the Vagrantfile's provisioning, so the three never drift apart.
set -euo pipefail

# tool on PATH -> Debian package that provides it
declare -A want=(
  [iptables]=iptables
  [iptables-legacy]=iptables
  [nft]=nftables
  [ipset]=ipset
  [conntrack]=conntrack
  [ip]=iproute2
  [ipvsadm]=ipvsadm
  [curl]=curl
)
missing=()
for tool in "${!want[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("${want[$tool]}")
done
# Extra package sets, asked for by name: KPBENCH_EXTRA_PACKAGES="chromium qemu-system-x86".
for pkg in ${KPBENCH_EXTRA_PACKAGES:-}; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: need root to install: ${missing[*]}" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
