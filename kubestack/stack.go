//go:build linux

// Package kubestack is `kpbench cluster up`: a real Kubernetes cluster in a lab, with no
// containers, kept running for its users. It is a lab (lab) whose control-plane namespace
// runs etcd, kube-apiserver, kube-controller-manager and kube-scheduler
// (kubestack/controlplane), whose every node runs the unmodified kube-proxy
// (backends/kubeproxy) and a lab kubelet (kubestack/kubelet), with an admin kubeconfig
// whose server is a loopback port of the host's namespace forwarded to the API server
// inside the lab. The stack records itself (Registry) before it creates anything, so that
// `kpbench cluster down --all` can remove what a crashed owner left.
package kubestack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kpbench.dev/kpbench/backends/ipvs"
	"kpbench.dev/kpbench/backends/kubeproxy"
	"kpbench.dev/kpbench/internal/upstream"
	"kpbench.dev/kpbench/kubestack/controlplane"
	"kpbench.dev/kpbench/kubestack/kubelet"
	"kpbench.dev/kpbench/lab"
)

// Stack is a running `cluster up` stack, owned by this process.
type Stack struct {
	cfg      Config
	registry Registry
	log      *slog.Logger

	mu       sync.Mutex
	rec      Record
	lab      *lab.Lab
	cp       *controlplane.ControlPlane
	forward  *controlplane.Forward
	kubelets []*kubelet.Kubelet
	proxies  []*kubeproxy.Backend
	dns      *DNS
	down     bool
}

// Option changes how Up builds a cluster.
type Option func(*options)

type options struct {
	logger  *slog.Logger
	logPath string
}

// WithLogger sends what the kubelets report in the background to l.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithLogPath records the owner's log file (a detached cluster's) in the cluster's record.
func WithLogPath(p string) Option { return func(o *options) { o.logPath = p } }

// Binaries are the upstream binaries a cluster runs (kubectl is for its users).
func Binaries() []string {
	return []string{upstream.Etcd, upstream.KubeAPIServer, upstream.KubeControllerManager, upstream.KubeScheduler, upstream.KubeProxy, upstream.CoreDNS}
}

// CheckProxy refuses a proxy mode this kernel cannot run (ipvs without IPVS), wrapping
// ErrBadConfig. It only asks the kernel's generic netlink for the IPVS family.
func CheckProxy(mode kubeproxy.Mode) error {
	if mode != kubeproxy.ModeIPVS {
		return nil
	}
	if err := ipvs.Probe("/proc/self/ns/net"); err != nil {
		return fmt.Errorf("%w: proxy ipvs: %v", ErrBadConfig, err)
	}
	return nil
}

// Up builds and starts the cluster described by cfg and returns once it is ready: every
// Node Ready, kube-proxy synced on every node, and the default service account made (pods
// can be created). On error (or cancellation) everything made so far is removed.
func Up(ctx context.Context, cfg Config, opts ...Option) (_ *Stack, err error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := CheckProxy(cfg.Proxy); err != nil {
		return nil, err
	}
	bins := map[string]string{}
	for _, n := range Binaries() {
		p, err := upstream.Binary(n)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", cfg.Name, err)
		}
		bins[n] = p
	}
	if cfg.KubeProxyBinary != "" {
		bins[upstream.KubeProxy] = cfg.KubeProxyBinary
	}
	if err := lab.CheckMachine(cfg.labConfig()); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("cluster up: needs root (network namespaces)")
	}
	reg := Registry{Dir: cfg.Dir, Labs: lab.Registry{Dir: cfg.LabRegistryDir}}
	if old, err := reg.Read(cfg.Name); err == nil {
		if old.OwnerAlive() {
			return nil, fmt.Errorf("%w: cluster %q already exists (owner pid %d is running); choose another --name or run `kpbench cluster down --name %s`", ErrBadConfig, cfg.Name, old.PID, cfg.Name)
		}
		if err := sweep(reg, old); err != nil {
			return nil, fmt.Errorf("cluster %q: removing stale leftovers: %w", cfg.Name, err)
		}
	}
	c := &Stack{cfg: cfg, registry: reg, log: o.logger, rec: Record{
		Entry: lab.Entry{Name: cfg.Name, PID: os.Getpid(), State: lab.StateBuilding, Created: time.Now()},
		Proxy: string(cfg.Proxy), Nodes: cfg.Nodes, Clients: cfg.Clients,
		Kubeconfig: reg.Kubeconfig(cfg.Name), Log: o.logPath,
	}}
	if err := c.save(); err != nil { // before anything exists
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("cluster %s up: %w", cfg.Name, err), c.Down(context.WithoutCancel(ctx)))
		}
	}()
	if err := c.build(ctx, bins); err != nil {
		return nil, err
	}
	return c, nil
}

