package nftables

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/knftables"

	"kpbench.dev/kpbench/backends"
	bt "kpbench.dev/kpbench/backends/backendstest"
	"kpbench.dev/kpbench/backends/conntrack"
)

func newFake() (*Backend, *knftables.Fake) {
	fake := knftables.NewFake(knftables.IPv4Family, Table)
	return newBackend(Options{NodeName: testNode}, fake, ifaceKernel{fake}, nil), fake
}

func TestNames(t *testing.T) {
	// Examples from kube-proxy's servicePortChainNameBase / servicePortEndpointChainNameBase docs.
	n := backends.ServicePortName{Namespace: "ns1", Name: "svc1", Port: "p80", Protocol: backends.TCP}
	tests := []struct{ name, got, want string }{
		{"service", clusterChainPrefix + serviceNameBase(n), "service-ULMVA6XW-ns1/svc1/tcp/p80"},
		{"endpoint", endpointChainPrefix + endpointNameBase(n, bt.EP("10.180.0.1:80")), "endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80"},
		{"long names are truncated", hashAndTruncate(strings.Repeat("a", 300))[chainNameBaseLengthMax-3:], "..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, tt.got) })
	}
}

// TestGolden checks the full ruleset of one sync against testdata/<name>.golden.
func TestGolden(t *testing.T) {
	withNodePort := func(sp *backends.ServicePort, np int32) *backends.ServicePort { sp.NodePort = np; return sp }
	tests := []struct {
		name  string
		state func() *backends.State
	}{
		{"one-endpoint", func() *backends.State {
			return state(bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EP("10.1.0.2:8080")))
		}},
		{"two-endpoints", func() *backends.State {
			return state(bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EP("10.1.0.2:8080"), bt.EP("10.1.0.3:8080", bt.Local)))
		}},
		{"three-endpoints", func() *backends.State {
			return state(bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EP("10.1.0.2:8080"), bt.EP("10.1.0.3:8080", bt.Local), bt.EP("10.1.0.4:8080")))
		}},
		{"320-endpoints", func() *backends.State { return state(bt.Service("ns1/svc1:p80", "172.30.0.41:80", nEndpoints(320)...)) }},
		{"affinity", func() *backends.State {
			sp := bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EP("10.1.0.2:8080"), bt.EP("10.1.0.3:8080", bt.Local))
			sp.AffinityClientIP, sp.AffinityTimeoutSeconds = true, 10800
			return state(sp)
		}},
		// Non-default timeouts on two Services: the affinity sets' timeouts must follow
		// each Service (a generator dropping the set timeout passed every test while the
		// goldens used kube-proxy's default).
		{"affinity-timeouts", func() *backends.State {
			a := bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EP("10.1.0.2:8080"), bt.EP("10.1.0.3:8080", bt.Local))
			a.AffinityClientIP, a.AffinityTimeoutSeconds = true, 60
			b := bt.Service("ns1/svc2:p80", "172.30.0.42:80", bt.EP("10.1.0.4:9090"))
			b.AffinityClientIP, b.AffinityTimeoutSeconds = true, 3600
			return state(a, b)
		}},
		{"nodeport", func() *backends.State {
			return state(withNodePort(bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EP("10.1.0.2:8080")), 30080))
		}},
		{"nodeport-all-local-addresses-masquerade-all", func() *backends.State {
			s := state(withNodePort(bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EP("10.1.0.2:8080")), 30080))
			s.NodeIPs, s.ClusterCIDR, s.MasqueradeAll = nil, netip.Prefix{}, true
			return s
		}},
		{"external-policy-local", func() *backends.State {
			sp := withNodePort(bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EP("10.1.0.2:8080"), bt.EP("10.1.0.3:8080", bt.Local)), 30080)
			sp.ExternalPolicyLocal, sp.HealthCheckNodePort = true, 30000
			return state(sp)
		}},
		{"external-policy-local-no-local-endpoints", func() *backends.State {
			sp := withNodePort(bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EP("10.1.0.2:8080")), 30080)
			sp.ExternalPolicyLocal = true
			return state(sp)
		}},
		{"both-policies-local", func() *backends.State {
			sp := withNodePort(bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EP("10.1.0.2:8080"), bt.EP("10.1.0.3:8080", bt.Local)), 30080)
			sp.ExternalPolicyLocal, sp.InternalPolicyLocal = true, true
			return state(sp)
		}},
		{"loadbalancer-source-ranges", func() *backends.State {
			sp := withNodePort(bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EP("10.1.0.2:8080")), 30080)
			sp.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("5.6.7.8")}
			sp.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("192.168.0.0/24")}
			return state(sp)
		}},
		{"external-ips", func() *backends.State {
			sp := bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EP("10.1.0.2:8080"))
			sp.ExternalIPs = []netip.Addr{netip.MustParseAddr("192.168.99.11"), netip.MustParseAddr("2001:db8::1")}
			return state(sp)
		}},
		{"no-endpoints", func() *backends.State {
			sp := withNodePort(bt.Service("ns1/svc1:p80", "172.30.0.41:80"), 30080)
			sp.ExternalIPs = []netip.Addr{netip.MustParseAddr("192.168.99.11")}
			return state(sp)
		}},
		// kube-proxy names an unnamed port "ns/name", without the colon the iptables
		// seed's older kube-proxy wrote (diff-rules against v1.37.2 found it).
		{"no-endpoints-unnamed-port", func() *backends.State {
			sp := withNodePort(bt.Service("ns1/svc1:p80", "172.30.0.41:80"), 30080)
			sp.Name.Port = ""
			return state(sp)
		}},
		{"internal-policy-local", func() *backends.State {
			a := bt.Service("ns1/svc-local:p80", "172.30.0.41:80", bt.EP("10.1.0.2:8080"), bt.EP("10.1.0.3:8080", bt.Local))
			a.InternalPolicyLocal = true
			b := bt.Service("ns1/svc-remote:p80", "172.30.0.42:80", bt.EP("10.1.0.4:8080"))
			b.InternalPolicyLocal = true
			return state(a, b)
		}},
		{"terminating-fallback-and-udp", func() *backends.State {
			term := bt.EP("10.1.0.5:53")
			term.Ready, term.Terminating = false, true
			notServing := bt.EP("10.1.0.6:53")
			notServing.Ready = false
			sp := bt.Service("kube-system/dns:p53", "172.30.0.10:53", term, notServing)
			sp.Name.Protocol, sp.Name.Port = backends.UDP, "dns"
			return state(sp)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, fake := newFake()
			res, err := b.Sync(context.Background(), tt.state())
			require.NoError(t, err)
			assert.True(t, res.Full)
			assert.Positive(t, res.Rules)
			dump := fake.Dump()
			if hasServiceChain(dump) {
				assert.Greater(t, res.Bytes, len(fake.LastTransaction.String()), "Bytes counts both transactions of a full sync")
			} else {
				assert.Equal(t, len(fake.LastTransaction.String()), res.Bytes, "nothing to create: the main transaction only")
			}
			golden(t, tt.name, dump)
		})
	}
}

