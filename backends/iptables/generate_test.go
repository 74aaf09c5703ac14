package iptables

import (
	"bytes"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
	bt "kpbench.dev/kpbench/backends/backendstest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func generate(t testing.TB, st *backends.State) string {
	t.Helper()
	var buf bytes.Buffer
	NewGenerator(DefaultMasqueradeBit).Generate(&buf, Request{State: st})
	return buf.String()
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create %s", path)
	assert.Equal(t, string(want), got)
}

func TestGenerateGolden(t *testing.T) {
	tests := []struct {
		name string
		st   *backends.State
	}{
		{"endpoints-1", bt.State(bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EPs(1, 1, 8080, 0)...))},
		{"endpoints-2", bt.State(bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EPs(1, 2, 8080, 0)...))},
		{"endpoints-3", bt.State(bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EPs(1, 3, 8080, 0)...))},
		{"endpoints-320", bt.State(bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EPs(1, 320, 8080, 0)...))},
		{"affinity", bt.State(bt.With(bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EPs(1, 2, 8080, 0)...), func(sp *backends.ServicePort) {
			sp.AffinityClientIP, sp.AffinityTimeoutSeconds = true, 10800
		}))},
		// Two Services with non-default timeouts, and one with none set (the default): a
		// generator that ignores the Service's timeout, or mixes them up, writes other
		// --seconds (a generator forcing 10800 passed every test while the goldens used
		// 10800, kube-proxy's default, too).
		{"affinity-timeouts", bt.State(
			bt.With(bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EPs(1, 2, 8080, 0)...), func(sp *backends.ServicePort) {
				sp.AffinityClientIP, sp.AffinityTimeoutSeconds = true, 60
			}),
			bt.With(bt.Service("ns1/svc2:p80", "172.30.0.42:80", bt.EPs(1, 1, 9090, 0)...), func(sp *backends.ServicePort) {
				sp.AffinityClientIP, sp.AffinityTimeoutSeconds = true, 3600
			}),
			bt.With(bt.Service("ns1/svc3:p80", "172.30.0.43:80", bt.EPs(1, 1, 7070, 0)...), func(sp *backends.ServicePort) {
				sp.AffinityClientIP, sp.AffinityTimeoutSeconds = true, 0
			}))},
		{"nodeport", bt.State(bt.With(bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EPs(1, 2, 8080, 0)...), func(sp *backends.ServicePort) {
			sp.NodePort = 30080
		}))},
		{"external-policy-local", bt.State(bt.With(bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EPs(1, 3, 8080, 1)...), func(sp *backends.ServicePort) {
			sp.NodePort, sp.ExternalPolicyLocal, sp.HealthCheckNodePort = 30080, true, 30999
			sp.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("1.2.3.4")}
		}), bt.With(bt.Service("ns1/svc2:p80", "172.30.0.42:80", bt.EPs(1, 2, 8080, 0)...), func(sp *backends.ServicePort) {
			sp.NodePort, sp.ExternalPolicyLocal, sp.HealthCheckNodePort = 30081, true, 30998
		}))},
		{"loadbalancer-source-ranges", bt.State(bt.With(bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EPs(1, 2, 8080, 0)...), func(sp *backends.ServicePort) {
			sp.NodePort = 30080
			sp.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("1.2.3.4")}
			sp.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/25"), netip.MustParsePrefix("192.168.0.0/24")}
		}))},
		{"external-ips", bt.State(bt.With(bt.Service("ns1/svc1:p53/udp", "172.30.0.41:53", bt.EPs(1, 2, 5353, 0)...), func(sp *backends.ServicePort) {
			sp.ExternalIPs = []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.11")}
		}))},
		{"no-endpoints", bt.State(bt.With(bt.Service("ns1/svc1:p80", "172.30.0.41:80"), func(sp *backends.ServicePort) {
			sp.NodePort = 30080
			sp.ExternalIPs = []netip.Addr{netip.MustParseAddr("192.0.2.10")}
			sp.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("1.2.3.4")}
		}))},
		{"internal-policy-local", bt.State(bt.With(bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EPs(1, 3, 8080, 1)...), func(sp *backends.ServicePort) {
			sp.InternalPolicyLocal = true
		}), bt.With(bt.Service("ns1/svc2:p80", "172.30.0.42:80", bt.EPs(1, 2, 8080, 0)...), func(sp *backends.ServicePort) {
			sp.InternalPolicyLocal = true
		}))},
		{"masquerade-all", func() *backends.State {
			st := bt.State(bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EPs(1, 2, 8080, 0)...))
			st.MasqueradeAll = true
			return st
		}()},
		{"seed-inference", bt.State(
			bt.With(bt.Service("default/inference-service-0", "10.96.10.20:8500", bt.EPs(1, 2, 8501, 0)...), func(sp *backends.ServicePort) { sp.NodePort = 32000 }),
			bt.With(bt.Service("default/kubernetes:https", "10.96.0.1:443", []backends.Endpoint{{IP: netip.MustParseAddr("192.168.0.1"), Port: 6443, Ready: true, Serving: true}}...),
				func(sp *backends.ServicePort) { sp.AffinityClientIP, sp.AffinityTimeoutSeconds = true, 10800 }),
		)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := generate(t, tt.st)
			_, err := ParseRestore([]byte(got))
			require.NoError(t, err)
			checkGolden(t, tt.name, got)
		})
	}
}

