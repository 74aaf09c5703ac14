package kubelet

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// DNS defaults of a cluster: kubeadm's and kind's.
const (
	// DefaultClusterDomain is the cluster's DNS domain (the kubelet's --cluster-domain).
	DefaultClusterDomain = "cluster.local"
	// maxDNSSearch is how many search domains a resolver reads (glibc's MAXDNSRCH since
	// 2.26; a kubelet trims to it too).
	maxDNSSearch = 32
)

// DefaultClusterDNS returns the address of the cluster's DNS Service (kube-system/kube-dns)
// in a Service range: its tenth address, as kubeadm and kind reserve it (10.96.0.10 in
// 10.96.0.0/12).
func DefaultClusterDNS(serviceCIDR netip.Prefix) netip.Addr {
	a := serviceCIDR.Masked().Addr()
	for range 10 {
		a = a.Next()
	}
	return a
}

// dnsSettings is what a pod's /etc/resolv.conf says.
type dnsSettings struct {
	nameservers, searches, options []string
}

// podDNS computes a pod's resolver settings as a kubelet does (pkg/kubelet/network/dns):
// ClusterFirst (the default) points at the cluster DNS with the pod's namespace's search
// path and ndots:5, unless the pod is hostNetwork (then it is Default);
// ClusterFirstWithHostNet is ClusterFirst even for hostNetwork pods; Default is the node's
// resolver (host); None is only the pod's dnsConfig, which every policy then extends.
func podDNS(pod *corev1.Pod, clusterDNS netip.Addr, domain string, host dnsSettings) dnsSettings {
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = corev1.DNSClusterFirst
	}
	if policy == corev1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = corev1.DNSDefault
	}
	var s dnsSettings
	switch policy {
	case corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet:
		s.nameservers = []string{clusterDNS.String()}
		s.searches = append([]string{pod.Namespace + ".svc." + domain, "svc." + domain, domain}, host.searches...)
		s.options = []string{"ndots:5"}
	case corev1.DNSDefault:
		s = dnsSettings{nameservers: slices.Clone(host.nameservers), searches: slices.Clone(host.searches), options: slices.Clone(host.options)}
	case corev1.DNSNone:
	}
	if c := pod.Spec.DNSConfig; c != nil {
		s.nameservers = appendNew(s.nameservers, c.Nameservers...)
		s.searches = appendNew(s.searches, c.Searches...)
		for _, o := range c.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			// A pod's option replaces the one of the same name.
			s.options = slices.DeleteFunc(s.options, func(have string) bool { return strings.SplitN(have, ":", 2)[0] == o.Name })
			s.options = append(s.options, opt)
		}
	}
	if len(s.searches) > maxDNSSearch {
		s.searches = s.searches[:maxDNSSearch]
	}
	return s
}

func appendNew(list []string, items ...string) []string {
	for _, it := range items {
		if !slices.Contains(list, it) {
			list = append(list, it)
		}
	}
	return list
}

// parseResolvConf reads the nameserver, search and options lines of a resolv.conf.
func parseResolvConf(b []byte) dnsSettings {
	var s dnsSettings
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";") {
			continue
		}
		switch f[0] {
		case "nameserver":
			s.nameservers = append(s.nameservers, f[1])
		case "search", "domain":
			s.searches = f[1:] // the last one wins, as in the resolver
		case "options":
			s.options = append(s.options, f[1:]...)
		}
	}
	return s
}

// resolvConf renders a resolv.conf.
func (s dnsSettings) resolvConf() []byte {
	var b bytes.Buffer
	if len(s.searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(s.searches, " "))
	}
	for _, ns := range s.nameservers {
		fmt.Fprintf(&b, "nameserver %s\n", ns)
	}
	if len(s.options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(s.options, " "))
	}
	return b.Bytes()
}

// podHostsFile renders a pod's /etc/hosts as a kubelet writes it (pkg/kubelet's
// managedHostsFileContent): localhost lines, the pod's own address with its hostname (and
// its FQDN when it has a subdomain), then the hostAliases. A hostNetwork pod gets the
// node's hosts file (host) and the hostAliases.
func podHostsFile(pod *corev1.Pod, podIP netip.Addr, hostname, domain string, host []byte) []byte {
	var b bytes.Buffer
	if pod.Spec.HostNetwork {
		b.Write(host)
		if len(host) > 0 && host[len(host)-1] != '\n' {
			b.WriteByte('\n')
		}
	} else {
		b.WriteString("# Kubernetes-managed hosts file.\n")
		b.WriteString("127.0.0.1\tlocalhost\n")
		b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
		b.WriteString("fe00::0\tip6-localnet\n")
		b.WriteString("fe00::0\tip6-mcastprefix\n")
		b.WriteString("fe00::1\tip6-allnodes\n")
		b.WriteString("fe00::2\tip6-allrouters\n")
		if podIP.IsValid() {
			if pod.Spec.Subdomain != "" {
				fmt.Fprintf(&b, "%s\t%s.%s.%s.svc.%s\t%s\n", podIP, hostname, pod.Spec.Subdomain, pod.Namespace, domain, hostname)
			} else {
				fmt.Fprintf(&b, "%s\t%s\n", podIP, hostname)
			}
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	return b.Bytes()
}