// mutation changes a state in place; the incremental tests apply them in sequence.
type mutation struct {
	name   string
	mutate func(s *backends.State)
	// touches is the service whose chains the incremental transaction may write
	// ("" for none).
	touches string
}

func mutations() []mutation {
	find := func(s *backends.State, name string) *backends.ServicePort {
		for _, sp := range s.Services {
			if sp.Name.Name == name {
				return sp
			}
		}
		panic("no service " + name)
	}
	return []mutation{
		{"add endpoint", func(s *backends.State) {
			sp := find(s, "svc-b")
			sp.Endpoints = append(sp.Endpoints, bt.EP("10.1.1.9:8080"))
		}, "svc-b"},
		{"remove endpoint", func(s *backends.State) {
			sp := find(s, "svc-a")
			sp.Endpoints = sp.Endpoints[1:]
		}, "svc-a"},
		{"enable affinity", func(s *backends.State) {
			sp := find(s, "svc-c")
			sp.AffinityClientIP, sp.AffinityTimeoutSeconds = true, 100
		}, "svc-c"},
		{"change affinity timeout", func(s *backends.State) { find(s, "svc-c").AffinityTimeoutSeconds = 200 }, "svc-c"},
		{"external policy local", func(s *backends.State) {
			sp := find(s, "svc-b")
			sp.NodePort, sp.ExternalPolicyLocal = 30001, true
		}, "svc-b"},
		{"internal policy local without local endpoints", func(s *backends.State) { find(s, "svc-a").InternalPolicyLocal = true }, "svc-a"},
		{"remove all endpoints", func(s *backends.State) { find(s, "svc-c").Endpoints = nil }, "svc-c"},
		{"add service", func(s *backends.State) {
			s.Services = append(s.Services, bt.Service("ns2/svc-d:p443", "172.30.0.44:443", bt.EP("10.1.2.1:8443", bt.Local)))
			s.SortServices()
		}, "svc-d"},
		{"remove service", func(s *backends.State) {
			s.Services = slicesDelete(s.Services, find(s, "svc-b"))
		}, "svc-b"},
		{"disable affinity", func(s *backends.State) {
			sp := find(s, "svc-c")
			sp.AffinityClientIP = false
			sp.Endpoints = []backends.Endpoint{bt.EP("10.1.1.1:8080")}
		}, "svc-c"},
		{"nothing", func(*backends.State) {}, ""},
	}
}

