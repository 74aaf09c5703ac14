//go:build linux

package conformance

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/scenarios"
)

func TestLoadSuite(t *testing.T) {
	suite, err := Load(".", "")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(suite), 19)
	for _, sc := range suite {
		assert.Contains(t, sc.Description, "[sig-network]", "%s: description must name the e2e test it mirrors", sc.Name)
		assert.Equal(t, 2, sc.Topology.Nodes, "%s: the suite uses small labs", sc.Name)
		for i, st := range sc.Steps {
			if st.Kind == "expect" || st.KnownFailure != nil {
				assert.NotEmpty(t, st.Name, "%s: step %d needs a name (it is a case in reports)", sc.Name, i)
			}
		}
	}
}

func TestLoadFilters(t *testing.T) {
	tests := []struct {
		name, cases string
		want        []string
		wantErr     string
	}{
		{"glob", "session-affinity-*", []string{"session-affinity-clusterip", "session-affinity-nodeport", "session-affinity-switch", "session-affinity-timeout"}, ""},
		{"exact", "hairpin", []string{"hairpin"}, ""},
		{"no match", "nothing-*", nil, "no case"},
		{"a list", "hairpin, nodeport", []string{"hairpin", "nodeport"}, ""},
		{"a list with a typo", "hairpin,nodeprot", nil, `matches "nodeprot"`},
		{"an empty item", "hairpin,", nil, "empty pattern"},
		{"bad glob", "[", nil, "pattern"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			suite, err := Load(".", tt.cases)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			var names []string
			for _, sc := range suite {
				names = append(names, sc.Name)
			}
			assert.Equal(t, tt.want, names)
		})
	}
}

func TestLoadRejectsUnknownKnownFailureBackend(t *testing.T) {
	for name, sc := range map[string]string{
		"per step":      "apiVersion: kpbench.dev/v1alpha1\nkind: Scenario\nname: x\nsteps:\n- name: w\n  wait: {synced: true}\n  knownFailure: {reason: why, backends: [nosuch]}\n",
		"scenario-wide": "apiVersion: kpbench.dev/v1alpha1\nkind: Scenario\nname: x\nknownFailures: {userspace: \"why\"}\nsteps:\n- wait: {synced: true}\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "x.yaml"), []byte(sc), 0o644))
			_, err := Load(dir, "")
			require.Error(t, err)
			if name == "per step" {
				assert.Contains(t, err.Error(), `steps[0].knownFailure.backends[0]: Unsupported value: "nosuch"`)
			} else {
				assert.Contains(t, err.Error(), "knownFailures: Forbidden")
			}
		})
	}
}

func TestJudge(t *testing.T) {
	known := &scenarios.KnownFailure{Reason: "source IP is lost", Issue: "kubernetes/kubernetes#1", Backends: []string{"userspace"}}
	sc := &scenarios.Scenario{Name: "case", Steps: []scenarios.Step{{Name: "a"}, {Name: "b", KnownFailure: known}}}
	pass := []reports.Case{{Name: "a", Result: reports.CasePass}, {Name: "b", Result: reports.CasePass}}
	fail := []reports.Case{{Name: "a", Result: reports.CasePass}, {Name: "b", Result: reports.CaseFail, Reason: "expected x"}, {Name: "case", Result: reports.CaseFail, Reason: "b: expected x"}}
	otherFails := []reports.Case{{Name: "a", Result: reports.CaseFail, Reason: "expected y"}, {Name: "b", Result: reports.CaseFail, Reason: "expected x"}}
	tests := []struct {
		name       string
		backend    string
		steps      []reports.Case
		err        error
		want       Outcome
		wantReason string
	}{
		{"pass", "iptables", pass, nil, Pass, ""},
		{"fail names the step", "iptables", fail, errors.New("b: expected x"), Fail, "b: expected x"},
		{"bench error without step case", "iptables", nil, errors.New("lab: boom"), Fail, "lab: boom"},
		{"declared failure", "userspace", fail, nil, XFail, "source IP is lost (kubernetes/kubernetes#1)"},
		{"run error beside a declared failure", "userspace", fail, errors.New("cleanup: busy"), Fail, "cleanup: busy"},
		{"declared failure passes", "userspace", pass, nil, XPass, "did not happen: source IP is lost"},
		{"an undeclared step fails beside a declared one", "userspace", otherFails, nil, Fail, "a: expected y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason := judge(sc, tt.backend, tt.steps, tt.err)
			assert.Equal(t, tt.want, got)
			assert.Contains(t, reason, tt.wantReason)
			if tt.want == Fail {
				assert.NotContains(t, reason, "case:", "the run-level case repeats the step's error")
			}
		})
	}
}

