package e2e

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func parseFile(t *testing.T, name string) *Suite {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	require.NoError(t, err)
	defer f.Close()
	s, err := ParseJUnit(f)
	require.NoError(t, err)
	return s
}

func TestParseJUnit(t *testing.T) {
	s := parseFile(t, "junit_01.xml")
	assert.Equal(t, 2, s.NotSelected, "specs left out by focus/skip")
	assert.InDelta(t, 412.5, s.Seconds, 1e-9)
	p, f, sk := s.Counts()
	assert.Equal(t, []int{1, 2, 1}, []int{p, f, sk})

	byName := map[string]Test{}
	for _, tc := range s.Tests {
		byName[tc.Name] = tc
	}
	tests := []struct {
		name     string
		outcome  Outcome
		reason   string
		location string
		state    string
	}{
		{
			name:    "[sig-network] Services should be able to create a functioning NodePort service [Conformance] [sig-network, Conformance]",
			outcome: Failed, state: "failed",
			reason:   "service is not reachable within 2m0s timeout on endpoint nodeport-test:80 over TCP protocol",
			location: "k8s.io/kubernetes/test/e2e/network/service.go:1302",
		},
		{
			name:    "[sig-network] Services should find a service from listing all namespaces [Conformance] [sig-network, Conformance]",
			outcome: Passed, state: "passed",
		},
		{
			name:    "[sig-network] Services should implement NodePort and HealthCheckNodePort correctly when ExternalTrafficPolicy changes [sig-network]",
			outcome: Skipped, state: "skipped", reason: "Requires at least 3 nodes (not 2)",
		},
		{
			name:    "[sig-network] Services should serve a basic endpoint from pods | with a pipe [Conformance] [sig-network, Conformance]",
			outcome: Failed, state: "timedout", reason: "A suite timeout occurred",
			location: "k8s.io/kubernetes/test/e2e/network/service.go:733",
		},
	}
	require.Len(t, s.Tests, len(tests), "suite nodes that passed and unselected specs are no tests")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := byName[tt.name]
			require.True(t, ok)
			assert.Equal(t, tt.outcome, got.Outcome)
			assert.Equal(t, tt.reason, got.Reason)
			assert.Equal(t, tt.location, got.Location)
			assert.Equal(t, tt.state, got.State)
		})
	}
}

func TestParseJUnitFailingSuiteNode(t *testing.T) {
	const doc = `<testsuites><testsuite time="3"><testcase name="[SynchronizedBeforeSuite]" status="failed" time="3">` +
		`<failure type="failed">[FAILED] there are currently no ready, schedulable nodes in the cluster&#xA;In [SynchronizedBeforeSuite] at: k8s.io/kubernetes/test/e2e/e2e.go:300 @ 12/05/26&#xA;</failure></testcase>` +
		`<testcase name="[It] a" status="skipped" time="0"><skipped message="skipped"/></testcase></testsuite></testsuites>`
	s, err := ParseJUnit(strings.NewReader(doc))
	require.NoError(t, err)
	require.Len(t, s.Tests, 1)
	assert.Equal(t, Test{
		Name: "[SynchronizedBeforeSuite]", Outcome: Failed, Seconds: 3, State: "failed",
		Reason:   "there are currently no ready, schedulable nodes in the cluster",
		Location: "k8s.io/kubernetes/test/e2e/e2e.go:300",
	}, s.Tests[0])
}

func TestParseJUnitErrors(t *testing.T) {
	for _, doc := range []string{"", "<testsuites>", "<testsuites></testsuites>", "not xml"} {
		_, err := ParseJUnit(strings.NewReader(doc))
		assert.Error(t, err, "%q", doc)
	}
}

func TestFailureReasonKeepsFirstLines(t *testing.T) {
	text := "[FAILED] line 1\nline 2\nline 3\nline 4\nline 5\nIn [It] at: a.go:1 @ now\n"
	reason, loc := failureReason(&junitMessage{Text: text})
	assert.Equal(t, "line 1\nline 2\nline 3\nline 4\n...", reason)
	assert.Equal(t, "a.go:1", loc)
}

