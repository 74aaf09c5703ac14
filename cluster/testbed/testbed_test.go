//go:build linux

package testbed

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/lab/probe"
	"kpbench.dev/kpbench/manifest"
)

func startTestbed(t *testing.T, backend string, files ...string) *Testbed {
	t.Helper()
	testutil.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tb, err := Start(ctx, Options{
		Lab:       lab.Config{Name: "t" + testutil.RandomID(t, 6), Nodes: 2, Clients: 1},
		Backend:   backend,
		ProbePods: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, tb.Stop(context.Background())) })
	objs, err := manifest.ReadFiles(files...)
	require.NoError(t, err)
	require.NoError(t, tb.Apply(ctx, manifest.RuntimeObjects(objs)...))
	require.NoError(t, tb.WaitSynced(ctx))
	return tb
}

func probeFrom(t *testing.T, tb *Testbed, host string, to netip.AddrPort) probe.Result {
	t.Helper()
	pr, err := tb.Prober(host)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return pr.Request(ctx, probe.Destination{Addr: to, Protocol: lab.TCP}, probe.Options{Timeout: 3 * time.Second})
}

func TestSeedNginxNodePortThroughIPTables(t *testing.T) {
	for _, backend := range []string{"iptables", "iptables-legacy", "nftables"} {
		t.Run(backend, func(t *testing.T) {
			tb := startTestbed(t, backend, "../../scenarios/examples/nginx-nodeport.yaml")
			require.Len(t, tb.Pods(), 3, "3 replicas")
			var svc *corev1.Service
			for _, s := range tb.Services() {
				if s.Name == "nginx-service" {
					svc = s
				}
			}
			require.NotNil(t, svc)
			vip := netip.MustParseAddr(svc.Spec.ClusterIP)

			seen := map[string]bool{}
			for _, node := range tb.Hosts(lab.KindNode) {
				for range 30 {
					res := probeFrom(t, tb, "client-0", netip.AddrPortFrom(node.IP, 30791))
					require.NoError(t, res.Err, "NodePort on %s", node.Name)
					assert.True(t, strings.HasPrefix(res.Answer.Pod, "nginx-deployment-"), res.Answer.Pod)
					seen[res.Answer.Pod] = true
				}
				res := probeFrom(t, tb, ProbePod(node.Name), netip.AddrPortFrom(vip, 88))
				require.NoError(t, res.Err, "ClusterIP from a pod on %s", node.Name)
				pod, _ := tb.Host(ProbePod(node.Name))
				assert.Equal(t, pod.IP, res.Answer.Client.Addr(), "pod source IP preserved through ClusterIP")
			}
			assert.Len(t, seen, 3, "every endpoint reached through the NodePort")
		})
	}
}
