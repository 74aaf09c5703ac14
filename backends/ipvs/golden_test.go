package ipvs

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"kpbench.dev/kpbench/backends"
	bt "kpbench.dev/kpbench/backends/backendstest"
)

// mixedState has one service port of every kind the ipsets distinguish.
func mixedState() *backends.State {
	return state(
		bt.Service("ns/plain:p", "172.30.0.1:80", bt.EP("10.1.0.1:8080", bt.Local), bt.EP("10.2.0.1:8080")),
		bt.With(bt.Service("ns/np:p/udp", "172.30.0.2:53", bt.EP("10.1.0.2:53", bt.Local)), func(sp *backends.ServicePort) { sp.NodePort = 30053 }),
		bt.With(bt.Service("ns/local:p", "172.30.0.3:443", bt.EP("10.1.0.3:8443", bt.Local)), func(sp *backends.ServicePort) {
			sp.NodePort, sp.ExternalPolicyLocal, sp.HealthCheckNodePort = 30443, true, 32000
			sp.ExternalIPs = []netip.Addr{ip("203.0.113.7")}
			sp.LoadBalancerIPs = []netip.Addr{ip("198.51.100.3")}
		}),
		bt.With(bt.Service("ns/fw:p", "172.30.0.4:80", bt.EP("10.2.0.4:80")), func(sp *backends.ServicePort) {
			sp.LoadBalancerIPs = []netip.Addr{ip("198.51.100.4")}
			sp.ExternalIPs = []netip.Addr{ip("203.0.113.4")}
			sp.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("10.0.0.0/8")}
		}),
	)
}

func TestIPSetGolden(t *testing.T) {
	tests := []struct {
		name string
		st   *backends.State
	}{
		{"ipset-empty", state()},
		{"ipset-mixed", mixedState()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			BuildSets(tt.st).WriteRestore(&b, nil)
			checkGolden(t, tt.name, b.String())
		})
	}
}

func TestIPSetsLeaveIPv6Out(t *testing.T) {
	st := state(
		bt.With(bt.Service("ns/dual:p", "172.30.0.9:80", bt.EP("[fd00::1]:80", bt.Local)), func(sp *backends.ServicePort) {
			sp.ExternalIPs = []netip.Addr{ip("2001:db8::9")}
			sp.LoadBalancerIPs = []netip.Addr{ip("2001:db8::10"), ip("198.51.100.9")}
			sp.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("192.0.2.0/24")}
		}),
		bt.Service("ns/v6:p", "[fd00:30::9]:80"),
	)
	var b strings.Builder
	BuildSets(st).WriteRestore(&b, nil)
	for _, v6 := range []string{"fd00", "2001:db8"} {
		assert.NotContains(t, b.String(), v6, "no IPv6 entry in family inet sets")
	}
	assert.Contains(t, b.String(), "add KUBE-LOAD-BALANCER-SOURCE-CIDR 198.51.100.9,tcp:80,192.0.2.0/24\n")
}

func TestIPSetPartialWritesChangedSetsOnly(t *testing.T) {
	old := BuildSets(mixedState())
	st := mixedState()
	st.Services = append(st.Services, bt.Service("ns/new:p", "172.30.0.9:80"))
	st.SortServices()
	cur := BuildSets(st)
	changed := cur.ChangedSets(old)
	assert.Equal(t, map[string]bool{SetClusterIP: true, SetIPVSIPs: true}, changed)
	var b strings.Builder
	n := cur.WriteRestore(&b, changed)
	assert.Equal(t, len(cur[SetClusterIP])+len(cur[SetIPVSIPs]), n)
	assert.Equal(t, 2, strings.Count(b.String(), "flush "))
	assert.Equal(t, len(SetSpecs()), strings.Count(b.String(), " -exist\n"), "every set is created (idempotently) anyway")
	assert.Empty(t, cur.ChangedSets(cur))
}

func TestRulesGolden(t *testing.T) {
	tests := []struct {
		name    string
		cfg     RulesConfig
		missing []Jump
	}{
		{"rules-first-sync", RulesConfig{ClusterCIDR: netip.MustParsePrefix("10.0.0.0/8"), MasqueradeBit: DefaultMasqueradeBit}, Jumps()},
		{"rules-jumps-present", RulesConfig{ClusterCIDR: netip.MustParsePrefix("10.0.0.0/8"), MasqueradeBit: DefaultMasqueradeBit}, nil},
		{"rules-masquerade-all-bit-15", RulesConfig{MasqueradeAll: true, MasqueradeBit: 15}, nil},
		{"rules-no-cluster-cidr", RulesConfig{MasqueradeBit: DefaultMasqueradeBit}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			n := WriteRules(&b, tt.cfg, tt.missing)
			assert.Equal(t, strings.Count(b.String(), "\n-"), n)
			checkGolden(t, tt.name, b.String())
		})
	}
}

func TestRulesDoNotGrowWithServices(t *testing.T) {
	cfg := RulesConfig{ClusterCIDR: netip.MustParsePrefix("10.0.0.0/8"), MasqueradeBit: DefaultMasqueradeBit}
	var a, b strings.Builder
	WriteRules(&a, cfg, nil)
	WriteRules(&b, cfg, nil)
	assert.Equal(t, a.String(), b.String())
	assert.NotContains(t, a.String(), "172.30.", "no service address in the constant ruleset")
}

func TestCleanupInput(t *testing.T) {
	var b strings.Builder
	WriteCleanup(&b, []Jump{Jumps()[0]})
	checkGolden(t, "cleanup", b.String())
}