func slicesDelete(svcs []*backends.ServicePort, del *backends.ServicePort) []*backends.ServicePort {
	out := svcs[:0:0]
	for _, sp := range svcs {
		if sp != del {
			out = append(out, sp)
		}
	}
	return out
}

func incrementalStart() *backends.State {
	return state(
		bt.Service("ns1/svc-a:p80", "172.30.0.41:80", bt.EP("10.1.0.2:8080"), bt.EP("10.1.0.3:8080", bt.Local)),
		bt.Service("ns1/svc-b:p80", "172.30.0.42:80", bt.EP("10.1.0.4:8080")),
		bt.Service("ns1/svc-c:p53", "172.30.0.43:53", bt.EP("10.1.0.5:53"), bt.EP("10.1.0.6:53", bt.Local)),
	)
}

// TestIncremental applies a sequence of changes. After each one the incremental
// transaction may only touch the changed service's chains and the shared maps' elements,
// and the resulting table must equal what a full sync of the same state builds.
func TestIncremental(t *testing.T) {
	b, fake := newFake()
	s := incrementalStart()
	_, err := b.Sync(context.Background(), s)
	require.NoError(t, err)
	for _, m := range mutations() {
		t.Run(m.name, func(t *testing.T) {
			m.mutate(s)
			fake.LastTransaction = nil
			res, err := b.Sync(context.Background(), s)
			require.NoError(t, err)
			assert.False(t, res.Full)
			if m.touches == "" {
				assert.Zero(t, res.ChangedServices)
				assert.Zero(t, res.Rules)
				assert.Nil(t, fake.LastTransaction, "no transaction when nothing changed")
			} else {
				assert.Equal(t, 1, res.ChangedServices)
				require.NotNil(t, fake.LastTransaction)
				for _, line := range strings.Split(strings.TrimSpace(fake.LastTransaction.String()), "\n") {
					ok := strings.Contains(line, "/"+m.touches+"/") ||
						strings.HasPrefix(line, "add element ") || strings.HasPrefix(line, "delete element ")
					assert.True(t, ok, "operation outside service %s: %s", m.touches, line)
				}
			}

			ref, refFake := newFake()
			_, err = ref.Sync(context.Background(), s)
			require.NoError(t, err)
			assert.Equal(t, sortedLines(refFake.Dump()), sortedLines(fake.Dump()), "incremental result differs from a full sync")
		})
	}
}

// TestIncrementalTransaction pins the exact operations of one endpoint change.
func TestIncrementalTransaction(t *testing.T) {
	b, fake := newFake()
	s := incrementalStart()
	_, err := b.Sync(context.Background(), s)
	require.NoError(t, err)
	s.Services[1].Endpoints = []backends.Endpoint{bt.EP("10.1.0.7:8080"), bt.EP("10.1.0.8:8080")}
	res, err := b.Sync(context.Background(), s)
	require.NoError(t, err)
	assert.False(t, res.Full)
	golden(t, "incremental-endpoints-change", fake.LastTransaction.String())
}

func TestTableDeletedBehindOurBack(t *testing.T) {
	b, fake := newFake()
	s := incrementalStart()
	_, err := b.Sync(context.Background(), s)
	require.NoError(t, err)
	want := fake.Dump()

	tx := fake.NewTransaction()
	tx.Delete(&knftables.Table{})
	require.NoError(t, fake.Run(context.Background(), tx))

	res, err := b.Sync(context.Background(), s)
	require.NoError(t, err)
	assert.True(t, res.Full)
	assert.Equal(t, "table ip kube-proxy is gone", res.FullReason)
	assert.Equal(t, want, fake.Dump())
}

func TestFailedTransactionMakesNextSyncFull(t *testing.T) {
	b, fake := newFake()
	s := incrementalStart()
	_, err := b.Sync(context.Background(), s)
	require.NoError(t, err)

	// Behind the backend's back, remove the element it will want to delete.
	tx := fake.NewTransaction()
	tx.Delete(&knftables.Element{Map: serviceIPsMap, Key: []string{"172.30.0.42", "tcp", "80"}})
	require.NoError(t, fake.Run(context.Background(), tx))

	s.Services = s.Services[:1]
	res, err := b.Sync(context.Background(), s)
	require.Error(t, err)
	assert.False(t, res.Full)
	assert.Contains(t, err.Error(), "sync node-1 nftables")

	res, err = b.Sync(context.Background(), s)
	require.NoError(t, err)
	assert.True(t, res.Full)
	ref, refFake := newFake()
	_, err = ref.Sync(context.Background(), s)
	require.NoError(t, err)
	assert.Equal(t, sortedLines(refFake.Dump()), sortedLines(fake.Dump()))
}

