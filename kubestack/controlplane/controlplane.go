//go:build linux

// Package controlplane runs a real Kubernetes control plane for a lab: etcd and
// kube-apiserver, built by `make upstream` (internal/upstream), inside the lab's
// control-plane namespace kpb-<lab>-cp, attached to the lab fabric. Node namespaces reach
// the API server at https://<fabric .2>:6443. Publish mirrors the lab's object store
// (apistore) into it with client-go.
//
// With Options.Controllers (`kpbench cluster up`) it is a whole control plane:
// kube-controller-manager and kube-scheduler run beside them, and the API server admits
// service accounts and authorizes kubelets with the Node authorizer and NodeRestriction.
// ForwardLoopback is then the one thing in the host's root namespace: a relay from a
// 127.0.0.1 port to the API server, whose upstream sockets are made inside the lab.
//
// The contract with backends/kubeproxy is written down in internal/upstream.
package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/upstream"
	"kpbench.dev/kpbench/lab"
)

// Port is the API server's secure port on the control plane's fabric address.
const Port = 6443

// Interface names: the control plane's veth end on the fabric bridge, and its own end.
const (
	fabricLink   = "kpbcp0"
	fabricBridge = "kpbfab0" // lab's fabric bridge (lab/links.go)
	hostIf       = "eth0"
)

// Options configure Start. Zero fields take the documented defaults.
type Options struct {
	// IP is the control plane's fabric address (default: the fabric's .2, which the lab
	// never gives to a node or client).
	IP netip.Addr
	// ServiceCIDR is the API server's --service-cluster-ip-range; it must be the lab
	// store's (default 10.96.0.0/12).
	ServiceCIDR netip.Prefix
	// NodePortMin and NodePortMax are --service-node-port-range (default 30000-32767).
	NodePortMin, NodePortMax int32
	// Dir holds certificates, kubeconfigs, etcd's data and the components' logs (default
	// /run/kpbench/controlplane/<lab>); removed by Stop.
	Dir string
	// StartTimeout bounds the wait for each component to become ready (default 2m: the
	// API server is ready 2-3 s after start on an idle machine).
	StartTimeout time.Duration
	// StopGrace is how long a component gets after SIGTERM before SIGKILL (default 10s).
	StopGrace time.Duration
	// APIServerArgs are extra kube-apiserver flags, appended last.
	APIServerArgs []string
	// Controllers makes a whole control plane (see the package documentation):
	// kube-controller-manager and kube-scheduler too, ServiceAccount admission, the Node
	// authorizer and NodeRestriction. Without it the API server runs alone, with no
	// service accounts, as the bench's publisher wants it.
	Controllers bool
	// ControllerManagerArgs and SchedulerArgs are extra flags of those components,
	// appended last.
	ControllerManagerArgs, SchedulerArgs []string
}

func (o *Options) defaults(l *lab.Lab) {
	cfg := l.Config()
	if !o.IP.IsValid() {
		o.IP = cfg.FabricGateway().Next()
	}
	if !o.ServiceCIDR.IsValid() {
		o.ServiceCIDR = netip.MustParsePrefix("10.96.0.0/12")
	}
	if o.NodePortMin == 0 && o.NodePortMax == 0 {
		o.NodePortMin, o.NodePortMax = 30000, 32767
	}
	if o.Dir == "" {
		o.Dir = filepath.Join("/run/kpbench/controlplane", l.Name())
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 2 * time.Minute
	}
	if o.StopGrace == 0 {
		o.StopGrace = 10 * time.Second
	}
}

// Usage is the resident memory of the control plane's processes, in bytes (0 for a
// component that does not run).
type Usage struct {
	APIServer, Etcd, ControllerManager, Scheduler uint64
}

