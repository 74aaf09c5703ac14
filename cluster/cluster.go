// Package cluster is the contract of a cluster under test: what `kpbench run`, `check` and
// `conform` drive, whoever built the cluster. It holds the interface and the plain types
// its methods use, and nothing else.
//
// # Glossary of a cluster under test
//
//   - Cluster: the cluster under test. Its Objects are the Kubernetes objects the steps
//     change; its Hosts are the places probes are sent from; its Proxies are the proxies
//     that program its nodes (kube-proxy or one of kpbench's backends).
//   - Host: a node, a pod or an external client (lab.Host). A scenario names nodes
//     node-N and clients client-N on every kind of cluster.
//   - Probe pod: a pod on a node that belongs to no Service, which sends in-cluster
//     traffic (ProbeHost).
//   - Client: a host outside the cluster. A cluster without one sends a client's traffic
//     from elsewhere and says so (ClientFor).
//   - Prober: what sends probes from one host and reads their answers (Request, Connect,
//     Dial, DialContext); a Destination (lab/probe) is where a probe goes.
//   - Proxy: one node's proxy, with the record of its syncs and its metrics.
//   - Synced: every proxy has programmed every change made so far (WaitSynced). Each kind
//     of cluster documents how it knows.
//   - Not available (ErrNotAvailable): what a kind of cluster cannot do at all (the
//     kernel rules of a real cluster's nodes). A step that needs it is not checked: never
//     a pass, never a 0.
//   - Info: what a cluster that kpbench did not build knows of itself (server version,
//     nodes, proxy mode), for the results' environment.
//
// # The kinds of cluster under test
//
//   - the lab (package cluster/testbed): namespaces as nodes, pods and clients, an
//     in-memory API store (or a real API server), a node agent per node driving one of
//     kpbench's backends or upstream kube-proxy. `kpbench cluster up` is the same lab kept
//     alive; commands reach it through its kubeconfig, as any cluster.
//   - any cluster reached through a kubeconfig (package cluster/kube): objects through
//     the API server in a namespace of the run's own, probes from prober pods.
//   - a fake (package cluster/fake): in memory, no root, for unit tests of the engine.
//
// # Why a package of its own
//
// The engine (package scenarios and its measure, check and conformance packages) is the
// consumer of this interface, and in Go the consumer owns its interfaces. But an
// interface's method types must be importable by both sides, and the implementations
// must not import the engine (the engine imports the lab to build one). So the contract
// is this leaf package, below both: the engine uses it, the implementations satisfy it,
// and neither imports the other. It imports the lab's host and probe types, the proxy
// agent's records and Kubernetes' API types; nothing of the engine or of reports.
package cluster

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/agent"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/lab/probe"
)

// Cluster is a cluster under test: a cluster whose objects the steps change, whose hosts
// send probes, and whose proxies program the nodes.
type Cluster interface {
	Objects
	Hosts
	Proxies
	// Info says what the cluster knows of itself, for the results' environment; nil for
	// the lab, whose environment is the machine's (the results record it themselves).
	// Call it after WaitSynced.
	Info(ctx context.Context) *Info
}

// Objects are the cluster's Kubernetes objects.
type Objects interface {
	// Apply creates or updates objects (all or nothing), as `kubectl apply` would.
	Apply(ctx context.Context, objs ...runtime.Object) error
	// Delete removes one object (kind: Service, EndpointSlice, Pod, Deployment).
	Delete(ctx context.Context, kind, namespace, name string) error
	// Get returns one object.
	Get(kind, namespace, name string) (runtime.Object, error)
	// Services, EndpointSlices and Pods list the objects of those kinds.
	Services() []*corev1.Service
	EndpointSlices() []*discoveryv1.EndpointSlice
	Pods() []*corev1.Pod
	// ScaleDeployment sets a Deployment's replica count.
	ScaleDeployment(ctx context.Context, namespace, name string, replicas int32) error
	// SetPodConditions sets a pod's Ready condition and termination (nil: unchanged), as
	// failing probes or a graceful deletion would.
	SetPodConditions(ctx context.Context, namespace, name string, ready, terminating *bool) error
	// ResourceVersion grows with every change of the objects.
	ResourceVersion() uint64
}

