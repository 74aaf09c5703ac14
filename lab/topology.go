package lab

import (
	"fmt"

	"kpbench.dev/kpbench/lab/echo"
	"math/bits"
	"net/netip"
	"regexp"
)

// Protocol is an L4 protocol of a pod port: "TCP" or "UDP".
type Protocol = echo.Protocol

// The protocols echo servers speak.
const (
	TCP = echo.TCP
	UDP = echo.UDP
)

// Port is one port a pod listens on.
type Port = echo.Port

// Config describes a lab: how many hosts of each kind, and their addresses.
//
// Addressing (defaults):
//   - fabric (the "physical" network between nodes and clients): NodeCIDR 172.18.0.0/24;
//     node i is .10+i, client j is .200+j; the fabric is a bridge in its own namespace,
//     holding .1, the nodes' default gateway (it does not forward: a dead end in the lab).
//   - pods: PodCIDR 10.244.0.0/16, node i gets the i-th /24 (a larger block, /23 or less,
//     when PodsPerNode does not fit a /24); the node's pod bridge holds the first address,
//     pods get the following ones.
//   - nodes route each other's pod blocks over the fabric. Clients are outside the cluster:
//     they reach node addresses on the fabric, and the prefixes in ClientRoutes (load-balancer
//     pools, external IPs; see Lab.AddClientRoute) through node 0, like a router in front of
//     the cluster. They have no route to pods.
type Config struct {
	// Name identifies the lab: 1-10 characters of [a-z0-9]. Namespaces are kpb-<Name>-<host>.
	Name string
	// Nodes, PodsPerNode and Clients are the initial host counts.
	Nodes, PodsPerNode, Clients int
	// PodCapacity is the most pods one node will hold, made by Up or added later (cluster
	// pods, probe pods); it sizes each node's pod block (0: PodsPerNode; a /24 at least).
	PodCapacity int
	// NodeCIDR is the fabric subnet of nodes and clients.
	NodeCIDR netip.Prefix
	// PodCIDR is the cluster's pod network, split into one block per node.
	PodCIDR netip.Prefix
	// DefaultPodPorts are the ports of pods made by Up (default 8080 TCP and UDP).
	DefaultPodPorts []Port
	// ClientRoutes are routed from every client to node 0 (load-balancer pool, externalIPs).
	ClientRoutes []netip.Prefix
	// Zones, when set, assigns node i the zone Zones[i % len(Zones)].
	Zones []string
}

var labNameRE = regexp.MustCompile(`^[a-z0-9]{1,10}$`)

// Default fills unset fields with the documented defaults.
func (c *Config) Default() {
	if c.Nodes == 0 {
		c.Nodes = 2
	}
	if !c.NodeCIDR.IsValid() {
		c.NodeCIDR = netip.MustParsePrefix("172.18.0.0/24")
	}
	if !c.PodCIDR.IsValid() {
		c.PodCIDR = netip.MustParsePrefix("10.244.0.0/16")
	}
	if c.DefaultPodPorts == nil {
		c.DefaultPodPorts = []Port{{Number: 8080, Protocol: TCP}, {Number: 8080, Protocol: UDP}}
	}
}

// Validate checks the configuration against the addressing plan and the limits.
func (c *Config) Validate() error {
	switch {
	case !labNameRE.MatchString(c.Name):
		return fmt.Errorf("lab name %q: must be 1-10 characters of a-z and 0-9", c.Name)
	case c.Nodes < 1 || c.Nodes > MaxNodes:
		return fmt.Errorf("nodes: %d is out of range 1-%d", c.Nodes, MaxNodes)
	case c.Clients < 0 || c.Clients > MaxClients:
		return fmt.Errorf("clients: %d is out of range 0-%d", c.Clients, MaxClients)
	case c.PodsPerNode < 0 || c.PodsPerNode > MaxPodsPerNode:
		return fmt.Errorf("pods per node: %d is out of range 0-%d", c.PodsPerNode, MaxPodsPerNode)
	case c.PodCapacity < 0 || c.PodCapacity > MaxPodsPerNode:
		return fmt.Errorf("pod capacity per node: %d is out of range 0-%d", c.PodCapacity, MaxPodsPerNode)
	case c.Nodes*c.PodsPerNode > MaxPods:
		return fmt.Errorf("pods: %d nodes x %d pods = %d exceeds the limit of %d pods per lab", c.Nodes, c.PodsPerNode, c.Nodes*c.PodsPerNode, MaxPods)
	case !c.NodeCIDR.Addr().Is4() || c.NodeCIDR.Bits() > MaxNodeCIDRBits:
		return fmt.Errorf("node CIDR %s: must be an IPv4 prefix of /%d or larger", c.NodeCIDR, MaxNodeCIDRBits)
	case !c.PodCIDR.Addr().Is4():
		return fmt.Errorf("pod CIDR %s: must be IPv4", c.PodCIDR)
	case c.NodeCIDR.Overlaps(c.PodCIDR):
		return fmt.Errorf("node CIDR %s overlaps pod CIDR %s", c.NodeCIDR, c.PodCIDR)
	}
	if _, err := c.nodeBlockBits(); err != nil {
		return err
	}
	return nil
}

// nodeBlockBits returns the prefix length of each node's pod block: /24, or larger blocks
// when PodsPerNode (or PodCapacity) does not fit (block size >= pods + network, gateway,
// broadcast).
func (c *Config) nodeBlockBits() (int, error) {
	need := max(c.PodsPerNode, c.PodCapacity) + 3
	hostBits := max(8, bits.Len(uint(need-1)))
	blockBits := 32 - hostBits
	nodeBits := bits.Len(uint(c.Nodes - 1))
	if blockBits-nodeBits < c.PodCIDR.Bits() {
		return 0, fmt.Errorf("pod CIDR %s is too small for %d nodes with /%d blocks (%d pods per node)", c.PodCIDR, c.Nodes, blockBits, max(c.PodsPerNode, c.PodCapacity))
	}
	return blockBits, nil
}

// NodePodCIDR returns node i's pod block.
func (c *Config) NodePodCIDR(i int) netip.Prefix {
	b, _ := c.nodeBlockBits()
	base := addrAdd(c.PodCIDR.Masked().Addr(), uint32(i)<<(32-b))
	return netip.PrefixFrom(base, b)
}

// NodeIP returns node i's address on the fabric.
func (c *Config) NodeIP(i int) netip.Addr { return addrAdd(c.NodeCIDR.Masked().Addr(), uint32(10+i)) }

// ClientIP returns client j's address on the fabric.
func (c *Config) ClientIP(j int) netip.Addr {
	return addrAdd(c.NodeCIDR.Masked().Addr(), uint32(200+j))
}

// FabricGateway is the fabric's own address (.1): the nodes' default gateway, which does not
// forward anything, so nothing leaves the lab.
func (c *Config) FabricGateway() netip.Addr { return addrAdd(c.NodeCIDR.Masked().Addr(), 1) }

// NodeName returns the name of node i ("node-0", ...).
func NodeName(i int) string { return fmt.Sprintf("node-%d", i) }

// ClientName returns the name of client j ("client-0", ...).
func ClientName(j int) string { return fmt.Sprintf("client-%d", j) }

// addrAdd returns a + n for IPv4 addresses.
func addrAdd(a netip.Addr, n uint32) netip.Addr {
	b := a.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += n
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
