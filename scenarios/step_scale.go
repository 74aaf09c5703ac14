//go:build linux

package scenarios

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/manifest"
)

// ScaleStep sets a Deployment's replica count.
type ScaleStep struct {
	// Deployment is "namespace/name" or "name" (namespace "default") of a Deployment the
	// scenario defines.
	Deployment string `json:"deployment"`
	// Replicas is the new count, 0-10000.
	Replicas *int32 `json:"replicas"`
}

// Default does nothing: a scale has no defaults.
func (sc *ScaleStep) Default() {}

// Validate requires a Deployment that exists at this step and a count that fits the lab.
func (sc *ScaleStep) Validate(v *Validation, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	ns, name := splitName(sc.Deployment)
	k := manifest.Key{Kind: manifest.KindDeployment, Namespace: ns, Name: name}
	if sc.Deployment == "" {
		errs = append(errs, field.Required(p.Child("deployment"), "namespace/name of a Deployment"))
	} else if _, ok := v.Object(k); !ok {
		errs = append(errs, field.NotFound(p.Child("deployment"), fmt.Sprintf("%s: no Deployment %s/%s exists at this step", sc.Deployment, ns, name)))
	}
	switch {
	case sc.Replicas == nil:
		errs = append(errs, field.Required(p.Child("replicas"), ""))
	case *sc.Replicas < 0 || *sc.Replicas > MaxReplicas:
		errs = append(errs, field.Invalid(p.Child("replicas"), *sc.Replicas, fmt.Sprintf("must be in range 0-%d", MaxReplicas)))
	default:
		if len(errs) == 0 {
			v.SetReplicas(k, *sc.Replicas)
			errs = append(errs, v.CheckCapacity(p.Child("replicas"))...)
		}
	}
	return errs
}

// Run scales the Deployment.
func (sc *ScaleStep) Run(ctx context.Context, s *Session) error {
	ns, n := splitName(sc.Deployment)
	return s.Cluster.ScaleDeployment(ctx, ns, n, *sc.Replicas)
}
