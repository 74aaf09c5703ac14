package scenarios

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestParseHostMatchesHostRE: parseHost accepts exactly what hostRE matches, with the
// same parts.
func TestParseHostMatchesHostRE(t *testing.T) {
	for _, s := range []string{
		"client-0", "client-15", "node-0", "node-1", "node-10", "node-99999999999999999999",
		"", "-", "node", "node-", "node-01", "node-00", "node-1x", "node-1-2", "node--1",
		"nodes-1", "xnode-1", "Node-1", "client-+1", "client- 1", "probe-node-1", "node-1\n",
		"node-١",
	} {
		role, num, ok := parseHost(s)
		m := hostRE.FindStringSubmatch(s)
		if assert.Equal(t, m != nil, ok, "%q", s) && ok {
			assert.Equal(t, m[1], role, "%q", s)
			assert.Equal(t, m[2], num, "%q", s)
		}
	}
}

// FuzzParseHost: parseHost and hostRE agree on any input.
func FuzzParseHost(f *testing.F) {
	for _, s := range []string{"node-1", "client-0", "node-01", "node-1-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		role, num, ok := parseHost(s)
		m := hostRE.FindStringSubmatch(s)
		if (m != nil) != ok || (ok && (m[1] != role || m[2] != num)) {
			t.Fatalf("%q: parseHost %q %q %v, hostRE %q", s, role, num, ok, m)
		}
	})
}
