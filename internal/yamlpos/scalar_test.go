package yamlpos

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// TestScalarFastPathsMatchYAML: where canonicalBool and plainDecimal read a scalar
// themselves, they read what yaml.v3 reads.
func TestScalarFastPathsMatchYAML(t *testing.T) {
	for _, in := range []string{"true", "True", "TRUE", "false", "False", "FALSE", "yes", "on", "tRue",
		"0", "-0", "7", "-7", "42", "0755", "0o17", "0x1f", "+5", "1_000", "123456789012345678", "1234567890123456789",
		"-9223372036854775808", "9223372036854775807", "12a", "", "1.5", "1e3"} {
		var node yaml.Node
		require.NoError(t, yaml.Unmarshal([]byte("v: "+in), &node))
		scalar := node.Content[0].Content[1]
		if b, ok := canonicalBool(in); ok {
			var want bool
			require.NoError(t, scalar.Decode(&want), in)
			assert.Equal(t, "!!bool", scalar.ShortTag(), in)
			assert.Equal(t, want, b, in)
		}
		if i, ok := plainDecimal(in); ok {
			var want int64
			require.NoError(t, scalar.Decode(&want), in)
			assert.Equal(t, "!!int", scalar.ShortTag(), in)
			assert.Equal(t, want, i, in)
		}
	}
	_, ok := plainDecimal("-")
	assert.False(t, ok)
	// The fast paths are taken for what files hold, or they save nothing.
	for _, in := range []string{"true", "False", "0", "42", "-7", "9223372036854775807"[:18]} {
		_, isBool := canonicalBool(in)
		_, isInt := plainDecimal(in)
		assert.True(t, isBool || isInt, "%q is read without yaml.v3", in)
	}
}
