package scenarios

import (
	"fmt"
	"maps"
	"math"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/internal/yamlpos"
	"kpbench.dev/kpbench/lab/manifest"
)

// Bounds that validation enforces.
const (
	MaxNodes               = 64
	MaxPodsPerNode         = 250
	MaxClients             = 16
	MaxChurnServices       = 50000
	MaxEndpointsPerService = 1000
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

// Validate checks the whole scenario: every field's allowed values and ranges, unique
// step names, and references (a scale step names a Deployment that exists at that point,
// an expectation a Service and port that exist, ...). It expects a defaulted scenario
// whose manifests were resolved (Load and ParseScenario do both). Errors are
// yamlpos.Errors pointing into the scenario file.
func (s *Scenario) Validate() error {
	errs := s.validate()
	if len(errs) == 0 {
		return nil
	}
	doc := s.doc
	if doc == nil {
		doc = &yamlpos.Doc{File: s.File}
	}
	return doc.FromFieldList(errs)
}

func (s *Scenario) validate() field.ErrorList {
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
	for b, why := range s.KnownFailures {
		if strings.TrimSpace(why) == "" {
			errs = append(errs, field.Required(field.NewPath("knownFailures").Key(b), "a one-line reason why the scenario fails on this backend"))
		}
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

	st := newState(s)
	mp := field.NewPath("manifests")
	errs = append(errs, validateRefs(s.Manifests, mp)...)
	for i, ref := range s.Manifests {
		for _, o := range ref.Objects {
			if prev, dup := st.objects[o.Key()]; dup {
				errs = append(errs, field.Duplicate(mp.Index(i), fmt.Sprintf("%s (first defined at %s)", o.Key(), prev.Source)))
				continue
			}
			st.objects[o.Key()] = o
		}
	}
	errs = append(errs, st.checkCapacity(mp)...)

	names := map[string]int{}
	sp := field.NewPath("steps")
	for i := range s.Steps {
		p := sp.Index(i)
		step := &s.Steps[i]
		if step.Name != "" {
			if first, dup := names[step.Name]; dup {
				errs = append(errs, field.Duplicate(p.Child("name"), fmt.Sprintf("%s (also steps[%d])", step.Name, first)))
			}
			names[step.Name] = i
		}
		var set []string
		for _, a := range step.actions() {
			if a.set {
				set = append(set, a.name)
			}
		}
		switch len(set) {
		case 0:
			errs = append(errs, field.Required(p, "one action: apply, delete, scale, setPods, churn, wait, expect or measure"))
			continue
		case 1:
		default:
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("a step has exactly one action, found %s", strings.Join(set, ", "))))
			continue
		}
		switch {
		case step.Apply != nil:
			errs = append(errs, st.apply(step.Apply, p.Child("apply"))...)
		case step.Delete != nil:
			errs = append(errs, st.delete(step.Delete, p.Child("delete"))...)
		case step.Scale != nil:
			errs = append(errs, st.scale(step.Scale, p.Child("scale"))...)
		case step.SetPods != nil:
			errs = append(errs, st.setPods(step.SetPods, p.Child("setPods"))...)
		case step.Churn != nil:
			errs = append(errs, validateChurn(step.Churn, p.Child("churn"))...)
		case step.Wait != nil:
			errs = append(errs, validateWait(step.Wait, p.Child("wait"))...)
		case step.Expect != nil:
			errs = append(errs, st.expect(step.Expect, p.Child("expect"))...)
		case step.Measure != nil:
			m := step.Measure
			if !measureRE.MatchString(m.Name) {
				errs = append(errs, field.Invalid(p.Child("measure", "name"), m.Name, "must be a measurement name: a letter, then letters, digits, '-' or '_' (at most 63)"))
			}
			for _, k := range slices.Sorted(maps.Keys(m.Limits)) {
				lp := p.Child("measure", "limits").Key(k)
				if !measureRE.MatchString(k) {
					errs = append(errs, field.Invalid(lp, k, "must be a measurement name"))
				}
				if v := m.Limits[k]; v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
					errs = append(errs, field.Invalid(lp, strconv.FormatFloat(v, 'g', -1, 64), "must be a finite number >= 0"))
				}
			}
		}
	}
	return errs
}