// ControlPlane is a running etcd and kube-apiserver of one lab.
type ControlPlane struct {
	// NetNS and NetNSPath are the control-plane namespace (kpb-<lab>-cp).
	NetNS, NetNSPath string
	// IP is the API server's fabric address.
	IP netip.Addr
	// Version is the API server's gitVersion, as /version reports it.
	Version string
	// Startup is the time from Start until /readyz answered ok; EtcdStartup the part
	// until etcd's /health answered.
	Startup, EtcdStartup time.Duration
	// ControllersStartup is the time from Start until kube-controller-manager and
	// kube-scheduler both answered /healthz (Options.Controllers; else 0).
	ControllersStartup time.Duration
	// StartRSS is the processes' resident memory once ready (see RSS for a new sample).
	StartRSS Usage

	lab    *lab.Lab
	opts   Options
	pki    *pki
	worker *netns.Worker
	etcd   *component
	api    *component
	kcm    *component // kube-controller-manager (Options.Controllers)
	sched  *component // kube-scheduler (Options.Controllers)

	mu          sync.Mutex
	kubeconfigs map[string]string
	kubelets    map[string]*keyPair // client certificates of nodes' kubelets, by node
	stopped     bool
}

// Start starts etcd and kube-apiserver inside the lab's control-plane namespace and waits
// until the API server is ready. On failure everything made so far is removed, and the
// error carries the failing component's log tail.
func Start(ctx context.Context, l *lab.Lab, opts Options) (_ *ControlPlane, err error) {
	t0 := time.Now()
	opts.defaults(l)
	bins := map[string]string{}
	names := []string{upstream.Etcd, upstream.KubeAPIServer}
	if opts.Controllers {
		names = append(names, upstream.KubeControllerManager, upstream.KubeScheduler)
	}
	for _, n := range names {
		p, err := upstream.Binary(n)
		if err != nil {
			return nil, fmt.Errorf("control plane of lab %s: %w", l.Name(), err)
		}
		bins[n] = p
	}
	cp := &ControlPlane{
		NetNS: fmt.Sprintf("%s-%s-cp", netns.Prefix, l.Name()), IP: opts.IP,
		lab: l, opts: opts, kubeconfigs: map[string]string{}, kubelets: map[string]*keyPair{},
	}
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("control plane of lab %s: %w", l.Name(), err), cp.Stop(context.WithoutCancel(ctx)))
		}
	}()
	if err := os.RemoveAll(opts.Dir); err != nil {
		return cp, err
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return cp, err
	}
	if cp.pki, err = newPKI(opts.Dir, l.Name(), opts.IP, firstServiceIP(opts.ServiceCIDR)); err != nil {
		return cp, err
	}
	if err := cp.makeNamespace(); err != nil {
		return cp, err
	}
	if cp.worker, err = netns.StartWorker(cp.NetNSPath); err != nil {
		return cp, err
	}

	cp.etcd, err = startComponent(ctx, cp.worker, upstream.Etcd, bins[upstream.Etcd], cp.etcdArgs(), filepath.Join(opts.Dir, "etcd.log"))
	if err != nil {
		return cp, err
	}
	etcdClient := &http.Client{Transport: &http.Transport{DialContext: cp.dial}, Timeout: 5 * time.Second}
	if err := cp.etcd.waitReady(ctx, opts.StartTimeout, func(ctx context.Context) error {
		return HTTPOK(ctx, etcdClient, "http://127.0.0.1:2379/health", `"health":"true"`)
	}); err != nil {
		return cp, err
	}
	cp.EtcdStartup = time.Since(t0)

	cp.api, err = startComponent(ctx, cp.worker, upstream.KubeAPIServer, bins[upstream.KubeAPIServer], cp.apiServerArgs(), filepath.Join(opts.Dir, "kube-apiserver.log"))
	if err != nil {
		return cp, err
	}
	apiClient, err := cp.httpClient()
	if err != nil {
		return cp, err
	}
	if err := cp.api.waitReady(ctx, opts.StartTimeout, func(ctx context.Context) error {
		return HTTPOK(ctx, apiClient, cp.Server()+"/readyz", "ok")
	}); err != nil {
		return cp, err
	}
	cp.Startup = time.Since(t0)
	cp.Version, err = serverVersion(ctx, apiClient, cp.Server())
	if err != nil {
		return cp, err
	}
	if err := waitLinkUp(ctx, cp.NetNSPath, hostIf); err != nil {
		return cp, err
	}
	if opts.Controllers {
		if err := cp.bindKubeletClient(ctx); err != nil {
			return cp, err
		}
		if err := cp.startControllers(ctx, bins); err != nil {
			return cp, err
		}
		cp.ControllersStartup = time.Since(t0)
	}
	cp.StartRSS, _ = cp.RSS()
	return cp, nil
}

