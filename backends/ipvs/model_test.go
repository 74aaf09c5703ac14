package ipvs

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
	bt "kpbench.dev/kpbench/backends/backendstest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// state returns backendstest's state with this package's two node addresses.
func state(sps ...*backends.ServicePort) *backends.State {
	st := bt.State(sps...)
	st.NodeIPs = []netip.Addr{ip("192.168.0.1"), ip("192.168.1.1")}
	return st
}

func key(proto backends.Protocol, addr string) ServiceKey {
	a := netip.MustParseAddrPort(addr)
	return ServiceKey{Addr: a.Addr(), Protocol: proto, Port: a.Port()}
}

// flat renders a model as "KEY sched flags timeout -> dest:weight ..." lines, for compact
// expectations.
func flat(m *Model) []string {
	var out []string
	for _, k := range m.SortedKeys() {
		vs := m.Services[k]
		line := k.String() + " " + vs.Scheduler
		if vs.Flags&FlagPersistent != 0 {
			line += " persistent " + strconv.Itoa(int(vs.Timeout))
		}
		for _, d := range sortedDests(vs.Dests) {
			line += " " + d.String() + "=" + strconv.Itoa(vs.Dests[d])
		}
		out = append(out, line)
	}
	return out
}

func TestBuild(t *testing.T) {
	tests := []struct {
		name      string
		st        *backends.State
		scheduler string
		want      []string
		addrs     []string
	}{
		{
			name: "cluster IP, two endpoints", scheduler: "rr",
			st:    state(bt.Service("ns/a:p", "172.30.0.1:80", bt.EP("10.1.0.2:8080"), bt.EP("10.1.0.1:8080", bt.Local))),
			want:  []string{"TCP/172.30.0.1:80 rr 10.1.0.1:8080=1 10.1.0.2:8080=1"},
			addrs: []string{"172.30.0.1"},
		},
		{
			name: "scheduler from options, UDP", scheduler: "sh",
			st:    state(bt.Service("ns/dns:p/udp", "172.30.0.10:53", bt.EP("10.1.0.5:53"))),
			want:  []string{"UDP/172.30.0.10:53 sh 10.1.0.5:53=1"},
			addrs: []string{"172.30.0.10"},
		},
		{
			name: "no endpoints keeps the virtual server", scheduler: "rr",
			st:    state(bt.Service("ns/empty:p", "172.30.0.2:80")),
			want:  []string{"TCP/172.30.0.2:80 rr"},
			addrs: []string{"172.30.0.2"},
		},
		{
			name: "client IP affinity is persistence", scheduler: "rr",
			st: state(bt.With(bt.Service("ns/aff:p", "172.30.0.3:80", bt.EP("10.1.0.1:80")), func(sp *backends.ServicePort) {
				sp.AffinityClientIP, sp.AffinityTimeoutSeconds = true, 7
			})),
			want:  []string{"TCP/172.30.0.3:80 rr persistent 7 10.1.0.1:80=1"},
			addrs: []string{"172.30.0.3"},
		},
		{
			name: "terminating endpoint gets weight 0 beside ready ones", scheduler: "rr",
			st:    state(bt.Service("ns/term:p", "172.30.0.4:80", bt.EP("10.1.0.1:80"), bt.EP("10.1.0.2:80", bt.Terminating))),
			want:  []string{"TCP/172.30.0.4:80 rr 10.1.0.1:80=1 10.1.0.2:80=0"},
			addrs: []string{"172.30.0.4"},
		},
		{
			name: "only terminating endpoints: fallback takes traffic", scheduler: "rr",
			st:    state(bt.Service("ns/fallback:p", "172.30.0.5:80", bt.EP("10.1.0.2:80", bt.Terminating))),
			want:  []string{"TCP/172.30.0.5:80 rr 10.1.0.2:80=1"},
			addrs: []string{"172.30.0.5"},
		},
		{
			name: "node port on every node IP, external and LB IPs bound", scheduler: "rr",
			st: state(bt.With(bt.Service("ns/np:p", "172.30.0.6:80", bt.EP("10.1.0.1:80", bt.Local), bt.EP("10.2.0.1:80")), func(sp *backends.ServicePort) {
				sp.NodePort = 30080
				sp.ExternalIPs = []netip.Addr{ip("203.0.113.1")}
				sp.LoadBalancerIPs = []netip.Addr{ip("198.51.100.1")}
			})),
			want: []string{
				"TCP/172.30.0.6:80 rr 10.1.0.1:80=1 10.2.0.1:80=1",
				"TCP/192.168.0.1:30080 rr 10.1.0.1:80=1 10.2.0.1:80=1",
				"TCP/192.168.1.1:30080 rr 10.1.0.1:80=1 10.2.0.1:80=1",
				"TCP/198.51.100.1:80 rr 10.1.0.1:80=1 10.2.0.1:80=1",
				"TCP/203.0.113.1:80 rr 10.1.0.1:80=1 10.2.0.1:80=1",
			},
			addrs: []string{"172.30.0.6", "198.51.100.1", "203.0.113.1"},
		},
		{
			name: "external policy local: external paths use local endpoints only", scheduler: "rr",
			st: state(bt.With(bt.Service("ns/etp:p", "172.30.0.7:80", bt.EP("10.1.0.1:80", bt.Local), bt.EP("10.2.0.1:80"), bt.EP("10.2.0.2:80", bt.Terminating)), func(sp *backends.ServicePort) {
				sp.NodePort, sp.ExternalPolicyLocal = 30081, true
			})),
			want: []string{
				"TCP/172.30.0.7:80 rr 10.1.0.1:80=1 10.2.0.1:80=1 10.2.0.2:80=0",
				"TCP/192.168.0.1:30081 rr 10.1.0.1:80=1",
				"TCP/192.168.1.1:30081 rr 10.1.0.1:80=1",
			},
			addrs: []string{"172.30.0.7"},
		},
		{
			name: "internal policy local with no local endpoint: no real servers", scheduler: "rr",
			st: state(bt.With(bt.Service("ns/itp:p", "172.30.0.8:80", bt.EP("10.2.0.1:80")), func(sp *backends.ServicePort) {
				sp.InternalPolicyLocal = true
			})),
			want:  []string{"TCP/172.30.0.8:80 rr"},
			addrs: []string{"172.30.0.8"},
		},
		{
			name: "external policy local, no local endpoint: external paths fall back to the cluster set", scheduler: "rr",
			st: state(bt.With(bt.Service("ns/etp-remote:p", "172.30.0.10:80", bt.EP("10.2.0.1:80"), bt.EP("10.2.0.2:80", bt.Terminating)), func(sp *backends.ServicePort) {
				sp.NodePort, sp.ExternalPolicyLocal = 30082, true
			})),
			want: []string{
				"TCP/172.30.0.10:80 rr 10.2.0.1:80=1 10.2.0.2:80=0",
				"TCP/192.168.0.1:30082 rr 10.2.0.1:80=1 10.2.0.2:80=0",
				"TCP/192.168.1.1:30082 rr 10.2.0.1:80=1 10.2.0.2:80=0",
			},
			addrs: []string{"172.30.0.10"},
		},
		{
			name: "both policies local, node port, no local endpoint: cluster set on every path", scheduler: "rr",
			st: state(bt.With(bt.Service("ns/both-local:p", "172.30.0.11:80", bt.EP("10.2.0.1:80")), func(sp *backends.ServicePort) {
				sp.NodePort, sp.ExternalPolicyLocal, sp.InternalPolicyLocal = 30083, true, true
			})),
			want: []string{
				"TCP/172.30.0.11:80 rr 10.2.0.1:80=1",
				"TCP/192.168.0.1:30083 rr 10.2.0.1:80=1",
				"TCP/192.168.1.1:30083 rr 10.2.0.1:80=1",
			},
			addrs: []string{"172.30.0.11"},
		},
		{
			name: "IPv6 addresses are left out", scheduler: "rr",
			st: func() *backends.State {
				st := state(
					bt.With(bt.Service("ns/dual:p", "172.30.0.9:80", bt.EP("10.1.0.1:80"), bt.EP("[fd00::1]:80")), func(sp *backends.ServicePort) {
						sp.NodePort, sp.ExternalIPs = 30009, []netip.Addr{ip("2001:db8::9")}
					}),
					bt.Service("ns/v6:p", "[fd00:30::9]:80", bt.EP("[fd00::2]:80")),
				)
				st.NodeIPs = append(st.NodeIPs[:1], ip("fd00:1::1"))
				return st
			}(),
			want:  []string{"TCP/172.30.0.9:80 rr 10.1.0.1:80=1", "TCP/192.168.0.1:30009 rr 10.1.0.1:80=1"},
			addrs: []string{"172.30.0.9"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Build(tt.st, tt.scheduler)
			assert.Equal(t, tt.want, flat(m))
			var addrs []string
			for _, a := range sortedAddrs(m.Addrs) {
				addrs = append(addrs, a.String())
			}
			assert.Equal(t, tt.addrs, addrs)
			for _, vs := range m.Services {
				assert.Equal(t, tt.st.Services[0].Name, vs.Owner)
			}
		})
	}
}

func TestValidScheduler(t *testing.T) {
	for _, s := range []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "sh", "dh", "sed", "nq", "mh"} {
		assert.True(t, ValidScheduler(s), s)
	}
	for _, s := range []string{"", "RR", "random", "fo", "ovf"} {
		assert.False(t, ValidScheduler(s), s)
	}
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create %s", path)
	assert.Equal(t, string(want), got)
}
