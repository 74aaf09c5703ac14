package userspace

import (
	"bytes"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
	bt "kpbench.dev/kpbench/backends/backendstest"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

func TestGenerateGolden(t *testing.T) {
	host := netip.MustParseAddr("10.0.0.1")
	nodePort := bt.Service("default/np:p", "10.96.0.11:80")
	nodePort.NodePort = 30080
	ext := bt.Service("default/ext:p/udp", "10.96.0.12:53")
	ext.ExternalIPs = []netip.Addr{netip.MustParseAddr("192.0.2.10")}
	ext.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("198.51.100.7")}
	noEPs := bt.Service("default/empty:p", "10.96.0.13:80")
	noEPs.NodePort = 30013
	tests := []struct {
		name    string
		portals []Portal
		hostIP  netip.Addr
		rules   int
	}{
		{name: "empty", hostIP: host},
		{name: "clusterip", hostIP: host, rules: 2,
			portals: []Portal{{Service: bt.Service("default/web:p", "10.96.0.10:80"), ProxyPort: 40001}}},
		{name: "clusterip-no-host-ip", rules: 2,
			portals: []Portal{{Service: bt.Service("default/web:p", "10.96.0.10:80"), ProxyPort: 40001}}},
		{name: "nodeport-external-lb", hostIP: host, rules: 10, portals: []Portal{
			{Service: nodePort, ProxyPort: 40002},
			{Service: ext, ProxyPort: 40003},
		}},
		{name: "reject-and-drop", hostIP: host, rules: 5, portals: []Portal{
			{Service: noEPs, ProxyPort: 40004, Action: Reject},
			{Service: bt.Service("default/local:p/udp", "10.96.0.14:53"), ProxyPort: 40005, Action: Drop},
			{Service: bt.Service("default/web:p", "10.96.0.10:80"), ProxyPort: 40001},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			g := Generate(&buf, tt.portals, tt.hostIP)
			assert.Equal(t, tt.rules, g.Rules)
			assert.Equal(t, buf.Len(), g.Bytes)
			path := filepath.Join("testdata", tt.name+".golden")
			if *update {
				require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run with -update to create it")
			assert.Equal(t, string(want), buf.String())
		})
	}
}

func TestCleanupInputDeletesEveryChain(t *testing.T) {
	in := string(CleanupInput())
	for _, j := range Jumps() {
		assert.Contains(t, in, ":"+j.To+" - [0:0]\n")
		assert.Contains(t, in, "-X "+j.To+"\n")
	}
}

func TestEndpointsOf(t *testing.T) {
	ep := func(ip string, ready, local bool) backends.Endpoint {
		return backends.Endpoint{IP: netip.MustParseAddr(ip), Port: 8080, Ready: ready, Serving: ready, IsLocal: local}
	}
	tests := []struct {
		name       string
		mutate     func(sp *backends.ServicePort)
		want       []string
		wantAction Action
	}{
		{name: "no endpoints rejects", wantAction: Reject, want: []string{}},
		{name: "ready endpoints", wantAction: Redirect, want: []string{"10.1.0.1:8080", "10.1.0.2:8080"},
			mutate: func(sp *backends.ServicePort) {
				sp.Endpoints = []backends.Endpoint{ep("10.1.0.1", true, false), ep("10.1.0.2", true, true), ep("10.1.0.3", false, true)}
			}},
		{name: "internal local with no local endpoint drops", wantAction: Drop, want: []string{},
			mutate: func(sp *backends.ServicePort) {
				sp.InternalPolicyLocal = true
				sp.Endpoints = []backends.Endpoint{ep("10.1.0.1", true, false)}
			}},
		{name: "internal local uses local endpoints", wantAction: Redirect, want: []string{"10.1.0.2:8080"},
			mutate: func(sp *backends.ServicePort) {
				sp.InternalPolicyLocal = true
				sp.Endpoints = []backends.Endpoint{ep("10.1.0.1", true, false), ep("10.1.0.2", true, true)}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp := bt.Service("default/web:p", "10.96.0.10:80")
			if tt.mutate != nil {
				tt.mutate(sp)
			}
			eps, action := endpointsOf(sp)
			got := []string{}
			for _, e := range eps {
				got = append(got, e.String())
			}
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantAction, action)
		})
	}
}