// firstServiceIP is the ClusterIP of default/kubernetes.
func firstServiceIP(p netip.Prefix) netip.Addr { return p.Masked().Addr().Next() }

func (cp *ControlPlane) etcdArgs() []string {
	return []string{
		"--name=kpbench", "--data-dir=" + filepath.Join(cp.opts.Dir, "etcd"),
		"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=kpbench=http://127.0.0.1:2380",
		// A lab's data lives for minutes: no fsync (etcd's own flag for tests).
		"--unsafe-no-fsync", "--log-level=warn",
	}
}

func (cp *ControlPlane) apiServerArgs() []string {
	p := cp.pki
	args := []string{
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=" + cp.IP.String(), "--advertise-address=" + cp.IP.String(),
		"--secure-port=" + strconv.Itoa(Port),
		"--tls-cert-file=" + p.apiserverCert, "--tls-private-key-file=" + p.apiserverKey,
		"--client-ca-file=" + p.caFile,
		"--cert-dir=" + filepath.Join(cp.opts.Dir, "pki"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + p.saPub, "--service-account-signing-key-file=" + p.saPriv,
		"--service-cluster-ip-range=" + cp.opts.ServiceCIDR.String(),
		fmt.Sprintf("--service-node-port-range=%d-%d", cp.opts.NodePortMin, cp.opts.NodePortMax),
		"--profiling=false", "--v=1",
	}
	if cp.opts.Controllers {
		// As kubeadm configures it: kubelets are limited to their own node's objects.
		args = append(args, "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
			"--allow-privileged=true")
		// The kubelets' API (exec, logs, port-forward): the API server proves who it is
		// with a client certificate, checks the kubelet's serving certificate against the
		// cluster's CA, and reaches a node at its InternalIP (a lab node's name resolves
		// nowhere; the default order tries Hostname first).
		args = append(args,
			"--kubelet-client-certificate="+p.kubeletClientCert, "--kubelet-client-key="+p.kubeletClientKey,
			"--kubelet-certificate-authority="+p.caFile,
			"--kubelet-preferred-address-types=InternalIP,Hostname,InternalDNS,ExternalDNS,ExternalIP")
	} else {
		// No controller manager runs: pods would wait for a default service account forever.
		args = append(args, "--authorization-mode=RBAC", "--disable-admission-plugins=ServiceAccount")
	}
	return append(args, cp.opts.APIServerArgs...)
}

// makeNamespace creates kpb-<lab>-cp with eth0 on the lab's fabric bridge.
//
// Equivalent to: `ip netns add $cp && ip -n $fabric link add kpbcp0 master kpbfab0 type veth
// peer name eth0 netns $cp && ip -n $fabric link set kpbcp0 up && ip -n $cp addr add $IP dev
// eth0 && ip -n $cp link set eth0 up && ip -n $cp link set lo up`.
func (cp *ControlPlane) makeNamespace() error {
	fabric, ok := cp.lab.Host("fabric")
	if !ok || fabric.Kind != lab.KindFabric {
		return errors.New("lab has no fabric namespace")
	}
	path, err := netns.Create(cp.NetNS)
	if err != nil {
		return err
	}
	cp.NetNSPath = path
	target, err := vnetns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", path, err)
	}
	defer target.Close()
	if err := netns.Do(fabric.NetNSPath, func() error {
		br, err := netlink.LinkByName(fabricBridge)
		if err != nil {
			return fmt.Errorf("fabric bridge %s: %w", fabricBridge, err)
		}
		veth := &netlink.Veth{
			LinkAttrs: netlink.LinkAttrs{Name: fabricLink, MasterIndex: br.Attrs().Index},
			PeerName:  hostIf, PeerNamespace: netlink.NsFd(int(target)),
		}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("add veth %s: %w", fabricLink, err)
		}
		return netlink.LinkSetUp(veth)
	}); err != nil {
		return err
	}
	bits := cp.lab.Config().NodeCIDR.Bits()
	return netns.Do(path, func() error {
		for _, name := range []string{"lo", hostIf} {
			link, err := netlink.LinkByName(name)
			if err != nil {
				return fmt.Errorf("link %s: %w", name, err)
			}
			if name == hostIf {
				addr := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(cp.IP.AsSlice()), Mask: net.CIDRMask(bits, 32)}}
				if err := netlink.AddrAdd(link, addr); err != nil {
					return fmt.Errorf("address %s/%d on %s: %w", cp.IP, bits, name, err)
				}
			}
			if err := netlink.LinkSetUp(link); err != nil {
				return fmt.Errorf("bring up %s: %w", name, err)
			}
		}
		// The API server reaches pods as on a real cluster (the pods/proxy subresource,
		// webhooks): each node's pod block via that node.
		cfg := cp.lab.Config()
		for i := range cfg.Nodes {
			dst, gw := cfg.NodePodCIDR(i), cfg.NodeIP(i)
			r := &netlink.Route{Dst: &net.IPNet{IP: net.IP(dst.Masked().Addr().AsSlice()), Mask: net.CIDRMask(dst.Bits(), 32)}, Gw: net.IP(gw.AsSlice())}
			if err := netlink.RouteAdd(r); err != nil {
				return fmt.Errorf("route %s via %s: %w", dst, gw, err)
			}
		}
		return nil
	})
}

