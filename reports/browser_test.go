//go:build linux

package reports

import (
	"context"
	"fmt"
	"image"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir()}
	out, err := exec.CommandContext(ctx, "chromium", append(base, args...)...).Output()
	require.NoError(t, err, "chromium %v", args)
	return out
}

// screenshot renders page in a window of w x h pixels and returns the image.
func screenshot(t *testing.T, page string, w, h int) image.Image {
	t.Helper()
	shot := filepath.Join(t.TempDir(), "shot.png")
	chromium(t, fmt.Sprintf("--window-size=%d,%d", w, h), "--screenshot="+shot, "file://"+page)
	f, err := os.Open(shot)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	keepScreenshot(t, shot, filepath.Base(page))
	return img
}

// keepScreenshot copies a screenshot to $KPBENCH_SCREENSHOTS (when set), for a person
// to look at.
func keepScreenshot(t *testing.T, shot, name string) {
	dir := os.Getenv("KPBENCH_SCREENSHOTS")
	if dir == "" {
		return
	}
	data, err := os.ReadFile(shot)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, strings.TrimSuffix(name, ".html")+".png"), data, 0o644))
}

// TestReportRendersInChromium opens a report drawn from the sample results in headless
// Chromium: the rendered DOM has the report's headings, tables and inline charts, and a
// screenshot of the first screen is not blank.
func TestReportRendersInChromium(t *testing.T) {
	testutil.RequireBinary(t, "chromium")
	res, err := Load("testdata/sample-results.json")
	require.NoError(t, err)
	dir := t.TempDir()
	_, err = WriteAll(dir, res)
	require.NoError(t, err)
	page := filepath.Join(dir, HTMLFile)

	dom := string(chromium(t, "--dump-dom", "file://"+page))
	for _, want := range []string{"kpbench report", "Which mode at which scale?", "Charts", "Conformance", "Tables", "Environment", "<table", "<svg"} {
		assert.Contains(t, dom, want)
	}
	assert.GreaterOrEqual(t, strings.Count(dom, "<svg"), 3, "charts are inlined")

	img := screenshot(t, page, 1280, 1000)
	assert.Greater(t, inkShare(img, img.Bounds()), 0.02, "the first screen shows text")
}

var svgSize = regexp.MustCompile(`^<svg width="([0-9.]+)pt" height="([0-9.]+)pt"`)

