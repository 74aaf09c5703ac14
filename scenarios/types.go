// Package scenarios defines the kpbench scenario file: what lab to build, which
// Kubernetes objects to start from, how to configure the proxy, and the steps to run
// (changes, waits, expectations and measurements).
//
// The file is an API (apiVersion kpbench.dev/v1alpha1, kind Scenario): its types are
// documented here, defaults are in defaults.go, validation in validate.go, and Load
// decodes it strictly and checks everything (including the manifests it references)
// before anything runs. Every error names the file, the line and the field.
//
//	apiVersion: kpbench.dev/v1alpha1
//	kind: Scenario
//	name: nginx-nodeport
//	topology: {nodes: 2, clients: 1}
//	proxy: {proxyConfigFile: seed-proxy.yaml}
//	manifests:
//	- file: nginx-nodeport.yaml
//	steps:
//	- wait: {synced: true}
//	- expect:
//	    from: client-0
//	    to: {service: default/nginx-service, address: nodePort}
//	    expectation: reachable
package scenarios

import (
	"encoding/json"
	"fmt"
	"time"

	"gopkg.in/yaml.v3"

	"kpbench.dev/kpbench/internal/yamlpos"
	"kpbench.dev/kpbench/lab/manifest"
)

// APIVersion and Kind of a scenario file.
const (
	APIVersion = "kpbench.dev/v1alpha1"
	Kind       = "Scenario"
)

// Scenario is one scenario file.
type Scenario struct {
	// APIVersion must be "kpbench.dev/v1alpha1".
	APIVersion string `json:"apiVersion"`
	// Kind must be "Scenario".
	Kind string `json:"kind"`
	// Name identifies the scenario in reports (a DNS-1123 label). Required.
	Name string `json:"name"`
	// Description says what the scenario shows, for humans and reports.
	Description string `json:"description,omitempty"`
	// Topology is the lab to build.
	Topology Topology `json:"topology"`
	// Proxy configures the proxy agent on every node (nil: kube-proxy's defaults).
	Proxy *ProxySpec `json:"proxy,omitempty"`
	// BackendOptions are kpbench's own backend knobs, beyond what KubeProxyConfiguration
	// says (nil: none). Results label every measurement taken with one on.
	BackendOptions *BackendOptions `json:"backendOptions,omitempty"`
	// Manifests are the objects that exist before the first step (applied in order).
	Manifests []ManifestRef `json:"manifests,omitempty"`
	// Steps run in order after the lab is up and the manifests are applied.
	Steps []Step `json:"steps,omitempty"`
	// KnownFailures declares backends on which the scenario is known to fail, with the
	// reason (backend name → one line, e.g. userspace: "source IP is lost"). A failure
	// there is reported as an expected failure (xfail) by `kpbench conform`, and a pass as
	// an unexpected pass (xpass); other commands ignore it.
	KnownFailures map[string]string `json:"knownFailures,omitempty"`

	// File is the path the scenario was loaded from ("" when parsed from memory). Set by
	// Load and ParseScenario.
	File string `json:"-"`
	// BaseDir is the directory relative file references are resolved against. Set by
	// Load (the scenario file's directory) and ParseScenario.
	BaseDir string `json:"-"`
	// ProxyConfig is the effective proxy configuration: Proxy's inline fields or the
	// content of Proxy.ProxyConfigFile, defaulted. Set by Load and ParseScenario.
	ProxyConfig ProxyConfig `json:"-"`
	// Warnings are non-fatal remarks found while loading (ignored fields of a
	// KubeProxyConfiguration file). Set by Load and ParseScenario.
	Warnings []string `json:"-"`

	// doc is the decoded document, for positions in validation errors.
	doc *yamlpos.Doc
}

