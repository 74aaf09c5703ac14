//go:build linux

package reports

import (
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/testutil"
)

// chromium runs headless Chromium on a local file, with the flags this closed network
// needs (no background networking, no sandbox as root) and a fresh profile.
func chromium(t *testing.T, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir()}
	out, err := exec.CommandContext(ctx, "chromium", append(base, args...)...).Output()
	require.NoError(t, err, "chromium %v", args)
	return out
}

// TestReportRendersInChromium opens a report drawn from the sample results in headless
// Chromium: the rendered DOM has the report's headings, tables and inline plots, and a
// screenshot of the page is not blank.
func TestReportRendersInChromium(t *testing.T) {
	testutil.RequireBinary(t, "chromium")
	res, err := Load("testdata/sample-results.json")
	require.NoError(t, err)
	dir := t.TempDir()
	_, err = WriteAll(dir, res)
	require.NoError(t, err)
	page := "file://" + filepath.Join(dir, HTMLFile)

	dom := string(chromium(t, "--dump-dom", page))
	for _, want := range []string{"kpbench report", "Which mode at which scale?", "Charts", "Conformance", "Tables", "Environment", "<table", "<svg"} {
		assert.Contains(t, dom, want)
	}
	assert.GreaterOrEqual(t, strings.Count(dom, "<svg"), 3, "plots are inlined")

	shot := filepath.Join(dir, "shot.png")
	chromium(t, "--window-size=1280,2400", "--screenshot="+shot, page)
	f, err := os.Open(shot)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	assert.Greater(t, inkShare(img), 0.02, "the screenshot shows text and plots")
}

// inkShare is the share of pixels that are not (near) white.
func inkShare(img image.Image) float64 {
	b := img.Bounds()
	ink, all := 0, 0
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			all++
			if r < 0xe000 || g < 0xe000 || bl < 0xe000 {
				ink++
			}
		}
	}
	return float64(ink) / float64(all)
}
