package kubelet

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The kubelet's files, under Options.Dir (the stack's state directory):
//
//	logs/<namespace>_<pod>_<uid>/<container>.log           the container's stdout and stderr, as written
//	logs/<namespace>_<pod>_<uid>/<container>.previous.log  the previous instance's, after a restart
//	pods/<uid>/etc-hosts, pods/<uid>/resolv.conf           the pod's /etc/hosts and /etc/resolv.conf
//
// The logs stay after the pod is gone (for `kpbench cluster` users to read); the pod's
// files go with it. The kubelet API's `kubectl logs` reads the same layout.

// podLogDir is the directory of a pod's container logs, named as a kubelet names it under
// /var/log/pods.
func podLogDir(dir string, pod *corev1.Pod) string {
	return filepath.Join(dir, "logs", fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID))
}

// containerLogPath is the log file of a container's current (or last) instance;
// previous is the one of the instance before it.
func containerLogPath(dir string, pod *corev1.Pod, container string, previous bool) string {
	if previous {
		return filepath.Join(podLogDir(dir, pod), container+".previous.log")
	}
	return filepath.Join(podLogDir(dir, pod), container+".log")
}

// podFilesDir holds a pod's /etc/hosts and /etc/resolv.conf.
func podFilesDir(dir string, uid string) string { return filepath.Join(dir, "pods", uid) }

// DefaultClusterDomain is the cluster's DNS domain when Options.ClusterDomain is empty.
const DefaultClusterDomain = "cluster.local"

// hostsFile renders a pod's /etc/hosts as a kubelet does: localhost, the pod's own address
// with its hostname (fully qualified when it has a subdomain), and its hostAliases.
func hostsFile(pod *corev1.Pod, podIP netip.Addr, hostname, domain string) string {
	var b strings.Builder
	b.WriteString("# Kubernetes-managed hosts file (kpbench lab kubelet).\n")
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")
	if podIP.IsValid() {
		if pod.Spec.Subdomain != "" && !pod.Spec.HostNetwork {
			fmt.Fprintf(&b, "%s\t%s.%s.%s.svc.%s\t%s\n", podIP, hostname, pod.Spec.Subdomain, pod.Namespace, domain, hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", podIP, hostname)
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	return b.String()
}

// resolvConf renders a pod's /etc/resolv.conf from its dnsPolicy and dnsConfig as a
// kubelet does, with the cluster's DNS servers. Without cluster DNS servers (or for the
// Default policy) no nameserver is written: the host's would be outside the lab, where no
// lab traffic may go.
func resolvConf(pod *corev1.Pod, clusterDNS []netip.Addr, domain string) string {
	var servers, search, options []string
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = corev1.DNSClusterFirst
	}
	if policy == corev1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = corev1.DNSDefault
	}
	if policy == corev1.DNSClusterFirst || policy == corev1.DNSClusterFirstWithHostNet {
		for _, a := range clusterDNS {
			servers = append(servers, a.String())
		}
		search = []string{pod.Namespace + ".svc." + domain, "svc." + domain, domain}
		options = []string{"ndots:5"}
	}
	if c := pod.Spec.DNSConfig; c != nil {
		servers = append(servers, c.Nameservers...)
		search = append(search, c.Searches...)
		for _, o := range c.Options {
			if o.Value != nil {
				options = append(options, o.Name+":"+*o.Value)
			} else {
				options = append(options, o.Name)
			}
		}
	}
	var b strings.Builder
	for _, s := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	if len(search) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(search, " "))
	}
	if len(options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(options, " "))
	}
	return b.String()
}
