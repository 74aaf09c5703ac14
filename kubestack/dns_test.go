//go:build linux

package kubestack_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kpbench.dev/kpbench/backends/kubeproxy"
	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/lab"
)

// resolverIn returns a resolver that sends its queries from inside the namespace at nsPath
// to server, as a pod's stub resolver does with the nameserver of its resolv.conf.
func resolverIn(t *testing.T, nsPath string, server netip.Addr) *net.Resolver {
	w, err := netns.StartWorker(nsPath)
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var c net.Conn
		err := w.Run(ctx, func() error {
			if err := netns.Guard(); err != nil {
				return err
			}
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, network, netip.AddrPortFrom(server, 53).String())
			return err
		})
		return c, err
	}}
}

// TestClusterDNS: a pod's query to the kube-dns ClusterIP goes through kube-proxy's rules to
// CoreDNS, which answers from the API server: Services by name (A records), and the reverse
// of a ClusterIP; a name outside the cluster's zones is refused, not forwarded.
func TestClusterDNS(t *testing.T) {
	for _, mode := range []kubeproxy.Mode{kubeproxy.ModeNFTables, kubeproxy.ModeIPTables} {
		t.Run(string(mode), func(t *testing.T) {
			c, client := upCluster(t, mode)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			dns := c.DNS()
			require.NotNil(t, dns)
			assert.Equal(t, "10.96.0.10", dns.ServiceIP.String())
			svc, err := client.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, "10.96.0.10", svc.Spec.ClusterIP)
			api, err := client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
			require.NoError(t, err)

			// A pod on the node CoreDNS does not run on, and one on the same node.
			for _, node := range []string{lab.NodeName(1), lab.NodeName(0)} {
				pod, err := c.Lab().AddPod(ctx, lab.PodSpec{Name: "dnsclient-" + node, Node: node, NoEcho: true})
				require.NoError(t, err)
				r := resolverIn(t, pod.NetNSPath, dns.ServiceIP)
				for name, want := range map[string]string{
					"kubernetes.default.svc.cluster.local.":   api.Spec.ClusterIP,
					"kube-dns.kube-system.svc.cluster.local.": svc.Spec.ClusterIP,
				} {
					addrs, err := r.LookupHost(ctx, name)
					require.NoError(t, err, "%s from %s", name, node)
					assert.Equal(t, []string{want}, addrs, "%s from %s", name, node)
				}
				names, err := r.LookupAddr(ctx, api.Spec.ClusterIP)
				require.NoError(t, err)
				assert.Equal(t, []string{"kubernetes.default.svc.cluster.local."}, names)

				_, err = r.LookupHost(ctx, "example.com.")
				var dnsErr *net.DNSError
				require.True(t, errors.As(err, &dnsErr), "example.com must not resolve: %v", err)
				assert.False(t, dnsErr.IsNotFound, "refused (no upstream), not NXDOMAIN: %v", err)
			}
		})
	}
}
