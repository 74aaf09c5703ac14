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

// toolsRun is a native run of scenario with the given tools and nft version, whose
// nftables partial sync at 20000 Services took v seconds.
func toolsRun(scenario, kernel, tools, nft string, v float64) *Results {
	r := &Results{Scenario: scenario, Environment: Environment{Kernel: "Linux", KernelRelease: kernel, Accelerator: "native", Tools: tools, NFTVersion: nft, IPTablesVersion: "iptables v1.8.9 (nf_tables)"}}
	r.Add("nftables", meas(MeasureSync, partial("20000"), UnitSeconds, v, v, v))
	return r
}

func TestToolsComparisons(t *testing.T) {
	tests := []struct {
		name string
		srcs []*Results
		// want is the columns of the one comparison expected, nil for none.
		want      []string
		best      int
		ratio     float64
		kernelCmp bool
	}{
		{
			name: "host against trixie on one kernel",
			srcs: []*Results{
				toolsRun("nft-versions", "6.18", "host", "nftables v1.0.6 (Lester Gooch #5)", 0.6),
				toolsRun("nft-versions", "6.18", "debian:trixie", "nftables v1.1.3 (Commodore Bullmoose #4)", 0.2),
			},
			want: []string{"host (nft v1.0.6, iptables v1.8.9)", "debian:trixie (nft v1.1.3, iptables v1.8.9)"},
			best: 1, ratio: 3,
		},
		{
			name: "results without tools are the host's",
			srcs: []*Results{
				toolsRun("nft-versions", "6.18", "", "nftables v1.0.6", 0.6),
				toolsRun("nft-versions", "6.18", "debian:trixie", "nftables v1.1.3", 0.3),
			},
			want: []string{"host (nft v1.0.6, iptables v1.8.9)", "debian:trixie (nft v1.1.3, iptables v1.8.9)"},
			best: 1, ratio: 2,
		},
		{
			name: "different kernels are not a tools comparison",
			srcs: []*Results{
				toolsRun("nft-versions", "6.18", "host", "nftables v1.0.6", 0.6),
				toolsRun("nft-versions", "6.1", "debian:trixie", "nftables v1.1.3", 0.2),
			},
		},
		{
			name: "same tools twice is not a tools comparison",
			srcs: []*Results{
				toolsRun("nft-versions", "6.18", "host", "nftables v1.0.6", 0.6),
				toolsRun("nft-versions", "6.18", "host", "nftables v1.0.6", 0.5),
			},
		},
		{
			name: "different scenarios are not compared",
			srcs: []*Results{
				toolsRun("a", "6.18", "host", "nftables v1.0.6", 0.6),
				toolsRun("b", "6.18", "debian:trixie", "nftables v1.1.3", 0.2),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var srcs []Source
			for i, r := range tt.srcs {
				srcs = append(srcs, Source{Path: string(rune('a' + i)), Results: r})
			}
			assert.Empty(t, kernelComparisons(srcs), "tools are not kernels")
			got := toolsComparisons(srcs)
			if tt.want == nil {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			assert.Equal(t, tt.want, got[0].Kernels)
			assert.Equal(t, "native, Linux 6.18", got[0].Label)
			require.Len(t, got[0].Rows, 1)
			assert.Equal(t, tt.best, got[0].Rows[0].Best)
			assert.InDelta(t, tt.ratio, got[0].Rows[0].Ratio, 1e-9)
		})
	}
}

// TestMergedToolsReport: the merged report of a host and a trixie run has a tools
// against tools section with the ratio between them, and names the tools in each
// section's heading.
func TestMergedToolsReport(t *testing.T) {
	dir := t.TempDir()
	var srcs []Source
	for _, r := range []*Results{
		toolsRun("nft-versions", "6.18", "host", "nftables v1.0.6 (Lester Gooch #5)", 0.6),
		toolsRun("nft-versions", "6.18", "debian:trixie", "nftables v1.1.3 (Commodore Bullmoose #4)", 0.2),
	} {
		sub := filepath.Join(dir, r.Environment.Tools)
		require.NoError(t, r.Write(sub))
		srcs = append(srcs, Source{Path: sub, Results: r})
	}
	out := t.TempDir()
	_, err := WriteMerged(out, srcs)
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(out, HTMLFile))
	require.NoError(t, err)
	page := html.UnescapeString(string(data))
	for _, want := range []string{
		"Tools against tools", "nft-versions, native, Linux 6.18",
		"debian:trixie (nft v1.1.3, iptables v1.8.9), 3.0x faster than the worst",
		"tools debian:trixie (nft v1.1.3, iptables v1.8.9)", "tools host (nft v1.0.6, iptables v1.8.9)",
		`id="native-6.18-debian-trixie-nft-versions"`,
	} {
		assert.True(t, strings.Contains(page, want), "merged report lacks %q", want)
	}
	assert.NotContains(t, page, "Kernel against kernel")
}

func TestVersionWord(t *testing.T) {
	for in, want := range map[string]string{
		"nftables v1.0.6 (Lester Gooch #5)": "v1.0.6",
		"iptables v1.8.11 (nf_tables)":      "v1.8.11",
		"something odd":                     "something odd",
		"":                                  "",
	} {
		assert.Equal(t, want, versionWord(in), in)
	}
}
