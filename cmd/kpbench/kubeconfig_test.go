//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kpbench.dev/kpbench/backends/kubeproxy"
	"kpbench.dev/kpbench/cluster/kube"
	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/internal/upstream"
	"kpbench.dev/kpbench/kubestack"
	"kpbench.dev/kpbench/reports"
)

// requireClusterUp skips (fails under KPBENCH_REQUIRE_PRIVILEGED=1 or
// KPBENCH_REQUIRE_UPSTREAM=1) unless `kpbench cluster up` can run here.
func requireClusterUp(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t)
	for _, b := range kubestack.Binaries() {
		if _, err := upstream.Binary(b); err != nil {
			if os.Getenv(upstream.RequireEnv) == "1" {
				t.Fatalf("%v (and %s=1 forbids skipping)", err, upstream.RequireEnv)
			}
			testutil.Missing(t, err.Error()+" (run `make upstream`)")
		}
	}
}

// kubeconfigCluster brings up a 2-node lab cluster with the proxy mode and returns its
// kubeconfig and a client; the cluster is removed at the end of the test.
func kubeconfigCluster(t *testing.T, mode kubeproxy.Mode) (string, kubernetes.Interface) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := kubestack.Up(ctx, kubestack.Config{Name: "t" + testutil.RandomID(t, 6), Nodes: 2, Proxy: mode, Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.Down(context.Background())) })
	client, _, err := kube.Client(c.Kubeconfig(), "")
	require.NoError(t, err)
	return c.Kubeconfig(), client
}

// runNamespaces lists the namespaces kpbench runs made in the cluster.
func runNamespaces(t *testing.T, client kubernetes.Interface) []string {
	t.Helper()
	list, err := client.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{LabelSelector: kube.RunLabel})
	require.NoError(t, err)
	var names []string
	for _, ns := range list.Items {
		names = append(names, ns.Name)
	}
	return names
}

const unlistenedTargetPort = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: nginx, ports: [{containerPort: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: web-wrong-port}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8081}]
`

// takenNodePort: the second Service asks for the first one's nodePort; the API server
// refuses it after the namespace and the first objects exist.
const takenNodePort = `apiVersion: v1
kind: Service
metadata: {name: a}
spec: {type: NodePort, selector: {app: a}, ports: [{port: 80, nodePort: 30999}]}
---
apiVersion: v1
kind: Service
metadata: {name: b}
spec: {type: NodePort, selector: {app: b}, ports: [{port: 80, nodePort: 30999}]}
`

// TestCheckKubeconfig runs `kpbench check --kubeconfig` against `kpbench cluster up` on
// both proxy modes: both seed manifests pass, a Service whose targetPort nobody listens
// on fails with exit 1, manifests the API server refuses exit 2, and no namespace of
// kpbench's is left in the cluster after any of them.
func TestCheckKubeconfig(t *testing.T) {
	requireClusterUp(t)
	bad := filepath.Join(t.TempDir(), "unlistened.yaml")
	require.NoError(t, os.WriteFile(bad, []byte(unlistenedTargetPort), 0o644))
	dup := filepath.Join(t.TempDir(), "taken-nodeport.yaml")
	require.NoError(t, os.WriteFile(dup, []byte(takenNodePort), 0o644))
	for _, mode := range []kubeproxy.Mode{kubeproxy.ModeIPTables, kubeproxy.ModeNFTables} {
		t.Run(string(mode), func(t *testing.T) {
			kc, client := kubeconfigCluster(t, mode)
			for _, tt := range []struct {
				file string
				want int
			}{
				{"../../scenarios/examples/nginx-nodeport.yaml", exitOK},
				{"../../scenarios/examples/inference.yaml", exitOK},
				{bad, exitFailed},
				{dup, exitBadInput},
			} {
				var out, errOut bytes.Buffer
				code := run([]string{"check", tt.file, "--kubeconfig", kc}, &out, &errOut)
				assert.Equal(t, tt.want, code, "%s:\n%s%s", tt.file, out.String(), errOut.String())
				if tt.want == exitOK {
					assert.Contains(t, out.String(), "nodePort")
					assert.Contains(t, out.String(), " 0 failed")
					assert.Contains(t, out.String(), "proxy "+string(mode), "kube-proxy's /proxyMode read")
				} else if tt.want == exitFailed {
					assert.Contains(t, out.String(), "refused")
				} else {
					assert.Contains(t, errOut.String(), "provided port is already allocated")
				}
				assert.Empty(t, runNamespaces(t, client), "namespaces left after %s", tt.file)
			}
		})
	}
}

// wrongConformCase expects refusals from a Service that has an endpoint: it must fail
// on any working proxy (the gate of conform --kubeconfig failing on purpose).
const wrongConformCase = `apiVersion: kpbench.dev/v1alpha1
kind: Scenario
name: wrong-expectation
topology: {nodes: 2}
manifests:
- inline:
    apiVersion: v1
    kind: Pod
    metadata: {name: client, labels: {role: client}}
    spec: {nodeName: node-1, containers: [{name: c, image: agnhost}]}
