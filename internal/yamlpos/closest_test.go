package yamlpos

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
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
	require.NoError(t, Decoder{}.Decode(docs[0], &s))
	assert.Equal(t, "a", s.Name)
	require.Len(t, s.Rest, 2)
	assert.Equal(t, "wait", s.Rest[0].Key.Value)
	assert.Equal(t, 2, s.Rest[0].Key.Line)
	assert.Equal(t, "measure", s.Rest[1].Path.String())
	assert.Equal(t, "x", s.Rest[1].Value.Value)
}

// TestSharedBudget: the decodes of one file share one budget, four times what the file
// holds: aliases that repeat a large value in many places are refused, each decode past
// the budget fails, and a file without aliases decodes whole.
func TestSharedBudget(t *testing.T) {
	type item struct {
		A []int `json:"a"`
	}
	src := "base: &b {a: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]}\nitems:\n"
	for range 2000 {
		src += "- *b\n"
	}
	docs, err := Split("s.yaml", []byte(src))
	require.NoError(t, err)
	var top struct {
		Items []*yaml.Node `json:"items"`
		Base  *yaml.Node   `json:"base"`
	}
	sh := NewSharedFor(docs...)
	require.NoError(t, Decoder{Shared: sh}.Decode(docs[0], &top))
	failed := 0
	for _, n := range top.Items {
		var it item
		if err := (Decoder{Shared: sh}).Decode(&Doc{File: "s.yaml", Node: n}, &it); err != nil {
			assert.Contains(t, err.Error(), "too many aliases")
			failed++
		}
	}
	assert.Positive(t, failed, "2000 copies of a 21-value anchor exceed 4x a 2000-line file")
	assert.Less(t, failed, 2000, "the first copies fit in the budget")

	plain := "items:\n"
	for range 2000 {
		plain += "- {a: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]}\n"
	}
	docs, err = Split("p.yaml", []byte(plain))
	require.NoError(t, err)
	var all struct {
		Items []item `json:"items"`
	}
	require.NoError(t, Decoder{Shared: NewSharedFor(docs...)}.Decode(docs[0], &all))
	assert.Len(t, all.Items, 2000)
}