// sampleReport is two modes' runs of the same suite, one with a run error.
func sampleReport(t *testing.T) *Report {
	nft := parseFile(t, "junit_01.xml")
	ipt := parseFile(t, "junit_01.xml")
	for i := range ipt.Tests { // the NodePort test passes on iptables
		if strings.Contains(ipt.Tests[i].Name, "functioning NodePort") {
			ipt.Tests[i] = Test{Name: ipt.Tests[i].Name, Outcome: Passed, Seconds: 14.2, State: "passed"}
		}
	}
	return &Report{
		Kubernetes: "v1.37.2", Focus: `\[sig-network\] Services`, Skip: `\[Serial\]|\[Disruptive\]`,
		Nodes: 2, KubeProxy: "/var/cache/kpbench/upstream/v1.37.2/bin/kube-proxy",
		Started: time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC),
		Runs: []ModeRun{
			{Mode: "nftables", ClusterUpSeconds: 9.84, E2ESeconds: 431, JUnit: "nftables/junit_01.xml", Log: "nftables/e2e.log", Suite: nft},
			{Mode: "iptables", ClusterUpSeconds: 10.2, E2ESeconds: 402, JUnit: "iptables/junit_01.xml", Log: "iptables/e2e.log", Suite: ipt,
				Error: "e2e.test: interrupted (Ctrl-C)"},
			{Mode: "ipvs", Error: "cluster up: proxy ipvs: the kernel has no IPVS"},
		},
	}
}

func TestWriteMarkdownGolden(t *testing.T) {
	withBackground := func(r *Report) *Report {
		r.BackgroundServices = 10000
		r.Runs[0].BackgroundSeconds, r.Runs[0].BackgroundSyncSeconds = 615, 42.5
		r.Runs[1].BackgroundSeconds, r.Runs[1].BackgroundSyncSeconds = 509, 131
		return r
	}
	tests := []struct {
		golden string
		report *Report
	}{
		{"e2e.md", sampleReport(t)},
		{"e2e-background.md", withBackground(sampleReport(t))}, // two more columns
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, WriteMarkdown(&b, tt.report))
			golden := filepath.Join("testdata", tt.golden)
			if *update {
				require.NoError(t, os.WriteFile(golden, b.Bytes(), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			assert.Equal(t, string(want), b.String(), "run go test ./e2e -update to accept")
		})
	}
}

func TestReportFailed(t *testing.T) {
	pass := &Suite{Tests: []Test{{Name: "a", Outcome: Passed}, {Name: "b", Outcome: Skipped, Reason: "r"}}}
	fail := &Suite{Tests: []Test{{Name: "a", Outcome: Failed}}}
	tests := []struct {
		name string
		runs []ModeRun
		want bool
	}{
		{"all passed or skipped", []ModeRun{{Mode: "nftables", Suite: pass}}, false},
		{"a failed test", []ModeRun{{Mode: "nftables", Suite: pass}, {Mode: "iptables", Suite: fail}}, true},
		{"a run error with passing tests", []ModeRun{{Mode: "nftables", Suite: pass, Error: "timeout"}}, true},
		{"no junit", []ModeRun{{Mode: "nftables"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, (&Report{Runs: tt.runs}).Failed())
		})
	}
}

// TestReportUnseen: what --require-all fails on: a skipped test, a run where nothing passed.
func TestReportUnseen(t *testing.T) {
	all := &Suite{Tests: []Test{{Name: "a", Outcome: Passed}, {Name: "b", Outcome: Passed}}}
	skip := &Suite{Tests: []Test{{Name: "a", Outcome: Passed}, {Name: "b", Outcome: Skipped, Reason: "r"}}}
	none := &Suite{}
	tests := []struct {
		name string
		runs []ModeRun
		want []string
	}{
		{"every test passed", []ModeRun{{Mode: "nftables", Suite: all}}, nil},
		{"a skip", []ModeRun{{Mode: "nftables", Suite: all}, {Mode: "iptables", Suite: skip}}, []string{"iptables: skipped b"}},
		{"nothing ran", []ModeRun{{Mode: "nftables", Suite: none}}, []string{"nftables: no test passed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, (&Report{Runs: tt.runs}).Unseen())
		})
	}
}

func TestWriteFiles(t *testing.T) {
	dir := t.TempDir()
	r := sampleReport(t)
	require.NoError(t, r.WriteFiles(dir))
	b, err := os.ReadFile(filepath.Join(dir, ReportJSON))
	require.NoError(t, err)
	var back Report
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, *r, back)
	_, err = os.Stat(filepath.Join(dir, ReportMarkdown))
	assert.NoError(t, err)
}
