//go:build linux

package kubelet

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPodExecSpecArgs: the helper reads back what the kubelet wrote, the command's own
// flags included, and refuses an incomplete command line.
func TestPodExecSpecArgs(t *testing.T) {
	s := podExecSpec{
		NetNS: "/run/netns/kpb-x-p", Hostname: "web-0", Root: "/run/kpbench/exec-root", Dir: "/work",
		Binds: [][2]string{{"/state/pods/u/resolv.conf", "/etc/resolv.conf"}, {"/bin/agnhost", "/agnhost"}},
		Argv:  []string{"/bin/sh", "-x", "-c", "echo --netns=no"},
	}
	got, err := parsePodExecSpec(s.args())
	require.NoError(t, err)
	assert.Equal(t, s, got)

	for _, bad := range [][]string{
		{"--netns=/n", "--hostname=h", "--root=/r", "--"},
		{"--netns=/n", "--root=/r", "--", "true"},
		{"--netns=/n", "--hostname=h", "--root=/r", "--bind=relative:/etc/hosts", "--", "true"},
	} {
		_, err := parsePodExecSpec(bad)
		assert.Error(t, err, bad)
	}
}
