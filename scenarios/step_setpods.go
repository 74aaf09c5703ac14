//go:build linux

package scenarios

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/manifest"
)

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

// Default sets the namespace.
func (sp *SetPodsStep) Default() { setDefault(&sp.Namespace, manifest.DefaultNamespace) }

// Validate requires pods that exist at this step and a condition to set.
func (sp *SetPodsStep) Validate(v *Validation, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case len(sp.Selector) > 0 && len(sp.Names) > 0:
		errs = append(errs, field.Forbidden(p, "set either selector or names, not both"))
	case len(sp.Selector) == 0 && len(sp.Names) == 0:
		errs = append(errs, field.Required(p, "selector or names choosing the pods"))
	case len(sp.Selector) > 0:
		for k, val := range sp.Selector {
			for _, msg := range validation.IsQualifiedName(k) {
				errs = append(errs, field.Invalid(p.Child("selector").Key(k), k, msg))
			}
			for _, msg := range validation.IsValidLabelValue(val) {
				errs = append(errs, field.Invalid(p.Child("selector").Key(k), val, msg))
			}
		}
		if len(errs) == 0 && !v.SelectorMatches(sp.Namespace, sp.Selector) {
			errs = append(errs, field.Invalid(p.Child("selector"), labels.Set(sp.Selector).String(), "matches no pod that exists at this step in namespace "+sp.Namespace))
		}
	default:
		for i, n := range sp.Names {
			if !v.PodExists(sp.Namespace, n) {
				errs = append(errs, field.NotFound(p.Child("names").Index(i), fmt.Sprintf("%s: no such pod in namespace %s at this step (Deployment pods are named <deployment>-<ordinal>)", n, sp.Namespace)))
			}
		}
	}
	if sp.Ready == nil && sp.Terminating == nil {
		errs = append(errs, field.Required(p, "ready and/or terminating: the condition to set"))
	}
	v.PodsChanged()
	return errs
}

// Run sets the conditions of every chosen pod; choosing none is a failure.
func (sp *SetPodsStep) Run(ctx context.Context, s *Session) error {
	names := map[string]bool{}
	for _, n := range sp.Names {
		pod, err := resolvePod(s.Cluster, sp.Namespace, n)
		if err != nil {
			return err
		}
		names[pod] = true
	}
	matched := 0
	for _, p := range s.Cluster.Pods() {
		if p.Namespace != sp.Namespace {
			continue
		}
		if len(sp.Selector) > 0 && !labels.SelectorFromSet(sp.Selector).Matches(labels.Set(p.Labels)) {
			continue
		}
		if len(sp.Names) > 0 && !names[p.Name] {
			continue
		}
		if err := s.Cluster.SetPodConditions(ctx, p.Namespace, p.Name, sp.Ready, sp.Terminating); err != nil {
			return err
		}
		matched++
	}
	if matched == 0 {
		return fmt.Errorf("setPods: no pod in namespace %s matches", sp.Namespace)
	}
	return nil
}
