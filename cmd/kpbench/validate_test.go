package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/lab"
)

// refusals are four scenarios that a lab used to be built for before they failed: each
// must be refused before anything exists, with its file, line and field.
var refusals = []struct {
	name, steps, where, msg string
}{
	{"unknown measurement", "- measure: {name: ruleCount}\n",
		":6: steps[0].measure.name:", `unknown measurement "ruleCount"`},
	{"samples of the wrong type", "- churn: {pattern: add, services: 10, allAtOnce: true}\n- measure: {name: lookup, params: {samples: many}}\n",
		":7: steps[1].measure.params.samples:", `Invalid value: "many": expected an integer`},
	{"misspelt repeats", "- churn: {pattern: add, services: 10, allAtOnce: true}\n- measure: {name: sync, params: {kind: full, repeat: 3}}\n",
		":7: steps[1].measure.params.repeat:", `unknown field (did you mean "repeats"?)`},
	{"programming latency without a trigger", "- churn: {pattern: add, services: 10, allAtOnce: true}\n- measure: {name: programming-latency}\n",
		":7: steps[1].measure.name:", "no step before this one makes such a change"},
}

// writeRefusal writes the scenario of a refusal case and returns its path.
func writeRefusal(t *testing.T, steps string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.yaml")
	src := "apiVersion: kpbench.dev/v1alpha1\nkind: Scenario\nname: refused\ntopology: {nodes: 1, clients: 0}\nsteps:\n" + steps
	require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
	return path
}

func TestValidateRefuses(t *testing.T) {
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			path := writeRefusal(t, tc.steps)
			var out, errOut bytes.Buffer
			start := time.Now()
			code := run([]string{"validate", path}, &out, &errOut)
			assert.Less(t, time.Since(start), 2*time.Second)
			assert.Equal(t, exitBadInput, code)
			assert.Contains(t, errOut.String(), path+tc.where)
			assert.Contains(t, errOut.String(), tc.msg)
		})
	}
}

// TestRunRefusesBeforeTheLab: run refuses the same scenarios with exit 2 before it builds
// anything: no lab is started (its first progress line) and no namespace of this process
// exists afterwards.
func TestRunRefusesBeforeTheLab(t *testing.T) {
	testutil.RequireRoot(t) // run needs root before it reads the scenario; validation is tested without it above
	before := ownNamespaces(t)
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			path := writeRefusal(t, tc.steps)
			outDir := filepath.Join(t.TempDir(), "out")
			var out, errOut bytes.Buffer
			start := time.Now()
			code := run([]string{"run", path, "--backend", "iptables", "--out", outDir}, &out, &errOut)
			assert.Less(t, time.Since(start), 2*time.Second)
			assert.Equal(t, exitBadInput, code)
			assert.Contains(t, errOut.String(), path+tc.where)
			assert.Contains(t, errOut.String(), tc.msg)
			assert.NotContains(t, errOut.String(), "building lab")
			assert.NoDirExists(t, outDir, "nothing is written for a refused scenario")
		})
	}
	assert.Equal(t, before, ownNamespaces(t), "no kpb namespace of this process appeared")
}

// ownNamespaces lists the kpb* network namespaces whose lab this process owns.
func ownNamespaces(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/run/netns")
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "kpb") {
			continue
		}
		labName, _, _ := strings.Cut(strings.TrimPrefix(name, "kpb-"), "-")
		data, err := os.ReadFile(filepath.Join(lab.DefaultRegistryDir, labName+".json"))
		var rec lab.Record
		if err != nil || json.Unmarshal(data, &rec) != nil || rec.PID == os.Getpid() {
			out = append(out, name) // unknown owner, or ours
		}
	}
	return out
}

// TestValidateShippedScenarios: every scenario, manifest and proxy configuration shipped
// in the repository validates.
func TestValidateShippedScenarios(t *testing.T) {
	var files []string
	for _, pattern := range []string{"*.yaml", "examples/*.yaml", "conformance/*.yaml", "conformance/manifests/*.yaml"} {
		m, err := filepath.Glob(filepath.Join("..", "..", "scenarios", pattern))
		require.NoError(t, err)
		files = append(files, m...)
	}
	require.Greater(t, len(files), 30)
	var out, errOut bytes.Buffer
	code := run(append([]string{"validate"}, files...), &out, &errOut)
	require.Equal(t, exitOK, code, "stderr: %s", errOut.String())
	for _, f := range files {
		assert.Contains(t, out.String(), f+": valid\n")
	}
}

// TestValidateKinds: validate tells a manifest and a proxy configuration from a
// scenario, and reports every file's errors.
func TestValidateKinds(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
		return p
	}
	badManifest := write("svc.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: 0}]}\n")
	badProxy := write("proxy.yaml", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: userspace\n")
	good := write("ok.yaml", "apiVersion: kpbench.dev/v1alpha1\nkind: Scenario\nname: ok\n")
	var out, errOut bytes.Buffer
	code := run([]string{"validate", badManifest, badProxy, good}, &out, &errOut)
	assert.Equal(t, exitBadInput, code)
	assert.Contains(t, errOut.String(), badManifest+":4: spec.ports[0].port")
	assert.Contains(t, errOut.String(), badProxy+":3: mode")
	assert.Contains(t, out.String(), good+": valid")
}

// TestValidateBackends: with --backend, a measurement needing a capability the backend
// lacks is refused.
func TestValidateBackends(t *testing.T) {
	path := filepath.Join("..", "..", "scenarios", "ipvs-schedulers.yaml")
	var out, errOut bytes.Buffer
	assert.Equal(t, exitOK, run([]string{"validate", path, "--backend", "ipvs"}, &out, &errOut), errOut.String())
	errOut.Reset()
	assert.Equal(t, exitBadInput, run([]string{"validate", path, "--backend", "iptables"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "params.scheduler: Forbidden: switching the IPVS scheduler needs a backend with ipvs-experiments; iptables has none")
}