func TestFullSyncRemovesLeftovers(t *testing.T) {
	// A second backend (a restarted proxy) finds the first one's table.
	first, fake := newFake()
	_, err := first.Sync(context.Background(), incrementalStart())
	require.NoError(t, err)
	second := newBackend(Options{NodeName: testNode}, fake, ifaceKernel{fake}, nil)
	s := state(bt.Service("ns1/svc-a:p80", "172.30.0.41:80", bt.EP("10.1.0.2:8080")))
	res, err := second.Sync(context.Background(), s)
	require.NoError(t, err)
	assert.True(t, res.Full)
	ref, refFake := newFake()
	_, err = ref.Sync(context.Background(), s)
	require.NoError(t, err)
	assert.Equal(t, sortedLines(refFake.Dump()), sortedLines(fake.Dump()))
}

func TestConfigChangeMakesSyncFull(t *testing.T) {
	b, _ := newFake()
	s := incrementalStart()
	_, err := b.Sync(context.Background(), s)
	require.NoError(t, err)
	s.NodeIPs = append(s.NodeIPs, netip.MustParseAddr("192.168.1.10"))
	res, err := b.Sync(context.Background(), s)
	require.NoError(t, err)
	assert.True(t, res.Full)
	assert.Contains(t, res.FullReason, "node IPs")
	res, err = b.Sync(context.Background(), s)
	require.NoError(t, err)
	assert.False(t, res.Full)
	assert.Empty(t, res.FullReason, "a partial sync has no reason")
}

func TestCleanup(t *testing.T) {
	b, fake := newFake()
	require.NoError(t, b.Cleanup(context.Background()), "cleanup without a table")
	_, err := b.Sync(context.Background(), incrementalStart())
	require.NoError(t, err)
	require.NoError(t, b.Cleanup(context.Background()))
	assert.Empty(t, fake.Dump())
	res, err := b.Sync(context.Background(), incrementalStart())
	require.NoError(t, err)
	assert.True(t, res.Full)
}

// TestUDPConntrackCleanup: after each sync the UDP entries the change made stale go
// (backends/synced): those made while the port rejected traffic once it has endpoints,
// and those answered by an endpoint that is gone; nothing else.
func TestUDPConntrackCleanup(t *testing.T) {
	dns := func(eps ...backends.Endpoint) *backends.State {
		sp := bt.Service("kube-system/dns:p53", "172.30.0.10:53", eps...)
		sp.Name.Protocol = backends.UDP
		return state(sp, bt.Service("ns1/tcp:p80", "172.30.0.11:80"))
	}
	ct := bt.NewConntrack()
	fake := knftables.NewFake(knftables.IPv4Family, Table)
	b := newBackend(Options{NodeName: testNode}, fake, ifaceKernel{fake}, ct)
	rejected := bt.UDPFlow("10.1.0.9:5000", "172.30.0.10:53", "172.30.0.10:53")
	toA := bt.UDPFlow("10.1.0.9:5001", "172.30.0.10:53", "10.1.0.2:53")
	toB := bt.UDPFlow("10.1.0.9:5002", "172.30.0.10:53", "10.1.0.3:53")
	steps := []struct {
		name   string
		state  *backends.State
		before []conntrack.Flow
		left   []conntrack.Flow
	}{
		{"no endpoints yet", dns(), []conntrack.Flow{rejected}, []conntrack.Flow{rejected}},
		{"first endpoints: the REJECT's entries go", dns(bt.EP("10.1.0.2:53"), bt.EP("10.1.0.3:53")), nil, nil},
		{"unchanged", dns(bt.EP("10.1.0.2:53"), bt.EP("10.1.0.3:53")), []conntrack.Flow{toA, toB}, []conntrack.Flow{toA, toB}},
		{"one replaced: its entries go", dns(bt.EP("10.1.0.3:53"), bt.EP("10.1.0.4:53")), nil, []conntrack.Flow{toB}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			ct.Add(st.before...)
			_, err := b.Sync(context.Background(), st.state)
			require.NoError(t, err)
			assert.Equal(t, st.left, ct.Flows())
		})
	}
}

// hasServiceChain reports whether a fake dump holds a per-service chain (one that a full
// sync into an empty table creates in a transaction of its own).
func hasServiceChain(dump string) bool {
	for _, l := range strings.Split(dump, "\n") {
		rest, ok := strings.CutPrefix(l, "add chain ip "+Table+" ")
		if name, _, _ := strings.Cut(rest, " "); ok && isServiceChainName(name) {
			return true
		}
	}
	return false
}
