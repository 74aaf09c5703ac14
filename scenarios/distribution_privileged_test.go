//go:build linux

package scenarios

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/reports"
)

// biasStep rewrites, on node-0, the probabilities of every iptables Service chain's
// endpoint jumps (-m statistic --mode random --probability P) to 1/n, the classic
// mistake for 1/(n-i): endpoint i then gets (1-1/n)^i/n of the connections, and the last
// one, jumped to without a probability, (1-1/n)^(n-1) (39% of them for 10 endpoints,
// against 10%). A test-only step: the fault a distribution expectation must see.
type biasStep struct {
	// Endpoints is n.
	Endpoints int `json:"endpoints"`
}

func (*biasStep) Default()                                          {}
func (*biasStep) Validate(*Validation, *field.Path) field.ErrorList { return nil }

var probability = regexp.MustCompile(`--probability [0-9.]+`)

func (b *biasStep) Run(ctx context.Context, s *Session) error {
	node, ok := s.Cluster.Host("node-0")
	if !ok {
		return fmt.Errorf("bias: no node-0")
	}
	save, err := netns.Exec(ctx, node.NetNSPath, netns.Command{Path: "iptables-nft-save", Args: []string{"-t", "nat"}})
	if err != nil {
		return fmt.Errorf("bias: %w", err)
	}
	var out []string
	rewritten := 0
	for _, l := range strings.Split(string(save.Stdout), "\n") {
		switch {
		case strings.HasPrefix(l, "*"), strings.HasPrefix(l, "COMMIT"):
			out = append(out, l)
		case strings.HasPrefix(l, "-A KUBE-SVC-") && probability.MatchString(l):
			out = append(out, probability.ReplaceAllString(l, fmt.Sprintf("--probability %.11f", 1/float64(b.Endpoints))))
			rewritten++
		case strings.HasPrefix(l, "-A KUBE-SVC-"):
			out = append(out, l)
		}
	}
	if rewritten != b.Endpoints-1 {
		return fmt.Errorf("bias: rewrote %d probabilities, want %d:\n%s", rewritten, b.Endpoints-1, save.Stdout)
	}
	// Flush and refill the Service chains only: their declarations (":KUBE-SVC-...")
	// are kept from the dump.
	var restore []string
	for _, l := range out {
		restore = append(restore, l)
		if l == "*nat" {
			for _, d := range strings.Split(string(save.Stdout), "\n") {
				if strings.HasPrefix(d, ":KUBE-SVC-") {
					restore = append(restore, d)
				}
			}
		}
	}
	_, err = netns.Exec(ctx, node.NetNSPath, netns.Command{Path: "iptables-nft-restore", Args: []string{"--noflush"}, Stdin: []byte(strings.Join(restore, "\n") + "\n")})
	return err
}

// TestDistributionExpectationSeesBias programs a Service of 10 endpoints with iptables'
// statistic mode random into a real kernel, rewrites its probabilities to 1/n instead of
// 1/(n-i), and requires the distribution expectation to fail on that rule set, while the
// same expectation passes on the correct one: the gate can fail, and does not fail a
// fair selection.
func TestDistributionExpectationSeesBias(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "iptables-nft-restore", "iptables-nft-save")
	reg := DefaultRegistry().AddStep(stepKind[biasStep, *biasStep]{name: "bias", role: RoleChange, doc: "test only"})
	const src = `apiVersion: kpbench.dev/v1alpha1
kind: Scenario
name: distribution-bias
topology: {nodes: 1, clients: 1}
manifests:
- inline:
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: ten}
    spec:
      replicas: 10
      selector: {matchLabels: {app: ten}}
      template:
        metadata: {labels: {app: ten}}
        spec: {containers: [{name: agnhost, image: agnhost, ports: [{containerPort: 80}]}]}
- inline:
    apiVersion: v1
    kind: Service
    metadata: {name: ten}
    spec:
      selector: {app: ten}
      ports: [{port: 80, targetPort: 80}]
steps:
- wait: {synced: true}
- name: fair
  expect: {from: node-0, to: {service: ten}, expectation: distribution, count: 1000}
- bias: {endpoints: 10}
- name: biased
  expect: {from: node-0, to: {service: ten}, expectation: distribution, count: 1000}
`
	sc, err := reg.Parse("distribution-bias.yaml", []byte(src), ".")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, _ := Run(ctx, sc, RunOptions{Backends: []string{"iptables"}})
	require.NotNil(t, res)
	got := map[string]reports.Case{}
	for _, c := range res.Cases {
		got[c.Name] = c
	}
	require.Contains(t, got, "fair")
	require.Contains(t, got, "biased", "cases: %v", res.Cases)
	assert.Equal(t, reports.CasePass, got["fair"].Result, "1/(n-i): %s %s", got["fair"].Reason, got["fair"].Evidence)
	assert.Equal(t, reports.CaseFail, got["biased"].Result, "1/n must not fit uniform shares")
	assert.Contains(t, got["biased"].Reason, "does not fit uniform shares")
	t.Logf("biased: %s", got["biased"].Reason)
}
