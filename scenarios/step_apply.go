//go:build linux

package scenarios

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/manifest"
)

// ApplyStep creates or updates objects (like `kubectl apply`).
type ApplyStep struct {
	// Manifests to apply, in order. At least one.
	Manifests []ManifestRef `json:"manifests"`
}

// ManifestRefs returns the manifests, for Load to read.
func (a *ApplyStep) ManifestRefs() []ManifestRef { return a.Manifests }

// Objects returns the objects the step applies, in order.
func (a *ApplyStep) Objects() []runtime.Object {
	var objs []runtime.Object
	for _, m := range a.Manifests {
		objs = append(objs, manifest.RuntimeObjects(m.Objects)...)
	}
	return objs
}

// Default does nothing: an apply has no defaults.
func (a *ApplyStep) Default() {}

// Validate requires a manifest and records the objects.
func (a *ApplyStep) Validate(v *Validation, p *field.Path) field.ErrorList {
	if len(a.Manifests) == 0 {
		return field.ErrorList{field.Required(p.Child("manifests"), "at least one manifest to apply")}
	}
	errs := validateRefs(a.Manifests, p.Child("manifests"))
	for _, ref := range a.Manifests {
		v.Apply(ref.Objects)
	}
	return append(errs, v.CheckCapacity(p)...)
}

// Run applies the objects.
func (a *ApplyStep) Run(ctx context.Context, s *Session) error {
	return s.Cluster.Apply(ctx, a.Objects()...)
}
