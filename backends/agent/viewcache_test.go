package agent

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/scenarios/synth"
)

// TestViewCacheMatchesBuildState applies a sequence of changes to the incremental view and
// checks after each that it equals the view built from scratch.
func TestViewCacheMatchesBuildState(t *testing.T) {
	node := backends.NodeView{Name: "node-0", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.10")}}
	opts := backends.ViewOptions{ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16")}
	pods := []synth.Backend{{IP: netip.MustParseAddr("10.244.0.2"), Node: "node-0"}, {IP: netip.MustParseAddr("10.244.1.2"), Node: "node-1"}, {IP: netip.MustParseAddr("10.244.1.3"), Node: "node-1"}}
	svc := func(i int) *corev1.Service {
		s := synth.Service(i, synth.Template{})
		s.Spec.ClusterIP = netip.AddrFrom4([4]byte{10, 96, 0, byte(10 + i)}).String()
		return s
	}
	services := map[string]*corev1.Service{}
	slices := map[string]*discoveryv1.EndpointSlice{}
	vc := newViewCache(node, opts)
	steps := []struct {
		name  string
		apply func()
	}{
		{"add three services", func() {
			for i := range 3 {
				s, sl := svc(i), synth.Slice(i, 0, synth.Template{}, pods)
				services[s.Name], slices[sl.Name] = s, sl
				vc.setService(s, false)
				vc.setSlice(sl, false)
			}
		}},
		{"move one service's endpoints", func() {
			sl := synth.Slice(1, 1, synth.Template{}, pods)
			slices[sl.Name] = sl
			vc.setSlice(sl, false)
		}},
		{"slice before its service", func() {
			sl := synth.Slice(7, 0, synth.Template{}, pods)
			slices[sl.Name] = sl
			vc.setSlice(sl, false)
		}},
		{"the service arrives", func() {
			s := svc(7)
			services[s.Name] = s
			vc.setService(s, false)
		}},
		{"label a slice headless (out of view)", func() {
			sl := synth.Slice(1, 2, synth.Template{}, pods)
			sl.Labels[backends.LabelHeadless] = ""
			slices[sl.Name] = sl
			vc.setSlice(sl, false)
		}},
		{"and back", func() {
			sl := synth.Slice(1, 3, synth.Template{}, pods)
			slices[sl.Name] = sl
			vc.setSlice(sl, false)
		}},
		{"delete a slice", func() {
			sl := slices[synth.Name(0)+"-synth"]
			delete(slices, sl.Name)
			vc.setSlice(sl, true)
		}},
		{"delete a service", func() {
			s := services[synth.Name(2)]
			delete(services, s.Name)
			vc.setService(s, true)
		}},
	}
	for _, st := range steps {
		st.apply()
		var ss []*corev1.Service
		for _, s := range services {
			ss = append(ss, s)
		}
		var sls []*discoveryv1.EndpointSlice
		for _, sl := range slices {
			sls = append(sls, sl)
		}
		want := backends.BuildState(node, opts, ss, sls)
		got := vc.state()
		require.Len(t, got.Services, len(want.Services), st.name)
		for i := range want.Services {
			assert.True(t, want.Services[i].Equal(got.Services[i]), "%s: service %d: %+v != %+v", st.name, i, want.Services[i], got.Services[i])
		}
		assert.Equal(t, want.NodeName, got.NodeName)
		assert.Equal(t, want.ClusterCIDR, got.ClusterCIDR)
	}
}
