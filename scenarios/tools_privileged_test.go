//go:build linux

package scenarios

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/netns/netnstest"
	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/internal/toolroot"
	"kpbench.dev/kpbench/reports"
)

// requireToolRoot returns the prepared root of spec, or skips saying how to prepare it
// (fails under KPBENCH_REQUIRE_PRIVILEGED=1, where CI must have prepared it).
func requireToolRoot(t *testing.T, spec string) toolroot.Root {
	t.Helper()
	testutil.RequireRoot(t)
	s, err := toolroot.Parse(spec)
	require.NoError(t, err)
	root, err := toolroot.Cache{}.Resolve(s)
	if err != nil {
		testutil.Missing(t, "needs the "+spec+" tool root (make tools-matrix, or kpbench tools prepare "+spec+"; ~2 min, 101 MB): "+err.Error())
	}
	return root
}

// TestRunToolRootTrixie is the small matrix test of `make test`: the seed nginx-nodeport
// scenario on nftables and iptables with Debian trixie's tools (about 2 s once the root
// is prepared). It must pass, and the results must record trixie's versions, not the
// host's.
func TestRunToolRootTrixie(t *testing.T) {
	root := requireToolRoot(t, "debian:trixie")
	sc, err := Load("examples/nginx-nodeport.scenario.yaml")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := Run(ctx, sc, RunOptions{Backends: []string{"nftables", "iptables"}, Tools: root})
	require.NoError(t, err)
	for _, c := range res.Cases {
		assert.Equal(t, reports.CasePass, c.Result, "%s on %s: %s\n%s", c.Name, c.Backend, c.Reason, c.Evidence)
	}
	e := res.Environment
	assert.Equal(t, "debian:trixie", e.Tools)
	assert.Equal(t, root.Dir, e.ToolRoot)
	assert.Regexp(t, regexp.MustCompile(`^nftables v1\.1\.`), e.NFTVersion, "trixie ships nft 1.1.x")
	assert.Regexp(t, regexp.MustCompile(`^iptables v1\.8\.1[1-9]`), e.IPTablesVersion)
	assert.Regexp(t, regexp.MustCompile(`^iptables-restore v1\.8\.1[1-9]`), e.IPTablesRestoreVersion)
	host := reports.CollectEnvironment(ctx)
	assert.NotEqual(t, host.NFTVersion, e.NFTVersion, "the root's nft, not the host's")
}

// toolsProbe is the smallest lab: one node, a first sync.
const toolsProbe = `apiVersion: kpbench.dev/v1alpha1
kind: Scenario
name: tools-probe
topology: {nodes: 1, clients: 0}
steps:
- wait: {synced: true, timeout: 20s}
`

// TestRunToolRootIsUsed: with a fake root, the backend's nft is the root's (its calls
// are logged in the root) and the environment records the root's versions; a tool the
// root lacks is reported, its version left empty rather than the host's.
func TestRunToolRootIsUsed(t *testing.T) {
	testutil.RequireRoot(t)
	fake := netnstest.NewFakeRoot(t, nil, "nft", "iptables")
	sc, err := ParseScenario("tools-probe.yaml", []byte(toolsProbe), "")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tools := toolroot.Root{Spec: toolroot.Spec{Distro: "debian", Suite: "fake"}, Dir: fake.Dir}
	res, _ := Run(ctx, sc, RunOptions{Backends: []string{"nftables"}, Tools: tools}) // the fake nft programs nothing: the run may fail
	require.NotNil(t, res)
	var programmed []string // the backend's calls; the environment's --version calls aside
	for _, c := range fake.Calls(t) {
		if strings.HasPrefix(c, "nft ") && c != "nft --version" {
			programmed = append(programmed, c)
		}
	}
	assert.NotEmpty(t, programmed, "the nftables backend ran the root's nft: %q", fake.Calls(t))
	assert.Equal(t, "debian:fake", res.Environment.Tools)
	assert.Equal(t, "nft "+netnstest.FakeVersion+" (fake)", res.Environment.NFTVersion)
	assert.Empty(t, res.Environment.IPTablesRestoreVersion, "the root has no iptables-restore")

	var env reports.Environment
	err = RecordTools(ctx, &env, tools)
	assert.ErrorContains(t, err, "no version of iptables-restore")
}