var probRE = regexp.MustCompile(`--probability (\S+)`)

func TestProbabilities(t *testing.T) {
	for _, n := range []int{1, 2, 3, 320} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			out := generate(t, bt.State(bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EPs(1, n, 8080, 0)...)))
			var svcLines []string
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "-A KUBE-SVC-") && !strings.Contains(l, "KUBE-MARK-MASQ") {
					svcLines = append(svcLines, l)
				}
			}
			require.Len(t, svcLines, n)
			seen := map[string]bool{}
			for i, l := range svcLines {
				m := probRE.FindStringSubmatch(l)
				if i == n-1 {
					assert.Nil(t, m, "last rule must be unconditional: %s", l)
					continue
				}
				require.NotNil(t, m, l)
				assert.Equal(t, fmt.Sprintf("%0.10f", 1/float64(n-i)), m[1])
				assert.False(t, seen[m[1]], "probability %s repeated", m[1])
				seen[m[1]] = true
			}
			assert.Len(t, seen, n-1)
		})
	}
}

func TestChainNames(t *testing.T) {
	tests := []struct {
		name backends.ServicePortName
		want string
	}{
		// Both from the seed inference-iptables-save.txt.
		{backends.ServicePortName{Namespace: "default", Name: "kubernetes", Port: "https", Protocol: backends.TCP}, "KUBE-SVC-NPX46M4PTMTKRN6Y"},
		{backends.ServicePortName{Namespace: "default", Name: "inference-service-0", Protocol: backends.TCP}, "KUBE-SVC-CAVPFFD4EDKETLMK"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, ServiceChain(tt.name))
		assert.Equal(t, "KUBE-SVL-"+tt.want[9:], LocalChain(tt.name))
	}
	assert.True(t, IsServiceChain("KUBE-SEP-AAAA"))
	assert.False(t, IsServiceChain("KUBE-SERVICES"))
}

