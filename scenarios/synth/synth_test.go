package synth

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"kpbench.dev/kpbench/manifest"
)

func TestServicesAreValidAndSpreadEvenly(t *testing.T) {
	backends := []Backend{
		{IP: netip.MustParseAddr("10.244.0.2"), Node: "node-0"},
		{IP: netip.MustParseAddr("10.244.0.3"), Node: "node-0"},
		{IP: netip.MustParseAddr("10.244.1.2"), Node: "node-1"},
	}
	objs, err := Services(0, 30, Template{Type: corev1.ServiceTypeNodePort}, backends)
	require.NoError(t, err)
	require.Len(t, objs, 60)
	uses := map[string]int{}
	var p manifest.Parser
	for _, o := range objs {
		ko, ok := o.(manifest.KubeObject)
		require.True(t, ok)
		assert.Empty(t, p.Validate(ko), "generated objects pass API validation")
		if sl, ok := o.(*discoveryv1.EndpointSlice); ok {
			require.Len(t, sl.Endpoints, 2)
			for _, ep := range sl.Endpoints {
				uses[ep.Addresses[0]]++
			}
		}
	}
	assert.Equal(t, map[string]int{"10.244.0.2": 20, "10.244.0.3": 20, "10.244.1.2": 20}, uses)
	assert.Equal(t, "svc-000007", Name(7))

	_, err = Services(0, 1, Template{EndpointsPerService: 5}, backends)
	assert.ErrorContains(t, err, "need at least")
}

func TestSliceGenerationMovesEndpoints(t *testing.T) {
	backends := []Backend{{IP: netip.MustParseAddr("10.0.0.1"), Node: "a"}, {IP: netip.MustParseAddr("10.0.0.2"), Node: "b"}, {IP: netip.MustParseAddr("10.0.0.3"), Node: "c"}}
	s0 := Slice(0, 0, Template{}, backends)
	s1 := Slice(0, 1, Template{}, backends)
	assert.Equal(t, "10.0.0.1", s0.Endpoints[0].Addresses[0])
	assert.Equal(t, "10.0.0.2", s1.Endpoints[0].Addresses[0])
}
