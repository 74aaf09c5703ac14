//go:build linux

package kubestack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/upstream"
	"kpbench.dev/kpbench/kubestack/controlplane"
	"kpbench.dev/kpbench/kubestack/kubelet"
	"kpbench.dev/kpbench/lab"
)

// The cluster DNS, as kubeadm and kind name it: a Service kube-system/kube-dns at the tenth
// address of the Service range (kubelet.DefaultClusterDNS), answering for ClusterDomain.
const (
	// ClusterDomain is the cluster's DNS domain (the kubelet's clusterDomain).
	ClusterDomain = kubelet.DefaultClusterDomain
	// DNSServiceNamespace and DNSServiceName name the cluster DNS Service.
	DNSServiceNamespace = metav1.NamespaceSystem
	DNSServiceName      = "kube-dns"
	// DNSPod is the lab host CoreDNS runs in: a pod namespace on node-0 that is no API Pod
	// (a lab kubelet names its pods namespace/name, so the two never collide).
	DNSPod = "coredns"
	// ManagedBy is the endpointslice.kubernetes.io/managed-by label of the EndpointSlices
	// kpbench writes into a cluster (the DNS Service's, `kpbench e2e`'s background ones):
	// the EndpointSlice controller leaves slices of other managers alone.
	ManagedBy = "kpbench.dev"
	// dnsReadyPort is where CoreDNS's ready plugin answers 200 once the kubernetes plugin
	// has synced with the API server.
	dnsReadyPort = 8181
)

// ServiceCIDR is the Service range of a Stack's API server (--service-cluster-ip-range).
func ServiceCIDR() netip.Prefix { return netip.MustParsePrefix("10.96.0.0/12") }

// DNS is a Stack's cluster DNS: the real CoreDNS (built by `make upstream`, tools/coredns)
// serving ClusterDomain and the reverse zones from the API server, in a pod namespace of
// its own on node-0 (never the host's namespace), behind the Service kube-system/kube-dns,
// whose EndpointSlice points at it, so that every node's kube-proxy carries pods' queries
// to it as on a real cluster. It forwards nothing: a name outside those zones is REFUSED (a
// lab has no upstream resolver).
type DNS struct {
	// ServiceIP is the kube-dns ClusterIP; Host the pod namespace CoreDNS listens in, at
	// Host.IP port 53 (UDP and TCP).
	ServiceIP netip.Addr
	Host      lab.Host
	// PID is CoreDNS's process; Log its output; Startup the time from its start until it
	// was ready (its kubernetes plugin synced).
	PID     int
	Log     string
	Startup time.Duration

	worker *netns.Worker
	cmd    *exec.Cmd
	done   chan struct{} // closed when the process has exited
	err    error         // its exit status, set before done is closed
}

// corefile is CoreDNS's configuration: kubeadm's, less forward (nothing leaves the lab),
// every listener bound to the pod's address.
func corefile(ip netip.Addr, kubeconfig, context string) string {
	return fmt.Sprintf(`%[1]s in-addr.arpa ip6.arpa {
    bind %[2]s
    errors
    ready %[2]s:%[5]d
    kubernetes %[1]s in-addr.arpa ip6.arpa {
        kubeconfig %[3]s %[4]s
        pods insecure
        ttl 30
    }
    cache 30
    loadbalance
}
`, ClusterDomain, ip, kubeconfig, context, dnsReadyPort)
}

// startDNS starts CoreDNS in its pod namespace, waits until it is ready, creates the DNS
// Service and its EndpointSlice, and records the process for a sweep.
func (c *Stack) startDNS(ctx context.Context, cp *controlplane.ControlPlane, l *lab.Lab, bin string) error {
	t0 := time.Now()
	h, err := l.AddPod(ctx, lab.PodSpec{Name: DNSPod, Node: lab.NodeName(0), NoEcho: true, Labels: map[string]string{"k8s-app": DNSServiceName}})
	if err != nil {
		return fmt.Errorf("cluster DNS: %w", err)
	}
	kc, err := cp.AdminKubeconfig()
	if err != nil {
		return fmt.Errorf("cluster DNS: %w", err)
	}
	dir := filepath.Join(c.registry.ClusterDir(c.cfg.Name), "coredns")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cluster DNS: %w", err)
	}
	conf := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(conf, []byte(corefile(h.IP, kc, "kpbench-"+l.Name())), 0o600); err != nil {
		return fmt.Errorf("cluster DNS: %w", err)
	}
	d := &DNS{ServiceIP: kubelet.DefaultClusterDNS(ServiceCIDR()), Host: *h, Log: filepath.Join(dir, "coredns.log"), done: make(chan struct{})}
	c.mu.Lock()
	c.dns = d
	c.mu.Unlock()
	if err := d.start(ctx, bin, conf); err != nil {
		return err
	}
	if err := c.update(func(r *Record) {
		r.Processes = append(r.Processes, ProcessRecord{Component: upstream.CoreDNS, Node: h.Node, PID: d.PID, Binary: bin})
	}); err != nil {
		return err
	}
	if err := d.waitReady(ctx, c.cfg.StartTimeout); err != nil {
		return err
	}
	d.Startup = time.Since(t0)
	rc, err := cp.RESTConfig()
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("cluster DNS: %w", err)
	}
	return publishDNS(ctx, client, d.ServiceIP, h.IP, h.Node, c.cfg.StartTimeout)
}

