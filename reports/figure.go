package reports

import (
	"bytes"
	"fmt"
	"image/color"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Figure is one chart drawn from a Results: a title and a note above one or more panels
// side by side, and a legend outside the data (to the right of the panels, or below them
// when it is wide), ready to be saved or inlined.
type Figure struct {
	// Name is the file name without extension, e.g. "sync-full" or "first-packet".
	Name string
	// Title is the chart's title, drawn in full (wrapped when long).
	Title string
	// Note says what is drawn (statistics, bars, sources) in a sentence or two, under the
	// title in the image and as the caption in report.html.
	Note string
	// Panels are drawn left to right with aligned axes.
	Panels []*plot.Plot
	// Legend is drawn outside the panels.
	Legend plot.Legend
}

// Figure geometry in the files and in report.html.
const (
	figureWidth  = 18 * vg.Centimeter
	panelHeight  = 9.5 * vg.Centimeter
	figureMargin = 0.25 * vg.Centimeter
	// rightRoom keeps the last x tick label of a panel inside the figure.
	rightRoom = 0.5 * vg.Centimeter
	legendGap = 0.4 * vg.Centimeter
	// pngDPI is the resolution of the PNG files (sharp in a README at full width).
	pngDPI = 150
)

// sansFont is the one face of every chart: Liberation Sans (regular only, so that
// report.html embeds a single font file for its inline SVGs; titles are larger instead
// of bold).
var sansFont = font.Font{Typeface: "Liberation", Variant: "Sans"}

// textStyle is a style in the sans face at size points.
func textStyle(f font.Font, size vg.Length, c color.Color) text.Style {
	return text.Style{Color: c, Font: font.From(f, size), Handler: plot.DefaultTextHandler}
}

// newLegend returns an empty legend in the figures' style.
func newLegend() plot.Legend {
	l := plot.NewLegend()
	l.TextStyle = textStyle(sansFont, 9, color.Black)
	l.Top, l.Left = true, true
	l.Padding = vg.Points(2)
	l.ThumbnailWidth = vg.Points(22)
	return l
}

// newPanel makes a panel with axis labels, a light grid and the sans face everywhere.
// Its title (panel's own, above it) is optional.
func newPanel(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = font.From(sansFont, 10)
	p.Title.Padding = vg.Points(4)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sansFont, 9.5)
		a.Tick.Label.Font = font.From(sansFont, 8.5)
		a.Tick.Label.Color = color.Gray{Y: 0x30}
	}
	p.X.Label.Text, p.Y.Label.Text = x, y
	g := plotterGrid()
	p.Add(g)
	return p
}

// layout is where a figure's parts go on its canvas.
type layout struct {
	width, height vg.Length
	titleLines    []string
	noteLines     []string
	legendRight   bool
	legendW       vg.Length
	legendH       vg.Length
}

var (
	titleStyle = textStyle(sansFont, 13, color.Black)
	noteStyle  = textStyle(sansFont, 9, color.Gray{Y: 0x50})
)

// layoutOf measures f: the title and note wrapped to the width, and the legend to the
// right when it takes at most 30% of the width, else below the panels.
func (f *Figure) layoutOf() layout {
	inner := figureWidth - 2*figureMargin
	l := layout{width: figureWidth}
	l.titleLines = wrapText(titleStyle, f.Title, inner)
	l.noteLines = wrapText(noteStyle, f.Note, inner)
	lr := f.Legend.Rectangle(draw.Canvas{})
	l.legendW, l.legendH = lr.Size().X, lr.Size().Y
	l.legendRight = l.legendW <= 0.3*inner
	l.height = 2*figureMargin + lineHeight(titleStyle)*vg.Length(len(l.titleLines)) +
		lineHeight(noteStyle)*vg.Length(len(l.noteLines)) + vg.Points(4) + panelHeight
	if !l.legendRight && l.legendH > 0 {
		l.height += l.legendH + legendGap
	}
	return l
}

// lineHeight is the height of one line of text in sty.
func lineHeight(sty text.Style) vg.Length {
	e := sty.FontExtents()
	return e.Height
}

// wrapText breaks s into lines no wider than width (words are never split).
func wrapText(sty text.Style, s string, width vg.Length) []string {
	var lines []string
	for _, para := range strings.Split(s, "\n") {
		line := ""
		for _, w := range strings.Fields(para) {
			try := strings.TrimSpace(line + " " + w)
			if line != "" && sty.Width(try) > width {
				lines = append(lines, line)
				line = w
				continue
			}
			line = try
		}
		if line != "" {
			lines = append(lines, line)
		}
	}
	return lines
}

// draw draws f on c, laid out by l.
func (f *Figure) draw(c draw.Canvas, l layout) {
	c.SetColor(color.White)
	c.Fill(c.Rectangle.Path())
	c = draw.Crop(c, figureMargin, -figureMargin, figureMargin, -figureMargin)
	y := c.Max.Y
	ts := titleStyle
	ts.XAlign, ts.YAlign = draw.XLeft, draw.YTop
	for _, line := range l.titleLines {
		c.FillText(ts, vg.Point{X: c.Min.X, Y: y}, line)
		y -= lineHeight(titleStyle)
	}
	ns := noteStyle
	ns.XAlign, ns.YAlign = draw.XLeft, draw.YTop
	for _, line := range l.noteLines {
		c.FillText(ns, vg.Point{X: c.Min.X, Y: y}, line)
		y -= lineHeight(noteStyle)
	}
	y -= vg.Points(4)
	area := c
	area.Max.Y = y
	if l.legendH > 0 {
		if l.legendRight {
			leg := area
			leg.Min.X = area.Max.X - l.legendW
			if f.Panels[0].Title.Text != "" { // level with the panels' data, under their titles
				leg.Max.Y -= vg.Points(14)
			}
			f.Legend.Draw(leg)
			area.Max.X = leg.Min.X - legendGap
		} else {
			leg := area
			leg.Max.Y = area.Min.Y + l.legendH
			leg.Min.X = area.Min.X + vg.Centimeter
			f.Legend.Draw(leg)
			area.Min.Y = leg.Max.Y + legendGap
		}
	}
	area.Max.X -= rightRoom
	if len(f.Panels) == 1 {
		f.Panels[0].Draw(area)
		return
	}
	tiles := draw.Tiles{Cols: len(f.Panels), Rows: 1, PadX: 0.5 * vg.Centimeter}
	cs := plot.Align([][]*plot.Plot{f.Panels}, tiles, area)
	for i, p := range f.Panels {
		p.Draw(cs[0][i])
	}
}

// render draws f as "png" (at pngDPI) or "svg".
func render(f Figure, format string) ([]byte, error) {
	l := f.layoutOf()
	var cw vg.CanvasWriterTo
	switch format {
	case "png":
		cw = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(l.width, l.height), vgimg.UseDPI(pngDPI))}
	case "svg":
		cw = vgsvg.New(l.width, l.height)
	default:
		return nil, fmt.Errorf("plot %s: unsupported format %q", f.Name, format)
	}
	f.draw(draw.New(cw), l)
	var buf bytes.Buffer
	if _, err := cw.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("plot %s: %w", f.Name, err)
	}
	return buf.Bytes(), nil
}
