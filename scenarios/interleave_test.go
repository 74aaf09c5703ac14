//go:build linux

package scenarios

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"kpbench.dev/kpbench/reports"
)

func TestPassesInterleave(t *testing.T) {
	tests := []struct {
		name     string
		backends []string
		rounds   int
		want     []pass
	}{
		{name: "one round", backends: []string{"a", "b"}, rounds: 1, want: []pass{{"a", -1}, {"b", -1}}},
		{name: "zero is one", backends: []string{"a"}, rounds: 0, want: []pass{{"a", -1}}},
		{name: "ab ba ab", backends: []string{"a", "b"}, rounds: 3,
			want: []pass{{"a", 0}, {"b", 0}, {"b", 1}, {"a", 1}, {"a", 2}, {"b", 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, passes(tt.backends, tt.rounds))
		})
	}
}

func TestPassOptionsLabelsTheRound(t *testing.T) {
	o := RunOptions{Labels: map[string]string{"kernel": "6.18"}}
	got := pass{backend: "a", round: 2}.options(o)
	assert.Equal(t, map[string]string{"kernel": "6.18", reports.RoundParam: "2"}, got.Labels)
	assert.Equal(t, map[string]string{"kernel": "6.18"}, o.Labels, "the caller's labels are not changed")
	assert.Equal(t, o, pass{backend: "a", round: -1}.options(o))
}

func TestDefaultRounds(t *testing.T) {
	tests := []struct {
		backends []string
		want     int
	}{
		{[]string{"iptables", "iptables@whole-table-cache"}, DefaultABRounds},
		{[]string{"iptables", "nftables"}, 1},
		{[]string{"iptables"}, 1},
		{[]string{"iptables", "iptables-legacy", "nftables"}, 1},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, DefaultRounds(tt.backends), "%v", tt.backends)
	}
}
