//go:build linux

package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/scenarios"
)

// TestSuitePasses runs the whole suite on iptables and nftables: every case must pass.
func TestSuitePasses(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "iptables-restore")
	testutil.RequireBinary(t, "nft")
	suite, err := Load(".", "")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rep, err := Run(ctx, suite, Options{Backends: []string{"iptables", "nftables"}})
	require.NoError(t, err)
	for _, res := range rep.Results {
		want := Pass
		if declaresKnownFailure(suiteByName(suite, res.Case), res.Backend) {
			want = XFail // declared, and still failing: an xpass means the declaration is stale
		}
		assert.Equal(t, want, res.Outcome, "%s on %s: %s", res.Case, res.Backend, res.Reason)
		t.Logf("%-32s %-9s %-5s %5.1fs", res.Case, res.Backend, res.Outcome, res.Duration.Seconds())
	}
	for _, b := range rep.Backends {
		var total time.Duration
		for _, res := range rep.Results {
			if res.Backend == b {
				total += res.Duration
			}
		}
		t.Logf("%s: whole suite %.1fs", b, total.Seconds())
		assert.Less(t, total, 2*time.Minute, "%s: the suite must stay fast", b)
	}
}

// declaresKnownFailure reports whether a step of sc declares a known failure on backend.
func declaresKnownFailure(sc *scenarios.Scenario, backend string) bool {
	for _, st := range sc.Steps {
		if st.KnownFailure.Declares(backend) {
			return true
		}
	}
	return false
}

func suiteByName(suite []*scenarios.Scenario, name string) *scenarios.Scenario {
	for _, sc := range suite {
		if sc.Name == name {
			return sc
		}
	}
	return &scenarios.Scenario{}
}

// mutation turns one expect step into one that must fail when the original holds.
type mutation struct {
	expectation string // new expectation ("" keeps it)
	node        string // new node of a nodePort target ("" keeps it)
}

// mutations lists, per case and step, the mutation when the default inversion (see
// invert) would not fail: a single endpoint makes sameBackend and allEndpoints
// equivalent, so those steps are flipped to dropped; a local-policy step moves to the node
// without a local endpoint.
var mutations = map[string]map[string]mutation{
	"basic-endpoints":     {"one-endpoint": {expectation: scenarios.ExpectDropped}, "remaining-endpoint": {expectation: scenarios.ExpectDropped}},
	"multiport-endpoints": {"port-1-one-endpoint": {expectation: scenarios.ExpectDropped}, "port-2-one-endpoint": {expectation: scenarios.ExpectDropped}},
	"udp-server-cycles":   {"clusterip-backend-a": {expectation: scenarios.ExpectDropped}, "nodeport-backend-a": {expectation: scenarios.ExpectDropped}},
	// one endpoint: "same backend" holds as well as "all endpoints".
	"headless-label": {"custom-slice-reachable": {expectation: scenarios.ExpectRefused}},
	"external-traffic-policy-local": {
		"via-node-with-endpoint-keeps-source-ip": {node: "node-0"},
		// the health checks swap nodes: 200 becomes 503 and 503 becomes 200.
		"health-check-200-on-node-with-endpoint":    {node: "node-0"},
		"health-check-503-on-node-without-endpoint": {node: "node-1"},
	},
}

// invert is the default mutation of an expectation.
func invert(expectation string) string {
	switch expectation {
	case scenarios.ExpectReachable, scenarios.ExpectSourceIPPreserved:
		return scenarios.ExpectDropped
	case scenarios.ExpectRefused, scenarios.ExpectDropped:
		return scenarios.ExpectReachable
	case scenarios.ExpectAllEndpoints:
		return scenarios.ExpectSameBackend
	case scenarios.ExpectSameBackend:
		return scenarios.ExpectAllEndpoints
	}
	return ""
}

// brokenProxy lists cases whose mutation is a broken proxy configuration rather than
// inverted expectations: masqueradeAll hides every client's address.
var brokenProxy = map[string]func(*scenarios.Scenario){
	"source-ip-clusterip": func(sc *scenarios.Scenario) { sc.ProxyConfig.IPTables.MasqueradeAll = true },
}

// TestEveryCaseCanFail runs a mutated copy of every case on iptables, each expect step
// inverted (and every step continuing on failure), and requires every mutated step to
// fail: no expectation of the suite holds vacuously.
func TestEveryCaseCanFail(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "iptables-restore")
	suite, err := Load(".", "")
	require.NoError(t, err)
	for _, sc := range suite {
		t.Run(sc.Name, func(t *testing.T) {
			mutate := mutations[sc.Name]
			want := map[string]bool{} // expect steps that must fail
			if broken, ok := brokenProxy[sc.Name]; ok {
				broken(sc)
				for _, st := range sc.Steps {
					if _, ok := st.Action.(*scenarios.ExpectStep); ok {
						want[st.Name] = true
					}
				}
			} else {
				for i := range sc.Steps {
					st := &sc.Steps[i]
					st.ContinueOnFailure = true
					e, ok := st.Action.(*scenarios.ExpectStep)
					if !ok {
						continue
					}
					m, ok := mutate[st.Name]
					if !ok {
						m.expectation = invert(e.Expectation)
					}
					if m.expectation != "" {
						e.Expectation = m.expectation
					}
					if m.node != "" {
						e.To.Node = m.node
					}
					want[st.Name] = true
				}
			}
			for i := range sc.Steps {
				sc.Steps[i].ContinueOnFailure = true
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, _ := scenarios.Run(ctx, sc, scenarios.RunOptions{Backends: []string{"iptables"}})
			require.NotNil(t, res)
			got := map[string]string{}
			for _, c := range res.Cases {
				if want[c.Name] {
					got[c.Name] = c.Result
				} else if c.Result == reports.CaseFail && c.Name != sc.Name {
					t.Errorf("step %s failed, but only expectations were mutated: %s", c.Name, c.Reason)
				}
			}
			for name := range want {
				assert.Equal(t, reports.CaseFail, got[name], "mutated step %s must fail", name)
			}
			assert.Equal(t, Fail, runCaseOutcome(sc, res), "the mutated case must fail")
		})
	}
}

// runCaseOutcome judges a finished run as RunCase would.
func runCaseOutcome(sc *scenarios.Scenario, res *reports.Results) Outcome {
	o, _ := judge(sc, "iptables", res.Cases, nil)
	return o
}
