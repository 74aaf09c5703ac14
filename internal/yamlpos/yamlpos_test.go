package yamlpos

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const sample = `# leading comment
---
---
kind: Service
metadata:
  name: web
  labels:
    app.kubernetes.io/name: web
spec:
  ports:
  - port: 80
    nodePort: 80
  - name: dns
    port: 53
---
# only a comment
---
kind: Pod
`

func TestSplitSkipsEmptyDocuments(t *testing.T) {
	docs, err := Split("svc.yaml", []byte(sample))
	require.NoError(t, err)
	require.Len(t, docs, 2)
	assert.Equal(t, 4, docs[0].Line())
	assert.Equal(t, 18, docs[1].Line())
	assert.Equal(t, "svc.yaml", docs[1].File)
}

func TestSplitSyntaxError(t *testing.T) {
	_, err := Split("bad.yaml", []byte("a: 1\nb: [1, 2\nc: 3\n"))
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "bad.yaml", e.File)
	assert.Positive(t, e.Line)
	assert.Contains(t, e.Error(), "bad.yaml:")
	assert.Contains(t, e.Msg, "invalid YAML")
}

func TestFieldLine(t *testing.T) {
	docs, err := Split("svc.yaml", []byte(sample))
	require.NoError(t, err)
	d := docs[0]
	for _, tc := range []struct {
		path string
		line int
	}{
		{"", 4},
		{"kind", 4},
		{"metadata.name", 6},
		{"metadata.labels[app.kubernetes.io/name]", 8},
		{"spec.ports", 10},
		{"spec.ports[0]", 11},
		{"spec.ports[0].nodePort", 12},
		{"spec.ports[1].port", 14},
		{"spec.ports[1].protocol", 13}, // missing: the deepest existing part (the list item)
		{"spec.ports[7].port", 10},     // index out of range: the list
		{"spec.type", 9},               // missing: its parent's key
		{"status.loadBalancer", 4},     // missing at top level: the document
	} {
		t.Run(tc.path, func(t *testing.T) {
			assert.Equal(t, tc.line, d.FieldLine(tc.path))
		})
	}
}

func TestErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		err  Error
		want string
	}{
		{Error{File: "svc.yaml", Line: 14, Field: "spec.ports[0].nodePort", Msg: "Invalid value: 80: must be in range 30000-32767"},
			"svc.yaml:14: spec.ports[0].nodePort: Invalid value: 80: must be in range 30000-32767"},
		{Error{File: "a.yaml", Line: 3, Msg: "invalid YAML: x"}, "a.yaml:3: invalid YAML: x"},
		{Error{File: "a.yaml", Field: "kind", Msg: "Required value"}, "a.yaml: kind: Required value"},
	} {
		assert.Equal(t, tc.want, tc.err.Error())
	}
}

func TestFromFieldWithBase(t *testing.T) {
	docs, err := Split("s.yaml", []byte("manifests:\n- inline:\n    kind: Service\n    spec:\n      ports:\n      - port: 0\n"))
	require.NoError(t, err)
	inline := docs[0].Node.Content[1].Content[0].Content[1]
	d := &Doc{File: "s.yaml", Node: inline, Base: field.NewPath("manifests").Index(0).Child("inline")}
	e := d.FromField(field.Invalid(field.NewPath("spec", "ports").Index(0).Child("port"), int32(0), "must be between 1 and 65535, inclusive"))
	assert.Equal(t, "s.yaml:6: manifests[0].inline.spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive", e.Error())
}

type inner struct {
	Port   int32              `json:"port"`
	Target intstr.IntOrString `json:"targetPort"`
	Ready  *bool              `json:"ready,omitempty"`
}

type base struct {
	Kind string `json:"kind"`
}

type outer struct {
	base   `json:",inline"`
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	Ports  []inner           `json:"ports"`
	Ratio  float64           `json:"ratio"`
	Raw    *yaml.Node        `json:"raw,omitempty"`
	Params map[string]any    `json:"params,omitempty"`
	Hidden string            `json:"-"`
}

func decodeString(t *testing.T, dc Decoder, src string) (outer, error) {
	t.Helper()
	docs, err := Split("f.yaml", []byte(src))
	require.NoError(t, err)
	require.Len(t, docs, 1)
	var o outer
	return o, dc.Decode(docs[0], &o)
}