// build makes the cluster, phase by phase, timing each.
func (c *Stack) build(ctx context.Context, bins map[string]string) error {
	cfg := c.cfg
	t0 := time.Now()
	var st Startup
	since := func(t time.Time) float64 { return time.Since(t).Seconds() }

	l, err := lab.Up(ctx, cfg.labConfig(), lab.WithRegistryDir(cfg.LabRegistryDir))
	if err != nil {
		return err
	}
	c.setLab(l)
	st.Lab = since(t0)

	cp, err := controlplane.Start(ctx, l, controlplane.Options{
		Controllers: true, Dir: filepath.Join(c.registry.ClusterDir(cfg.Name), "controlplane"),
		StartTimeout: cfg.StartTimeout, ServiceCIDR: ServiceCIDR(),
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.cp = cp
	c.mu.Unlock()
	st.Etcd, st.APIServer, st.Controllers = cp.EtcdStartup.Seconds(), cp.Startup.Seconds(), cp.ControllersStartup.Seconds()
	if err := c.update(func(r *Record) {
		pids := cp.PIDs()
		for _, name := range []string{upstream.Etcd, upstream.KubeAPIServer, upstream.KubeControllerManager, upstream.KubeScheduler} {
			if pid, ok := pids[name]; ok {
				r.Processes = append(r.Processes, ProcessRecord{Component: name, PID: pid, Binary: bins[name]})
			}
		}
		r.APIServer, r.Version = cp.Server(), cp.Version
	}); err != nil {
		return err
	}

	fw, err := cp.ForwardLoopback(cfg.Port)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.forward = fw
	c.mu.Unlock()
	if err := cp.WriteAdminKubeconfig(c.Kubeconfig(), fw.Server()); err != nil {
		return err
	}
	if err := c.update(func(r *Record) { r.Server = fw.Server() }); err != nil {
		return err
	}

	if err := c.startDNS(ctx, cp, l, bins[upstream.CoreDNS]); err != nil {
		return err
	}

	tk := time.Now()
	if err := c.startKubelets(ctx, cp, l); err != nil {
		return err
	}
	st.Kubelets = since(tk)

	tp := time.Now()
	if err := c.startProxies(ctx, cp, l, bins[upstream.KubeProxy]); err != nil {
		return err
	}
	st.KubeProxies = since(tp)

	tr := time.Now()
	if err := c.waitReady(ctx, cp); err != nil {
		return err
	}
	st.Ready = since(tr)
	st.Total = since(t0)
	mem := c.Memory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return c.update(func(r *Record) {
		r.Startup, r.MemoryAtReady, r.HeapAtReady, r.State = &st, mem, ms.HeapInuse, lab.StateReady
	})
}

func (c *Stack) setLab(l *lab.Lab) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lab = l
}

// startKubelets starts a lab kubelet per node, all at once.
func (c *Stack) startKubelets(ctx context.Context, cp *controlplane.ControlPlane, l *lab.Lab) error {
	nodes := l.Hosts(lab.KindNode)
	kubelets := make([]*kubelet.Kubelet, len(nodes))
	g, gctx := errgroup.WithContext(ctx)
	for i, n := range nodes {
		g.Go(func() error {
			rc, err := cp.KubeletRESTConfig(n.Name)
			if err != nil {
				return err
			}
			cert, cas, err := cp.KubeletServing(n.Name)
			if err != nil {
				return err
			}
			dir := c.registry.ClusterDir(c.cfg.Name)
			k, err := kubelet.Start(gctx, kubelet.Options{Node: n, Network: l, Config: rc, Logger: c.log,
				API:      &kubelet.APIOptions{Certificate: cert, ClientCAs: cas},
				StateDir: filepath.Join(dir, "kubelet", n.Name), Logs: kubelet.FileLogs{Dir: filepath.Join(dir, "logs")},
				ClusterDNS: kubelet.DefaultClusterDNS(ServiceCIDR()), ClusterDomain: ClusterDomain})
			kubelets[i] = k
			return err
		})
	}
	err := g.Wait()
	c.mu.Lock()
	for _, k := range kubelets {
		if k != nil {
			c.kubelets = append(c.kubelets, k)
		}
	}
	c.mu.Unlock()
	return err
}

// startProxies starts kube-proxy on every node and waits for each one's first sync.
func (c *Stack) startProxies(ctx context.Context, cp *controlplane.ControlPlane, l *lab.Lab, bin string) error {
	nodes := l.Hosts(lab.KindNode)
	proxies := make([]*kubeproxy.Backend, len(nodes))
	for i, n := range nodes {
		kc, err := cp.KubeconfigFor(n.Name)
		if err != nil {
			return err
		}
		b, err := kubeproxy.New(kubeproxy.Options{
			Binary: bin, NetNSPath: n.NetNSPath, StateDir: l.StateDir(),
			Config: kubeproxy.Config{
				Mode: c.cfg.Proxy, NodeName: n.Name, NodeIP: n.IP, ClusterCIDR: l.Config().PodCIDR,
				Kubeconfig: kc, MinSyncPeriod: c.cfg.MinSyncPeriod,
			},
			SyncTimeout: c.cfg.StartTimeout,
		})
		if err != nil {
			return err
		}
		proxies[i] = b
	}
	c.mu.Lock()
	c.proxies = proxies
	c.mu.Unlock()
	// The first Sync of each starts its kube-proxy and returns after its first sync.
	if err := c.WaitProxiesSynced(ctx, c.cfg.StartTimeout); err != nil {
		return err
	}
	var found []ProcessRecord
	for _, n := range nodes {
		cfgPath := filepath.Join(l.StateDir(), "kube-proxy-"+n.Name+".yaml")
		pid, err := findProcess(bin, cfgPath)
		if err != nil {
			return fmt.Errorf("kube-proxy on %s: %w", n.Name, err)
		}
		found = append(found, ProcessRecord{Component: upstream.KubeProxy, Node: n.Name, PID: pid, Binary: bin})
	}
	return c.update(func(r *Record) { r.Processes = append(r.Processes, found...) })
}

// WaitProxiesSynced waits, within timeout, until every node's kube-proxy has
// programmed what the API server holds now (kube-proxy's own metrics say so: no change
// pending, a sync ended after this call, then a quiet period; backends/kubeproxy's rule).
func (c *Stack) WaitProxiesSynced(ctx context.Context, timeout time.Duration) error {
	c.mu.Lock()
	proxies := c.proxies
	c.mu.Unlock()
	g, gctx := errgroup.WithContext(ctx)
	for _, b := range proxies {
		g.Go(func() error {
			ctx, cancel := context.WithTimeout(gctx, timeout)
			defer cancel()
			for {
				// One Sync waits at most the stack's StartTimeout; a full sync of many
				// Services may take longer, so a wait that ran out is asked again.
				_, err := b.Sync(ctx, nil)
				if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
					return err
				}
			}
		})
	}
	return g.Wait()
}

