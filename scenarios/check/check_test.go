//go:build linux

package check

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/cluster/testbed"
	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/internal/upstream/upstreamtest"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/manifest"
)

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: x
        ports: [{containerPort: 8080}]
---
`

func runCheck(t *testing.T, backend, yaml string) []Outcome {
	t.Helper()
	testutil.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	objs, err := manifest.Parser{}.Parse("test.yaml", []byte(yaml))
	require.NoError(t, err)
	tb, err := testbed.Start(ctx, testbed.Options{
		Lab:     lab.Config{Name: "t" + testutil.RandomID(t, 6), Nodes: 2, Clients: 1},
		Backend: backend, ProbePods: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, tb.Stop(context.Background())) })
	require.NoError(t, tb.Apply(ctx, manifest.RuntimeObjects(objs)...))
	outs, err := Run(ctx, tb, Options{Timeout: time.Second})
	require.NoError(t, err)
	return outs
}

const services = `apiVersion: v1
kind: Service
metadata: {name: web}
spec: {type: NodePort, selector: {app: web}, ports: [{port: 80, targetPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: bad-port}
spec: {selector: {app: web}, ports: [{port: 80, targetPort: 9999}]}
---
apiVersion: v1
kind: Service
metadata: {name: empty}
spec: {type: NodePort, selector: {app: nothing}, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: sticky}
spec: {selector: {app: web}, sessionAffinity: ClientIP, ports: [{port: 80, targetPort: 8080}]}
---
apiVersion: v1
kind: Pod
metadata: {name: only, labels: {app: one}}
spec: {nodeName: node-0, containers: [{name: c, image: x, ports: [{containerPort: 8080}]}]}
---
apiVersion: v1
kind: Service
metadata: {name: local}
spec: {type: NodePort, externalTrafficPolicy: Local, selector: {app: one}, ports: [{port: 80, targetPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: hl}
spec: {clusterIP: None, selector: {app: web}, ports: [{port: 80}]}
`

// checkWant is what TestCheck expects of each service of deployment+services.
var checkWant = map[string]struct {
	fail     bool
	evidence []string // each must appear in some path's evidence
}{
	"default/web":      {false, []string{"3/3 endpoints reached", "chi2="}},
	"default/bad-port": {true, []string{"refused="}},
	"default/empty":    {false, []string{"refused (no endpoints)"}},
	"default/sticky":   {false, []string{"affinity held"}},
	"default/local":    {false, []string{"dropped (Local policy", "1/1 endpoints reached"}},
	"default/hl":       {false, []string{"no proxy rules (expected)"}},
}

// TestCheck runs every kind of path against one testbed per backend and checks each
// service's verdicts and evidence: passing paths pass, and a service whose target port
// nobody listens on fails.
func TestCheck(t *testing.T) {
	for _, backend := range []string{"iptables", "nftables"} {
		t.Run(backend, func(t *testing.T) { checkBackend(t, backend) })
	}
}

// TestCheckUpstreamKubeProxy is TestCheck on the unmodified kube-proxy (`make upstream`),
// reading the lab's real API server: the same verdicts and evidence.
func TestCheckUpstreamKubeProxy(t *testing.T) {
	testutil.RequireRoot(t)
	upstreamtest.Require(t)
	for _, backend := range []string{"kube-proxy-iptables", "kube-proxy-nftables"} {
		t.Run(backend, func(t *testing.T) { checkBackend(t, backend) })
	}
}

func checkBackend(t *testing.T, backend string) {
	outs := runCheck(t, backend, deployment+services)
	assert.True(t, Failed(outs), "bad-port must fail the run")
	bySvc := map[string][]Outcome{}
	for _, o := range outs {
		bySvc[o.Service] = append(bySvc[o.Service], o)
	}
	require.Len(t, bySvc, len(checkWant))
	for svc, w := range checkWant {
		var evidence strings.Builder
		failed := false
		for _, o := range bySvc[svc] {
			failed = failed || o.Verdict == Fail
			evidence.WriteString(o.Detail + "\n")
		}
		assert.Equal(t, w.fail, failed, "%s: %s", svc, evidence.String())
		for _, e := range w.evidence {
			assert.Contains(t, evidence.String(), e, svc)
		}
	}
}
