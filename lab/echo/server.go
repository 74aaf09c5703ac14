//go:build linux

// Package echo is the server that runs in every lab pod. It answers every TCP line, every
// HTTP/1.x request and every UDP datagram with one line that names the pod, its IP and node,
// and the client address it saw:
//
//	pod=web-1 ip=10.244.1.5 node=node-1 client=10.0.0.1:40312 port=80 proto=tcp
//
// Beside that line protocol it speaks agnhost netexec's HTTP API (/hostname, /clientip,
// /echo, /dial, /healthz, /readyz; see netexec.go) and its UDP commands, so that probes
// written for registry.k8s.io/e2e-test-images/agnhost work the same in the lab.
//
// One kpbench process hosts thousands of pods, so there is no process per pod: Serve creates
// the listening sockets on a thread that has entered the pod's namespace (internal/netns.Do), and
// ordinary goroutines serve them afterwards, since a socket stays in the namespace it was
// created in.
//
// The sockets are bound to the wildcard address in dual-stack mode (`[::]:port`, which
// accepts IPv4 too, like 0.0.0.0:port); client addresses are reported unmapped (10.0.0.1,
// not ::ffff:10.0.0.1). UDP answers leave from the source address the pod's routing picks,
// which is the pod IP in a lab pod.
package echo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"kpbench.dev/kpbench/internal/conns"
	"kpbench.dev/kpbench/internal/netns"
)

// Identity names the pod an echo server speaks for.
type Identity struct {
	// Pod is the pod name. Required; printable ASCII without spaces.
	Pod string
	// PodIP is the pod's IP address. Required.
	PodIP string
	// Node is the name of the node hosting the pod. Required; printable ASCII without spaces.
	Node string
	// Hostname is what netexec's /hostname answers (default Pod, as a pod's hostname is its
	// name unless spec.hostname says otherwise).
	Hostname string
}

// Port is one port the echo server listens on.
type Port struct {
	// Number is the port, 1-65535.
	Number int32
	// Protocol is TCP or UDP.
	Protocol Protocol
}

// String renders the port as 80/TCP.
func (p Port) String() string { return fmt.Sprintf("%d/%s", p.Number, p.Protocol) }

// Server is an echo server serving some ports of one pod. It is safe for concurrent use.
type Server struct {
	nsPath string
	id     Identity
	ports  []Port
	idle   time.Duration

	ctx          context.Context // ends at Close: /dial's connections give up
	cancel       context.CancelFunc
	shuttingDown atomic.Bool // /readyz fails (see MarkShuttingDown)

	wg sync.WaitGroup

	closeOnce sync.Once
	listeners []net.Listener
	packets   []net.PacketConn
	conns     conns.Set
}

// Serve opens the given ports inside the network namespace at nsPath (a pod) and serves them
// until Close. It refuses to listen in the host's root namespace. If any port cannot be
// opened, nothing is left open.
//
// Equivalent to: `ip netns exec $pod socat ... TCP-LISTEN:$port,fork` for every port.
func Serve(nsPath string, id Identity, ports []Port) (*Server, error) {
	ip, err := validate(id, ports)
	if err != nil {
		return nil, fmt.Errorf("echo serve %s in %s: %w", id.Pod, nsPath, err)
	}
	id.PodIP = ip.String()
	if id.Hostname == "" {
		id.Hostname = id.Pod
	}
	s := &Server{
		nsPath: nsPath,
		id:     id,
		ports:  append([]Port(nil), ports...),
		idle:   DefaultIdleTimeout,
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	err = netns.Do(nsPath, func() error {
		if err := netns.Guard(); err != nil {
			return err
		}
		for _, p := range ports {
			addr := fmt.Sprintf(":%d", p.Number)
			switch p.Protocol {
			case TCP:
				l, err := net.Listen("tcp", addr)
				if err != nil {
					return fmt.Errorf("listen %s: %w", p, err)
				}
				s.listeners = append(s.listeners, l)
			case UDP:
				c, err := net.ListenPacket("udp", addr)
				if err != nil {
					return fmt.Errorf("listen %s: %w", p, err)
				}
				s.packets = append(s.packets, c)
			}
		}
		return nil
	})
	if err != nil {
		s.cancel()
		s.closeSockets()
		return nil, fmt.Errorf("echo serve %s in %s: %w", id.Pod, nsPath, err)
	}
	for i, l := range s.listeners {
		s.conns.Serve(l, &s.wg, s.tcpHandler(tcpPorts(ports)[i]))
	}
	for i, c := range s.packets {
		s.wg.Add(1)
		go s.packetLoop(c, udpPorts(ports)[i])
	}
	return s, nil
}

// validate checks the identity and ports, and returns the parsed pod IP.
func validate(id Identity, ports []Port) (netip.Addr, error) {
	if err := validValue(id.Pod); err != nil {
		return netip.Addr{}, fmt.Errorf("pod name %q: %w", id.Pod, err)
	}
	if err := validValue(id.Node); err != nil {
		return netip.Addr{}, fmt.Errorf("node name %q: %w", id.Node, err)
	}
	if id.Hostname != "" {
		if err := validValue(id.Hostname); err != nil {
			return netip.Addr{}, fmt.Errorf("hostname %q: %w", id.Hostname, err)
		}
	}
	ip, err := netip.ParseAddr(id.PodIP)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("pod IP: %w", err)
	}
	if len(ports) == 0 {
		return netip.Addr{}, errors.New("no ports")
	}
	seen := make(map[Port]bool, len(ports))
	for _, p := range ports {
		if p.Number < 1 || p.Number > 65535 {
			return netip.Addr{}, fmt.Errorf("port %s: number not in 1-65535", p)
		}
		if p.Protocol != TCP && p.Protocol != UDP {
			return netip.Addr{}, fmt.Errorf("port %s: protocol must be TCP or UDP", p)
		}
		if seen[p] {
			return netip.Addr{}, fmt.Errorf("port %s: listed twice", p)
		}
		seen[p] = true
	}
	return ip, nil
}