// start runs CoreDNS from a thread inside the pod's namespace, so that its sockets are made
// there; the parent-death signal is tied to that thread, which lives until stop, so a
// crashed kpbench leaves no CoreDNS behind.
//
// Equivalent to: `ip netns exec $pod coredns -conf $corefile`.
func (d *DNS) start(ctx context.Context, bin, conf string) error {
	f, err := os.Create(d.Log)
	if err != nil {
		return fmt.Errorf("cluster DNS: %w", err)
	}
	w, err := netns.StartWorker(d.Host.NetNSPath)
	if err != nil {
		f.Close()
		return fmt.Errorf("cluster DNS: %w", err)
	}
	d.worker = w
	d.cmd = exec.Command(bin, "-conf", conf)
	d.cmd.Stdout, d.cmd.Stderr = f, f
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := w.Run(ctx, func() error {
		if err := netns.Guard(); err != nil {
			return err
		}
		return d.cmd.Start()
	}); err != nil {
		f.Close()
		close(d.done)
		return fmt.Errorf("cluster DNS: start %s: %w", bin, err)
	}
	d.PID = d.cmd.Process.Pid
	go func() {
		d.err = d.cmd.Wait()
		f.Close()
		close(d.done)
	}()
	return nil
}

// waitReady polls CoreDNS's ready plugin from inside its namespace until it answers 200.
func (d *DNS) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: d.dial}}
	defer client.CloseIdleConnections()
	url := "http://" + netip.AddrPortFrom(d.Host.IP, dnsReadyPort).String() + "/ready"
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		last = controlplane.HTTPOK(ctx, client, url, "")
		if last == nil {
			return nil
		}
		select {
		case <-d.done:
			return fmt.Errorf("cluster DNS: coredns exited during start-up (%v); its log: %s", d.err, d.Log)
		case <-ctx.Done():
			return fmt.Errorf("cluster DNS: coredns not ready after %s (last check: %v); its log: %s", timeout, last, d.Log)
		case <-tick.C:
		}
	}
}

// dial connects from inside CoreDNS's namespace.
func (d *DNS) dial(ctx context.Context, network, address string) (net.Conn, error) {
	return d.worker.Dial(ctx, &net.Dialer{}, network, address)
}

// stop sends CoreDNS SIGTERM, SIGKILL after grace (or when ctx ends), waits for its exit
// and ends the thread that started it. Safe on a DNS that never started.
func (d *DNS) stop(ctx context.Context, grace time.Duration) error {
	if d.cmd != nil && d.cmd.Process != nil {
		select {
		case <-d.done:
		default:
			if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
				return fmt.Errorf("stop coredns: %w", err)
			}
			t := time.NewTimer(grace)
			select {
			case <-d.done:
			case <-t.C:
				_ = d.cmd.Process.Kill()
			case <-ctx.Done():
				_ = d.cmd.Process.Kill()
			}
			t.Stop()
			<-d.done
		}
	}
	if d.worker != nil {
		d.worker.Stop() // after the process: its thread's death would SIGKILL it
	}
	return nil
}

// publishDNS creates the Service kube-system/kube-dns (ClusterIP serviceIP, 53/UDP "dns"
// and 53/TCP "dns-tcp", a selector that matches no Pod, as kubeadm's does match CoreDNS's
// pods) and an EndpointSlice of ours pointing at CoreDNS (podIP on node), retrying while
// kube-system does not exist yet (the API server makes it shortly after it is ready).
//
// Equivalent to: `kubectl -n kube-system create service clusterip kube-dns --clusterip
// 10.96.0.10 --tcp 53` plus the UDP port and `kubectl apply` of the EndpointSlice.
func publishDNS(ctx context.Context, client kubernetes.Interface, serviceIP, podIP netip.Addr, node string, timeout time.Duration) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: DNSServiceName, Namespace: DNSServiceNamespace, Labels: map[string]string{
			"k8s-app": DNSServiceName, "kubernetes.io/name": "CoreDNS", "kubernetes.io/cluster-service": "true",
		}},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: serviceIP.String(), ClusterIPs: []string{serviceIP.String()},
			Selector: map[string]string{"k8s-app": DNSServiceName},
			Ports: []corev1.ServicePort{
				{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(53)},
			},
		},
	}
	ready, port := true, int32(53)
	udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
	dnsName, tcpName := "dns", "dns-tcp"
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: DNSServiceName + "-coredns", Namespace: DNSServiceNamespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: DNSServiceName, discoveryv1.LabelManagedBy: ManagedBy,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{podIP.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &ready},
			NodeName:   &node,
		}},
		Ports: []discoveryv1.EndpointPort{
			{Name: &dnsName, Protocol: &udp, Port: &port},
			{Name: &tcpName, Protocol: &tcp, Port: &port},
		},
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := createDNSObjects(ctx, client, svc, slice)
		if err == nil || !apierrors.IsNotFound(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster DNS: %w (namespace %s not made after %s)", err, DNSServiceNamespace, timeout)
		case <-tick.C:
		}
	}
}

func createDNSObjects(ctx context.Context, client kubernetes.Interface, svc *corev1.Service, slice *discoveryv1.EndpointSlice) error {
	if _, err := client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cluster DNS: create Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	if _, err := client.DiscoveryV1().EndpointSlices(slice.Namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cluster DNS: create EndpointSlice %s/%s: %w", slice.Namespace, slice.Name, err)
	}
	return nil
}

// DNS returns the cluster's DNS (nil before it started).
func (c *Stack) DNS() *DNS {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dns
}
