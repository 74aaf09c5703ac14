//go:build linux

package conformance

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"kpbench.dev/kpbench/internal/netns/netnstest"
	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/internal/toolroot"
)

// TestReportRecordsTools: the suite's results.json names the tools the backends ran and
// their versions (the root's, not the host's).
func TestReportRecordsTools(t *testing.T) {
	testutil.RequireRoot(t)
	fake := netnstest.NewFakeRoot(t, nil, "nft", "iptables", "iptables-restore")
	tools := toolroot.Root{Spec: toolroot.Spec{Distro: "debian", Suite: "fake"}, Dir: fake.Dir}
	rep := &Report{Tools: tools}
	env := rep.ReportResults(context.Background()).Environment
	assert.Equal(t, "debian:fake", env.Tools)
	assert.Equal(t, fake.Dir, env.ToolRoot)
	assert.Equal(t, "nft "+netnstest.FakeVersion+" (fake)", env.NFTVersion)
	assert.Equal(t, "iptables-restore "+netnstest.FakeVersion+" (fake)", env.IPTablesRestoreVersion)

	host := (&Report{}).ReportResults(context.Background()).Environment
	assert.Equal(t, "host", host.Tools)
	assert.Empty(t, host.ToolRoot)
}