func TestDecodeValid(t *testing.T) {
	o, err := decodeString(t, Decoder{}, `
kind: Thing
name: a
labels: {x: "1"}
ports:
- port: 80
  targetPort: http
  ready: true
- port: 81
  targetPort: 8081
ratio: 2
raw: {anything: [1, 2]}
params: {n: 3, s: x}
`)
	require.NoError(t, err)
	assert.Equal(t, "Thing", o.Kind)
	assert.Equal(t, "a", o.Name)
	assert.Equal(t, map[string]string{"x": "1"}, o.Labels)
	require.Len(t, o.Ports, 2)
	assert.Equal(t, intstr.FromString("http"), o.Ports[0].Target)
	assert.Equal(t, intstr.FromInt32(8081), o.Ports[1].Target)
	require.NotNil(t, o.Ports[0].Ready)
	assert.True(t, *o.Ports[0].Ready)
	assert.Nil(t, o.Ports[1].Ready)
	assert.InDelta(t, 2.0, o.Ratio, 0)
	require.NotNil(t, o.Raw)
	assert.Equal(t, 12, o.Raw.Line)
	assert.Equal(t, map[string]any{"n": int64(3), "s": "x"}, o.Params)
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src, field, msg string
		line                  int
	}{
		{"unknown field", "name: a\nnmae: b\n", "nmae", "unknown field", 2},
		{"unknown field case hint", "Name: a\n", "Name", `did you mean "name"?`, 1},
		{"hidden field is unknown", "Hidden: a\n", "Hidden", "unknown field", 1},
		{"duplicate key", "name: a\nname: b\n", "name", "already set at line 1", 2},
		{"int into string", "name: 80\n", "name", "expected a string", 1},
		{"string into int", "ports:\n- port: xxxx\n", "ports[0].port", `Invalid value: "xxxx": expected an integer`, 2},
		{"quoted int into int", "ports:\n- port: \"80\"\n", "ports[0].port", "expected an integer", 2},
		{"int32 overflow", "ports:\n- port: 4294967296\n", "ports[0].port", "out of range", 2},
		{"float into int", "ports:\n- port: 1.5\n", "ports[0].port", "expected an integer", 2},
		{"bad IntOrString", "ports:\n- targetPort: 1.5\n", "ports[0].targetPort", "Invalid value", 2},
		{"list expected", "ports: 80\n", "ports", "expected a list", 1},
		{"mapping expected", "ports:\n- 80\n", "ports[0]", "expected a mapping", 2},
		{"map value type", "labels:\n  a: [1]\n", "labels[a]", "expected a string", 2},
		{"bool type", "ports:\n- ready: yes\n", "ports[0].ready", "expected a boolean", 2},
		{"merge key", "base: &b {name: a}\n<<: *b\n", "", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeString(t, Decoder{}, tc.src)
			require.Error(t, err)
			list := AsErrors(err)
			require.NotEmpty(t, list)
			if tc.line == 0 {
				return
			}
			assert.Equal(t, "f.yaml", list[0].File)
			assert.Equal(t, tc.line, list[0].Line, "line")
			assert.Equal(t, tc.field, list[0].Field)
			assert.Contains(t, list[0].Msg, tc.msg)
		})
	}
}

func TestDecodeCollectsAllErrors(t *testing.T) {
	_, err := decodeString(t, Decoder{}, "name: 1\nfoo: 2\nports:\n- port: x\n")
	assert.Len(t, AsErrors(err), 3)
}

func TestDecodeAliases(t *testing.T) {
	o, err := decodeString(t, Decoder{}, "labels: &l {a: b}\nparams: {x: 1}\nports:\n- &p {port: 1}\n- *p\n")
	require.NoError(t, err)
	require.Len(t, o.Ports, 2)
	assert.Equal(t, int32(1), o.Ports[1].Port)
}

func TestDecodeAliasBombIsBounded(t *testing.T) {
	src := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for i := range 8 {
		name := fmt.Sprintf("b%d", i)
		src += fmt.Sprintf("%s: &%s [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n", name, name, prev, prev, prev, prev, prev, prev, prev, prev, prev, prev)
		prev = name
	}
	src += "params: {bomb: *" + prev + "}\n"
	docs, err := Split("bomb.yaml", []byte(src))
	require.NoError(t, err)
	var m struct {
		Params map[string]any `json:"params"`
	}
	err = Decoder{OnUnknownField: func(*field.Path, *yaml.Node, *yaml.Node) {}}.Decode(docs[0], &m)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "too many aliases")
}

func TestDecodeLenient(t *testing.T) {
	var seen []string
	dc := Decoder{OnUnknownField: func(p *field.Path, k, _ *yaml.Node) {
		seen = append(seen, fmt.Sprintf("%s@%d", p, k.Line))
	}}
	o, err := decodeString(t, dc, "name: a\nextra: 1\nports:\n- port: 2\n  other: {x: 1}\n")
	require.NoError(t, err)
	assert.Equal(t, "a", o.Name)
	assert.Equal(t, []string{"extra@2", "ports[0].other@5"}, seen)
}

func TestAsErrors(t *testing.T) {
	e1 := &Error{File: "a", Line: 1, Msg: "x"}
	e2 := &Error{File: "b", Line: 2, Msg: "y"}
	assert.Nil(t, AsErrors(nil))
	assert.Equal(t, Errors{e1}, AsErrors(fmt.Errorf("wrap: %w", e1)))
	assert.Equal(t, Errors{e1, e2}, AsErrors(Errors{e1, e2}))
	assert.Equal(t, Errors{e1, e2}, AsErrors(errors.Join(e1, e2)))
	assert.NoError(t, Errors(nil).Err())
}

func TestDecodeErrorsAreBounded(t *testing.T) {
	src := "ports:\n"
	for range 500 {
		src += "- port: x\n"
	}
	_, err := decodeString(t, Decoder{}, src)
	list := AsErrors(err)
	require.Len(t, list, maxErrors+1)
	assert.Contains(t, list[maxErrors].Msg, "too many errors")
}

// TestSplitDropsComments: no comment is kept, on any node.
func TestSplitDropsComments(t *testing.T) {
	src := "# file\na: b # line\n# head\nsteps:\n# first\n- x # item\n# foot\n"
	docs, err := Split("f.yaml", []byte(src))
	require.NoError(t, err)
	require.Len(t, docs, 1)
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		assert.Empty(t, n.HeadComment+n.LineComment+n.FootComment, "line %d", n.Line)
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(docs[0].Node)
}
