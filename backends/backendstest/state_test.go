package backendstest

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"

	"kpbench.dev/kpbench/backends"
)

func TestService(t *testing.T) {
	sp := Service("ns1/svc1:p80/udp", "172.30.0.41:80", EP("10.1.0.3:53"), EP("10.1.0.2:53", Local))
	assert.Equal(t, backends.ServicePortName{Namespace: "ns1", Name: "svc1", Port: "p80", Protocol: backends.UDP}, sp.Name)
	assert.Equal(t, netip.MustParseAddr("172.30.0.41"), sp.ClusterIP)
	assert.Equal(t, int32(80), sp.Port)
	assert.Equal(t, "10.1.0.2:53", sp.Endpoints[0].String(), "sorted")
	assert.True(t, sp.Endpoints[0].IsLocal)
	assert.Equal(t, Node, sp.Endpoints[0].NodeName)
	assert.Equal(t, OtherNode, sp.Endpoints[1].NodeName)

	unnamed := Service("ns/dns", "10.96.0.10:53")
	assert.Equal(t, "", unnamed.Name.Port)
	assert.Equal(t, backends.TCP, unnamed.Name.Protocol)
	assert.Panics(t, func() { Service("dns", "10.96.0.10:53") })
	assert.Panics(t, func() { Service("ns/dns/icmp", "10.96.0.10:53") })
}

func TestEPs(t *testing.T) {
	eps := EPs(249, 3, 8080, 1)
	var got []string
	for _, e := range eps {
		got = append(got, e.String())
	}
	assert.Equal(t, []string{"10.1.0.250:8080", "10.1.1.1:8080", "10.1.1.2:8080"}, got)
	assert.True(t, eps[0].IsLocal)
	assert.False(t, eps[1].IsLocal)
	e := EP("10.1.0.9:80", Terminating)
	assert.False(t, e.Ready)
	assert.True(t, e.Serving && e.Terminating)
}