- inline:
    apiVersion: v1
    kind: Pod
    metadata: {name: web-0, labels: {app: web}}
    spec: {nodeName: node-0, containers: [{name: c, image: agnhost, ports: [{containerPort: 80}]}]}
- inline:
    apiVersion: v1
    kind: Service
    metadata: {name: web}
    spec: {selector: {app: web}, ports: [{port: 80}]}
steps:
- wait: {synced: true}
- name: reached
  expect: {from: pod:client, to: {service: web}, expectation: allEndpoints, count: 5}
- name: refused-but-served
  expect: {from: pod:client, to: {service: web}, expectation: refused}
`

// TestConformKubeconfig runs a subset of the conformance suite against a lab cluster
// through --kubeconfig: a case that runs passes, a case that needs a client outside the
// cluster is not checked (skip, with the reason), a wrong expectation fails (exit 1),
// and no namespace is left.
func TestConformKubeconfig(t *testing.T) {
	requireClusterUp(t)
	kc, client := kubeconfigCluster(t, kubeproxy.ModeIPTables)
	var out, errOut bytes.Buffer
	var code int
	for _, tt := range []struct {
		cases, want string
		extra       []string
		wantCode    int
	}{
		{cases: "basic-endpoints", want: "pass", wantCode: exitOK},
		// client-0's NodePort traffic goes from the other node's host network.
		{cases: "nodeport", want: "pass", wantCode: exitOK},
		// A case that is not checked is not a pass: exit 1, or 0 with --allow-skip.
		{cases: "external-ips", want: "skip", wantCode: exitFailed},
		{cases: "external-ips", want: "skip", extra: []string{"--allow-skip"}, wantCode: exitOK},
		// No load-balancer controller: the Services get no address, nothing to send to.
		{cases: "loadbalancer-source-ranges", want: "skip", wantCode: exitFailed},
	} {
		out.Reset()
		errOut.Reset()
		resDir := t.TempDir()
		args := append([]string{"conform", "--kubeconfig", kc, "--dir", "../../scenarios/conformance", "--cases", tt.cases, "--out", resDir}, tt.extra...)
		code = run(args, &out, &errOut)
		assert.Equal(t, tt.wantCode, code, "%s:\n%s%s", tt.cases, out.String(), errOut.String())
		if tt.want == "pass" {
			// results.json names the cluster, as run's does.
			res, err := reports.Load(resDir)
			require.NoError(t, err)
			require.NotNil(t, res.Environment.Cluster, "conform's results.json has environment.cluster")
			assert.Equal(t, 2, res.Environment.Cluster.Nodes)
			assert.Equal(t, "iptables", res.Environment.Cluster.ProxyMode)
		}
		assert.Regexp(t, tt.cases+` +`+tt.want, out.String())
		if tt.want == "skip" {
			assert.Contains(t, out.String()+errOut.String(), "not checked")
		}
		assert.Empty(t, runNamespaces(t, client), "namespaces left after %s", tt.cases)
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "wrong.yaml"), []byte(wrongConformCase), 0o644))
	out.Reset()
	errOut.Reset()
	code = run([]string{"conform", "--kubeconfig", kc, "--dir", dir, "--out", t.TempDir()}, &out, &errOut)
	assert.Equal(t, exitFailed, code, "%s%s", out.String(), errOut.String())
	assert.Regexp(t, `wrong-expectation +fail`, out.String())
	assert.Empty(t, runNamespaces(t, client), "namespaces left after the failed case")
}

// smallClusterLadder is cluster-ladder.yaml at 10 Services, with few samples.
const smallClusterLadder = `apiVersion: kpbench.dev/v1alpha1
kind: Scenario
name: small-ladder
topology: {nodes: 2, clients: 0}
steps:
- {name: grow-to-10, churn: {pattern: add, services: 10, endpointsPerService: 2, allAtOnce: true}}
- {name: synced-10, wait: {synced: true, timeout: 1m}}
- {name: lookup-10, measure: {name: lookup, params: {samples: 5}}}
- {name: distribution-10, measure: {name: distribution, params: {endpoints: 4, connections: 40}}}
- {name: programming-10, measure: {name: programming-latency, params: {mode: probed, samples: 3}}}
`

// TestRunKubeconfig runs a small ladder against a lab cluster through --kubeconfig: the
// generated Services are created through the API, lookup, distribution and probed
// programming latency (per node: API acknowledgement to the first probe that sees it) are recorded,
// results.json names the cluster (version, nodes, kube-proxy's mode), and nothing is left.
// A scenario step that needs the nodes' rules fails (it is never a pass or a 0).
func TestRunKubeconfig(t *testing.T) {
	requireClusterUp(t)
	kc, client := kubeconfigCluster(t, kubeproxy.ModeIPTables)
	dir := t.TempDir()
	sc := filepath.Join(dir, "small.yaml")
	require.NoError(t, os.WriteFile(sc, []byte(smallClusterLadder), 0o644))
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run([]string{"run", sc, "--kubeconfig", kc, "--out", out}, &stdout, &stderr)
	require.Equal(t, exitOK, code, "%s%s", stdout.String(), stderr.String())
	res, err := reports.Load(out)
	require.NoError(t, err)
	require.NotNil(t, res.Environment.Cluster)
	assert.Equal(t, 2, res.Environment.Cluster.Nodes)
	assert.Equal(t, "iptables", res.Environment.Cluster.ProxyMode)
	assert.NotEmpty(t, res.Environment.Cluster.ServerVersion)
	names := map[string]int{}
	for _, r := range res.Runs {
		for _, m := range r.Measurements {
			names[m.Name] += len(m.Samples)
		}
	}
	assert.Equal(t, 15, names["lookup"], "5 connects at first, middle and last; no established control through /dial")
	assert.Equal(t, 4, names["distribution"], "one count per endpoint")
	// Probed programming latency on the cluster path: 3 changes timed on each of the 2 nodes.
	assert.Equal(t, 6, names["programming-latency"], "3 API changes × 2 nodes' probers")
	assert.Empty(t, runNamespaces(t, client))

	rules := strings.Replace(smallClusterLadder, "- {name: lookup-10", "- {name: rules, measure: {name: rules}}\n- {name: lookup-10", 1)
	require.NoError(t, os.WriteFile(sc, []byte(rules), 0o644))
	stdout.Reset()
	stderr.Reset()
	code = run([]string{"run", sc, "--kubeconfig", kc, "--out", t.TempDir()}, &stdout, &stderr)
	assert.NotEqual(t, exitOK, code, "kernel rules of a real cluster are not available: %s%s", stdout.String(), stderr.String())
	assert.Contains(t, stdout.String()+stderr.String(), "not available on this cluster")
	assert.Empty(t, runNamespaces(t, client))
}

// TestCheckKubeconfigKilledIsCleanedUp kills a `kpbench check --kubeconfig` with SIGKILL
// once its namespace exists: the namespace stays, and `kpbench cluster cleanup` removes it;
// one interrupted with SIGINT (Ctrl-C) removes its namespace itself.
func TestCheckKubeconfigKilledIsCleanedUp(t *testing.T) {
	requireClusterUp(t)
	kc, client := kubeconfigCluster(t, kubeproxy.ModeIPTables)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	child := startKpbench(ctx, t, "check", "../../scenarios/examples/nginx-nodeport.yaml", "--kubeconfig", kc)
	require.Eventually(t, func() bool { return len(runNamespaces(t, client)) > 0 || child.cmd.ProcessState != nil },
		time.Minute, 50*time.Millisecond, "the run's namespace appears:\n%s", child.out.String())
	require.NoError(t, syscall.Kill(child.cmd.Process.Pid, syscall.SIGKILL))
	_ = child.cmd.Wait()
	left := runNamespaces(t, client)
	require.Len(t, left, 1, "a killed run leaves its namespace")

	var out, errOut bytes.Buffer
	require.Equal(t, exitOK, run([]string{"cluster", "cleanup", "--kubeconfig", kc}, &out, &errOut), errOut.String())
	assert.Contains(t, out.String(), "removed 1 namespaces ["+left[0]+"]")
	assert.Empty(t, runNamespaces(t, client))

	// Ctrl-C: the run deletes its namespace itself.
	child = startKpbench(ctx, t, "check", "../../scenarios/examples/nginx-nodeport.yaml", "--kubeconfig", kc)
	require.Eventually(t, func() bool { return len(runNamespaces(t, client)) > 0 || child.cmd.ProcessState != nil },
		time.Minute, 50*time.Millisecond, "the run's namespace appears:\n%s", child.out.String())
	require.NoError(t, syscall.Kill(child.cmd.Process.Pid, syscall.SIGINT))
	_ = child.cmd.Wait()
	assert.Contains(t, child.out.String(), "deleted")
	assert.Empty(t, runNamespaces(t, client), "an interrupted run deletes its namespace:\n%s", child.out.String())
}

// TestKubeconfigFlagsBadInput: the real-cluster flags refuse bad input with exit 2
// before anything is created, and never fall back to a default kubeconfig.
func TestKubeconfigFlagsBadInput(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
`), 0o600))
	t.Setenv("KUBECONFIG", kc)
	for _, tt := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"context without kubeconfig", []string{"check", "x.yaml", "--context", "ctx"}, "--context needs --kubeconfig"},
		{"dry-run without kubeconfig", []string{"check", "x.yaml", "--dry-run"}, "--dry-run needs --kubeconfig"},
		{"missing kubeconfig", []string{"check", "../../scenarios/examples/inference.yaml", "--kubeconfig", filepath.Join(dir, "nope")}, "--kubeconfig " + filepath.Join(dir, "nope")},
		{"unknown context", []string{"check", "../../scenarios/examples/inference.yaml", "--kubeconfig", kc, "--context", "other"}, `--context "other": no such context`},
		{"max objects", []string{"check", "../../scenarios/examples/inference.yaml", "--kubeconfig", kc, "--max-objects", "0"}, "--max-objects 0"},
		{"bad manifest", []string{"check", filepath.Join(dir, "nope.yaml"), "--kubeconfig", kc}, "nope.yaml"},
		{"cleanup without kubeconfig", []string{"cluster", "cleanup"}, "--kubeconfig is required"},
		{"lab flag with kubeconfig", []string{"check", "x.yaml", "--kubeconfig", kc, "--backend", "nftables"}, "--backend is a lab flag"},
		{"conform lab flag", []string{"conform", "--kubeconfig", kc, "--backend", "nftables"}, "--backend is a lab flag"},
		{"run: backends if available are the lab's", []string{"run", "../../scenarios/churn-small.yaml", "--kubeconfig", kc, "--backend-if-available", "ipvs"}, "--backend-if-available is a lab flag"},
		{"run dry-run", []string{"run", "../../scenarios/churn-small.yaml", "--kubeconfig", kc, "--dry-run"}, "--dry-run: only check --kubeconfig has it"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			assert.Equal(t, exitBadInput, run(tt.args, &out, &errOut), "stderr: %s", errOut.String())
			assert.Contains(t, errOut.String(), tt.wantErr)
		})
	}
}
