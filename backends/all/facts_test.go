//go:build linux

package all

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/perrule"
)

// TestEveryBackendHasFacts: a backend the rules measurement cannot read fails every ladder
// that counts rules (make bench did, for kube-proxy-*); one without a mode gets no periods.
func TestEveryBackendHasFacts(t *testing.T) {
	for _, f := range Registered() {
		t.Run(f.Name, func(t *testing.T) {
			assert.NotEmpty(t, f.Doc)
			assert.NotEmpty(t, f.Family)
			assert.True(t, f.Mode.Valid(), "%s: mode %q", f.Name, f.Mode)
			require.NotEmpty(t, f.Dump)
			for _, c := range f.Dump {
				assert.NotEmpty(t, c.Path)
			}
			require.NotNil(t, f.CountRules)
			n, err := f.CountRules(nil)
			require.NoError(t, err)
			assert.Zero(t, n, "an empty dump holds no rule")
			if f.Normalizer != nil {
				assert.NotEmpty(t, f.Normalizer.Kind)
			}
		})
	}
	_, ok := Lookup("bogus")
	assert.False(t, ok)
}

// TestCountRules counts real dumps of each family: kube-proxy's own (testdata of
// backends/kubeproxy) and an ipvsadm listing.
func TestCountRules(t *testing.T) {
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join("..", "kubeproxy", "testdata", name))
		require.NoError(t, err)
		return data
	}
	ipvsadm := []byte(`IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port Scheduler Flags
  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn
TCP  10.96.0.10:80 rr
  -> 10.244.1.2:8080              Masq    1      0          0
  -> 10.244.2.2:8080              Masq    1      0          0
UDP  10.96.0.10:53 rr
  -> 10.244.1.3:53                Masq    0      0          1
`)
	tests := []struct {
		backend string
		dump    []byte
		want    int
	}{
		// grep -c '^-A' testdata/iptables-affinity.save
		{"kube-proxy-iptables", read("iptables-affinity.save"), 19},
		// 31 rule lines, plus 2 for the numgen vmap's elements (its line 1), plus one per
		// element of cluster-ips, nodeport-ips and service-ips; the affinity sets' size
		// and timeout lines are declarations, not rules
		{"kube-proxy-nftables", read("nft-affinity.txt"), 36},
		{"ipvs", ipvsadm, 5},
	}
	for _, tt := range tests {
		t.Run(tt.backend, func(t *testing.T) {
			f, ok := Lookup(tt.backend)
			require.True(t, ok)
			n, err := f.CountRules(tt.dump)
			require.NoError(t, err)
			assert.Equal(t, tt.want, n)
		})
	}
}

// TestNodeState: a failure's node state holds the rule dump, IPVS's statistics and
// connection table where there are some, and conntrack's flows last.
func TestNodeState(t *testing.T) {
	tests := []struct {
		backend string
		want    []string
	}{
		{"nftables", []string{"nft list table ip kube-proxy", "conntrack -L"}},
		{"iptables-perrule", []string{"iptables-legacy-save -t filter", "iptables-legacy-save -t nat", "iptables-legacy-save -t mangle", "conntrack -L"}},
		{"kube-proxy-iptables", []string{"iptables-nft-save", "conntrack -L"}},
		{"ipvs", []string{"ipvsadm -Ln", "ipvsadm -Ln --stats", "ipvsadm -Lnc", "iptables-save -c", "ipset list", "ip -4 addr show", "ip -4 route show table all", "nft list ruleset", "conntrack -S", "nstat -asz", "conntrack -L"}},
		{"kube-proxy-ipvs", []string{"ipvsadm -Ln", "ipvsadm -Ln --stats", "ipvsadm -Lnc", "iptables-save -c", "ipset list", "ip -4 addr show", "ip -4 route show table all", "nft list ruleset", "conntrack -S", "nstat -asz", "conntrack -L"}},
	}
	for _, tt := range tests {
		t.Run(tt.backend, func(t *testing.T) {
			f, ok := Lookup(tt.backend)
			require.True(t, ok)
			var got []string
			for _, c := range f.NodeState() {
				got = append(got, c.String())
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestForMode(t *testing.T) {
	tests := []struct {
		mode, want string
		ok         bool
	}{
		{"", "iptables", true},
		{"iptables", "iptables", true},
		{"nftables", "nftables", true},
		{"ipvs", "ipvs", true},
		{"kernelspace", "kernelspace", false},
	}
	for _, tt := range tests {
		got, ok := ForMode(tt.mode)
		assert.Equal(t, tt.want, got, tt.mode)
		assert.Equal(t, tt.ok, ok, tt.mode)
	}
}

// TestNormalizable: diff-rules compares the iptables and nftables families, not IPVS or
// the userspace proxy, and only within one dump format.
func TestNormalizable(t *testing.T) {
	assert.Equal(t, []string{"iptables", "iptables-legacy", "iptables-perrule", "kube-proxy-iptables", "kube-proxy-nftables", "nftables"}, Normalizable())
	a, _ := Lookup("iptables-legacy")
	b, _ := Lookup("kube-proxy-iptables")
	c, _ := Lookup("nftables")
	assert.Equal(t, a.Normalizer.Kind, b.Normalizer.Kind)
	assert.NotEqual(t, a.Normalizer.Kind, c.Normalizer.Kind)
}

type fakeBackend struct{}

func (fakeBackend) Name() string { return "fake" }
func (fakeBackend) Sync(context.Context, *backends.State) (backends.SyncResult, error) {
	return backends.SyncResult{}, nil
}
func (fakeBackend) Cleanup(context.Context) error { return nil }

type fakeIPVS struct{ fakeBackend }

func (fakeIPVS) SetScheduler(string) error           { return nil }
func (fakeIPVS) SetWeights(map[netip.Addr]int) error { return nil }
func (fakeIPVS) RuleTimings() []perrule.RuleTiming   { return nil }
func (fakeIPVS) Syncs() uint64                       { return 0 }
func (fakeIPVS) RuleTimingsSince(uint64) ([]perrule.RuleTiming, bool) {
	return nil, true
}
func (fakeIPVS) SetBulk(bool) {}
func (fakeIPVS) Name() string { return "fake-ipvs" }

type wrapper struct{ backends.Backend }

func (w wrapper) Unwrap() backends.Backend { return w.Backend }

// TestCapabilityAccessors: experiments are found on the backend or through a wrapper,
// and not on a backend without them.
func TestCapabilityAccessors(t *testing.T) {
	_, ok := IPVSExperimentsOf(fakeBackend{})
	assert.False(t, ok)
	_, ok = RuleTimerOf(wrapper{fakeBackend{}})
	assert.False(t, ok)
	_, ok = IPVSExperimentsOf(wrapper{fakeIPVS{}})
	assert.True(t, ok)
	_, ok = RuleTimerOf(fakeIPVS{})
	assert.True(t, ok)
}