// Hosts are the places probes are sent from: nodes, external clients and pods.
type Hosts interface {
	// Host returns a host by name (node-N, client-N, a probe pod, a pod's host name).
	Host(name string) (lab.Host, bool)
	// Hosts returns the hosts of one kind, in name order.
	Hosts(kind lab.HostKind) []lab.Host
	// PodHost returns the host of a cluster pod.
	PodHost(namespace, name string) (lab.Host, bool)
	// ProbeHost names the probe pod of a node: a pod that belongs to no Service.
	ProbeHost(node string) string
	// AddPod adds an echo server pod on a node that no controller manages (the
	// endpoints of generated Services).
	AddPod(ctx context.Context, name, node string) (lab.Host, error)
	// AddClientRoute makes prefix (a load-balancer or external IP) reachable from the
	// external clients.
	AddClientRoute(ctx context.Context, prefix netip.Prefix) error
	// ClientFor returns the host that sends client's traffic to targetNode (a NodePort or
	// health-check node port there; "" for none): the client itself in a lab. A cluster
	// with no client outside it sends from another node's host network, as an external
	// client would reach the target node, and says so in note ("" when the client sends
	// itself); with no such host it returns an error wrapping ErrNotAvailable.
	ClientFor(client, targetNode string) (host lab.Host, note string, err error)
	// Prober returns the shared prober of a host.
	Prober(host string) (Prober, error)
	// NewProber returns a prober of its own with that many workers; the caller closes it.
	NewProber(host string, workers int) (ProberCloser, error)
}

// Proxies are the proxies that program the cluster's nodes.
type Proxies interface {
	// WaitSynced waits until every node's proxy has programmed every change made so far.
	WaitSynced(ctx context.Context) error
	// Proxies returns every node's proxy, in node order (none when the proxies are not
	// kpbench's to read).
	Proxies() []Proxy
	// WriteNodeState writes every node's rules and connection-tracking state (what a
	// failed step leaves to be read).
	WriteNodeState(ctx context.Context, w io.Writer) error
	// KernelRules counts the rules (or IPVS services and destinations) on the first node.
	KernelRules(ctx context.Context) (int, error)
}

// Prober sends probes from one host: the lab's probers (lab/probe, whose Dial's
// *probe.Conn is a Conn) or a real cluster's prober pods.
type Prober interface {
	// Request opens a new connection (or sends a datagram), sends one request and reads
	// the answer.
	Request(ctx context.Context, dst probe.Destination, opts probe.Options) probe.Result
	// Connect opens a new connection and times its handshake.
	Connect(ctx context.Context, dst probe.Destination, opts probe.Options) probe.Result
	// Dial opens a connection kept for several requests (ErrNotAvailable where
	// connections cannot be kept).
	Dial(ctx context.Context, dst probe.Destination, opts probe.Options) (Conn, error)
	// DialContext opens a connection from the host (an HTTP transport's dialer).
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// ProberCloser is a prober of one's own: the caller closes it.
type ProberCloser interface {
	Prober
	// Close stops the prober's workers.
	Close() error
}

// Conn is one established connection of a Prober.
type Conn interface {
	// Request sends one request over the connection and reads the answer.
	Request(ctx context.Context) probe.Result
	// Close closes the connection.
	Close() error
}

// Proxy is the proxy of one node: its sync records, a way to force a sync, its metrics
// and the backend it drives. The lab's *agent.Agent is one.
type Proxy interface {
	// Node names the proxy's node.
	Node() string
	// ForceSync syncs now (fully when full) and returns the sync's record.
	ForceSync(ctx context.Context, full bool) (agent.SyncRecord, error)
	// Records returns every sync so far, in order.
	Records() []agent.SyncRecord
	// Metrics returns the proxy's metrics (network programming latencies, ...).
	Metrics() agent.Metrics
	// Backend is the backend the proxy drives (for measurements that need one of its
	// capabilities).
	Backend() backends.Backend
}

// ErrNotAvailable marks what a cluster cannot do (a kept connection from a real
// cluster's prober pod, its nodes' kernel rules, setting pod conditions the kubelet
// owns): the step is not checked there, neither passed nor failed.
var ErrNotAvailable = errors.New("not available on this cluster")

// Info is what a cluster that kpbench did not build knows of itself; the engine copies
// it into the results' environment (reports.ClusterEnvironment).
type Info struct {
	// ServerVersion is the API server's version, e.g. "v1.37.2".
	ServerVersion string
	// Nodes is the number of Ready, schedulable nodes.
	Nodes int
	// ProxyMode is kube-proxy's /proxyMode answer ("" when none answered).
	ProxyMode string
	// ProxyModeNote says why the mode is unknown.
	ProxyModeNote string
}
