//go:build linux

package measure

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"kpbench.dev/kpbench/backends/all"
)

// TestEveryBackendHasARuleDump: a backend the rules measurement cannot read fails every
// ladder that counts rules (make bench did, for kube-proxy-*).
func TestEveryBackendHasARuleDump(t *testing.T) {
	for _, name := range all.Names() {
		cmd, ok := ruleDumpCommand(name)
		assert.True(t, ok, "%s: no rule dump", name)
		assert.NotEmpty(t, cmd.Path, name)
	}
	_, ok := ruleDumpCommand("bogus")
	assert.False(t, ok)
}
