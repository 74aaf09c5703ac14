//go:build linux

package lab

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"

	"kpbench.dev/kpbench/internal/netns"
)

// Interface names inside lab namespaces. Every name we choose starts with "kpb"; eth0 is the
// conventional name of a node's fabric interface and of a pod's interface.
const (
	fabricBridge = "kpbfab0" // in the fabric namespace
	podBridge    = "kpbbr0"  // in every node namespace
	hostIfName   = "eth0"
)

// nsHandle is a netlink handle bound to one namespace, plus the namespace's fd (used to
// move the far end of a veth pair there at creation).
type nsHandle struct {
	*netlink.Handle
	ns vnetns.NsHandle
}

func openNS(path string) (*nsHandle, error) {
	ns, err := vnetns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", path, err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("netlink in %s: %w", path, err)
	}
	return &nsHandle{Handle: h, ns: ns}, nil
}

func (h *nsHandle) Close() {
	h.Handle.Close()
	h.ns.Close()
}

// addBridge creates a bridge with a fixed MAC address, optionally with an IP address, and
// brings it up.
//
// The MAC is fixed because a bridge whose address was never set takes the lowest MAC of its
// ports, and changes it when a port with a lower one joins. A pod or node that learnt the
// gateway's old MAC keeps sending to it; the bridge delivers those frames up as another
// host's (PACKET_OTHERHOST), and the IP stack drops them without a counter: every
// connection through the gateway times out until the neighbour entry expires. That was the
// conformance flake "basic-endpoints on ipvs: one-endpoint: timeout=5", about one run in
// three under load, after a pod joined the node's bridge.
//
// Equivalent to: `ip link add $name address $mac type bridge && ip addr add $addr dev $name &&
// ip link set $name up`.
func (h *nsHandle) addBridge(name string, addr netip.Prefix) error {
	mac, err := randomLocalMAC()
	if err != nil {
		return fmt.Errorf("bridge %s: %w", name, err)
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name, HardwareAddr: mac}}
	if err := h.LinkAdd(br); err != nil {
		return fmt.Errorf("add bridge %s: %w", name, err)
	}
	if addr.IsValid() {
		if err := h.AddrAdd(br, toAddr(addr)); err != nil {
			return fmt.Errorf("address %s on %s: %w", addr, name, err)
		}
	}
	if err := h.LinkSetUp(br); err != nil {
		return fmt.Errorf("bring up %s: %w", name, err)
	}
	return nil
}

// randomLocalMAC returns a random unicast, locally administered MAC address.
func randomLocalMAC() (net.HardwareAddr, error) {
	mac := make(net.HardwareAddr, 6)
	if _, err := rand.Read(mac); err != nil {
		return nil, fmt.Errorf("random MAC: %w", err)
	}
	mac[0] = mac[0]&^0x01 | 0x02
	return mac, nil
}

// addVethInto creates a veth pair whose local end `local` is enslaved to bridge `master`
// (and put in hairpin mode when hairpin is set) and whose far end is created directly in
// the namespace of peer, named eth0.
//
// Equivalent to: `ip link add $local type veth peer name eth0 netns $peer &&
// ip link set $local master $master up && bridge link set dev $local hairpin on`.
func (h *nsHandle) addVethInto(local, master string, peer *nsHandle, hairpin bool) error {
	br, err := h.LinkByName(master)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", master, err)
	}
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: local, MasterIndex: br.Attrs().Index},
		PeerName:      hostIfName,
		PeerNamespace: netlink.NsFd(int(peer.ns)),
	}
	if err := h.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth %s: %w", local, err)
	}
	if hairpin {
		if err := h.LinkSetHairpin(veth, true); err != nil {
			return fmt.Errorf("hairpin on %s: %w", local, err)
		}
	}
	if err := h.LinkSetUp(veth); err != nil {
		return fmt.Errorf("bring up %s: %w", local, err)
	}
	return nil
}