func TestMatrixAndResults(t *testing.T) {
	rep := &Report{
		Backends: []string{"iptables", "ipvs"}, Cases: []string{"hairpin", "nodeport"},
		Results: []Result{
			{Case: "hairpin", Description: "[sig-network] hairpin", Backend: "iptables", Outcome: Pass},
			{Case: "nodeport", Backend: "iptables", Outcome: XFail, Reason: "known"},
			{Case: "hairpin", Backend: "ipvs", Outcome: Skip, Reason: "cannot run here: no IPVS"},
			{Case: "nodeport", Backend: "ipvs", Outcome: Fail, Reason: "step: refused"},
		},
	}
	var b bytes.Buffer
	require.NoError(t, rep.WriteMatrix(&b))
	out := b.String()
	for _, want := range []string{"CASE", "iptables", "ipvs", "hairpin", "xfail", "skip", "nodeport on ipvs: fail: step: refused", "hairpin on ipvs: skip: cannot run here: no IPVS"} {
		assert.Contains(t, out, want)
	}
	assert.True(t, rep.Failed())

	res := rep.ReportResults(context.Background())
	require.Len(t, res.Cases, 4)
	assert.Equal(t, "[sig-network] hairpin [hairpin]", res.Cases[0].Name)
	assert.Equal(t, reports.CaseSkip, res.Cases[1].Result)
	assert.Equal(t, "xfail: known", res.Cases[1].Reason)
	assert.Equal(t, reports.CaseFail, res.Cases[3].Result)
	var junit bytes.Buffer
	require.NoError(t, reports.WriteJUnit(&junit, res))
	assert.Contains(t, junit.String(), `failures="1"`)
}

// TestUnmet: the gate's arithmetic. A skip is unmet unless skips are allowed; xfail and
// xpass are met; a failure is unmet either way.
func TestUnmet(t *testing.T) {
	r := func(o Outcome, backend, reason string) Result {
		return Result{Case: "c-" + string(o), Backend: backend, Outcome: o, Reason: reason}
	}
	tests := []struct {
		name        string
		results     []Result
		allowSkip   bool
		wantUnmet   int
		wantVerdict []string
	}{
		{"all pass", []Result{r(Pass, "iptables", "")}, false, 0, nil},
		{"xfail and xpass are met", []Result{r(XFail, "userspace", "known"), r(XPass, "userspace", "did not happen")}, false, 0, nil},
		{"a backend that cannot run is not a pass", []Result{r(Skip, "ipvs", "cannot run here: no IPVS"), r(Skip, "ipvs", "cannot run here: no IPVS")}, false, 2,
			[]string{"2 case × backend not checked", "ipvs: cannot run here: no IPVS", "--allow-skip"}},
		{"--allow-skip accepts skips", []Result{r(Skip, "ipvs", "cannot run here: no IPVS")}, true, 0, nil},
		{"--allow-skip does not accept failures", []Result{r(Skip, "ipvs", "x"), r(Fail, "iptables", "step: refused")}, true, 1, []string{"1 case × backend failed"}},
		{"failures and skips", []Result{r(Fail, "iptables", "y"), r(Skip, "ipvs", "x")}, false, 2, []string{"1 case × backend failed", "1 case × backend not checked"}},
		{"no result at all", nil, false, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := &Report{Results: tt.results}
			assert.Len(t, rep.Unmet(tt.allowSkip), tt.wantUnmet)
			v := rep.Verdict(tt.allowSkip)
			if tt.wantUnmet == 0 {
				assert.Empty(t, v)
				return
			}
			for _, w := range tt.wantVerdict {
				assert.Contains(t, v, w)
			}
		})
	}
}

// TestXPassReported: a declared failure that did not happen passes the gate but shows in
// the matrix (its total and its note) and in junit.xml (the case's system-out).
func TestXPassReported(t *testing.T) {
	rep := &Report{
		Backends: []string{"userspace"}, Cases: []string{"source-ip-clusterip"},
		Results: []Result{{Case: "source-ip-clusterip", Backend: "userspace", Outcome: XPass, Reason: "did not happen: source IP is lost (kubernetes/kubernetes#1)"}},
	}
	assert.False(t, rep.Failed())
	var b bytes.Buffer
	require.NoError(t, rep.WriteMatrix(&b))
	assert.Contains(t, b.String(), "1 xpass")
	assert.Contains(t, b.String(), "source-ip-clusterip on userspace: xpass: did not happen")
	var junit bytes.Buffer
	require.NoError(t, reports.WriteJUnit(&junit, rep.ReportResults(context.Background())))
	assert.Contains(t, junit.String(), "<system-out>xpass: did not happen: source IP is lost")
	assert.Contains(t, junit.String(), `failures="0"`)
}
