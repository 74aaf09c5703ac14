//go:build linux

package kubelet

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCommandLine: a container's process is the exec helper's command line, with the
// pod's namespace, hostname, files and working directory, and the program unchanged.
func TestCommandLine(t *testing.T) {
	l := launcher{helper: []string{"/proc/self/exe", PodExecCommand}, root: "/s/exec-root", agnhost: "/cache/bin/agnhost"}
	s := procSpec{argv: []string{"/agnhost", "netexec", "--http-port=8080"}, netns: "/run/netns/kpb-x-p", hostname: "web-0", dir: "/tmp",
		binds: [][2]string{{"/s/pods/u/hosts", "/etc/hosts"}, {"/cache/bin/agnhost", "/agnhost"}}}
	assert.Equal(t, []string{"/proc/self/exe", PodExecCommand, "--netns=/run/netns/kpb-x-p", "--hostname=web-0", "--root=/s/exec-root", "--dir=/tmp",
		"--bind=/s/pods/u/hosts:/etc/hosts", "--bind=/cache/bin/agnhost:/agnhost", "--", "/agnhost", "netexec", "--http-port=8080"}, l.commandLine(s))
}
