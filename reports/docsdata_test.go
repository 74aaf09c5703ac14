package reports

import (
	"html"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShippedResults keeps the results behind docs/findings.md and the README's charts
// readable and merged as the docs say: `kpbench report docs/data/bench docs/data/vm-ladder
// --out DIR`.
func TestShippedResults(t *testing.T) {
	srcs, err := LoadSources("../docs/data/bench", "../docs/data/vm-ladder")
	require.NoError(t, err)
	require.Len(t, srcs, 2)
	assert.Equal(t, "native", srcs[0].Results.Environment.Accelerator)
	assert.Equal(t, "tcg", srcs[1].Results.Environment.Accelerator)
	at := answers(srcs[0].Results)
	assert.Equal(t, []string{"1000", "5000", "10000"}, at.Sizes, "which mode at 10k is answered")
	assert.Contains(t, backends(srcs[1].Results), "ipvs")

	out := t.TempDir()
	_, err = WriteMerged(out, srcs)
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(out, HTMLFile))
	require.NoError(t, err)
	page := html.UnescapeString(string(data))
	for _, want := range []string{"<th>10,000 Services</th>", "<th>5,000 Services</th>", "IPVS is deprecated", "emulated (TCG)"} {
		assert.True(t, strings.Contains(page, want), "merged report lacks %q", want)
	}
}
