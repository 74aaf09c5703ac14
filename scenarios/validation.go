package scenarios

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/backends/all"
	"kpbench.dev/kpbench/manifest"
)

// Validation is the scenario as the steps before the one being validated leave it: the
// objects that exist, the Services churn steps generated, the changes made so far. Each
// step's Validate checks itself against it and records what it changes.
type Validation struct {
	// Scenario being validated.
	Scenario *Scenario
	// Options say what is known of the run (backends and their facts).
	Options ValidationOptions

	objects  map[manifest.Key]manifest.Object
	replicas map[manifest.Key]int32 // Deployment replicas after scale steps
	pods     int                    // pods that exist: Pod objects and Deployments' replicas
	// selectorServices counts the Services with a selector (their slices are written by
	// the endpoints controller, with trigger times).
	selectorServices int
	// labels indexes the objects that make pods (Pods, Deployments' templates) by
	// namespace and label "key=value", for SelectorMatches.
	labels map[string]map[string]map[manifest.Key]bool

	// SyntheticServices is the number of generated Services (churn steps) that exist at
	// this step, as far as validation can tell (a delete churn removes at most what
	// exists).
	SyntheticServices int
	// TriggeredChanges is set once a change that carries a trigger time was made: an
	// EndpointSlice written by the endpoints controller (a Service with a selector) or by
	// a mixed churn. Programming latency is measured from those.
	TriggeredChanges bool
	// ProbedChurn is set once a mixed churn ran a prober.
	ProbedChurn bool
}

func newValidation(s *Scenario, o ValidationOptions) *Validation {
	return &Validation{Scenario: s, Options: o, objects: map[manifest.Key]manifest.Object{}, replicas: map[manifest.Key]int32{},
		labels: map[string]map[string]map[manifest.Key]bool{}}
}

// put records that an object exists (created or updated).
func (v *Validation) put(o manifest.Object) {
	k := o.Key()
	if _, ok := v.objects[k]; ok {
		v.drop(k)
	}
	v.objects[k] = o
	v.pods += v.podsOf(k)
	switch obj := o.Object.(type) {
	case *corev1.Service:
		if len(obj.Spec.Selector) > 0 {
			v.selectorServices++
			v.TriggeredChanges = true // its slice is written by the endpoints controller
		}
	case *corev1.Pod:
		v.index(k, obj.Labels, true)
	case *appsv1.Deployment:
		v.index(k, obj.Spec.Template.Labels, true)
	}
}

// drop forgets an object and what it counted for.
func (v *Validation) drop(k manifest.Key) {
	o, ok := v.objects[k]
	if !ok {
		return
	}
	v.pods -= v.podsOf(k)
	switch obj := o.Object.(type) {
	case *corev1.Service:
		if len(obj.Spec.Selector) > 0 {
			v.selectorServices--
		}
	case *corev1.Pod:
		v.index(k, obj.Labels, false)
	case *appsv1.Deployment:
		v.index(k, obj.Spec.Template.Labels, false)
	}
	delete(v.objects, k)
	delete(v.replicas, k)
}

// podsOf is the number of pods an object makes at this step.
func (v *Validation) podsOf(k manifest.Key) int {
	switch v.objects[k].Object.(type) {
	case *corev1.Pod:
		return 1
	case *appsv1.Deployment:
		return int(v.DeploymentReplicas(k))
	}
	return 0
}

// index adds (or removes) an object's labels to the label index.
func (v *Validation) index(k manifest.Key, labels map[string]string, add bool) {
	ns := v.labels[k.Namespace]
	if ns == nil {
		ns = map[string]map[manifest.Key]bool{}
		v.labels[k.Namespace] = ns
	}
	for lk, lv := range labels {
		pair := lk + "=" + lv
		if add {
			if ns[pair] == nil {
				ns[pair] = map[manifest.Key]bool{}
			}
			ns[pair][k] = true
		} else {
			delete(ns[pair], k)
		}
	}
}

// Apply records objects created or updated by a step.
func (v *Validation) Apply(objs []manifest.Object) {
	for _, o := range objs {
		v.put(o)
	}
}

// Object returns the object of that key at this step.
func (v *Validation) Object(k manifest.Key) (manifest.Object, bool) {
	o, ok := v.objects[k]
	return o, ok
}

// Remove records that an object was deleted.
func (v *Validation) Remove(k manifest.Key) {
	v.drop(k)
	v.podsChanged()
}

// SetReplicas records a Deployment's new replica count.
func (v *Validation) SetReplicas(k manifest.Key, replicas int32) {
	v.pods -= v.podsOf(k)
	v.replicas[k] = replicas
	v.pods += v.podsOf(k)
	v.podsChanged()
}

// podsChanged records that pods came or went: the endpoints controller rewrites the
// slices of the Services with a selector (with a trigger time).
func (v *Validation) podsChanged() {
	if v.selectorServices > 0 {
		v.TriggeredChanges = true
	}
}

// PodsChanged records that pods' conditions changed (setPods).
func (v *Validation) PodsChanged() { v.podsChanged() }

