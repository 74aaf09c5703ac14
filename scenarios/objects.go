//go:build linux

package scenarios

import (
	"k8s.io/apimachinery/pkg/runtime"

	"kpbench.dev/kpbench/manifest"
)

// objectSource is an action that applies objects (apply).
type objectSource interface {
	// Objects returns the objects the step applies.
	Objects() []runtime.Object
}

// AppliedObjects returns the objects of a run that only applies objects (diff-rules): the
// manifests, then the objects of the steps that apply some, up to the first expectation
// (every such step with allSteps). Other change steps cannot be replayed as objects:
// their labels are returned in skipped. Waits and measurements are passed over.
func (sc *Scenario) AppliedObjects(allSteps bool) (objs []runtime.Object, skipped []string) {
	for _, m := range sc.Manifests {
		objs = append(objs, manifest.RuntimeObjects(m.Objects)...)
	}
	reg := sc.registry
	if reg == nil {
		reg = DefaultRegistry()
	}
	for i, st := range sc.Steps {
		if src, ok := st.Action.(objectSource); ok {
			objs = append(objs, src.Objects()...)
			continue
		}
		kind, _ := reg.Step(st.Kind)
		switch {
		case kind == nil:
		case kind.Role() == RoleExpect && !allSteps:
			return objs, skipped
		case kind.Role() == RoleChange:
			skipped = append(skipped, sc.StepLabel(i))
		}
	}
	return objs, skipped
}
