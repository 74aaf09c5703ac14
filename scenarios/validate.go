package scenarios

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/internal/yamlpos"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/manifest"
)

// Bounds that validation enforces. The topology's are the lab's (lab/limits.go).
const (
	MaxNodes   = lab.MaxNodes
	MaxClients = lab.MaxClients
	// MaxPodsPerNode leaves room on a node for its probe pod and the generated Services'
	// pods.
	MaxPodsPerNode = lab.MaxPodsPerNode - reservedPodsPerNode
	// MaxPods bounds the cluster's pods (nodes x podsPerNode).
	MaxPods                = lab.MaxPods
	MaxChurnServices       = 50000
	MaxEndpointsPerService = SyntheticPods
	MaxProbeCount          = 100000
	MaxReplicas            = 10000
	// MaxWaitDuration bounds a wait step's fixed duration.
	MaxWaitDuration = 5 * time.Minute
	// MaxProbeInterval bounds the pause between an expect step's probes.
	MaxProbeInterval = 10 * time.Second
)

var (
	hostRE    = regexp.MustCompile(`^(client|node)-(0|[1-9][0-9]*)$`)
	measureRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,62}$`)
)

// parseHost splits a host name as hostRE matches it: "client-N" or "node-N", N a decimal
// number without leading zeros. It is what every expect step's host is checked with;
// hostRE there was 4% of loading a 1 MB scenario.
func parseHost(s string) (role, num string, ok bool) {
	role, num, _ = strings.Cut(s, "-")
	if (role != "client" && role != "node") || num == "" || (num[0] == '0' && len(num) > 1) {
		return "", "", false
	}
	for i := range len(num) {
		if num[i] < '0' || num[i] > '9' {
			return "", "", false
		}
	}
	return role, num, true
}

// Validate checks the whole scenario: every field's allowed values and ranges, unique
// step names, and references (a scale step names a Deployment that exists at that point,
// an expectation a Service and port that exist, a measurement can produce a sample where
// it stands, ...). It expects a defaulted scenario whose steps were decoded and whose
// manifests were resolved (Load and ParseScenario do all three). Errors are
// yamlpos.Errors pointing into the scenario file. Checks that depend on the backends
// (ValidationOptions) are left to ValidateFor.
func (s *Scenario) Validate() error { return s.ValidateFor(ValidationOptions{}) }

// ValidationOptions are what validation knows of the run: the backends it will use and
// what they can do. Without them, the checks that depend on backends are left to the
// run.
type ValidationOptions struct {
	// Backends the scenario will run on (nil: not known).
	Backends []string
	// Facts answers what a backend can do (nil: not known).
	Facts BackendFacts
}

// BackendFacts answers what validation needs to know of a backend before any lab exists:
// its capabilities. The backends' facts registry answers it.
type BackendFacts interface {
	// Capable reports whether backend has the capability.
	Capable(backend string, c Capability) bool
}

// Capability is something only some backends can do.
type Capability string

// Capabilities measurements need.
const (
	// CapabilityIPVSExperiments: switch the IPVS scheduler and real-server weights at run
	// time (the distribution measurement's scheduler and weights).
	CapabilityIPVSExperiments Capability = "ipvs-experiments"
	// CapabilityPerRuleTimings: time each rule's insertion (the perrule measurement).
	CapabilityPerRuleTimings Capability = "per-rule-timings"
)

// ValidateFor is Validate knowing the run's backends: a measurement that needs a
// capability one of them lacks is an error too.
func (s *Scenario) ValidateFor(o ValidationOptions) error {
	errs := s.validate(o)
	if len(errs) == 0 {
		return nil
	}
	doc := s.doc
	if doc == nil {
		doc = &yamlpos.Doc{File: s.File}
	}
	if len(errs) > maxErrors {
		out := doc.FromFieldList(errs[:maxErrors])
		return append(out, &yamlpos.Error{File: s.File, Msg: fmt.Sprintf("too many errors (more than %d), giving up", maxErrors)})
	}
	return doc.FromFieldList(errs)
}

// maxErrors bounds the validation errors reported: past it a file is hopeless.
const maxErrors = 100

func (s *Scenario) validate(o ValidationOptions) field.ErrorList {
	var errs field.ErrorList
	if s.APIVersion != APIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), s.APIVersion, []string{APIVersion}))
	}
	if s.Kind != Kind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), s.Kind, []string{Kind}))
	}
	if s.Name == "" {
		errs = append(errs, field.Required(field.NewPath("name"), "a DNS-1123 label naming the scenario in reports"))
	}
	for _, msg := range validation.IsDNS1123Label(s.Name) {
		if s.Name != "" {
			errs = append(errs, field.Invalid(field.NewPath("name"), s.Name, msg))
		}
	}
	errs = append(errs, s.Topology.validate(field.NewPath("topology"))...)
	if s.KnownFailures != nil {
		errs = append(errs, field.Forbidden(field.NewPath("knownFailures"),
			"a scenario-wide known failure would hide regressions in every other step: declare `knownFailure: {reason: ..., issue: ..., backends: [...]}` on the step that fails"))
	}
	if s.Proxy != nil {
		pp := field.NewPath("proxy")
		if s.Proxy.ProxyConfigFile != "" {
			if s.Proxy.ProxyConfig != (ProxyConfig{}) {
				errs = append(errs, field.Forbidden(pp, "set either proxyConfigFile or inline fields, not both"))
			}
		} else {
			c := s.Proxy.ProxyConfig
			if c.APIVersion != "" && c.APIVersion != ProxyConfigAPIVersion {
				errs = append(errs, field.NotSupported(pp.Child("apiVersion"), c.APIVersion, []string{ProxyConfigAPIVersion}))
			}
			if c.Kind != "" && c.Kind != ProxyConfigKind {
				errs = append(errs, field.NotSupported(pp.Child("kind"), c.Kind, []string{ProxyConfigKind}))
			}
			errs = append(errs, c.Validate(pp)...)
		}
	}

	v := newValidation(s, o)
	mp := field.NewPath("manifests")
	errs = append(errs, validateRefs(s.Manifests, mp)...)
	for i, ref := range s.Manifests {
		for _, obj := range ref.Objects {
			if prev, dup := v.objects[obj.Key()]; dup {
				errs = append(errs, field.Duplicate(mp.Index(i), fmt.Sprintf("%s (first defined at %s)", obj.Key(), prev.Source)))
				continue
			}
			v.put(obj)
		}
	}
	errs = append(errs, v.CheckCapacity(mp)...)

	names := map[string]int{}
	sp := field.NewPath("steps")
	for i := range s.Steps {
		if len(errs) > maxErrors {
			// Hopeless: the steps after are not checked (10k invalid steps took twice
			// as long to validate as to parse).
			break
		}
		// Paths are built only where they are used: a step's path is three allocations,
		// and a 1 MB file has 45k steps.
		step := &s.Steps[i]
		if step.Name != "" {
			if first, dup := names[step.Name]; dup {
				errs = append(errs, field.Duplicate(sp.Index(i).Child("name"), fmt.Sprintf("%s (also steps[%d])", step.Name, first)))
			}
			names[step.Name] = i
		}
		if step.KnownFailure != nil {
			errs = append(errs, v.knownFailure(step.KnownFailure, sp.Index(i).Child("knownFailure"))...)
		}
		if step.Action == nil {
			continue // decoding reported why
		}
		errs = append(errs, step.Action.Validate(v, step.actionPath(i))...)
	}
	return errs
}

// reservedPodsPerNode is the room a node keeps beyond podsPerNode: its probe pod and, at
// worst, every pod of the generated Services.
const reservedPodsPerNode = 1 + SyntheticPods

// podCapacity is the most pods one node of the lab holds: the cluster's, its probe pod,
// the generated Services' (lab.Config.PodCapacity).
func (t *Topology) podCapacity() int { return t.PodsPerNode + reservedPodsPerNode }

func (t *Topology) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	rng := func(name string, v, lo, hi int) {
		if v < lo || v > hi {
			errs = append(errs, field.Invalid(p.Child(name), v, fmt.Sprintf("must be in range %d-%d", lo, hi)))
		}
	}
	rng("nodes", t.Nodes, 1, MaxNodes)
	rng("podsPerNode", t.PodsPerNode, 1, MaxPodsPerNode)
	if t.Nodes*t.PodsPerNode > MaxPods {
		errs = append(errs, field.Invalid(p.Child("podsPerNode"), t.PodsPerNode, fmt.Sprintf("%d nodes x %d pods exceed the lab's limit of %d pods", t.Nodes, t.PodsPerNode, MaxPods)))
	}
	clients := 0
	if t.Clients != nil {
		clients = *t.Clients
	}
	rng("clients", clients, 0, MaxClients)

	type named struct {
		name string
		pfx  netip.Prefix
	}
	var nets []named
	cidr := func(name, v string, maxBits int) (netip.Prefix, bool) {
		pfx, err := netip.ParsePrefix(v)
		switch {
		case err != nil || !pfx.Addr().Is4():
			errs = append(errs, field.Invalid(p.Child(name), v, "must be an IPv4 CIDR such as 10.0.0.0/16"))
			return netip.Prefix{}, false
		case pfx.Masked() != pfx:
			errs = append(errs, field.Invalid(p.Child(name), v, fmt.Sprintf("host bits set: did you mean %s?", pfx.Masked())))
			return netip.Prefix{}, false
		case pfx.Bits() > maxBits:
			errs = append(errs, field.Invalid(p.Child(name), v, fmt.Sprintf("prefix must be /%d or shorter", maxBits)))
			return netip.Prefix{}, false
		}
		nets = append(nets, named{name, pfx})
		return pfx, true
	}
	// The lab's addressing plan: nodes are .10+i and clients .200+j of the fabric.
	cidr("nodeCIDR", t.NodeCIDR, lab.MaxNodeCIDRBits)
	if pfx, ok := cidr("podCIDR", t.PodCIDR, 24); ok && t.Nodes >= 1 && t.Nodes <= MaxNodes && t.PodsPerNode >= 1 && t.PodsPerNode <= MaxPodsPerNode {
		cfg := lab.Config{Nodes: t.Nodes, PodCIDR: pfx, PodCapacity: t.podCapacity()}
		if _, err := cfg.NodeBlockBits(); err != nil {
			errs = append(errs, field.Invalid(p.Child("podCIDR"), t.PodCIDR, err.Error()))
		}
	}
	cidr("serviceCIDR", t.ServiceCIDR, 28)
	cidr("loadBalancerPool", t.LoadBalancerPool, 32)
	for i := range nets {
		for j := i + 1; j < len(nets); j++ {
			if nets[i].pfx.Overlaps(nets[j].pfx) {
				errs = append(errs, field.Invalid(p.Child(nets[j].name), nets[j].pfx.String(), "overlaps "+nets[i].name+" "+nets[i].pfx.String()))
			}
		}
	}
	if _, err := manifest.ParsePortRange(t.NodePortRange); err != nil {
		errs = append(errs, field.Invalid(p.Child("nodePortRange"), t.NodePortRange, "must be MIN-MAX with ports 1-65535, e.g. 30000-32767"))
	}
	return errs
}

func validateRefs(refs []ManifestRef, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range refs {
		switch {
		case r.File == "" && r.Inline == nil:
			errs = append(errs, field.Required(p.Index(i), "one of file or inline"))
		case r.File != "" && r.Inline != nil:
			errs = append(errs, field.Forbidden(p.Index(i), "set either file or inline, not both"))
		}
	}
	return errs
}

func validateDuration(d *Duration, p *field.Path) field.ErrorList {
	if d != nil && d.Duration <= 0 {
		return field.ErrorList{field.Invalid(p, d.String(), "must be a positive duration such as \"30s\"")}
	}
	return nil
}

func validateProtocol(proto string, p *field.Path) field.ErrorList {
	switch proto {
	case "TCP", "UDP", "SCTP":
		return nil
	}
	return field.ErrorList{field.NotSupported(p, proto, []string{"TCP", "UDP", "SCTP"})}
}
