//go:build linux

package scenarios

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/manifest"
)

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

// ManifestRefs returns the manifests, for Load to read.
func (d *DeleteStep) ManifestRefs() []ManifestRef { return d.Manifests }

// Default sets the namespace of an object named by kind and name.
func (d *DeleteStep) Default() {
	if d.Kind != "" {
		setDefault(&d.Namespace, manifest.DefaultNamespace)
	}
}

// Validate requires objects that exist at this step, and records their removal.
func (d *DeleteStep) Validate(v *Validation, p *field.Path) field.ErrorList {
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
				if _, ok := v.Object(o.Key()); !ok {
					errs = append(errs, field.NotFound(p.Child("manifests").Index(i), o.Key().String()))
				}
				v.Remove(o.Key())
			}
		}
		return errs
	}
	kinds := []string{manifest.KindService, manifest.KindPod, manifest.KindDeployment, manifest.KindEndpointSlice}
	switch d.Kind {
	case manifest.KindService, manifest.KindPod, manifest.KindDeployment, manifest.KindEndpointSlice:
	default:
		return field.ErrorList{field.NotSupported(p.Child("kind"), d.Kind, kinds)}
	}
	if d.Name == "" {
		return field.ErrorList{field.Required(p.Child("name"), "")}
	}
	k := manifest.Key{Kind: d.Kind, Namespace: d.Namespace, Name: d.Name}
	if _, ok := v.Object(k); !ok {
		return field.ErrorList{field.NotFound(p.Child("name"), fmt.Sprintf("%s: no such object exists at this step", k))}
	}
	v.Remove(k)
	return nil
}

// Run deletes the objects.
func (d *DeleteStep) Run(ctx context.Context, s *Session) error {
	if d.Kind != "" {
		return s.Cluster.Delete(ctx, d.Kind, d.Namespace, d.Name)
	}
	for _, m := range d.Manifests {
		for _, o := range m.Objects {
			k := o.Key()
			if err := s.Cluster.Delete(ctx, k.Kind, k.Namespace, k.Name); err != nil {
				return err
			}
		}
	}
	return nil
}