// waitLinkUp waits until link carries traffic (a fresh veth drops packets until the
// kernel's link watcher marks it up, up to a second later).
func waitLinkUp(ctx context.Context, nsPath, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var up bool
		if err := netns.Do(nsPath, func() error {
			l, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			up = l.Attrs().OperState == netlink.OperUp
			return nil
		}); err != nil {
			return fmt.Errorf("link %s: %w", name, err)
		}
		if up {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("link %s in %s not up: %w", name, nsPath, ctx.Err())
		case <-tick.C:
		}
	}
}

// dial opens a connection from inside the control-plane namespace, for the publisher's and
// the readiness checks' HTTP clients.
func (cp *ControlPlane) dial(ctx context.Context, network, address string) (net.Conn, error) {
	return cp.worker.Dial(ctx, &net.Dialer{Timeout: 10 * time.Second}, network, address)
}

// Server returns the API server's URL, https://<fabric IP>:6443.
func (cp *ControlPlane) Server() string {
	return "https://" + netip.AddrPortFrom(cp.IP, Port).String()
}

// RESTConfig returns a client-go configuration with the admin identity (system:masters)
// whose connections are made from inside the control-plane namespace.
func (cp *ControlPlane) RESTConfig() (*rest.Config, error) {
	key, err := cp.pki.admin.KeyPEM()
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host: cp.Server(),
		TLSClientConfig: rest.TLSClientConfig{
			CAData: cp.pki.ca.CertPEM(), CertData: cp.pki.admin.CertPEM(), KeyData: key,
		},
		Dial: cp.dial, QPS: 50, Burst: 100,
	}, nil
}

// Client returns a clientset of the API server with RESTConfig's admin identity.
func (cp *ControlPlane) Client() (*kubernetes.Clientset, error) {
	cfg, err := cp.RESTConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

func (cp *ControlPlane) httpClient() (*http.Client, error) {
	key, err := cp.pki.admin.KeyPEM()
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(cp.pki.admin.CertPEM(), key)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(cp.pki.ca.cert)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext:     cp.dial,
		TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}}, nil
}

