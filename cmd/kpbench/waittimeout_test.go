//go:build linux

package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestDefaultWaitTimeout: only a TCG guest lengthens the wait default.
func TestDefaultWaitTimeout(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want time.Duration
	}{
		{"host", nil, time.Minute},
		{"tcg guest", map[string]string{"KPBENCH_IN_VM": "1", "KPBENCH_VM_ACCEL": "tcg"}, 3 * time.Minute},
		{"kvm guest", map[string]string{"KPBENCH_IN_VM": "1", "KPBENCH_VM_ACCEL": "kvm"}, time.Minute},
		{"accel set on the host", map[string]string{"KPBENCH_VM_ACCEL": "tcg"}, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, defaultWaitTimeout(func(k string) string { return tt.env[k] }))
		})
	}
}