func (t *Topology) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	rng := func(name string, v, lo, hi int) {
		if v < lo || v > hi {
			errs = append(errs, field.Invalid(p.Child(name), v, fmt.Sprintf("must be in range %d-%d", lo, hi)))
		}
	}
	rng("nodes", t.Nodes, 1, MaxNodes)
	rng("podsPerNode", t.PodsPerNode, 1, MaxPodsPerNode)
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
	if pfx, ok := cidr("nodeCIDR", t.NodeCIDR, 30); ok {
		hosts := 1<<(32-pfx.Bits()) - 3 // network, broadcast, gateway
		if need := t.Nodes + clients; need > hosts {
			errs = append(errs, field.Invalid(p.Child("nodeCIDR"), t.NodeCIDR, fmt.Sprintf("holds %d hosts, the topology needs %d (nodes + clients)", hosts, need)))
		}
	}
	if pfx, ok := cidr("podCIDR", t.PodCIDR, 24); ok {
		if perNode := 1 << (24 - pfx.Bits()); t.Nodes > perNode {
			errs = append(errs, field.Invalid(p.Child("podCIDR"), t.PodCIDR, fmt.Sprintf("holds %d /24 node ranges, the topology has %d nodes", perNode, t.Nodes)))
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

func validateChurn(c *ChurnStep, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch c.Pattern {
	case "add", "update", "delete", "mixed":
	default:
		errs = append(errs, field.NotSupported(p.Child("pattern"), c.Pattern, []string{"add", "update", "delete", "mixed"}))
	}
	if c.Services < 1 || c.Services > MaxChurnServices {
		errs = append(errs, field.Invalid(p.Child("services"), c.Services, fmt.Sprintf("must be in range 1-%d", MaxChurnServices)))
	}
	if c.EndpointsPerService < 0 || c.EndpointsPerService > MaxEndpointsPerService {
		errs = append(errs, field.Invalid(p.Child("endpointsPerService"), c.EndpointsPerService, fmt.Sprintf("must be in range 0-%d", MaxEndpointsPerService)))
	}
	switch {
	case c.AllAtOnce && c.Rate != 0:
		errs = append(errs, field.Forbidden(p.Child("rate"), "set either rate or allAtOnce, not both"))
	case !c.AllAtOnce && c.Rate == 0:
		errs = append(errs, field.Required(p.Child("rate"), "changes per second (or allAtOnce: true)"))
	case c.Rate < 0 || c.Rate > 1e6:
		errs = append(errs, field.Invalid(p.Child("rate"), strconv.FormatFloat(c.Rate, 'g', -1, 64), "must be in range (0, 1000000] changes per second"))
	}
	timed := c.Pattern == "update" || c.Pattern == "mixed"
	switch {
	case timed && c.Duration == nil:
		errs = append(errs, field.Required(p.Child("duration"), fmt.Sprintf("how long the %s pattern runs, e.g. \"30s\"", c.Pattern)))
	case !timed && c.Duration != nil:
		errs = append(errs, field.Forbidden(p.Child("duration"), "only the update and mixed patterns run for a duration"))
	}
	if c.Pattern == "mixed" && c.AllAtOnce {
		errs = append(errs, field.Forbidden(p.Child("allAtOnce"), "the mixed pattern runs at a rate"))
	}
	if c.Probe != nil {
		errs = append(errs, validateChurnProbe(c, p.Child("probe"))...)
	}
	errs = append(errs, validateDuration(c.Duration, p.Child("duration"))...)
	tp := p.Child("template")
	if c.Template.Port < 1 || c.Template.Port > 65535 {
		errs = append(errs, field.Invalid(tp.Child("port"), c.Template.Port, "must be in range 1-65535"))
	}
	errs = append(errs, validateProtocol(c.Template.Protocol, tp.Child("protocol"))...)
	switch c.Template.Type {
	case "ClusterIP", "NodePort", "LoadBalancer":
	default:
		errs = append(errs, field.NotSupported(tp.Child("type"), c.Template.Type, []string{"ClusterIP", "NodePort", "LoadBalancer"}))
	}
	return errs
}

// Bounds of a churn step's prober.
const (
	MaxChurnProbeWorkers  = 64
	MaxChurnProbeInterval = time.Second
	MaxChurnProbeTimeout  = 5 * time.Second
	MaxChurnProbeDeadline = 10 * time.Minute
)

func validateChurnProbe(c *ChurnStep, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	pr := c.Probe
	if c.Pattern != "mixed" {
		errs = append(errs, field.Forbidden(p, "only the mixed pattern runs a prober"))
	}
	if pr.Node != "" {
		if m := hostRE.FindStringSubmatch(pr.Node); m == nil || m[1] != "node" {
			errs = append(errs, field.Invalid(p.Child("node"), pr.Node, "must be node-N"))
		}
	}
	if pr.Workers < 0 || pr.Workers > MaxChurnProbeWorkers {
		errs = append(errs, field.Invalid(p.Child("workers"), pr.Workers, fmt.Sprintf("must be in range 1-%d (0: the default 8)", MaxChurnProbeWorkers)))
	}
	bound := func(name string, d *Duration, most time.Duration) {
		errs = append(errs, validateDuration(d, p.Child(name))...)
		if d != nil && d.Duration > most {
			errs = append(errs, field.Invalid(p.Child(name), d.String(), fmt.Sprintf("must be at most %s", most)))
		}
	}
	bound("interval", pr.Interval, MaxChurnProbeInterval)
	bound("timeout", pr.Timeout, MaxChurnProbeTimeout)
	bound("deadline", pr.Deadline, MaxChurnProbeDeadline)
	return errs
}

func validateWait(w *WaitStep, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case w.Synced && w.Duration != nil:
		errs = append(errs, field.Forbidden(p, "set either synced or duration, not both"))
	case !w.Synced && w.Duration == nil:
		errs = append(errs, field.Required(p.Child("synced"), "must be true (wait until synced), or set a duration to wait"))
	case w.Duration != nil && w.Timeout != nil:
		errs = append(errs, field.Forbidden(p.Child("timeout"), "a fixed duration has no timeout"))
	case w.Duration != nil && w.Duration.Duration > MaxWaitDuration:
		errs = append(errs, field.Invalid(p.Child("duration"), w.Duration.String(), fmt.Sprintf("must be at most %s", MaxWaitDuration)))
	}
	errs = append(errs, validateDuration(w.Duration, p.Child("duration"))...)
	return append(errs, validateDuration(w.Timeout, p.Child("timeout"))...)
}

// state follows the objects that exist as the steps run, so that references can be
// checked at the step that makes them.
type state struct {
	s        *Scenario
	objects  map[manifest.Key]manifest.Object
	replicas map[manifest.Key]int32 // Deployment replicas after scale steps
}

func newState(s *Scenario) *state {
	return &state{s: s, objects: map[manifest.Key]manifest.Object{}, replicas: map[manifest.Key]int32{}}
}

// splitName parses "namespace/name" or "name".
func splitName(s string) (ns, name string) {
	if ns, name, ok := strings.Cut(s, "/"); ok {
		return ns, name
	}
	return manifest.DefaultNamespace, s
}

func (st *state) deploymentReplicas(k manifest.Key) int32 {
	if r, ok := st.replicas[k]; ok {
		return r
	}
	if d, ok := st.objects[k].Object.(*appsv1.Deployment); ok && d.Spec.Replicas != nil {
		return *d.Spec.Replicas
	}
	return 0
}

// checkCapacity fails when the pods that exist do not fit on the nodes.
func (st *state) checkCapacity(p *field.Path) field.ErrorList {
	total := 0
	for k, o := range st.objects {
		switch o.Object.(type) {
		case *corev1.Pod:
			total++
		case *appsv1.Deployment:
			total += int(st.deploymentReplicas(k))
		}
	}
	capacity := st.s.Topology.Nodes * st.s.Topology.PodsPerNode
	if total > capacity {
		return field.ErrorList{field.Invalid(p, total, fmt.Sprintf("pods exceed the lab's capacity of %d (topology.nodes x topology.podsPerNode)", capacity))}
	}
	return nil
}

func (st *state) apply(a *ApplyStep, p *field.Path) field.ErrorList {
	if len(a.Manifests) == 0 {
		return field.ErrorList{field.Required(p.Child("manifests"), "at least one manifest to apply")}
	}
	errs := validateRefs(a.Manifests, p.Child("manifests"))
	for _, ref := range a.Manifests {
		for _, o := range ref.Objects {
			st.objects[o.Key()] = o
			delete(st.replicas, o.Key())
		}
	}
	return append(errs, st.checkCapacity(p)...)
}

func (st *state) delete(d *DeleteStep, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	byName := d.Kind != "" || d.Name != ""
	switch {
	case len(d.Manifests) > 0 && byName:
		return field.ErrorList{field.Forbidden(p, "set either manifests or kind and name, not both")}
	case len(d.Manifests) == 0 && !byName:
		return field.ErrorList{field.Required(p, "manifests, or kind and name")}
	case len(d.Manifests) > 0:
		errs = append(errs, validateRefs(d.Manifests, p.Child("manifests"))...)
		for i, ref := range d.Manifests {
			for _, o := range ref.Objects {
				if _, ok := st.objects[o.Key()]; !ok {
					errs = append(errs, field.NotFound(p.Child("manifests").Index(i), o.Key().String()))
				}
				delete(st.objects, o.Key())
			}
		}
		return errs
	}
	switch d.Kind {
	case manifest.KindService, manifest.KindPod, manifest.KindDeployment, manifest.KindEndpointSlice:
	default:
		return field.ErrorList{field.NotSupported(p.Child("kind"), d.Kind, []string{manifest.KindService, manifest.KindPod, manifest.KindDeployment, manifest.KindEndpointSlice})}
	}
	if d.Name == "" {
		return field.ErrorList{field.Required(p.Child("name"), "")}
	}
	k := manifest.Key{Kind: d.Kind, Namespace: d.Namespace, Name: d.Name}
	if _, ok := st.objects[k]; !ok {
		return field.ErrorList{field.NotFound(p.Child("name"), fmt.Sprintf("%s: no such object exists at this step", k))}
	}
	delete(st.objects, k)
	return nil
}

func (st *state) scale(sc *ScaleStep, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	ns, name := splitName(sc.Deployment)
	k := manifest.Key{Kind: manifest.KindDeployment, Namespace: ns, Name: name}
	if sc.Deployment == "" {
		errs = append(errs, field.Required(p.Child("deployment"), "namespace/name of a Deployment"))
	} else if _, ok := st.objects[k]; !ok {
		errs = append(errs, field.NotFound(p.Child("deployment"), fmt.Sprintf("%s: no Deployment %s/%s exists at this step", sc.Deployment, ns, name)))
	}
	switch {
	case sc.Replicas == nil:
		errs = append(errs, field.Required(p.Child("replicas"), ""))
	case *sc.Replicas < 0 || *sc.Replicas > MaxReplicas:
		errs = append(errs, field.Invalid(p.Child("replicas"), *sc.Replicas, fmt.Sprintf("must be in range 0-%d", MaxReplicas)))
	default:
		if len(errs) == 0 {
			st.replicas[k] = *sc.Replicas
			errs = append(errs, st.checkCapacity(p.Child("replicas"))...)
		}
	}
	return errs
}

// podExists reports whether a pod of that name exists in ns: a Pod object or the pod
// <deployment>-<ordinal> of a Deployment.
func (st *state) podExists(ns, name string) bool {
	if _, ok := st.objects[manifest.Key{Kind: manifest.KindPod, Namespace: ns, Name: name}]; ok {
		return true
	}
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return false
	}
	ord, err := strconv.Atoi(name[i+1:])
	if err != nil || ord < 0 || strconv.Itoa(ord) != name[i+1:] {
		return false
	}
	k := manifest.Key{Kind: manifest.KindDeployment, Namespace: ns, Name: name[:i]}
	if _, ok := st.objects[k]; !ok {
		return false
	}
	return int32(ord) < st.deploymentReplicas(k)
}

