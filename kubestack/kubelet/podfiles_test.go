package kubelet

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestHostsFile(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns1"}}
	ip := netip.MustParseAddr("10.244.1.5")
	got := hostsFile(pod, ip, "web-0", "cluster.local")
	assert.Contains(t, got, "127.0.0.1\tlocalhost\n")
	assert.Contains(t, got, "10.244.1.5\tweb-0\n")

	pod.Spec.Subdomain = "web"
	pod.Spec.HostAliases = []corev1.HostAlias{{IP: "10.0.0.9", Hostnames: []string{"foo", "bar"}}}
	got = hostsFile(pod, ip, "web-0", "cluster.local")
	assert.Contains(t, got, "10.244.1.5\tweb-0.web.ns1.svc.cluster.local\tweb-0\n")
	assert.Contains(t, got, "# Entries added by HostAliases.\n10.0.0.9\tfoo\tbar\n")
}

func TestResolvConf(t *testing.T) {
	dns := []netip.Addr{netip.MustParseAddr("10.96.0.10")}
	ndots := "2"
	tests := []struct {
		name string
		spec corev1.PodSpec
		dns  []netip.Addr
		want string
	}{
		{name: "ClusterFirst (the default)", dns: dns,
			want: "nameserver 10.96.0.10\nsearch ns1.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"},
		{name: "no cluster DNS: no nameserver", want: "search ns1.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"},
		{name: "hostNetwork falls back to Default", spec: corev1.PodSpec{HostNetwork: true}, dns: dns},
		{name: "ClusterFirstWithHostNet", spec: corev1.PodSpec{HostNetwork: true, DNSPolicy: corev1.DNSClusterFirstWithHostNet}, dns: dns,
			want: "nameserver 10.96.0.10\nsearch ns1.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"},
		{name: "None with dnsConfig", dns: dns, spec: corev1.PodSpec{DNSPolicy: corev1.DNSNone, DNSConfig: &corev1.PodDNSConfig{
			Nameservers: []string{"1.2.3.4"}, Searches: []string{"example"}, Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &ndots}, {Name: "edns0"}}}},
			want: "nameserver 1.2.3.4\nsearch example\noptions ndots:2 edns0\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns1"}, Spec: tt.spec}
			assert.Equal(t, tt.want, resolvConf(pod, tt.dns, "cluster.local"))
		})
	}
}

func TestLogPaths(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns1", UID: "u-1"}}
	assert.Equal(t, "/state/logs/ns1_web-0_u-1/agnhost.log", containerLogPath("/state", pod, "agnhost", false))
	assert.Equal(t, "/state/logs/ns1_web-0_u-1/agnhost.previous.log", containerLogPath("/state", pod, "agnhost", true))
	assert.Equal(t, "/state/pods/u-1", podFilesDir("/state", "u-1"))
}
