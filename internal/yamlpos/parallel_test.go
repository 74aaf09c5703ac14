package yamlpos

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// steps returns n lines made by item(i), after head.
func steps(head string, n int, item func(i int) string) string {
	var b strings.Builder
	b.WriteString(head)
	for i := range n {
		b.WriteString(item(i))
	}
	return b.String()
}

const parallelHead = "# a scenario\napiVersion: kpbench.dev/v1alpha1\nkind: Scenario\n\n# its steps\nsteps:\n"

func flowItem(i int) string {
	return fmt.Sprintf("- expect: {from: client-0, to: {service: s%d, port: a}, expectation: reachable, timeout: 5s}\n", i)
}

// parallelCases are files parseParallel must parse as the serial parse does (cut: true),
// or leave to it (cut: false).
var parallelCases = []struct {
	name string
	src  string
	cut  bool
}{
	{"flow items at column 0", steps(parallelHead, 40, flowItem), true},
	{"block items indented", steps(parallelHead, 40, func(i int) string {
		return fmt.Sprintf("  - name: step %d\n    measure:\n      name: lookup\n      params: {samples: %d}\n", i, i)
	}), true},
	{"comments between and inside items", steps(parallelHead, 40, func(i int) string {
		return fmt.Sprintf("# before %d\n- wait: {synced: true} # after %d\n  # inside\n  y: 1\n\n# between\n- x: %d\n", i, i, i)
	}), true},
	{"comment before the first item", steps(parallelHead+"# first\n\n", 40, flowItem), true},
	{"trailing comments", steps(parallelHead, 40, flowItem) + "  # the end\n# really\n", true},
	{"a hash in a quoted scalar", steps(parallelHead, 40, flowItem) + "- 'a#b'\n", true},
	{"comments only in the head", steps(strings.TrimSuffix(parallelHead, "steps:\n")+"# last\n\n# words\nsteps:\n", 40, flowItem), true},
	{"blank lines between items", steps(parallelHead, 40, func(i int) string { return flowItem(i) + "\n\n" }), true},
	{"kept trailing lines", steps(parallelHead, 40, func(i int) string { return fmt.Sprintf("- |+\n  text %d\n\n\n", i) }), true},
	{"CRLF", strings.ReplaceAll(steps(parallelHead, 40, flowItem), "\n", "\r\n"), true},
	{"block scalars", steps(parallelHead, 40, func(i int) string {
		return fmt.Sprintf("- apply: |\n    line %d\n\n    - not an item\n- keep: >-\n    folded\n    text\n", i)
	}), true},
	{"quoted and multi-line scalars", steps(parallelHead, 40, func(i int) string {
		return fmt.Sprintf("- a: \"quoted\n    on two lines %d\"\n- b: plain\n    continued\n- 'c': ''''\n", i)
	}), true},
	{"nested sequences", steps(parallelHead, 40, func(i int) string {
		return fmt.Sprintf("- - a%d\n  - - b\n    - c\n-\n  d: e\n-\n", i)
	}), true},
	{"tags", steps(parallelHead, 40, func(i int) string { return fmt.Sprintf("- !!str %d\n- !custom {a: b}\n", i) }), true},
	{"lone dash items and nulls", steps(parallelHead, 40, func(int) string { return "-\n- ~\n- null\n" }), true},
	{"blank lines before the first item", steps(parallelHead+"\n\n", 40, flowItem), true},
	{"document start", steps("---\n"+parallelHead, 40, flowItem), true},

	// Left to the serial parse.
	{"flow sequence over lines", steps(parallelHead, 40, func(i int) string { return fmt.Sprintf("- [a%d,\n- b]\n", i) }), false},
	{"anchors and aliases", steps(parallelHead+"- &a {x: 1}\n", 40, func(int) string { return "- *a\n" }), false},
	{"a key after the sequence", steps(parallelHead, 40, flowItem) + "name: late\n", false},

	{"two documents", steps(parallelHead, 40, flowItem) + "---\na: b\n", false},
	{"tag directive", "%TAG !k! tag:kpbench.dev,2026:\n" + steps("---\n"+parallelHead, 40, func(int) string { return "- !k!x a\n" }), false},
	{"lone carriage return", steps(parallelHead, 40, flowItem) + "- a\rb\n", false},
	{"key with a comment", steps("a: b\nsteps: # mine\n", 40, flowItem), false},
	{"key with a value", steps("a: b\nsteps: []\n", 40, flowItem), false},
	{"syntax error in an item", steps(parallelHead, 40, flowItem) + "- {a: b\n", false},
	{"item less indented than the first", steps(parallelHead+"  - a\n", 40, flowItem), false},
	{"sequence at the root", steps("", 40, flowItem), false},
}