// DeploymentReplicas returns a Deployment's replica count at this step.
func (v *Validation) DeploymentReplicas(k manifest.Key) int32 {
	if r, ok := v.replicas[k]; ok {
		return r
	}
	if d, ok := v.objects[k].Object.(*appsv1.Deployment); ok && d.Spec.Replicas != nil {
		return *d.Spec.Replicas
	}
	return 0
}

// CheckCapacity fails when the pods that exist do not fit on the nodes.
func (v *Validation) CheckCapacity(p *field.Path) field.ErrorList {
	capacity := v.Scenario.Topology.Nodes * v.Scenario.Topology.PodsPerNode
	if v.pods > capacity {
		return field.ErrorList{field.Invalid(p, v.pods, fmt.Sprintf("pods exceed the lab's capacity of %d (topology.nodes x topology.podsPerNode)", capacity))}
	}
	return nil
}

// PodExists reports whether a pod of that name exists in ns: a Pod object or the pod
// <deployment>-<ordinal> of a Deployment.
func (v *Validation) PodExists(ns, name string) bool {
	if _, ok := v.objects[manifest.Key{Kind: manifest.KindPod, Namespace: ns, Name: name}]; ok {
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
	if _, ok := v.objects[k]; !ok {
		return false
	}
	return int32(ord) < v.DeploymentReplicas(k)
}

// SelectorMatches reports whether a pod in ns matches the selector (a set of labels):
// it checks the objects carrying the selector's rarest label only.
func (v *Validation) SelectorMatches(ns string, set map[string]string) bool {
	sel := labels.SelectorFromSet(set)
	var candidates map[manifest.Key]bool
	first := true
	for lk, lv := range set {
		c := v.labels[ns][lk+"="+lv]
		if len(c) == 0 {
			return false
		}
		if first || len(c) < len(candidates) {
			candidates, first = c, false
		}
	}
	for k := range candidates {
		switch obj := v.objects[k].Object.(type) {
		case *corev1.Pod:
			if sel.Matches(labels.Set(obj.Labels)) {
				return true
			}
		case *appsv1.Deployment:
			if v.DeploymentReplicas(k) > 0 && sel.Matches(labels.Set(obj.Spec.Template.Labels)) {
				return true
			}
		}
	}
	return false
}

// CheckHost checks a probe source at this step: client-N or node-N of the topology, a
// node's probe pod (probe-node-N), or pod:NAME / pod:NAMESPACE/NAME of a pod that exists.
func (v *Validation) CheckHost(from string, p *field.Path) field.ErrorList {
	t := v.Scenario.Topology
	if pod, ok := strings.CutPrefix(from, "pod:"); ok {
		ns, name := splitName(pod)
		if name == "" || !v.PodExists(ns, name) {
			return field.ErrorList{field.NotFound(p, fmt.Sprintf("%s: no such pod at this step (Deployment pods are named <deployment>-<ordinal>)", from))}
		}
		return nil
	}
	host := strings.TrimPrefix(from, "probe-")
	role, num, ok := parseHost(host)
	if !ok || (host != from && role != "node") {
		return field.ErrorList{field.Invalid(p, from, "must be client-N, node-N, probe-node-N or pod:NAME")}
	}
	n, _ := strconv.Atoi(num)
	limit := t.Nodes
	if role == "client" {
		limit = 0
		if t.Clients != nil {
			limit = *t.Clients
		}
	}
	if n >= limit {
		return field.ErrorList{field.NotFound(p, fmt.Sprintf("%s: the topology has %d %ss (%s-0 to %s-%d)", from, limit, role, role, role, limit-1))}
	}
	return nil
}

// RequireCapability fails when a backend the run will use lacks c (nothing is known
// without Options.Facts: the run checks it then).
func (v *Validation) RequireCapability(c Capability, p *field.Path, what string) field.ErrorList {
	if v.Options.Facts == nil {
		return nil
	}
	var lacking []string
	for _, b := range v.Options.Backends {
		if !v.Options.Facts.Capable(b, c) {
			lacking = append(lacking, b)
		}
	}
	if len(lacking) == 0 {
		return nil
	}
	return field.ErrorList{field.Forbidden(p, fmt.Sprintf("%s needs a backend with %s; %s has none", what, c, strings.Join(lacking, ", ")))}
}

// knownFailure checks a step's known-failure declaration.
func (v *Validation) knownFailure(k *KnownFailure, p *field.Path) field.ErrorList {
	if k == nil {
		return nil
	}
	var errs field.ErrorList
	if strings.TrimSpace(k.Reason) == "" {
		errs = append(errs, field.Required(p.Child("reason"), "one line: why the step fails on these backends"))
	}
	if len(k.Backends) == 0 {
		errs = append(errs, field.Required(p.Child("backends"), "the backends on which the step is known to fail"))
	}
	for i, b := range k.Backends {
		switch {
		case !all.Valid(b):
			errs = append(errs, field.NotSupported(p.Child("backends").Index(i), b, all.Names()))
		case slices.Index(k.Backends, b) < i:
			errs = append(errs, field.Duplicate(p.Child("backends").Index(i), b))
		}
	}
	return errs
}

// splitName parses "namespace/name" or "name".
func splitName(s string) (ns, name string) {
	if ns, name, ok := strings.Cut(s, "/"); ok {
		return ns, name
	}
	return manifest.DefaultNamespace, s
}