// KubeconfigFor writes (once) and returns the path of a kubeconfig for the named lab node:
// the lab's CA, a client certificate for system:kube-proxy (group system:node-proxier) and
// Server(). Use it from inside the node's namespace, which reaches the API over the fabric.
func (cp *ControlPlane) KubeconfigFor(node string) (string, error) {
	if h, ok := cp.lab.Host(node); !ok || h.Kind != lab.KindNode {
		return "", fmt.Errorf("kubeconfig for %s: not a node of lab %s", node, cp.lab.Name())
	}
	return cp.kubeconfig("kubeconfig-"+node, cp.pki.kubeProxy, KubeProxyUser)
}

// AdminKubeconfig writes (once) and returns the path of a kubeconfig with the admin
// identity (system:masters), e.g. for kubectl run inside a node namespace.
func (cp *ControlPlane) AdminKubeconfig() (string, error) {
	return cp.kubeconfig("kubeconfig-admin", cp.pki.admin, AdminUser)
}

func (cp *ControlPlane) kubeconfig(file string, kp *keyPair, user string) (string, error) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if p, ok := cp.kubeconfigs[file]; ok {
		return p, nil
	}
	key, err := kp.KeyPEM()
	if err != nil {
		return "", err
	}
	name := "kpbench-" + cp.lab.Name()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: cp.Server(), CertificateAuthorityData: cp.pki.ca.CertPEM()}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: kp.CertPEM(), ClientKeyData: key}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user}
	cfg.CurrentContext = name
	p := filepath.Join(cp.opts.Dir, file)
	if err := clientcmd.WriteToFile(*cfg, p); err != nil {
		return "", fmt.Errorf("write kubeconfig %s: %w", p, err)
	}
	cp.kubeconfigs[file] = p
	return p, nil
}

// RSS samples the resident memory of the control plane's processes.
func (cp *ControlPlane) RSS() (Usage, error) {
	var u Usage
	var errs []error
	for _, c := range []struct {
		comp *component
		into *uint64
	}{{cp.api, &u.APIServer}, {cp.etcd, &u.Etcd}, {cp.kcm, &u.ControllerManager}, {cp.sched, &u.Scheduler}} {
		if c.comp != nil {
			v, err := c.comp.rss()
			*c.into = v
			errs = append(errs, err)
		}
	}
	return u, errors.Join(errs...)
}

// PIDs returns the process ids of the running components, by binary name (for the records
// that let a sweep find what a crashed owner left).
func (cp *ControlPlane) PIDs() map[string]int {
	out := map[string]int{}
	for _, c := range []*component{cp.etcd, cp.api, cp.kcm, cp.sched} {
		if c != nil {
			out[c.name] = c.Pid()
		}
	}
	return out
}

// Stop stops the scheduler and the controller manager, then the API server, then etcd (the
// other order makes the API server hang ~30 s; kube-proxy processes must be stopped
// before), and removes the namespace and Dir. Calling it again does nothing.
func (cp *ControlPlane) Stop(ctx context.Context) error {
	cp.mu.Lock()
	if cp.stopped {
		cp.mu.Unlock()
		return nil
	}
	cp.stopped = true
	cp.mu.Unlock()
	var errs []error
	for _, c := range []*component{cp.sched, cp.kcm, cp.api, cp.etcd} {
		if c == nil {
			continue
		}
		if err := c.Stop(ctx, cp.opts.StopGrace); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", c.name, err))
		}
	}
	if cp.worker != nil {
		cp.worker.Stop() // after the processes: its thread's death would SIGKILL them
	}
	if cp.NetNSPath != "" {
		errs = append(errs, netns.Delete(cp.NetNS))
	}
	errs = append(errs, os.RemoveAll(cp.opts.Dir))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stop control plane of lab %s: %w", cp.lab.Name(), err)
	}
	return nil
}

// HTTPOK GETs url with c and checks for status 200 and a body containing want (""
// accepts any body): the readiness check of the control plane's components, and of the
// stack's CoreDNS. Its error carries the status and the start of the body.
func HTTPOK(ctx context.Context, c *http.Client, url, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

func serverVersion(ctx context.Context, c *http.Client, server string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, server+"/version", nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", fmt.Errorf("GET /version: %w", err)
	}
	defer resp.Body.Close()
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return "", fmt.Errorf("GET /version: %w", err)
	}
	return v.GitVersion, nil
}
