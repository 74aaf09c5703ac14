package scenarios

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"kpbench.dev/kpbench/internal/yamlpos"
)

// scenario1MB returns a valid scenario just under 1 MB: the file of issue 21's bound
// ("loading any scenario under 1 MB takes under 100 ms"), about 12k expect steps in
// the flow style users write, with the optional fields (port, protocol, count, timeout)
// that each decode differently.
func scenario1MB() string {
	var b strings.Builder
	b.WriteString(scenario())
	expectations := []string{
		"- expect: {from: client-0, to: {service: multi, port: a}, expectation: reachable, timeout: 5s}\n",
		"- expect: {from: node-1, to: {service: multi, port: b}, protocol: UDP, expectation: reachable}\n",
		"- expect: {from: client-0, to: {service: multi, port: a, address: nodePort}, count: 3, expectation: reachable}\n",
		"- expect: {from: node-0, to: {ipPort: \"10.0.0.1:80\"}, expectation: dropped, timeout: 2s}\n",
	}
	for i := 0; ; i++ {
		line := expectations[i%len(expectations)]
		if b.Len()+len(line) >= 1<<20 {
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

// scenario1MBDense is the densest valid scenario just under 1 MB we know of: 45k of
// the shortest step, `- wait: {synced: true}`. More nodes per byte than scenario1MB, so
// the slowest to load per byte.
func scenario1MBDense() string {
	return fillTo1MB(scenario(), func(int) string { return "- wait: {synced: true}\n" })
}

// scenario1MBCommented is scenario1MB's steps with a comment line before each.
func scenario1MBCommented() string {
	lines := strings.SplitAfter(strings.TrimPrefix(scenario1MB(), scenario()), "\n")
	return fillTo1MB(scenario(), func(i int) string { return fmt.Sprintf("# step %d\n%s", i, lines[i%4]) })
}

// fillTo1MB appends line(0), line(1), ... to head while the whole stays under 1 MB.
func fillTo1MB(head string, line func(i int) string) string {
	var b strings.Builder
	b.WriteString(head)
	for i := 0; ; i++ {
		l := line(i)
		if b.Len()+len(l) >= 1<<20 {
			return b.String()
		}
		b.WriteString(l)
	}
}

// shapes1MB are the valid 1 MB scenarios the load is measured on.
func shapes1MB() map[string]string {
	return map[string]string{"expects": scenario1MB(), "dense": scenario1MBDense(), "commented": scenario1MBCommented()}
}

func TestScenario1MBIsValid(t *testing.T) {
	for name, src := range shapes1MB() {
		require.Less(t, len(src), 1<<20, name)
		require.Greater(t, len(src), 1<<20-200, name)
		s, err := ParseScenario("s.yaml", []byte(src), "examples")
		require.NoError(t, err, name)
		require.Greater(t, len(s.Steps), 9000, name)
	}
}

// maxLoadOverParse bounds what loading the 1 MB scenario allocates, as a multiple of
// what yaml.v3 alone allocates to parse it into nodes. The parse is most of the work of a
// load (74 ms of CPU of a 1 MB file here, BenchmarkParse1MB; yamlpos.Split spreads it over
// the cores, so BenchmarkLoad1MB takes 72-76 ms in all); everything after it (decoding the
// steps, validating) must stay a small part of it. Today the ratio is 1.29; a second
// parse of the file makes it 2.3, and the loader as it was before issue 21 (a
// field.Path per decoded value, a JSON round trip per duration) 1.66.
const maxLoadOverParse = 1.4

// TestLoad1MBAllocations is the check of issue 21's bound (a 1 MB scenario loads in
// under 100 ms) that holds whatever the machine's load: allocations, not seconds, against
// yaml.v3's own parse of the same bytes. The seconds are BenchmarkLoad1MB's.
func TestLoad1MBAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a 1 MB scenario")
	}
	src := []byte(scenario1MB())
	parse := testing.AllocsPerRun(1, func() {
		var n yaml.Node
		require.NoError(t, yaml.Unmarshal(src, &n))
	})
	var err error
	load := testing.AllocsPerRun(1, func() { _, err = ParseScenario("s.yaml", src, "examples") })
	require.NoError(t, err)
	t.Logf("%d bytes: %.0f allocations to load, %.0f to parse, ratio %.2f", len(src), load, parse, load/parse)
	require.LessOrEqual(t, load, maxLoadOverParse*parse, "loading allocates more than %.1fx yaml.v3's own parse: a second parse, or per-value work on the way", maxLoadOverParse)
}

// BenchmarkLoad1MB loads the valid 1 MB scenario; BenchmarkParse1MB is yaml.v3's parse
// of the same bytes alone, the floor of any loader built on it.
//
//	go test ./scenarios -run '^$' -bench '1MB' -count 10
func BenchmarkLoad1MB(b *testing.B) {
	src := []byte(scenario1MB())
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := ParseScenario("s.yaml", src, "examples"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoad1MBShapes loads each valid 1 MB shape: `-bench Load1MBShapes`.
func BenchmarkLoad1MBShapes(b *testing.B) {
	for name, src := range shapes1MB() {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				if _, err := ParseScenario("s.yaml", []byte(src), "examples"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSplit1MB is yamlpos.Split of the 1 MB scenario: yaml.v3's parse, in runs of
// steps on every core.
func BenchmarkSplit1MB(b *testing.B) {
	src := []byte(scenario1MB())
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := yamlpos.Split("s.yaml", src); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse1MB is yaml.v3's parse of the 1 MB scenario into a node tree, serially.
func BenchmarkParse1MB(b *testing.B) {
	src := []byte(scenario1MB())
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		var n yaml.Node
		if err := yaml.Unmarshal(src, &n); err != nil {
			b.Fatal(err)
		}
	}
}