func (st *state) selectorMatches(ns string, sel labels.Selector) bool {
	for k, o := range st.objects {
		if k.Namespace != ns {
			continue
		}
		switch obj := o.Object.(type) {
		case *corev1.Pod:
			if sel.Matches(labels.Set(obj.Labels)) {
				return true
			}
		case *appsv1.Deployment:
			if st.deploymentReplicas(k) > 0 && sel.Matches(labels.Set(obj.Spec.Template.Labels)) {
				return true
			}
		}
	}
	return false
}

func (st *state) setPods(sp *SetPodsStep, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case len(sp.Selector) > 0 && len(sp.Names) > 0:
		errs = append(errs, field.Forbidden(p, "set either selector or names, not both"))
	case len(sp.Selector) == 0 && len(sp.Names) == 0:
		errs = append(errs, field.Required(p, "selector or names choosing the pods"))
	case len(sp.Selector) > 0:
		for k, v := range sp.Selector {
			for _, msg := range validation.IsQualifiedName(k) {
				errs = append(errs, field.Invalid(p.Child("selector").Key(k), k, msg))
			}
			for _, msg := range validation.IsValidLabelValue(v) {
				errs = append(errs, field.Invalid(p.Child("selector").Key(k), v, msg))
			}
		}
		if len(errs) == 0 && !st.selectorMatches(sp.Namespace, labels.SelectorFromSet(sp.Selector)) {
			errs = append(errs, field.Invalid(p.Child("selector"), labels.Set(sp.Selector).String(), "matches no pod that exists at this step in namespace "+sp.Namespace))
		}
	default:
		for i, n := range sp.Names {
			if !st.podExists(sp.Namespace, n) {
				errs = append(errs, field.NotFound(p.Child("names").Index(i), fmt.Sprintf("%s: no such pod in namespace %s at this step (Deployment pods are named <deployment>-<ordinal>)", n, sp.Namespace)))
			}
		}
	}
	if sp.Ready == nil && sp.Terminating == nil {
		errs = append(errs, field.Required(p, "ready and/or terminating: the condition to set"))
	}
	return errs
}

