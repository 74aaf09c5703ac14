//go:build linux

package kubelet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/upstream"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/lab/probe"
)

// PodNetwork makes and removes the network namespaces of a node's pods: the lab
// (*lab.Lab). Names are "namespace/name".
type PodNetwork interface {
	// AddPod creates a pod's namespace on its node's bridge, with the next free address of
	// the node's pod block, and returns once its link carries traffic.
	AddPod(ctx context.Context, spec lab.PodSpec) (*lab.Host, error)
	// RemovePod deletes a pod's namespace.
	RemovePod(ctx context.Context, name string) error
	// SetPodConditions records a pod's readiness for `lab status`.
	SetPodConditions(name string, ready, terminating bool) error
}

// Options configure a Kubelet. Zero durations take the documented defaults.
type Options struct {
	// Node is the lab node the kubelet runs: name, fabric IP, pod block, namespace, zone.
	Node lab.Host
	// Network makes the pods' namespaces (the lab).
	Network PodNetwork
	// Config is the client configuration with the node's identity
	// (controlplane.KubeletRESTConfig). Its Dial is replaced: the kubelet's connections to
	// the API server leave from the node's namespace, over the lab fabric.
	Config *rest.Config
	// Logger receives what goes wrong in the background (default slog.Default()).
	Logger *slog.Logger
	// LeaseDuration is the node Lease's leaseDurationSeconds (default 40s); RenewInterval
	// how often it is renewed (default 10s); StatusInterval how often the Node's status
	// heartbeat is written (default 1m). A kubelet's defaults.
	LeaseDuration, RenewInterval, StatusInterval time.Duration

	// API serves the kubelet API (exec, port-forward, container logs) on the node's
	// InternalIP when set; without it the node serves none, and kubectl exec and logs fail.
	API *APIOptions
	// StateDir is the node's directory: the pods' files (pods/<uid>: resolv.conf, hosts,
	// hostname), the exec helper's mount point (exec-root) and, unless Logs is set, the
	// container logs (logs/). The kubelet leaves it in place at Stop; empty: a temporary
	// directory, removed by Stop.
	StateDir string
	// Logs keeps what the containers print (default FileLogs in StateDir/logs).
	Logs ContainerLogs
	// ClusterDNS is the nameserver of pods with dnsPolicy ClusterFirst (default
	// DefaultClusterDNS of 10.96.0.0/12: 10.96.0.10); ClusterDomain the cluster's domain
	// (default DefaultClusterDomain).
	ClusterDNS    netip.Addr
	ClusterDomain string
	// ExecHelper is the command line of the exec helper, up to PodExecCommand included
	// (default: this very program, /proc/self/exe, and PodExecCommand; a test binary
	// dispatches PodExecCommand to RunPodExec in its TestMain: RunPodExecIfAsked).
	ExecHelper []string
	// Agnhost is the agnhost binary that agnhost containers run and that exec'd commands
	// see as /agnhost (default AgnhostPath(), when it is there). Without it agnhost
	// containers are emulated by the echo server where they can be, else not realisable.
	Agnhost string

	// client replaces the client made from Config (tests).
	client kubernetes.Interface
}

// AgnhostPath is where the agnhost binary is looked for: beside the upstream binaries
// (`make upstream` builds it there).
func AgnhostPath() string { return filepath.Join(upstream.BinDir(), "agnhost") }

// Kubelet is a running lab kubelet of one node.
type Kubelet struct {
	opts     Options
	log      *slog.Logger
	client   kubernetes.Interface
	apiDial  *netns.Worker
	probes   *probe.Prober
	prober   *prober
	launcher *launcher
	// ownStateDir: Options.StateDir is the kubelet's temporary directory, removed by Stop.
	ownStateDir bool
	events      record.EventBroadcaster
	recorder    record.EventRecorder
	nodeUID     types.UID
	since       metav1.Time     // when the node registered (its conditions' transition time)
	runCtx      context.Context // the workers' context: ends with Stop
	cancel      context.CancelFunc
	wg          sync.WaitGroup

	api      *apiServer    // the kubelet API (Options.API)
	logs     ContainerLogs // nil without a state directory
	execer   procExecutor
	execRoot string // the exec helper's mount point

	mu       sync.Mutex
	stopping bool
	pods     map[types.UID]*podWorker
	finished map[types.UID]bool // workers done, until the informer reports the deletion
}

