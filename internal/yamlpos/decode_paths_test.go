package yamlpos

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deep nests lists, maps and structs, so that an error's path has every kind of segment.
type deep struct {
	Groups []struct {
		Items map[string][]inner `json:"items"`
	} `json:"groups"`
	Wide  map[string]int `json:"wide,omitempty"`
	Delay *textDuration  `json:"delay,omitempty"`
	Rest  Rest           `json:"-"`
}

// textDuration is a duration read through encoding.TextUnmarshaler (and, like
// scenarios.Duration, json.Unmarshaler: the text path must win for a string).
type textDuration struct {
	time.Duration
	viaJSON bool
}

func (d *textDuration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return errors.New("must be a duration")
	}
	d.Duration = v
	return nil
}

func (d *textDuration) UnmarshalJSON(b []byte) error {
	d.viaJSON = true
	if string(b) == "0" {
		return nil
	}
	return errors.New("must be a duration string")
}

// TestDecodeErrorPaths: the decoder keeps the path of the value it decodes as a stack and
// builds a field path only for an error or a Rest entry; every error still names its
// field and line exactly, at any depth, after any sibling.
func TestDecodeErrorPaths(t *testing.T) {
	wide := "wide:\n"
	for i := range 2 * smallMapping {
		wide += fmt.Sprintf("  k%d: %d\n", i, i)
	}
	for _, tc := range []struct {
		name, src, want string
	}{
		{"list, map key with dots, list, field",
			"groups:\n- items: {a: [{port: 1}]}\n- items:\n    x.y/z:\n    - {port: 1}\n    - {port: x}\n",
			`f.yaml:6: groups[1].items[x.y/z][1].port: Invalid value: "x": expected an integer`},
		{"after a Rest entry",
			"other: {a: 1}\ngroups:\n- items: {a: [{prt: 1}]}\n",
			`f.yaml:3: groups[0].items[a][0].prt: unknown field (did you mean "port"?)`},
		{"duplicate key, small mapping",
			"groups:\n- items: {a: [], b: [], a: []}\n",
			"f.yaml:2: groups[0].items[a]: Duplicate value: key already set at line 2"},
		{"duplicate key, large mapping",
			wide + "  k3: 9\n",
			fmt.Sprintf("f.yaml:%d: wide[k3]: Duplicate value: key already set at line 5", 2*smallMapping+2)},
		{"text unmarshaler error",
			"delay: soon\n",
			`f.yaml:1: delay: Invalid value: "soon": must be a duration`},
		{"json unmarshaler for a non-string",
			"delay: 5\n",
			"f.yaml:1: delay: Invalid value: 5: must be a duration string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := Split("f.yaml", []byte(tc.src))
			require.NoError(t, err)
			var d deep
			err = Decoder{}.Decode(docs[0], &d)
			require.Error(t, err)
			assert.Equal(t, tc.want, strings.Split(err.Error(), "\n")[0])
		})
	}
}

// TestDecodeTextUnmarshaler: a string goes to UnmarshalText, with no JSON round trip.
func TestDecodeTextUnmarshaler(t *testing.T) {
	docs, err := Split("f.yaml", []byte("delay: 1500ms\nother: {a: 1}\n"))
	require.NoError(t, err)
	var d deep
	require.NoError(t, Decoder{}.Decode(docs[0], &d))
	require.NotNil(t, d.Delay)
	assert.Equal(t, 1500*time.Millisecond, d.Delay.Duration)
	assert.False(t, d.Delay.viaJSON)
	require.Len(t, d.Rest, 1)
	assert.Equal(t, "other", d.Rest[0].Path.String())
}