// TestSeedInferenceShape checks the shape of the seed inference-iptables-save.txt: the same
// chain names, 0.5 then an unconditional rule for two endpoints, and the -m recent pair of
// the kubernetes Service.
func TestSeedInferenceShape(t *testing.T) {
	inf := bt.Service("default/inference-service-0", "10.96.10.20:8500", bt.EPs(1, 2, 8501, 0)...)
	inf.NodePort = 32000
	kube := bt.Service("default/kubernetes:https", "10.96.0.1:443", bt.EPs(1, 1, 6443, 0)...)
	kube.AffinityClientIP, kube.AffinityTimeoutSeconds = true, 10800
	s, err := ParseRestore([]byte(generate(t, bt.State(inf, kube))))
	require.NoError(t, err)
	rules := func(chain string) [][]string {
		var out [][]string
		for _, r := range s.Rules {
			if r.Chain == chain {
				out = append(out, r.Args)
			}
		}
		return out
	}
	svcRules := rules("KUBE-SVC-CAVPFFD4EDKETLMK")
	require.Len(t, svcRules, 3) // masquerade for off-cluster sources, then two endpoints
	assert.Equal(t, []string{"--probability", "0.5000000000"}, svcRules[1][len(svcRules[1])-4:len(svcRules[1])-2])
	assert.NotContains(t, svcRules[2], "statistic")
	assert.Equal(t, "-j", svcRules[2][len(svcRules[2])-2])
	sep := svcRules[2][len(svcRules[2])-1]
	assert.Equal(t, []string{"-m", "comment", "--comment", "default/inference-service-0:", "-m", "tcp", "-p", "tcp", "-j", "DNAT", "--to-destination", "10.1.0.3:8501"}, rules(sep)[1])
	np := rules("KUBE-NODEPORTS")
	require.Len(t, np, 1)
	assert.Equal(t, []string{"--dport", "32000", "-j", "KUBE-EXT-CAVPFFD4EDKETLMK"}, np[0][len(np[0])-4:])
	k := rules("KUBE-SVC-NPX46M4PTMTKRN6Y")
	require.Len(t, k, 3)
	assert.Contains(t, strings.Join(k[1], " "), "-m recent --name KUBE-SEP-")
	assert.Contains(t, strings.Join(k[1], " "), "--rcheck --seconds 10800 --reap")
}

func TestLargeClusterDropsEndpointComments(t *testing.T) {
	for _, tt := range []struct {
		n        int
		comments bool
	}{{LargeClusterEndpointsThreshold, true}, {LargeClusterEndpointsThreshold + 1, false}} {
		out := generate(t, bt.State(bt.Service("ns1/svc1:p80", "172.30.0.41:80", bt.EPs(1, tt.n, 8080, 0)...)))
		assert.Equal(t, tt.comments, strings.Contains(out, `-m comment --comment "ns1/svc1:p80 -> `), "n=%d", tt.n)
		assert.Equal(t, tt.comments, strings.Contains(out, `-m comment --comment ns1/svc1:p80 -s`), "n=%d", tt.n)
		assert.Contains(t, out, `"ns1/svc1:p80 cluster IP"`, "service comments stay")
	}
}

func TestGeneratePartial(t *testing.T) {
	a := bt.Service("ns1/a:p80", "172.30.0.1:80", bt.EPs(1, 2, 8080, 0)...)
	b := bt.Service("ns1/b:p80", "172.30.0.2:80", bt.EPs(1, 3, 9090, 0)...)
	g := NewGenerator(DefaultMasqueradeBit)
	var buf bytes.Buffer
	full := g.Generate(&buf, Request{State: bt.State(a, b)})
	assert.Len(t, full.Active, 7)
	buf.Reset()
	res := g.Generate(&buf, Request{State: bt.State(a, b), Changed: map[backends.ServicePortName]bool{b.Name: true}, Installed: full.Active})
	assert.False(t, res.Full)
	assert.Equal(t, 1, res.ChangedServices)
	assert.Empty(t, res.Deleted)
	s, err := ParseRestore(buf.Bytes())
	require.NoError(t, err)
	for _, c := range s.Chains["nat"] {
		if IsServiceChain(c) {
			assert.Contains(t, []string{ServiceChain(b.Name), EndpointChain(b.Name, b.Endpoints[0]), EndpointChain(b.Name, b.Endpoints[1]), EndpointChain(b.Name, b.Endpoints[2])}, c)
		}
	}
	for _, r := range s.Rules {
		assert.False(t, strings.HasPrefix(r.Chain, "KUBE-S") && r.Chain != ChainServices && strings.HasSuffix(r.Chain, ServiceChain(a.Name)[9:]), "rule of unchanged service a: %v", r)
	}
	assert.Contains(t, buf.String(), "-j "+ServiceChain(a.Name)+"\n", "KUBE-SERVICES keeps a's entry")
	assert.NotContains(t, buf.String(), "*mangle")
}
