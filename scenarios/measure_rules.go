//go:build linux

package scenarios

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/scenarios/measure"
)

// RulesParams are the rules measurement's parameters: none.
type RulesParams struct{}

// Default does nothing.
func (*RulesParams) Default() {}

// Validate accepts the rules measurement anywhere.
func (*RulesParams) Validate(*Validation, *field.Path) field.ErrorList { return nil }

// prepare reads the kernel memory before the lab exists, once settled.
func (*RulesParams) prepare(ctx context.Context, s *Session) {
	if s.memBase == 0 {
		s.memBase, _ = measure.SettledKernelMemory(ctx)
	}
}

// Measure counts the rules, and their memory when the baseline was read.
func (*RulesParams) Measure(ctx context.Context, s *Session) ([]reports.Measurement, error) {
	n, err := s.Cluster.KernelRules(ctx)
	if err != nil {
		return nil, err
	}
	out := []reports.Measurement{{Name: reports.MeasureRules, Params: s.Labels(), Unit: reports.UnitCount, Samples: []float64{float64(n)}}}
	if mem, err := measure.KernelMemory(); err == nil && s.memBase > 0 {
		out = append(out, reports.Measurement{Name: reports.MeasureRulesMemory, Params: s.Labels(), Unit: reports.UnitBytes, Samples: []float64{float64(mem - s.memBase)}})
	}
	return out, nil
}