// setupHostIf gives the namespace's eth0 its address and a default route (if gw is
// valid), and brings eth0 and lo up.
//
// Equivalent to: `ip addr add $addr dev eth0 && ip link set eth0 up && ip link set lo up &&
// ip route add default via $gw`.
func (h *nsHandle) setupHostIf(addr netip.Prefix, gw netip.Addr) error {
	for _, name := range []string{"lo", hostIfName} {
		l, err := h.LinkByName(name)
		if err != nil {
			return fmt.Errorf("link %s: %w", name, err)
		}
		if name == hostIfName {
			if err := h.AddrAdd(l, toAddr(addr)); err != nil {
				return fmt.Errorf("address %s on %s: %w", addr, name, err)
			}
		}
		if err := h.LinkSetUp(l); err != nil {
			return fmt.Errorf("bring up %s: %w", name, err)
		}
	}
	if gw.IsValid() {
		if err := h.RouteAdd(&netlink.Route{Gw: net.IP(gw.AsSlice())}); err != nil {
			return fmt.Errorf("default route via %s: %w", gw, err)
		}
	}
	return nil
}

// addRoute routes dst via gw.
//
// Equivalent to: `ip route add $dst via $gw`.
func (h *nsHandle) addRoute(dst netip.Prefix, gw netip.Addr) error {
	r := &netlink.Route{Dst: toIPNet(dst), Gw: net.IP(gw.AsSlice())}
	if err := h.RouteAdd(r); err != nil {
		return fmt.Errorf("route %s via %s: %w", dst, gw, err)
	}
	return nil
}

func toIPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), 32)}
}

func toAddr(p netip.Prefix) *netlink.Addr { return &netlink.Addr{IPNet: toIPNet(p)} }

// Sysctl is one setting under /proc/sys.
type Sysctl struct{ Key, Value string }

// nodeSysctls are what a node needs to act as a Kubernetes node: forwarding, bridged
// traffic through iptables (so conntrack un-DNATs replies between pods on one bridge),
// no reverse-path filtering (replies from other nodes' pods arrive over the fabric), no
// ICMP redirects.
var nodeSysctls = []Sysctl{
	{"net/ipv4/ip_forward", "1"},
	{"net/ipv4/conf/all/rp_filter", "0"},
	{"net/ipv4/conf/default/rp_filter", "0"},
	{"net/bridge/bridge-nf-call-iptables", "1"},
	// An ICMP redirect to a pod would use up the ICMP rate-limit token that the port
	// unreachable of a REJECT needs: the client would time out instead of being refused.
	{"net/ipv4/conf/all/send_redirects", "0"},
	{"net/ipv4/conf/default/send_redirects", "0"},
}

// ErrNoBrNetfilter is reported when bridged traffic cannot be sent through iptables.
var ErrNoBrNetfilter = errors.New("net.bridge.bridge-nf-call-iptables is missing (br_netfilter not loaded): pod-to-service traffic whose endpoint is on the same node bypasses conntrack")

// setSysctls writes and reads back each sysctl inside the namespace at nsPath.
//
// Equivalent to: `ip netns exec $ns sysctl -w $key=$value`.
func setSysctls(nsPath string, ctls []Sysctl) error {
	return netns.Do(nsPath, func() error {
		for _, s := range ctls {
			p := filepath.Join("/proc/sys", s.Key)
			if err := os.WriteFile(p, []byte(s.Value), 0o644); err != nil {
				if errors.Is(err, os.ErrNotExist) && s.Key == "net/bridge/bridge-nf-call-iptables" {
					return ErrNoBrNetfilter
				}
				return fmt.Errorf("sysctl %s=%s: %w", s.Key, s.Value, err)
			}
			got, err := os.ReadFile(p)
			if err != nil {
				return fmt.Errorf("sysctl %s: %w", s.Key, err)
			}
			if string(got[:len(got)-1]) != s.Value {
				return fmt.Errorf("sysctl %s: wrote %s, reads %q", s.Key, s.Value, got)
			}
		}
		return nil
	})
}

// waitOperUp waits until the named link in the namespace is operationally up: until then
// its queue discards every packet. The kernel's link watcher sets it within about a second
// of the carrier coming up; this polls (there is no cheaper event to wait for in another
// namespace) for at most 5 seconds.
func waitOperUp(ctx context.Context, nsPath, link string) error {
	h, err := openNS(nsPath)
	if err != nil {
		return err
	}
	defer h.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := h.LinkByName(link)
		if err != nil {
			return fmt.Errorf("link %s: %w", link, err)
		}
		if l.Attrs().OperState == netlink.OperUp {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("link %s is still %s after 5s", link, l.Attrs().OperState)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