// Topology describes the lab: nodes (each a network namespace running a proxy agent),
// pods on them, and external clients, all on one fabric network.
type Topology struct {
	// Nodes is the number of nodes, named node-0 ... node-(N-1). Default 1, at most 64.
	Nodes int `json:"nodes,omitempty"`
	// PodsPerNode is the most pods the lab places on one node (the kubelet's maxPods).
	// Default 110, at most 250 (a node's pod CIDR is a /24).
	PodsPerNode int `json:"podsPerNode,omitempty"`
	// Clients is the number of external client hosts on the fabric, named client-0 ...
	// client-(N-1). Default 1, at most 16.
	Clients *int `json:"clients,omitempty"`
	// NodeCIDR is the fabric network holding node and client addresses. Default
	// 172.18.0.0/24.
	NodeCIDR string `json:"nodeCIDR,omitempty"`
	// PodCIDR is the cluster's pod network; node i gets the i-th /24 of it. Default
	// 10.244.0.0/16.
	PodCIDR string `json:"podCIDR,omitempty"`
	// ServiceCIDR is where ClusterIPs are allocated. Default 10.96.0.0/12.
	ServiceCIDR string `json:"serviceCIDR,omitempty"`
	// LoadBalancerPool is where LoadBalancer Services get their ingress IPs. Default
	// 172.18.1.0/24.
	LoadBalancerPool string `json:"loadBalancerPool,omitempty"`
	// NodePortRange is the cluster's node port range, "MIN-MAX". Default 30000-32767.
	NodePortRange string `json:"nodePortRange,omitempty"`
}

// ProxySpec configures the proxy: either inline (the fields of a KubeProxyConfiguration,
// checked strictly as part of the scenario) or a KubeProxyConfiguration file (read
// leniently, like kube-proxy: unknown fields become warnings).
type ProxySpec struct {
	// ProxyConfigFile is a KubeProxyConfiguration file, relative to the scenario file.
	// When set, no inline field may be set.
	ProxyConfigFile string `json:"proxyConfigFile,omitempty"`
	// ProxyConfig holds the inline fields.
	ProxyConfig `json:",inline"`
}

// BackendOptions are options of our backends that kube-proxy does not have.
type BackendOptions struct {
	// IPTables configures the iptables backend (nft flavour).
	IPTables IPTablesBackendOptions `json:"iptables,omitempty"`
}

// IPTablesBackendOptions configures the iptables backend.
type IPTablesBackendOptions struct {
	// WholeTableCache starts large iptables-nft restores with a chainless `-S`, so that
	// iptables-nft 1.8.9 caches the whole table instead of building the per-chain request
	// list that makes --noflush restores quadratic in the number of chains. Same rules,
	// different cost; kube-proxy does not do it. The iptables (nft) backend only.
	WholeTableCache bool `json:"wholeTableCache,omitempty"`
}

// ManifestRef is a source of Kubernetes objects: a file (any number of documents) or one
// inline object. Exactly one of File and Inline is set.
type ManifestRef struct {
	// File is a manifest file, relative to the scenario file.
	File string `json:"file,omitempty"`
	// Inline is one object written in the scenario itself.
	Inline *yaml.Node `json:"inline,omitempty"`

	// Objects are the decoded, defaulted and validated objects. Set by Load and
	// ParseScenario.
	Objects []manifest.Object `json:"-"`
}

// Step is one action of a scenario. Exactly one of the action fields is set.
type Step struct {
	// Name identifies the step in reports; unique within the scenario when set.
	Name string `json:"name,omitempty"`
	// ContinueOnFailure lets the scenario go on when this step fails (the failure is
	// still reported).
	ContinueOnFailure bool `json:"continueOnFailure,omitempty"`

	// Apply creates or updates objects.
	Apply *ApplyStep `json:"apply,omitempty"`
	// Delete removes objects.
	Delete *DeleteStep `json:"delete,omitempty"`
	// Scale changes a Deployment's replica count.
	Scale *ScaleStep `json:"scale,omitempty"`
	// SetPods changes pod conditions (ready, terminating), as failing probes or a
	// graceful deletion would.
	SetPods *SetPodsStep `json:"setPods,omitempty"`
	// Churn creates, updates or deletes many generated Services at a given rate.
	Churn *ChurnStep `json:"churn,omitempty"`
	// Wait blocks until a condition holds.
	Wait *WaitStep `json:"wait,omitempty"`
	// Expect probes from a host to a target and checks the outcome.
	Expect *ExpectStep `json:"expect,omitempty"`
	// Measure runs a named measurement.
	Measure *MeasureStep `json:"measure,omitempty"`
}