// Start registers the node and starts watching the Pods bound to it. The kubelet runs
// until Stop; ctx bounds only the start (registration and the first list of Pods).
func Start(ctx context.Context, o Options) (_ *Kubelet, err error) {
	if o.Node.Kind != lab.KindNode || !o.Node.PodCIDR.IsValid() || !o.Node.IP.IsValid() {
		return nil, fmt.Errorf("lab kubelet: %q is not a lab node with an address and a pod block", o.Node.Name)
	}
	if o.Network == nil || (o.Config == nil && o.client == nil) {
		return nil, errors.New("lab kubelet: Network and Config are required")
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = 40 * time.Second
	}
	if o.RenewInterval == 0 {
		o.RenewInterval = 10 * time.Second
	}
	if o.StatusInterval == 0 {
		o.StatusInterval = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	ownStateDir := false
	if o.StateDir == "" {
		d, err := os.MkdirTemp("", "kpbench-kubelet-")
		if err != nil {
			return nil, fmt.Errorf("lab kubelet on %s: state directory: %w", o.Node.Name, err)
		}
		o.StateDir, ownStateDir = d, true
	}
	if err := o.apiDefaults(); err != nil {
		if ownStateDir {
			_ = os.RemoveAll(o.StateDir)
		}
		return nil, fmt.Errorf("lab kubelet on %s: %w", o.Node.Name, err)
	}
	k := &Kubelet{opts: o, log: o.Logger.With("kubelet", o.Node.Name), pods: map[types.UID]*podWorker{}, finished: map[types.UID]bool{}, logs: o.Logs, ownStateDir: ownStateDir}
	defer func() {
		if err != nil {
			k.Stop()
			err = fmt.Errorf("lab kubelet on %s: %w", o.Node.Name, err)
		}
	}()
	k.client = o.client
	if k.client == nil {
		if k.apiDial, err = netns.StartWorker(o.Node.NetNSPath); err != nil {
			return nil, err
		}
		cfg := rest.CopyConfig(o.Config)
		cfg.Dial = k.dialAPI
		cfg.UserAgent = "kpbench-lab-kubelet/" + o.Node.Name
		cfg.QPS, cfg.Burst = 50, 100
		if k.client, err = kubernetes.NewForConfig(cfg); err != nil {
			return nil, err
		}
	}
	if k.probes, err = probe.New(o.Node.NetNSPath, probe.WithWorkers(2)); err != nil {
		return nil, err
	}
	if err := k.startProcesses(); err != nil {
		return nil, err
	}
	k.prober = newProber(k.probes)
	k.prober.launcher = k.launcher
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	k.runCtx, k.cancel = runCtx, cancel
	if err := k.register(ctx); err != nil {
		return nil, err
	}
	k.events = record.NewBroadcaster(record.WithContext(runCtx))
	k.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: k.client.CoreV1().Events("")})
	k.recorder = k.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kpbench-lab-kubelet", Host: o.Node.Name})
	if _, err := k.renew(ctx, nil); err != nil {
		return nil, err
	}
	k.wg.Add(1)
	go func() { defer k.wg.Done(); k.heartbeat(runCtx) }()

	factory := informers.NewSharedInformerFactoryWithOptions(k.client, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", o.Node.Name).String()
	}))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.dispatch(obj, false) },
		UpdateFunc: func(_, obj any) { k.dispatch(obj, false) },
		DeleteFunc: func(obj any) { k.dispatch(obj, true) },
	}); err != nil {
		return nil, err
	}
	factory.Start(runCtx.Done())
	k.wg.Add(1)
	go func() { defer k.wg.Done(); <-runCtx.Done(); factory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("list the pods of %s: %w", o.Node.Name, context.Cause(ctx))
	}
	if err := k.startAPI(ctx); err != nil {
		return nil, err
	}
	return k, nil
}

// dialAPI connects to the API server from inside the node's namespace.
func (k *Kubelet) dialAPI(ctx context.Context, network, address string) (net.Conn, error) {
	return k.apiDial.Dial(ctx, &net.Dialer{Timeout: 10 * time.Second}, network, address)
}

// Client returns the kubelet's API client (the node's identity).
func (k *Kubelet) Client() kubernetes.Interface { return k.client }

// register creates the node's Node, or takes over the one that exists (same name: a
// kubelet restarted).
func (k *Kubelet) register(ctx context.Context) error {
	m, err := readMachine()
	if err != nil {
		return err
	}
	if m.storage, err = nodeFSBytes(k.opts.StateDir); err != nil {
		return err
	}
	boot := make([]byte, 16)
	_, _ = rand.Read(boot)
	k.since = metav1.Now()
	h := k.opts.Node
	node := nodeObject(nodeSpec{name: h.Name, ip: h.IP, podCIDR: h.PodCIDR, zone: h.Zone, bootID: hex.EncodeToString(boot), machine: m, apiPort: k.apiPort()}, k.since)
	created, err := k.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = k.client.CoreV1().Nodes().Get(ctx, h.Name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("register Node %s: %w", h.Name, err)
	}
	k.nodeUID = created.UID
	// The API server drops status on create; write it through the status subresource.
	return k.patchNodeStatus(ctx, node.Status)
}

