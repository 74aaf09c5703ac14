#!/bin/sh
# PID 1 of the kpbench microVM (busybox sh in the initramfs). Written by microvm; its hash is
# part of the initramfs cache key, so editing it rebuilds the image.
#
# Kernel command line words:
#   kpbvm.share=PATH  host path of the per-run share (no spaces); mounted at /share here and at
#                     PATH inside the chroot. It holds run.sh (the command), mounts (writable
#                     host directories: "TAG PATH" per line), and receives stdout.log,
#                     stderr.log, exit-code, uptime (guest uptime when the command started)
#                     and kernel.log (the kernel's log, dmesg, when the command ended).
#   kpbvm.debug=1     print every step on the console.
# The kernel log gets a start and an end marker around the command (see microvm/kernellog.go),
# so warnings and soft lockups of the command can be told from those of the boot.
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
SHARE=
DEBUG=
for a in $(cat /proc/cmdline); do
	case "$a" in
	kpbvm.share=*) SHARE=${a#kpbvm.share=} ;;
	kpbvm.debug=1) DEBUG=1 ;;
	esac
done
say() { echo "kpbench-vm: $*" >/dev/console; }
dbg() { [ -n "$DEBUG" ] && say "$*"; }
die() {
	say "FATAL: $*"
	echo 255 >/share/exit-code 2>/dev/null
	sync
	poweroff -f
}
[ -n "$SHARE" ] || die "no kpbvm.share= on the kernel command line"

dbg "mounting shares"
modprobe -a virtio_pci 9pnet_virtio 9p overlay || die "modules for 9p and overlay"
O9P=trans=virtio,version=9p2000.L,msize=262144
mount -t 9p -o $O9P share /share || die "mount share"
mount -t 9p -o $O9P,ro,cache=loose hostroot /lower || die "mount host root"
mount -t tmpfs -o mode=0755 tmpfs /rw
mkdir -p /rw/upper/etc /rw/work
# Hot /etc files go to the upper layer: each open() of a 9p file costs ~1 ms under TCG, and
# ipset opens /etc/protocols once per entry.
for f in protocols services hosts host.conf nsswitch.conf gai.conf resolv.conf ld.so.cache \
	passwd group shadow localtime; do
	[ -e /lower/etc/$f ] && cp -a /lower/etc/$f /rw/upper/etc/
done
mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work /newroot || die "overlay"
N=/newroot
mount -t proc proc $N/proc
mount -t sysfs sysfs $N/sys
mount -t devtmpfs devtmpfs $N/dev
mkdir -p $N/dev/pts $N/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts $N/dev/pts
mount -t tmpfs tmpfs $N/dev/shm
# A fresh /run: the host's /run/netns entries must not be visible (ip netns uses /run/netns).
mount -t tmpfs -o mode=0755 tmpfs $N/run
mkdir -p $N/run/lock
mount -t cgroup2 cgroup2 $N/sys/fs/cgroup 2>/dev/null
mkdir -p "$N$SHARE" && mount --bind /share "$N$SHARE" || die "bind share"
KVER=$(uname -r)
mkdir -p $N/usr/lib/modules/$KVER && mount --bind /lib/modules/$KVER $N/usr/lib/modules/$KVER
if [ -f /share/mounts ]; then
	while read -r tag dir; do
		[ -n "$tag" ] || continue
		dbg "writable $tag at $dir"
		mkdir -p "$N$dir" && mount -t 9p -o $O9P "$tag" "$N$dir" || die "mount writable $dir"
	done </share/mounts
fi

dbg "loading modules"
# Loaded one call per group: a module missing from this kernel must not stop the others.
modprobe -a crc32c_generic nf_conntrack nf_conntrack_netlink nf_nat nf_tables nft_compat \
	nft_chain_nat nft_ct nft_nat nft_masq nft_numgen nft_fib_inet nft_reject_inet || say "some nf_tables modules are missing"
modprobe -a ip_tables iptable_filter iptable_nat iptable_mangle iptable_raw \
	ip6_tables ip6table_filter ip6table_nat ip6table_mangle ip6table_raw || say "some iptables modules are missing"
modprobe -a xt_comment xt_mark xt_MASQUERADE xt_conntrack xt_statistic xt_addrtype xt_nat \
	xt_multiport xt_tcpudp xt_set xt_ipvs xt_physdev xt_recent || say "some xt modules are missing"
modprobe -a ip_set ip_set_hash_ip ip_set_hash_ipport ip_set_hash_ipportip ip_set_hash_ipportnet \
	ip_set_hash_net ip_set_bitmap_port || say "some ipset modules are missing"
modprobe -a dummy veth bridge br_netfilter xfrm_user || say "some link or netlink modules are missing"
modprobe ip_vs || say "ip_vs is missing"
for s in rr wrr lc wlc lblc lblcr sh dh sed nq mh fo ovf twos; do
	[ -n "$(find /lib/modules/$KVER -name ip_vs_$s.ko 2>/dev/null)" ] && modprobe ip_vs_$s
done
echo 1 >/proc/sys/net/ipv4/ip_forward
ip link set lo up

dbg "running $SHARE/run.sh"
cut -d' ' -f1 /proc/uptime >/share/uptime
echo "kpbench-vm: command start" >/dev/kmsg
chroot $N /bin/sh "$SHARE/run.sh" >/share/stdout.log 2>/share/stderr.log </dev/null
rc=$?
echo "kpbench-vm: command end, exit status $rc" >/dev/kmsg
dmesg >/share/kernel.log 2>&1
echo $rc >/share/exit-code.tmp && mv /share/exit-code.tmp /share/exit-code
sync
poweroff -f