func (st *state) checkHost(from string, p *field.Path) field.ErrorList {
	t := st.s.Topology
	if pod, ok := strings.CutPrefix(from, "pod:"); ok {
		ns, name := splitName(pod)
		if name == "" || !st.podExists(ns, name) {
			return field.ErrorList{field.NotFound(p, fmt.Sprintf("%s: no such pod at this step (Deployment pods are named <deployment>-<ordinal>)", from))}
		}
		return nil
	}
	m := hostRE.FindStringSubmatch(from)
	if m == nil {
		return field.ErrorList{field.Invalid(p, from, "must be client-N, node-N or pod:NAME")}
	}
	n, _ := strconv.Atoi(m[2])
	limit := t.Nodes
	if m[1] == "client" {
		limit = 0
		if t.Clients != nil {
			limit = *t.Clients
		}
	}
	if n >= limit {
		return field.ErrorList{field.NotFound(p, fmt.Sprintf("%s: the topology has %d %ss (%s-0 to %s-%d)", from, limit, m[1], m[1], m[1], limit-1))}
	}
	return nil
}

func validExpectation(e string) bool {
	switch e {
	case ExpectReachable, ExpectRefused, ExpectDropped, ExpectAllEndpoints, ExpectSameBackend, ExpectDistribution, ExpectSourceIPPreserved, ExpectHTTPStatus:
		return true
	}
	return false
}