// TestParseParallelMatchesSerial: every file parseParallel cuts comes out as the serial
// parse's tree, lines, columns and styles included; files it must not cut are left
// alone.
func TestParseParallelMatchesSerial(t *testing.T) {
	for _, tt := range parallelCases {
		t.Run(tt.name, func(t *testing.T) {
			for _, workers := range []int{2, 3, 8} {
				got, ok := parseParallel([]byte(tt.src), workers, 0)
				require.Equal(t, tt.cut, ok, "workers %d: cut", workers)
				if !ok {
					continue
				}
				want, err := splitSerial("f.yaml", []byte(tt.src))
				require.NoError(t, err)
				require.Len(t, want, 1)
				assert.Equal(t, want[0].Node, got, "workers %d", workers)
			}
		})
	}
}

// TestParseParallelCutsEvenly: the runs are of about equal size, so that the cores share
// the work.
func TestParseParallelCutsEvenly(t *testing.T) {
	src := []byte(steps(parallelHead, 1000, flowItem))
	plan, ok := planCuts(src, 4)
	require.True(t, ok)
	require.Len(t, plan.starts, 4)
	for i, s := range plan.starts {
		end := len(src)
		if i+1 < len(plan.starts) {
			end = plan.lines[plan.starts[i+1]].start
		}
		size := end - plan.lines[s].start
		assert.InDelta(t, len(src)/4, size, float64(len(src))/20, "run %d", i)
	}
}

// TestSplitParallel: Split takes the parallel path for a large file, and the serial one
// (with its positioned error) when a run does not parse.
func TestSplitParallel(t *testing.T) {
	big := steps(parallelHead, 4000, flowItem)
	require.Greater(t, len(big), minParallelBytes)
	_, cut := parseParallel([]byte(big), max(2, runtime.GOMAXPROCS(0)), minParallelBytes)
	require.True(t, cut, "Split's parameters take the parallel path for this file")
	docs, err := Split("big.yaml", []byte(big))
	require.NoError(t, err)
	require.Len(t, docs, 1)
	seq := docs[0].Node.Content[len(docs[0].Node.Content)-1]
	require.Len(t, seq.Content, 4000)
	assert.Equal(t, 4006, seq.Content[3999].Line, "the last item's line in the file")

	bad := []byte(big + "- {a: b\n")
	_, want := splitSerial("big.yaml", bad)
	_, err = Split("big.yaml", bad)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, want, err)
	assert.Equal(t, 4007, e.Line)
}

// FuzzParallelMatchesSerial: for any input, when parseParallel cuts it, the serial parse
// accepts it too and gives the same tree.
func FuzzParallelMatchesSerial(f *testing.F) {
	for _, tt := range parallelCases {
		f.Add(steps(parallelHead, 2, func(i int) string { return strings.SplitAfter(tt.src, "\n")[6+i%5] }), uint8(2))
	}
	f.Add("a:\n- b\n- c\n", uint8(2))
	f.Fuzz(func(t *testing.T, src string, workers uint8) {
		got, ok := parseParallel([]byte(src), int(workers%9), 0)
		if !ok {
			return
		}
		var doc yaml.Node
		require.NoError(t, yaml.Unmarshal([]byte(src), &doc), "the parallel parse accepted what the serial one refuses")
		want, err := splitSerial("f.yaml", []byte(src))
		require.NoError(t, err)
		require.Len(t, want, 1)
		require.Equal(t, want[0].Node, got)
	})
}

// TestSplitDropsComments: neither parse keeps a comment, so that both give one tree.
func TestSplitDropsComments(t *testing.T) {
	src := "# file\na: b # line\n# head\nsteps:\n# first\n- x # item\n# foot\n"
	for name, big := range map[string]bool{"serial": false, "parallel": true} {
		t.Run(name, func(t *testing.T) {
			data := src
			if big {
				data = steps(src, minParallelBytes/10, func(int) string { return "- x # item\n" })
			}
			docs, err := Split("f.yaml", []byte(data))
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
		})
	}
}