// TestEveryChartInChromium renders every chart of a report (the sample run, and a native
// run merged with an emulated one) in headless Chromium, with the font report.html
// embeds, each at the size it was laid out for (stacked on one page, one screenshot),
// and checks that each is drawn (ink) and that nothing is clipped: a title, legend or
// tick label running past a chart's edge would put ink on its outermost pixels, which
// the layout keeps blank. Set KPBENCH_SCREENSHOTS to a directory to keep a screenshot of
// every chart for a person to look at.
func TestEveryChartInChromium(t *testing.T) {
	testutil.RequireBinary(t, "chromium")
	native := sampleResults()
	vm := sampleResults()
	vm.Scenario = "vm-ladder"
	vm.Environment.Accelerator, vm.Environment.KernelRelease = "tcg", "6.1.0-57-amd64"
	vm.Runs[1].Backend = "ipvs"
	palette := paletteOf([]Source{{Results: native}, {Results: vm}})
	type chart struct {
		name string
		rect image.Rectangle // where it is on the page, in CSS pixels
	}
	var charts []chart
	var body strings.Builder
	width, y := 0, 0
	for _, src := range []struct {
		prefix string
		r      *Results
	}{{"sample-", native}, {"tcg-", vm}} {
		figs, err := figuresWith(src.r, palette)
		require.NoError(t, err)
		for _, f := range figs {
			svg, err := render(f, "svg")
			require.NoError(t, err)
			svg = xmlProlog.ReplaceAll(svg, []byte("$1"))
			m := svgSize.FindSubmatch(svg)
			require.NotNil(t, m, "%s: SVG size", f.Name)
			wpt, _ := strconv.ParseFloat(string(m[1]), 64)
			hpt, _ := strconv.ParseFloat(string(m[2]), 64)
			w, h := int(math.Ceil(wpt*4/3)), int(math.Ceil(hpt*4/3)) // CSS px: 96 per inch, 72 pt
			fmt.Fprintf(&body, `<div style="width:%dpx;height:%dpx;overflow:hidden">%s</div>`, w, h, svg)
			charts = append(charts, chart{src.prefix + f.Name, image.Rect(0, y, int(math.Floor(wpt*4/3)), y+int(math.Floor(hpt*4/3)))})
			width, y = max(width, w), y+h
		}
	}
	// The control: a chart whose label runs past its right edge must be caught.
	const clipped = `<svg width="150pt" height="60pt" viewBox="0 0 150 60" xmlns="http://www.w3.org/2000/svg">` +
		`<text x="90" y="35" style="font-family:Liberation Sans;font-size:14px">a label too long</text></svg>`
	fmt.Fprintf(&body, `<div style="width:200px;height:80px;overflow:hidden">%s</div>`, clipped)
	control := image.Rect(0, y, 200, y+80)
	width, y = max(width, 200), y+80
	dir := t.TempDir()
	page := filepath.Join(dir, "charts.html")
	html := `<!DOCTYPE html><html><head><meta charset="utf-8"><style>` + string(chartFontFace()) +
		`body{margin:0;background:#fff} svg{display:block}</style></head><body>` + body.String() + `</body></html>`
	require.NoError(t, os.WriteFile(page, []byte(html), 0o644))
	img := screenshot(t, page, width, y)
	require.GreaterOrEqual(t, img.Bounds().Dy(), y, "the screenshot holds every chart")
	assert.Equal(t, []string{"right"}, inkedEdges(img, control), "the check sees a clipped label")
	for _, c := range charts {
		t.Run(c.name, func(t *testing.T) {
			r := c.rect
			assert.Greater(t, inkShare(img, r.Inset(8)), 0.03, "the chart is drawn")
			assert.Empty(t, inkedEdges(img, r), "ink on an edge: something is clipped")
			if dir := os.Getenv("KPBENCH_SCREENSHOTS"); dir != "" {
				sub, ok := img.(interface {
					SubImage(image.Rectangle) image.Image
				})
				require.True(t, ok)
				f, err := os.Create(filepath.Join(dir, c.name+".png"))
				require.NoError(t, err)
				defer f.Close()
				require.NoError(t, png.Encode(f, sub.SubImage(r)))
			}
		})
	}
	assert.GreaterOrEqual(t, len(charts), 16, "every chart of both sections")
}

// inkedEdges names the edges of r (2 pixels deep) that have ink on them.
func inkedEdges(img image.Image, r image.Rectangle) []string {
	var out []string
	for _, edge := range []struct {
		name string
		r    image.Rectangle
	}{
		{"right", image.Rect(r.Max.X-2, r.Min.Y, r.Max.X, r.Max.Y)},
		{"bottom", image.Rect(r.Min.X, r.Max.Y-2, r.Max.X, r.Max.Y)},
		{"left", image.Rect(r.Min.X, r.Min.Y, r.Min.X+2, r.Max.Y)},
		{"top", image.Rect(r.Min.X, r.Min.Y, r.Max.X, r.Min.Y+2)},
	} {
		if inkShare(img, edge.r) > 0 {
			out = append(out, edge.name)
		}
	}
	return out
}

// inkShare is the share of pixels of r (in img) that are not (near) white.
func inkShare(img image.Image, r image.Rectangle) float64 {
	r = r.Intersect(img.Bounds())
	ink, all := 0, 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, g, bl, _ := img.At(x, y).RGBA()
			all++
			if cr < 0xe000 || g < 0xe000 || bl < 0xe000 {
				ink++
			}
		}
	}
	if all == 0 {
		return 0
	}
	return float64(ink) / float64(all)
}