// tcpPorts returns the TCP port numbers of ports, in order.
func tcpPorts(ports []Port) []int32 { return portsOf(ports, TCP) }

// udpPorts returns the UDP port numbers of ports, in order.
func udpPorts(ports []Port) []int32 { return portsOf(ports, UDP) }

func portsOf(ports []Port, proto Protocol) []int32 {
	var out []int32
	for _, p := range ports {
		if p.Protocol == proto {
			out = append(out, p.Number)
		}
	}
	return out
}

// Identity returns the pod the server speaks for (PodIP in canonical form).
func (s *Server) Identity() Identity { return s.id }

// Ports returns the ports the server listens on.
func (s *Server) Ports() []Port { return append([]Port(nil), s.ports...) }

// MarkShuttingDown makes netexec's /readyz answer 503 "shutting down", as agnhost netexec
// does once it got SIGTERM; everything else is served as before, until Close.
func (s *Server) MarkShuttingDown() { s.shuttingDown.Store(true) }

// netexec returns the netexec handler of one connection (or UDP peer).
func (s *Server) netexec(client netip.AddrPort, port int32) *netexec {
	return &netexec{hostname: s.id.Hostname, port: port, client: client, shuttingDown: s.shuttingDown.Load, dial: s.dialInPod}
}

// dialInPod connects from a thread inside the pod's namespace (netexec's /dial); the socket
// stays there.
func (s *Server) dialInPod(ctx context.Context, network, address string) (net.Conn, error) {
	return netns.Dial(ctx, s.nsPath, &net.Dialer{}, network, address)
}

// answerLine renders the answer for one client, with its newline.
func (s *Server) answerLine(client netip.AddrPort, port int32, proto Protocol) []byte {
	a := Answer{Pod: s.id.Pod, PodIP: s.id.PodIP, Node: s.id.Node, Client: client, Port: port, Protocol: proto}
	return append(a.appendLine(make([]byte, 0, 128)), '\n')
}

// unmap returns the address and port of addr with an IPv4-mapped address unmapped.
func unmap(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// tcpHandler serves one accepted connection of a TCP port.
func (s *Server) tcpHandler(port int32) func(net.Conn) {
	return func(c net.Conn) {
		client := unmap(c.RemoteAddr().(*net.TCPAddr).AddrPort())
		serveTCP(s.ctx, c, s.answerLine(client, port, TCP), s.idle, s.netexec(client, port).serve)
	}
}

// packetLoop answers UDP datagrams until the socket is closed.
func (s *Server) packetLoop(c net.PacketConn, port int32) {
	defer s.wg.Done()
	uc := c.(*net.UDPConn)
	buf := make([]byte, 64<<10)
	out := make([]byte, 0, 256)
	a := Answer{Pod: s.id.Pod, PodIP: s.id.PodIP, Node: s.id.Node, Port: port, Protocol: UDP}
	for {
		n, from, err := uc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // e.g. ECONNREFUSED from an ICMP error of an earlier answer
		}
		a.Client = unmap(from)
		if cmd, ok := udpCommand(s.id.Hostname, a.Client, port, buf[:n]); ok {
			_, _ = uc.WriteToUDPAddrPort(cmd, from)
			continue
		}
		out = append(a.appendLine(out[:0]), '\n')
		_, _ = uc.WriteToUDPAddrPort(out, from)
	}
}

// Close stops serving: it closes the listening sockets, resets every open connection, and
// waits for all goroutines of the server. Afterwards the server holds no socket in the namespace,
// so the namespace can be freed and the ports bound again. Close is idempotent.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.cancel()
		err = s.closeSockets()
		s.conns.Close(true) // reset: the namespace must be free once Close returns
	})
	s.wg.Wait()
	if err != nil {
		return fmt.Errorf("echo close %s in %s: %w", s.id.Pod, s.nsPath, err)
	}
	return nil
}

// closeSockets closes the listening sockets.
func (s *Server) closeSockets() error {
	var errs []error
	for _, l := range s.listeners {
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for _, c := range s.packets {
		if err := c.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// String describes the server: pod, namespace and ports.
func (s *Server) String() string {
	ps := make([]string, len(s.ports))
	for i, p := range s.ports {
		ps[i] = p.String()
	}
	return fmt.Sprintf("echo %s (%s) in %s on %s", s.id.Pod, s.id.PodIP, s.nsPath, strings.Join(ps, ","))
}
