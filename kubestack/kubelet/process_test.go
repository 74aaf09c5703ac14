//go:build linux

package kubelet

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCommandLine(t *testing.T) {
	spec := procSpec{argv: []string{"/agnhost", "netexec", "--http-port=8080"}, netns: "/run/netns/kpb-x-p", hostname: "web-0",
		hosts: "/s/pods/u/etc-hosts", resolv: "/s/pods/u/resolv.conf"}
	prefix := []string{"/usr/bin/nsenter", "--net=/run/netns/kpb-x-p", "--", "/usr/bin/unshare", "--uts", "--mount", "--propagation", "private", "--",
		"/bin/sh", "-c", containerSetup, "kpbench-container", "web-0", "/s/pods/u/etc-hosts", "/s/pods/u/resolv.conf"}
	tests := []struct {
		name string
		l    launcher
		argv []string
		want []string
	}{
		{name: "/agnhost is the binary's path when the host has no /agnhost",
			l:    launcher{agnhost: "/cache/bin/agnhost"},
			want: append(append(prefix, ""), "/cache/bin/agnhost", "netexec", "--http-port=8080")},
		{name: "bound on /agnhost when the host has that path",
			l:    launcher{agnhost: "/cache/bin/agnhost", mountAgnhost: true},
			want: append(append(prefix, "/cache/bin/agnhost"), "/agnhost", "netexec", "--http-port=8080")},
		{name: "another program is left alone", l: launcher{agnhost: "/cache/bin/agnhost"}, argv: []string{"/bin/false"},
			want: append(append(prefix, ""), "/bin/false")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.l.nsenter, tt.l.unshare, tt.l.sh = "/usr/bin/nsenter", "/usr/bin/unshare", "/bin/sh"
			s := spec
			if tt.argv != nil {
				s.argv = tt.argv
			}
			assert.Equal(t, tt.want, tt.l.commandLine(s))
		})
	}
}