// Action returns the name of the step's action ("apply", "expect", ...) or "" when none
// is set.
func (s *Step) Action() string {
	for _, a := range s.actions() {
		if a.set {
			return a.name
		}
	}
	return ""
}

type action struct {
	name string
	set  bool
}

func (s *Step) actions() []action {
	return []action{
		{"apply", s.Apply != nil}, {"delete", s.Delete != nil}, {"scale", s.Scale != nil},
		{"setPods", s.SetPods != nil}, {"churn", s.Churn != nil}, {"wait", s.Wait != nil},
		{"expect", s.Expect != nil}, {"measure", s.Measure != nil},
	}
}

// ApplyStep creates or updates objects (like `kubectl apply`).
type ApplyStep struct {
	// Manifests to apply, in order. At least one.
	Manifests []ManifestRef `json:"manifests"`
}

// DeleteStep removes objects: those of Manifests, or the one named by Kind and Name.
type DeleteStep struct {
	// Manifests whose objects are deleted.
	Manifests []ManifestRef `json:"manifests,omitempty"`
	// Kind (Service, Pod, Deployment, EndpointSlice), Namespace (default "default") and
	// Name of one object to delete.
	Kind      string `json:"kind,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
}

// ScaleStep sets a Deployment's replica count.
type ScaleStep struct {
	// Deployment is "namespace/name" or "name" (namespace "default") of a Deployment the
	// scenario defines.
	Deployment string `json:"deployment"`
	// Replicas is the new count, 0-10000.
	Replicas *int32 `json:"replicas"`
}

// SetPodsStep changes the conditions of pods chosen by Selector or by Names.
type SetPodsStep struct {
	// Namespace of the pods (default "default").
	Namespace string `json:"namespace,omitempty"`
	// Selector chooses pods by labels.
	Selector map[string]string `json:"selector,omitempty"`
	// Names chooses pods by name. Pods of a Deployment are named <deployment>-<ordinal>.
	Names []string `json:"names,omitempty"`
	// Ready sets the pods' Ready condition (nil: unchanged).
	Ready *bool `json:"ready,omitempty"`
	// Terminating marks the pods as terminating (nil: unchanged), as a graceful deletion
	// does: their endpoints stay, not ready, until they are deleted.
	Terminating *bool `json:"terminating,omitempty"`
}

// ChurnStep generates Service and endpoint changes, to measure how the proxy keeps up.
type ChurnStep struct {
	// Pattern is what happens: "add" creates Services, "update" keeps replacing
	// endpoints of the churned Services for Duration, "delete" removes them, "mixed"
	// cycles for Duration through the three kinds of change a live cluster makes: one
	// endpoint of a Service replaced in its slice, a Service added, a Service (one this
	// step added a while before) deleted; the extra Services left at the end are deleted,
	// so the Service count is the same after the step as before.
	Pattern string `json:"pattern"`
	// Services is how many Services are created, updated or deleted (1-50000).
	Services int `json:"services"`
	// EndpointsPerService is the number of endpoints each Service gets (0-1000).
	EndpointsPerService int `json:"endpointsPerService,omitempty"`
	// Template is the shape of the generated Services.
	Template ChurnTemplate `json:"template,omitempty"`
	// Rate is the number of changes per second. Exactly one of Rate and AllAtOnce. It is
	// a contract: the step's results record the rate achieved (churn-rate), so a runner
	// that could not keep up says so.
	Rate float64 `json:"rate,omitempty"`
	// AllAtOnce makes every change at once (one big sync).
	AllAtOnce bool `json:"allAtOnce,omitempty"`
	// Duration is how long the "update" and "mixed" patterns run (required for them,
	// forbidden otherwise).
	Duration *Duration `json:"duration,omitempty"`
	// Probe, when set, runs a prober while the step churns (mixed pattern only), to time
	// each change's arrival in the data plane and to check that traffic never reaches a
	// removed endpoint nor is refused by a live Service. Measure programming-latency and
	// churn afterwards to report it.
	Probe *ChurnProbe `json:"probe,omitempty"`
}

// ChurnProbe is the prober of a churn step: a fixed pool of workers, each probing one
// Service's ClusterIP at a time from a node's probe pod: the Services whose change it
// waits to see first, else recently changed ones, else any live one at random.
type ChurnProbe struct {
	// Node is the node whose probe pod sends the probes (default node-0). Its proxy's
	// syncs are the ones the probes are judged against.
	Node string `json:"node,omitempty"`
	// Workers is the number of probes in flight (default 8, 1-64).
	Workers int `json:"workers,omitempty"`
	// Interval is each worker's pause between two probes (default 10ms, at most 1s).
	Interval *Duration `json:"interval,omitempty"`
	// Timeout bounds one probe (default 500ms, at most 5s): a probe that times out
	// counts as not answered.
	Timeout *Duration `json:"timeout,omitempty"`
	// Deadline is how long the prober waits to see a change in the data plane (default
	// 30s, at most 10m); the prober keeps running after the last change until every
	// change is seen or past its deadline.
	Deadline *Duration `json:"deadline,omitempty"`
}

// ChurnTemplate is the shape of the Services a churn step generates.
type ChurnTemplate struct {
	// Port of every generated Service (default 80).
	Port int32 `json:"port,omitempty"`
	// Protocol TCP, UDP or SCTP (default TCP).
	Protocol string `json:"protocol,omitempty"`
	// Type ClusterIP, NodePort or LoadBalancer (default ClusterIP).
	Type string `json:"type,omitempty"`
}

// WaitStep waits until a condition holds, or for a fixed time. Exactly one of Synced and
// Duration is set.
type WaitStep struct {
	// Synced waits until every node's proxy has programmed the current state.
	Synced bool `json:"synced,omitempty"`
	// Duration waits this long, doing nothing (e.g. to let a session affinity entry
	// expire), at most MaxWaitDuration.
	Duration *Duration `json:"duration,omitempty"`
	// Timeout fails the step when the condition does not hold in time (default 60s, or
	// what `--wait-timeout` says).
	Timeout *Duration `json:"timeout,omitempty"`
}

// Expectation kinds.
const (
	// ExpectReachable: every probe gets an answer.
	ExpectReachable = "reachable"
	// ExpectRefused: every probe is actively refused (TCP RST / ICMP unreachable).
	ExpectRefused = "refused"
	// ExpectDropped: every probe times out.
	ExpectDropped = "dropped"
	// ExpectAllEndpoints: every ready endpoint answers at least once.
	ExpectAllEndpoints = "allEndpoints"
	// ExpectSameBackend: every probe is answered by the same endpoint (affinity).
	ExpectSameBackend = "sameBackend"
	// ExpectDistribution: answers spread over the endpoints as expected (chi-square).
	ExpectDistribution = "distribution"
	// ExpectSourceIPPreserved: the endpoint sees the client's own address.
	ExpectSourceIPPreserved = "sourceIPPreserved"
	// ExpectHTTPStatus: every probe is an HTTP GET of Path answered with Status (e.g. a
	// health-check node port: 200 on a node with local endpoints, 503 without).
	ExpectHTTPStatus = "httpStatus"
)

// ExpectStep sends probes from one host to a target and checks the outcome.
type ExpectStep struct {
	// From is the sending host: "client-N", "node-N", or "pod:NAME" /
	// "pod:NAMESPACE/NAME" (Deployment pods are named <deployment>-<ordinal>).
	From string `json:"from"`
	// To is the target.
	To Target `json:"to"`
	// Protocol of the probes, TCP, UDP or SCTP (default: the target service port's
	// protocol, or TCP for a literal address).
	Protocol string `json:"protocol,omitempty"`
	// Count is the number of probes, 1-100000 (default 1 for reachable, refused, dropped
	// and sourceIPPreserved; 100 for allEndpoints, sameBackend and distribution).
	Count int `json:"count,omitempty"`
	// Expectation is what must be observed: reachable, refused, dropped, allEndpoints,
	// sameBackend, distribution, sourceIPPreserved or httpStatus.
	Expectation string `json:"expectation"`
	// Status is the HTTP status every answer must have (httpStatus only, and required
	// there: 100-599).
	Status int `json:"status,omitempty"`
	// Path is the path of the httpStatus GET (default "/"; httpStatus only).
	Path string `json:"path,omitempty"`
	// Timeout bounds the whole step (default 30s).
	Timeout *Duration `json:"timeout,omitempty"`
	// SourcePort, when not 0, is the fixed local port every probe is sent from (UDP
	// conntrack cases: the same 5-tuple across an endpoint change). 0: an ephemeral port
	// per probe. With TCP, consecutive probes from one port may collide with TIME_WAIT.
	SourcePort int `json:"sourcePort,omitempty"`
	// Interval is a pause between consecutive probes (default none), at most
	// MaxProbeInterval; e.g. longer than a session affinity timeout, so that every probe
	// chooses its endpoint afresh.
	Interval *Duration `json:"interval,omitempty"`
}

// Address kinds of a Service target.
const (
	AddressClusterIP    = "clusterIP"
	AddressNodePort     = "nodePort"
	AddressLoadBalancer = "loadBalancer"
	AddressExternalIP   = "externalIP"
	// AddressHealthCheckNodePort is a node's address with the Service's health-check node
	// port (LoadBalancer Services with externalTrafficPolicy Local): kube-proxy's service
	// health server, probed with httpStatus.
	AddressHealthCheckNodePort = "healthCheckNodePort"
)

// Target is where probes go: a Service port reached through one of its addresses, or a
// literal IP:port. Exactly one of Service and IPPort is set.
type Target struct {
	// Service is "namespace/name" or "name" (namespace "default") of a Service the
	// scenario defines.
	Service string `json:"service,omitempty"`
	// Port is the service port's name; required when the Service has more than one port.
	Port string `json:"port,omitempty"`
	// Address is how the Service is reached: clusterIP (default), nodePort,
	// loadBalancer, externalIP or healthCheckNodePort.
	Address string `json:"address,omitempty"`
	// Node is the node whose address is used for nodePort and healthCheckNodePort
	// (default node-0).
	Node string `json:"node,omitempty"`
	// IPPort is a literal "IP:port" target.
	IPPort string `json:"ipPort,omitempty"`
}

// MeasureStep runs a named measurement.
type MeasureStep struct {
	// Name of the measurement plug-in.
	Name string `json:"name"`
	// Params are passed to the measurement as they are.
	Params map[string]any `json:"params,omitempty"`
	// Limits turn measurements into expectations: the step fails when a measurement it
	// produced, named by the key (e.g. churn-misroutes), has a sample above the value.
	// Each limit is a case in the results, pass or fail; a limit naming a measurement
	// the step did not produce fails.
	Limits map[string]float64 `json:"limits,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("1s", "500ms", "2m").
type Duration struct {
	time.Duration
}

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("must be a duration string such as \"1s\" or \"500ms\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("must be a duration such as \"1s\" or \"500ms\"")
	}
	d.Duration = v
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.Duration.String()) }

// NewDuration returns a *Duration.
func NewDuration(d time.Duration) *Duration { return &Duration{Duration: d} }
