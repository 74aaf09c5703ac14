package yamlpos

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClosest(t *testing.T) {
	names := []string{"sync", "lookup", "distribution", "rules", "perrule", "programming-latency", "churn", "throughput"}
	for _, tc := range []struct{ name, want string }{
		{"repeat", ""},
		{"Sync", "sync"},
		{"lokup", "lookup"},
		{"distributon", "distribution"},
		{"rule", "rules"},
		{"ruleCount", ""},
		{"programming_latency", "programming-latency"},
		{"xyz", ""},
		{"", ""},
		{strings.Repeat("a", 1000), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Closest(tc.name, names))
		})
	}
	assert.Equal(t, "repeats", Closest("repeat", []string{"kind", "repeats"}))
}

func TestDecodeRest(t *testing.T) {
	type step struct {
		Name string `json:"name"`
		Rest Rest   `json:"-"`
	}
	docs, err := Split("s.yaml", []byte("name: a\nwait: {synced: true}\nmeasure: x\n"))
	require.NoError(t, err)
	var s step
	require.NoError(t, Decode(docs[0], &s))
	assert.Equal(t, "a", s.Name)
	require.Len(t, s.Rest, 2)
	assert.Equal(t, "wait", s.Rest[0].Key.Value)
	assert.Equal(t, 2, s.Rest[0].Key.Line)
	assert.Equal(t, "measure", s.Rest[1].Path.String())
	assert.Equal(t, "x", s.Rest[1].Value.Value)
}