// patchNodeStatus writes the node's status (conditions merge by type).
func (k *Kubelet) patchNodeStatus(ctx context.Context, st corev1.NodeStatus) error {
	patch, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		return err
	}
	if _, err := k.client.CoreV1().Nodes().Patch(ctx, k.opts.Node.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("status of Node %s: %w", k.opts.Node.Name, err)
	}
	return nil
}

// renew creates or renews the node's Lease in kube-node-lease (lease: the last one written,
// or nil), and returns it.
func (k *Kubelet) renew(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	leases := k.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	if lease != nil {
		l := lease.DeepCopy()
		l.Spec.RenewTime = &now
		updated, err := leases.Update(ctx, l, metav1.UpdateOptions{})
		if err == nil {
			return updated, nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("renew Lease %s: %w", k.opts.Node.Name, err)
		}
	}
	cur, err := leases.Get(ctx, k.opts.Node.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		holder, dur := k.opts.Node.Name, int32(k.opts.LeaseDuration/time.Second)
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: k.opts.Node.Name, Namespace: corev1.NamespaceNodeLease,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: k.opts.Node.Name, UID: k.nodeUID}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &now},
		}
		created, err := leases.Create(ctx, l, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create Lease %s: %w", k.opts.Node.Name, err)
		}
		return created, nil
	}
	if err != nil {
		return nil, fmt.Errorf("renew Lease %s: %w", k.opts.Node.Name, err)
	}
	cur.Spec.RenewTime = &now
	updated, err := leases.Update(ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("renew Lease %s: %w", k.opts.Node.Name, err)
	}
	return updated, nil
}

// heartbeat renews the Lease every RenewInterval and writes the Node's status every
// StatusInterval, until ctx ends.
func (k *Kubelet) heartbeat(ctx context.Context) {
	tick := time.NewTicker(k.opts.RenewInterval)
	defer tick.Stop()
	var lease *coordinationv1.Lease
	lastStatus := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		l, err := k.renew(ctx, lease)
		if err != nil {
			if ctx.Err() == nil {
				k.log.Warn("node lease", "err", err)
			}
			lease = nil
		} else {
			lease = l
		}
		if time.Since(lastStatus) >= k.opts.StatusInterval {
			if err := k.patchNodeStatus(ctx, corev1.NodeStatus{Conditions: nodeConditions(metav1.Now(), k.since)}); err != nil {
				if ctx.Err() == nil {
					k.log.Warn("node status", "err", err)
				}
			} else {
				lastStatus = time.Now()
			}
		}
	}
}

// dispatch hands an informer event to the pod's worker, starting one for a new pod.
func (k *Kubelet) dispatch(obj any, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopping {
		return
	}
	if k.finished[pod.UID] {
		if deleted {
			delete(k.finished, pod.UID)
		}
		return
	}
	w := k.pods[pod.UID]
	if w == nil {
		if deleted || podIsTerminal(pod) {
			return
		}
		w = newPodWorker(k, pod.UID)
		k.pods[pod.UID] = w
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			w.loop(k.runCtx)
			k.mu.Lock()
			delete(k.pods, pod.UID)
			k.finished[pod.UID] = true
			k.mu.Unlock()
		}()
	}
	var msg *corev1.Pod
	if !deleted {
		msg = pod
	}
	select { // newest wins: only dispatch sends, under k.mu, so the send never blocks
	case <-w.updates:
	default:
	}
	w.updates <- msg
}

// eventf records an event on a pod.
func (k *Kubelet) eventf(obj runtime.Object, eventType, reason, format string, args ...any) {
	if k.recorder != nil && obj != nil {
		k.recorder.Eventf(obj, eventType, reason, format, args...)
	}
}

// Stop stops every pod (their echo servers and namespaces; the API is left alone), the
// heartbeat and the watch. The Node and its Lease stay in the API server, as when a real
// kubelet stops. It is idempotent.
func (k *Kubelet) Stop() {
	k.mu.Lock()
	k.stopping = true
	k.mu.Unlock()
	if k.api != nil {
		k.api.close() // no new exec or port-forward; the running ones end with their pods
	}
	if k.cancel != nil {
		k.cancel()
	}
	k.wg.Wait()
	if k.events != nil {
		k.events.Shutdown()
	}
	if k.probes != nil {
		_ = k.probes.Close()
	}
	k.stopProcesses()
	if k.apiDial != nil {
		k.apiDial.Stop()
	}
}
