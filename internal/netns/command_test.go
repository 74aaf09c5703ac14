//go:build linux

package netns

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCommandString: a command renders as its command line, for errors and listings.
func TestCommandString(t *testing.T) {
	assert.Equal(t, "ipvsadm -Ln --stats", Command{Path: "ipvsadm", Args: []string{"-Ln", "--stats"}}.String())
	assert.Equal(t, "iptables-nft-save", Command{Path: "iptables-nft-save"}.String())
}