func (st *state) expect(e *ExpectStep, p *field.Path) field.ErrorList {
	errs := st.checkHost(e.From, p.Child("from"))
	if e.From == "" {
		errs = field.ErrorList{field.Required(p.Child("from"), "client-N, node-N or pod:NAME")}
	}
	if !validExpectation(e.Expectation) {
		errs = append(errs, field.NotSupported(p.Child("expectation"), e.Expectation, []string{
			ExpectReachable, ExpectRefused, ExpectDropped, ExpectAllEndpoints, ExpectSameBackend, ExpectDistribution, ExpectSourceIPPreserved, ExpectHTTPStatus}))
	}
	if e.Expectation == ExpectHTTPStatus {
		if e.Status < 100 || e.Status > 599 {
			errs = append(errs, field.Invalid(p.Child("status"), e.Status, "must be an HTTP status, 100-599"))
		}
		if e.Path != "" && !strings.HasPrefix(e.Path, "/") {
			errs = append(errs, field.Invalid(p.Child("path"), e.Path, "must start with /"))
		}
		if e.Protocol != "" && e.Protocol != "TCP" {
			errs = append(errs, field.Invalid(p.Child("protocol"), e.Protocol, "HTTP goes over TCP"))
		}
	} else {
		if e.Status != 0 {
			errs = append(errs, field.Forbidden(p.Child("status"), "only an httpStatus expectation has a status"))
		}
		if e.Path != "" {
			errs = append(errs, field.Forbidden(p.Child("path"), "only an httpStatus expectation has a path"))
		}
	}
	if e.Count < 1 || e.Count > MaxProbeCount {
		errs = append(errs, field.Invalid(p.Child("count"), e.Count, fmt.Sprintf("must be in range 1-%d", MaxProbeCount)))
	}
	errs = append(errs, validateDuration(e.Timeout, p.Child("timeout"))...)
	if e.SourcePort < 0 || e.SourcePort > 65535 {
		errs = append(errs, field.Invalid(p.Child("sourcePort"), e.SourcePort, "must be in range 1-65535 (0: an ephemeral port per probe)"))
	}
	errs = append(errs, validateDuration(e.Interval, p.Child("interval"))...)
	if e.Interval != nil && e.Interval.Duration > MaxProbeInterval {
		errs = append(errs, field.Invalid(p.Child("interval"), e.Interval.String(), fmt.Sprintf("must be at most %s", MaxProbeInterval)))
	}
	if e.Protocol != "" {
		errs = append(errs, validateProtocol(e.Protocol, p.Child("protocol"))...)
	}
	tp := p.Child("to")
	to := e.To
	switch {
	case to.Service != "" && to.IPPort != "":
		return append(errs, field.Forbidden(tp, "set either service or ipPort, not both"))
	case to.Service == "" && to.IPPort == "":
		return append(errs, field.Required(tp, "service (namespace/name) or ipPort"))
	case to.IPPort != "":
		ap, err := netip.ParseAddrPort(to.IPPort)
		if err != nil || !ap.Addr().Is4() || ap.Port() == 0 {
			errs = append(errs, field.Invalid(tp.Child("ipPort"), to.IPPort, "must be IPv4:port, e.g. 10.96.0.10:53"))
		}
		if to.Port != "" || to.Address != "" || to.Node != "" {
			errs = append(errs, field.Forbidden(tp, "port, address and node apply only to a service target"))
		}
		return errs
	}
	ns, name := splitName(to.Service)
	o, ok := st.objects[manifest.Key{Kind: manifest.KindService, Namespace: ns, Name: name}]
	if !ok {
		return append(errs, field.NotFound(tp.Child("service"), fmt.Sprintf("%s: no Service %s/%s exists at this step", to.Service, ns, name)))
	}
	svc := o.Object.(*corev1.Service)
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return append(errs, field.Invalid(tp.Child("service"), to.Service, "headless and ExternalName Services have no proxy rules to probe"))
	}
	var port *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Name == to.Port {
			port = &svc.Spec.Ports[i]
		}
	}
	if port == nil {
		var names []string
		for _, sp := range svc.Spec.Ports {
			names = append(names, sp.Name)
		}
		if to.Port == "" {
			errs = append(errs, field.Required(tp.Child("port"), fmt.Sprintf("the Service has several ports: one of %s", strings.Join(names, ", "))))
		} else {
			errs = append(errs, field.NotSupported(tp.Child("port"), to.Port, names))
		}
	} else if e.Protocol != "" && string(port.Protocol) != e.Protocol {
		errs = append(errs, field.Invalid(p.Child("protocol"), e.Protocol, fmt.Sprintf("the service port is %s", port.Protocol)))
	}
	switch to.Address {
	case AddressClusterIP:
	case AddressNodePort:
		if svc.Spec.Type != corev1.ServiceTypeNodePort && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			errs = append(errs, field.Invalid(tp.Child("address"), to.Address, fmt.Sprintf("Service %s/%s is of type %s and has no node port", ns, name, svc.Spec.Type)))
		}
		if m := hostRE.FindStringSubmatch(to.Node); m == nil || m[1] != "node" {
			errs = append(errs, field.Invalid(tp.Child("node"), to.Node, "must be node-N"))
		} else {
			errs = append(errs, st.checkHost(to.Node, tp.Child("node"))...)
		}
	case AddressLoadBalancer:
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			errs = append(errs, field.Invalid(tp.Child("address"), to.Address, fmt.Sprintf("Service %s/%s is of type %s, not LoadBalancer", ns, name, svc.Spec.Type)))
		}
	case AddressExternalIP:
		if len(svc.Spec.ExternalIPs) == 0 {
			errs = append(errs, field.Invalid(tp.Child("address"), to.Address, fmt.Sprintf("Service %s/%s has no externalIPs", ns, name)))
		}
	case AddressHealthCheckNodePort:
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
			errs = append(errs, field.Invalid(tp.Child("address"), to.Address, fmt.Sprintf("Service %s/%s has no health-check node port: only LoadBalancer Services with externalTrafficPolicy Local have one", ns, name)))
		}
		if to.Node != "" {
			if m := hostRE.FindStringSubmatch(to.Node); m == nil || m[1] != "node" {
				errs = append(errs, field.Invalid(tp.Child("node"), to.Node, "must be node-N"))
			} else {
				errs = append(errs, st.checkHost(to.Node, tp.Child("node"))...)
			}
		}
	default:
		errs = append(errs, field.NotSupported(tp.Child("address"), to.Address, []string{AddressClusterIP, AddressNodePort, AddressLoadBalancer, AddressExternalIP, AddressHealthCheckNodePort}))
	}
	if e.Expectation == ExpectHTTPStatus && to.Address != AddressHealthCheckNodePort {
		errs = append(errs, field.Invalid(tp.Child("address"), to.Address, "httpStatus probes a Service's healthCheckNodePort (or a literal ipPort)"))
	}
	if to.Node != "" && to.Address != AddressNodePort && to.Address != AddressHealthCheckNodePort {
		errs = append(errs, field.Forbidden(tp.Child("node"), "only a nodePort or healthCheckNodePort target names a node"))
	}
	return errs
}