// waitReady waits until every Node is Ready and untainted by the node lifecycle
// controller, and the default service account exists.
func (c *Stack) waitReady(ctx context.Context, cp *controlplane.ControlPlane) error {
	client, err := cp.Client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		last = c.notReady(ctx, client)
		if last == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %s", c.cfg.StartTimeout, last)
		case <-tick.C:
		}
	}
}

// notReady says what is not ready yet ("" when everything is).
func (c *Stack) notReady(ctx context.Context, client kubernetes.Interface) string {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	if len(nodes.Items) != c.cfg.Nodes {
		return fmt.Sprintf("%d of %d Nodes registered", len(nodes.Items), c.cfg.Nodes)
	}
	for _, n := range nodes.Items {
		ready := false
		for _, cond := range n.Status.Conditions {
			ready = ready || (cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue)
		}
		if !ready {
			return "Node " + n.Name + " is not Ready"
		}
		for _, t := range n.Spec.Taints {
			if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
				return "Node " + n.Name + " still has the taint " + t.Key
			}
		}
	}
	if _, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{}); err != nil {
		return "service account default/default: " + err.Error()
	}
	return ""
}

// Kubeconfig returns the path of the admin kubeconfig.
func (c *Stack) Kubeconfig() string { return c.registry.Kubeconfig(c.cfg.Name) }

