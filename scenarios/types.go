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
	"k8s.io/apimachinery/pkg/util/validation/field"
	"slices"
	"time"

	"gopkg.in/yaml.v3"

	"kpbench.dev/kpbench/internal/yamlpos"
	"kpbench.dev/kpbench/manifest"
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
	// KnownFailures is the scenario-wide declaration of earlier versions (backend name →
	// reason). Refused: declare a knownFailure on the step that fails instead, so that
	// the other steps still count.
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
	// registry decoded the steps; runs and validation use it.
	registry *Registry
}

// Topology describes the lab: nodes (each a network namespace running a proxy agent),
// pods on them, and external clients, all on one fabric network.
type Topology struct {
	// Nodes is the number of nodes, named node-0 ... node-(N-1). Default 1, at most 64.
	Nodes int `json:"nodes,omitempty"`
	// PodsPerNode is the most pods the lab places on one node (the kubelet's maxPods).
	// Default 110, at most 3989 (the lab's 4000, less a node's probe pod and the generated
	// Services' pods), and at most 20000 pods in all; a node's pod block grows past a /24
	// to hold them.
	PodsPerNode int `json:"podsPerNode,omitempty"`
	// Clients is the number of external client hosts on the fabric, named client-0 ...
	// client-(N-1). Default 1, at most 32.
	Clients *int `json:"clients,omitempty"`
	// NodeCIDR is the fabric network holding node (.10+i) and client (.200+j) addresses:
	// a /24 or larger. Default 172.18.0.0/24.
	NodeCIDR string `json:"nodeCIDR,omitempty"`
	// PodCIDR is the cluster's pod network; node i gets the i-th block of it (a /24, or
	// larger for more than 242 pods per node). Default 10.244.0.0/16.
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
	// Inline is one object (or a List of objects) written in the scenario itself.
	Inline *yaml.Node `json:"inline,omitempty"`

	// Objects are the decoded, defaulted and validated objects. Set by Load and
	// ParseScenario.
	Objects []manifest.Object `json:"-"`
}

// Step is one step of a scenario: a name, how a failure is taken, and exactly one action,
// written under the key of its kind (`- wait: {synced: true}`, `- measure: {name: sync}`).
// The kinds are registered (Registry; DefaultRegistry has apply, delete, scale, setPods,
// churn, wait, expect and measure).
type Step struct {
	// Name identifies the step in reports; unique within the scenario when set.
	Name string `json:"name,omitempty"`
	// ContinueOnFailure lets the scenario go on when this step fails (the failure is
	// still reported).
	ContinueOnFailure bool `json:"continueOnFailure,omitempty"`
	// KnownFailure declares that this step fails on some backends, with the reason and
	// the upstream issue: there its failure is an expected failure (xfail) and its pass
	// an unexpected pass (xpass), and the scenario goes on after it. Every other step
	// must still pass.
	KnownFailure *KnownFailure `json:"knownFailure,omitempty"`

	// Kind is the name of the step's kind: the key its action is written under. Set by
	// Load.
	Kind string `json:"-"`
	// Action is the step's decoded action (*ApplyStep, *ExpectStep, *MeasureStep, ...).
	// Set by Load.
	Action Action `json:"-"`
	// Rest is the step's action as written (its kind's key and value), which Load
	// decodes through the registry.
	Rest yamlpos.Rest `json:"-"`
}

// actionPath returns the field path of the step's action ("steps[3].wait"): the one
// decoding built for its Rest entry, so that validation does not build it again for
// every step; built from i for a Step made in code.
func (s *Step) actionPath(i int) *field.Path {
	for _, e := range s.Rest {
		if e.Key.Value == s.Kind && e.Path != nil {
			return e.Path
		}
	}
	return field.NewPath("steps").Index(i).Child(s.Kind)
}

// KnownFailure is a step's declared failure on some backends.
type KnownFailure struct {
	// Reason says in one line why the step fails there. Required.
	Reason string `json:"reason"`
	// Issue is the upstream issue, e.g. "kubernetes/kubernetes#89358".
	Issue string `json:"issue,omitempty"`
	// Backends on which the step is known to fail. At least one.
	Backends []string `json:"backends"`
}

// Declares reports whether the known failure is declared for backend.
func (k *KnownFailure) Declares(backend string) bool {
	return k != nil && slices.Contains(k.Backends, backend)
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
	return d.UnmarshalText([]byte(s))
}

// UnmarshalText reads a duration string (YAML decoding, without a JSON round trip).
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
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
