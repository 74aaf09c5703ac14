package backends

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPolicyChains checks kube-proxy's choice of policy chains: the local chain under a
// Local policy (external only when the port is externally accessible), no endpoints when
// the port has none (reject) or its Local path has none on this node (drop).
func TestPolicyChains(t *testing.T) {
	remote := Endpoint{IP: netip.MustParseAddr("10.0.1.2"), Port: 80, Ready: true}
	local := Endpoint{IP: netip.MustParseAddr("10.0.0.2"), Port: 80, Ready: true, IsLocal: true}
	tests := []struct {
		name string
		sp   ServicePort
		want PolicyChains
	}{
		{"cluster", ServicePort{Endpoints: []Endpoint{remote}},
			PolicyChains{Internal: "C", External: "C", HasInternal: true, HasExternal: true}},
		{"no endpoints", ServicePort{},
			PolicyChains{Internal: "C", External: "C"}},
		{"internal local, none here", ServicePort{InternalPolicyLocal: true, Endpoints: []Endpoint{remote}},
			PolicyChains{Internal: "L", External: "C", HasExternal: true}},
		{"external local, not accessible", ServicePort{ExternalPolicyLocal: true, Endpoints: []Endpoint{remote}},
			PolicyChains{Internal: "C", External: "C", HasInternal: true, HasExternal: true}},
		{"external local, one here", ServicePort{ExternalPolicyLocal: true, NodePort: 30080, Endpoints: []Endpoint{remote, local}},
			PolicyChains{Internal: "C", External: "L", HasInternal: true, HasExternal: true}},
		{"external local, none here", ServicePort{ExternalPolicyLocal: true, NodePort: 30080, Endpoints: []Endpoint{remote}},
			PolicyChains{Internal: "C", External: "L", HasInternal: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, CategorizeEndpoints(&tt.sp).PolicyChains(&tt.sp, "C", "L"))
		})
	}
}