// Lab returns the cluster's lab.
func (c *Stack) Lab() *lab.Lab { return c.lab }

// ControlPlane returns the cluster's control plane (its admin kubeconfig and REST
// configuration, for clients of the cluster such as the e2e suite).
func (c *Stack) ControlPlane() *controlplane.ControlPlane { return c.cp }

// Record returns a copy of the cluster's record.
func (c *Stack) Record() Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.rec
	r.Processes = append([]ProcessRecord(nil), c.rec.Processes...)
	return r
}

// Memory samples the resident memory of the cluster's processes and of this one.
func (c *Stack) Memory() []Memory {
	return SampleMemory(c.Record())
}

func (c *Stack) save() error { return c.update(func(*Record) {}) }

// update changes the record with fn and writes it.
func (c *Stack) update(fn func(r *Record)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	fn(&c.rec)
	return c.registry.Write(&c.rec)
}

// Down stops everything of the cluster, in order: the lab kubelets (their pods' echo
// servers), the kube-proxies, the API forward, the control plane, the lab; then removes
// the cluster's directory (record and kubeconfig). It is safe to call more than once.
func (c *Stack) Down(ctx context.Context) error {
	c.mu.Lock()
	if c.down {
		c.mu.Unlock()
		return nil
	}
	c.down = true
	kubelets, proxies, dns, fw, cp, l := c.kubelets, c.proxies, c.dns, c.forward, c.cp, c.lab
	c.mu.Unlock()
	_ = c.update(func(r *Record) { r.State = lab.StateStopping })
	var errs []error
	var wg sync.WaitGroup
	for _, k := range kubelets {
		wg.Add(1)
		go func() { defer wg.Done(); k.Stop() }()
	}
	wg.Wait()
	perr := make([]error, len(proxies))
	for i, p := range proxies {
		if p != nil {
			wg.Add(1)
			go func() { defer wg.Done(); perr[i] = p.Close(ctx) }()
		}
	}
	wg.Wait()
	errs = append(errs, perr...)
	if dns != nil {
		errs = append(errs, dns.stop(ctx, 5*time.Second))
	}
	if fw != nil {
		errs = append(errs, fw.Close())
	}
	if cp != nil {
		errs = append(errs, cp.Stop(ctx))
	}
	if l != nil {
		errs = append(errs, l.Down(ctx))
	}
	errs = append(errs, c.registry.Remove(c.cfg.Name))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster %s down: %w", c.cfg.Name, err)
	}
	return nil
}
