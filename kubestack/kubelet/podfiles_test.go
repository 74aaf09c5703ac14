package kubelet

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodResolvConf: a pod's resolv.conf follows its dnsPolicy and dnsConfig as a
// kubelet writes it.
func TestPodResolvConf(t *testing.T) {
	dns := netip.MustParseAddr("10.96.0.10")
	host := parseResolvConf([]byte("# host\nnameserver 10.255.255.53\nsearch corp.example\noptions edns0\n"))
	two := "2"
	cases := []struct {
		name string
		spec corev1.PodSpec
		want string
	}{
		{"default is ClusterFirst", corev1.PodSpec{},
			"search ns1.svc.cluster.local svc.cluster.local cluster.local corp.example\nnameserver 10.96.0.10\noptions ndots:5\n"},
		{"hostNetwork ClusterFirst is Default", corev1.PodSpec{HostNetwork: true},
			"search corp.example\nnameserver 10.255.255.53\noptions edns0\n"},
		{"ClusterFirstWithHostNet", corev1.PodSpec{HostNetwork: true, DNSPolicy: corev1.DNSClusterFirstWithHostNet},
			"search ns1.svc.cluster.local svc.cluster.local cluster.local corp.example\nnameserver 10.96.0.10\noptions ndots:5\n"},
		{"None takes dnsConfig only", corev1.PodSpec{DNSPolicy: corev1.DNSNone, DNSConfig: &corev1.PodDNSConfig{
			Nameservers: []string{"1.2.3.4"}, Searches: []string{"a.example"}, Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &two}}}},
			"search a.example\nnameserver 1.2.3.4\noptions ndots:2\n"},
		{"dnsConfig extends and overrides", corev1.PodSpec{DNSConfig: &corev1.PodDNSConfig{
			Searches: []string{"svc.cluster.local", "b.example"}, Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &two}, {Name: "single-request"}}}},
			"search ns1.svc.cluster.local svc.cluster.local cluster.local corp.example b.example\nnameserver 10.96.0.10\noptions ndots:2 single-request\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "p"}, Spec: tc.spec}
			assert.Equal(t, tc.want, string(podDNS(pod, dns, DefaultClusterDomain, host).resolvConf()))
		})
	}
}

// TestPodHostsFile: a pod's /etc/hosts names it (with its FQDN under a subdomain) and
// its hostAliases; a hostNetwork pod gets the node's.
func TestPodHostsFile(t *testing.T) {
	ip := netip.MustParseAddr("10.244.1.5")
	const head = "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"
	aliases := []corev1.HostAlias{{IP: "1.2.3.4", Hostnames: []string{"foo", "bar"}}}
	cases := []struct {
		name string
		spec corev1.PodSpec
		want string
	}{
		{"plain", corev1.PodSpec{}, head + "10.244.1.5\tweb\n"},
		{"subdomain", corev1.PodSpec{Subdomain: "sub"}, head + "10.244.1.5\tweb.sub.ns1.svc.cluster.local\tweb\n"},
		{"hostAliases", corev1.PodSpec{HostAliases: aliases}, head + "10.244.1.5\tweb\n\n# Entries added by HostAliases.\n1.2.3.4\tfoo\tbar\n"},
		{"hostNetwork", corev1.PodSpec{HostNetwork: true, HostAliases: aliases}, "127.0.0.1 localhost\n\n# Entries added by HostAliases.\n1.2.3.4\tfoo\tbar\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "p"}, Spec: tc.spec}
			assert.Equal(t, tc.want, string(podHostsFile(pod, ip, "web", DefaultClusterDomain, []byte("127.0.0.1 localhost"))))
		})
	}
}

func TestDefaultClusterDNS(t *testing.T) {
	assert.Equal(t, "10.96.0.10", DefaultClusterDNS(netip.MustParsePrefix("10.96.0.0/12")).String())
	assert.Equal(t, "10.0.0.10", DefaultClusterDNS(netip.MustParsePrefix("10.0.0.0/16")).String())
}
