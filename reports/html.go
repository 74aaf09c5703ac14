package reports

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"codeberg.org/go-fonts/liberation/liberationsansregular"
)

// htmlTemplate is report.html's template. Everything is inline: styles, and the charts as
// SVG elements, so the file can be mailed or attached to a CI run alone. The page answers
// first (which backend at which size, by how much), then shows the charts, then the long
// tables.
const htmlTemplate = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>kpbench report: {{.Title}}</title>
<style>
{{.FontFace}}
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1180px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ccc; }
h3 { margin-top: 1.4em; }
table { border-collapse: collapse; margin: 0.6em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.55em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.best { font-weight: bold; }
table.answers td { min-width: 11em; }
table.answers th.q { white-space: nowrap; }
.win { font-weight: bold; } .val { font-variant-numeric: tabular-nums; }
.sub { display: block; color: #555; font-size: 0.88em; font-weight: normal; }
.dir { display: block; color: #777; font-size: 0.8em; font-weight: normal; }
td.pass { background: #d9f2d9; } td.fail { background: #f8d0d0; } td.skip { background: #eee; color: #666; }
figure { margin: 1.2em 0; } figcaption { font-size: 0.85em; color: #555; }
figure svg { width: 100%; max-width: 1000px; height: auto; }
.muted { color: #666; font-size: 0.9em; }
.note { background: #fff6d9; border: 1px solid #e8d48a; padding: 0.5em 0.8em; font-size: 0.92em; }
.tails { background: #fbeeee; border: 1px solid #e3b3b3; padding: 0.4em 0.8em; font-size: 0.9em; }
.tails li { margin: 0.15em 0; }
nav a { margin-right: 1em; }
</style>
</head>
<body>
<h1>kpbench report: {{.Title}}</h1>
<p class="muted">{{.Meta}}</p>
{{if .IPVSNote}}<p class="note"><b>IPVS is deprecated.</b> {{.IPVSNote}}</p>{{end}}
{{if .Multi}}<nav>Sections: {{range .Sections}}<a href="#{{.ID}}">{{.Heading}}</a>{{end}}{{range .Comparisons}}<a href="#{{.ID}}">{{.Noun}} against {{.Noun}}</a>{{end}}<a href="#tables">tables</a></nav>{{end}}
{{range .Sections}}
<section id="{{.ID}}">
{{if $.Multi}}<h2>{{.Heading}}</h2>{{end}}
<p class="muted">{{.EnvLine}}</p>
{{if .Answers.Rows}}<h2 id="{{.Prefix}}answers">Which mode at which scale?</h2>
<table class="answers">
<tr><th></th>{{range .Answers.Sizes}}<th>{{.}}</th>{{end}}</tr>
{{range .Answers.Rows}}<tr><th class="q">{{.Title}}<span class="dir">{{.Direction}}</span></th>{{range .Cells}}<td>{{if .Winner}}<span class="win">{{.Winner}}</span> <span class="val">{{.Value}}</span>{{if .Vs}}<span class="sub">{{.Vs}}</span>{{end}}{{if .Last}}<span class="sub">{{.Last}}</span>{{end}}{{if .Missing}}<span class="sub">{{.Missing}}</span>{{end}}{{else}}—{{end}}</td>{{end}}</tr>
{{end}}</table>
<p class="muted">Best backend of this run for each figure and size, and how many times better than the next best; slowest last.
Figures compare only backends measured here, on this kernel, by the direction of each figure; "—" is not measured.
{{.Pooling}} p99 and max of every figure are in the <a href="#{{.Prefix}}figures">tables</a>.</p>
{{else if not .Matrix}}<p>No measurements in this run.</p>{{end}}
{{if .Outliers}}<div class="tails"><b>Samples far from the rest</b> (more than {{$.Factor}}x their measurement's median; the measurements whose tails cost the most time first):<ul>
{{range .Outliers}}<li>{{.}}</li>
{{end}}</ul>{{if .MoreOutliers}}<p>{{.MoreOutliers}}; every one is listed with the <a href="#{{.Prefix}}figures">tables</a>.</p>{{end}}</div>{{end}}
{{if .Figures}}<h2 id="{{.Prefix}}charts">Charts</h2>
{{range .Figures}}<figure id="plot-{{.File}}">{{.SVG}}<figcaption><a href="plots/{{.File}}.png">PNG</a> · <a href="plots/{{.File}}.svg">SVG</a></figcaption></figure>
{{end}}{{end}}
{{if .Matrix}}<h2 id="{{.Prefix}}conformance">Conformance</h2>
<p>{{.Pass}} passed, {{.Fail}} failed, {{.Skip}} skipped. Hover a cell for the evidence.</p>
<table>
<tr><th>case</th>{{range .Backends}}<th>{{.}}</th>{{end}}</tr>
{{range .Matrix}}<tr><td>{{.Name}}</td>{{range .Cells}}{{if .Result}}<td class="{{.Result}}" title="{{.Tip}}">{{.Result}}{{if .Reason}}: {{.Reason}}{{end}}</td>{{else}}<td class="muted">not run</td>{{end}}{{end}}</tr>
{{end}}</table>{{end}}
</section>
{{end}}
{{range .Comparisons}}<h2 id="{{.ID}}">{{.Title}}</h2>
{{$noun := .Noun}}{{$plural := .Plural}}{{range .Items}}<h3>{{.Scenario}}, {{.Label}}</h3>
<p class="muted">The same scenario on each of the {{$plural}}; a row compares them for one backend at one size (ratios between {{$plural}} only).</p>
<table>
<tr><th>figure</th><th>Services</th><th>backend</th>{{range .Kernels}}<th>{{.}}</th>{{end}}<th>best {{$noun}}</th></tr>
{{range .Rows}}<tr><td>{{.Question}}</td><td class="num">{{.Size}}</td><td>{{.Backend}}</td>{{range .Cells}}<td class="num{{if .Best}} best{{end}}">{{.Text}}</td>{{end}}<td>{{.Verdict}}</td></tr>
{{end}}</table>
{{end}}{{end}}
<h2 id="tables">Tables</h2>
{{range .Sections}}
{{if $.Multi}}<h3>{{.Heading}}</h3>{{end}}
{{if .Rows}}<h3 id="{{.Prefix}}figures">Every figure: median (p99, max, n)</h3>
<table>
<tr><th>measurement</th><th>parameters</th>{{range .Backends}}<th>{{.}}</th>{{end}}<th>best (by the figure's direction)</th></tr>
{{range .Rows}}<tr><td>{{.Name}}</td><td>{{.Params}}</td>{{range .Cells}}<td class="num{{if .Best}} best{{end}}">{{.Median}}{{if .Tail}}<span class="sub">{{.Tail}}</span>{{end}}</td>{{end}}<td>{{.Ratio}}</td></tr>
{{end}}</table>{{end}}
{{if .AllOutliers}}<h3>Every sample far from the rest</h3><ul class="muted">{{range .AllOutliers}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if .Published}}<h3>Published first-packet latencies beside this run</h3>
<p class="muted">{{.PublishedSource}}; read off the chart's bars (±4 µs). Another machine and method: the shapes compare, the values do not.</p>
<table><tr><th>mode</th><th>Services</th><th>p50</th><th>p90</th><th>p99</th></tr>
{{range .Published}}<tr><td>{{index . 0}}</td><td class="num">{{index . 1}}</td><td class="num">{{index . 2}}</td><td class="num">{{index . 3}}</td><td class="num">{{index . 4}}</td></tr>
{{end}}</table>{{end}}
<h3 id="{{.Prefix}}environment">Environment</h3>
<table>
{{range .Env}}<tr><th>{{index . 0}}</th><td>{{index . 1}}</td></tr>
{{end}}</table>
{{end}}
</body>
</html>
`

type htmlAnswerCell struct {
	Winner, Value, Vs, Last, Missing string
}

type htmlAnswerRow struct {
	Title, Direction string
	Cells            []htmlAnswerCell
}

type htmlAnswers struct {
	Sizes []string
	Rows  []htmlAnswerRow
}

type htmlCell struct {
	Median, Tail string
	Best         bool
}

type htmlRow struct {
	Name, Params, Ratio string
	Cells               []htmlCell
}

type htmlFigure struct {
	File string
	SVG  template.HTML
}

type htmlCase struct {
	Result, Reason, Tip string
}

type htmlMatrixRow struct {
	Name  string
	Cells []htmlCase
}

type htmlSection struct {
	ID, Prefix, Heading, EnvLine, Pooling string
	Answers                               htmlAnswers
	Outliers, AllOutliers                 []string
	MoreOutliers                          string
	Figures                               []htmlFigure
	Backends                              []string
	Rows                                  []htmlRow
	Env                                   [][2]string
	Matrix                                []htmlMatrixRow
	Pass, Fail, Skip                      int
	Published                             [][5]string
	PublishedSource                       string
}

type htmlKernelCell struct {
	Text string
	Best bool
}

type htmlKernelRow struct {
	Question, Size, Backend, Verdict string
	Cells                            []htmlKernelCell
}

type htmlKernels struct {
	Scenario, Label string
	Kernels         []string
	Rows            []htmlKernelRow
}

// htmlAxis is every comparison along one axis (kernels, tools).
type htmlAxis struct {
	ID, Title, Noun, Plural string
	Items                   []htmlKernels
}

type htmlData struct {
	// FontFace embeds the charts' font once, so that their inline SVG text is drawn
	// with the metrics it was laid out with, on any machine.
	FontFace              template.CSS
	Title, Meta, IPVSNote string
	Multi                 bool
	Factor                int
	Sections              []htmlSection
	Comparisons           []htmlAxis
}

// htmlComparison renders one comparison along an axis: a row per question, size and
// backend, a cell per column, the best column and by how much.
func htmlComparison(kc kernelComparison) htmlKernels {
	hk := htmlKernels{Scenario: kc.Scenario, Label: kc.Label, Kernels: kc.Kernels}
	for _, row := range kc.Rows {
		hr := htmlKernelRow{Question: row.Question, Size: row.Size, Backend: row.Backend, Verdict: "—"}
		for i, v := range row.Values {
			c := htmlKernelCell{Text: "—"}
			if v != nil {
				c = htmlKernelCell{Text: formatValue(v.Value, v.Unit), Best: i == row.Best}
			}
			hr.Cells = append(hr.Cells, c)
		}
		if row.Best >= 0 {
			hr.Verdict = fmt.Sprintf("%s, %s %s than the worst", kc.Kernels[row.Best], ratioString(row.Ratio), comparative(row.Unit, row.Better))
		}
		hk.Rows = append(hk.Rows, hr)
	}
	return hk
}

// shownOutliers is how many outliers a section lists above its charts.
const shownOutliers = 8

// xmlProlog matches what precedes the <svg> element in a standalone SVG file.
var xmlProlog = regexp.MustCompile(`(?s)^.*?(<svg[\s>])`)

// WriteHTML writes report.html of one run: first the answers (for each size, the best
// backend for full and partial sync, first-packet latency p50 and p99, programming
// latency, throughput and kernel memory, and by how much), samples far from the rest,
// then every chart inlined as SVG, the conformance matrix, and last the long tables
// (every figure with its p99 and max, the environment).
func WriteHTML(w io.Writer, r *Results) error {
	return writeHTMLReport(w, []section{{Source: Source{Results: r}}}, backends(r))
}

// writeHTMLReport writes report.html for secs (one per source).
func writeHTMLReport(w io.Writer, secs []section, palette []string) error {
	tmpl, err := template.New("report").Parse(htmlTemplate)
	if err != nil {
		return fmt.Errorf("report.html template: %w", err)
	}
	d := htmlData{Multi: len(secs) > 1, Factor: OutlierFactor, FontFace: chartFontFace()}
	var srcs []Source
	var scen []string
	for _, s := range secs {
		srcs = append(srcs, s.Source)
		if n := cmpOr(s.Source.Results.Scenario, "run"); !slices.Contains(scen, n) {
			scen = append(scen, n)
		}
	}
	d.Title = strings.Join(scen, ", ")
	d.Meta = metaLine(srcs)
	if hasIPVS(srcs) {
		d.IPVSNote = KEP5495Note
	}
	for _, s := range secs {
		hs, err := htmlSectionOf(s, palette)
		if err != nil {
			return err
		}
		d.Sections = append(d.Sections, hs)
	}
	for _, kcs := range [][]kernelComparison{kernelComparisons(srcs), toolsComparisons(srcs)} {
		if len(kcs) == 0 {
			continue
		}
		ax := htmlAxis{ID: kcs[0].Axis.ID, Title: kcs[0].Axis.Title, Noun: kcs[0].Axis.Noun, Plural: kcs[0].Axis.Plural}
		for _, kc := range kcs {
			ax.Items = append(ax.Items, htmlComparison(kc))
		}
		d.Comparisons = append(d.Comparisons, ax)
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, d); err != nil {
		return fmt.Errorf("report.html: %w", err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("report.html: %w", err)
	}
	return nil
}

// chartFontFace is the CSS @font-face rule that gives the SVG charts their font.
func chartFontFace() template.CSS {
	// The font is gonum's own Liberation Sans, base64-encoded; not user input.
	return template.CSS(`@font-face { font-family: "Liberation Sans"; src: url(data:font/ttf;base64,` + //nolint:gosec
		base64.StdEncoding.EncodeToString(liberationsansregular.TTF) + `) format("truetype"); }`)
}

// metaLine says when the runs ran, how long they took and where they came from.
func metaLine(srcs []Source) string {
	var parts []string
	for _, s := range srcs {
		r := s.Results
		p := ""
		if !r.Started.IsZero() {
			p = "run " + dateOf(r.Started)
			if !r.Finished.IsZero() {
				p += fmt.Sprintf(" (%s)", r.Finished.Sub(r.Started).Round(time.Second))
			}
		}
		if c := r.Environment.KpbenchCommit; c != "" {
			p = joinNonEmpty(", ", p, "kpbench "+c)
		}
		if s.Path != "" {
			p = joinNonEmpty(", ", p, "from "+s.Path)
		}
		if p != "" {
			parts = append(parts, p)
		}
	}
	return joinNonEmpty("; ", strings.Join(parts, "; "), "figures are drawn from the raw samples in results.json")
}

// htmlSectionOf fills one section of the page.
func htmlSectionOf(s section, palette []string) (htmlSection, error) {
	r := s.Source.Results
	hs := htmlSection{ID: s.ID, Heading: envLabel(r.Environment), Backends: backends(r)}
	if s.ID != "" {
		hs.Prefix = s.ID + "-"
		hs.Heading = joinNonEmpty(": ", cmpOr(r.Scenario, "run"), hs.Heading)
	}
	e := r.Environment
	hs.EnvLine = joinNonEmpty(", ", "Ran "+acceleratorLabel(e.Accelerator), strings.TrimSpace(e.Kernel+" "+e.KernelRelease), coresLabel(e.Cores),
		e.IPTablesVersion, e.NFTVersion, dateOf(e.Date), cmpOr(e.KpbenchCommit, ""), "scenario "+cmpOr(r.Scenario, "?"))
	if e.Accelerator == "tcg" {
		hs.EnvLine += ". Emulated kernel: compare backends within this section only, never with native figures."
	}
	at := answers(r)
	for _, size := range at.Sizes {
		hs.Answers.Sizes = append(hs.Answers.Sizes, sizeLabel(size))
	}
	for _, row := range at.Rows {
		hr := htmlAnswerRow{Title: row.Question.Title, Direction: directionText(row.Cells)}
		for _, a := range row.Cells {
			hr.Cells = append(hr.Cells, answerCell(a))
		}
		hs.Answers.Rows = append(hs.Answers.Rows, hr)
	}
	for _, row := range at.Rows {
		if p := row.Question.Pooling; p != "" && !strings.Contains(hs.Pooling, p) {
			hs.Pooling = joinNonEmpty(" ", hs.Pooling, p)
		}
	}
	outs := Outliers(r)
	for _, o := range outs {
		hs.AllOutliers = append(hs.AllOutliers, o.String())
	}
	// Above the charts: the tails of the figures the answers are about; every other one
	// (the latencies of a throughput load, for instance) is listed with the tables.
	groups := groupOutliers(answeredOutliers(outs))
	for i, g := range groups {
		if i < shownOutliers {
			hs.Outliers = append(hs.Outliers, g.String())
		}
	}
	hs.MoreOutliers = countLine(len(hs.Outliers), len(groups))
	for _, row := range comparisonRows(r) {
		hr := htmlRow{Name: row.Name, Params: row.Params, Ratio: row.ratioText()}
		if row.Informational != "" {
			hr.Params += " (informational, never gated: " + row.Informational + ")"
		}
		if hr.Ratio == "" && row.Better == NoDirection {
			hr.Ratio = "no direction"
		}
		for _, b := range hs.Backends {
			c := htmlCell{Median: "—"}
			if sm, ok := row.Summaries[b]; ok && sm.N > 0 {
				c = htmlCell{Median: formatValue(sm.P50, row.Unit), Best: row.Ratio > 0 && b == row.Best}
				if t := tailText(sm, row.Unit); t != "" {
					c.Tail = fmt.Sprintf("%s, n=%d", t, sm.N)
				} else if sm.N > 1 {
					c.Tail = fmt.Sprintf("all %d alike", sm.N)
				}
			}
			hr.Cells = append(hr.Cells, c)
		}
		hs.Rows = append(hs.Rows, hr)
	}
	figs, err := figuresWith(r, palette)
	if err != nil {
		return hs, err
	}
	for _, f := range figs {
		svg, err := render(f, "svg")
		if err != nil {
			return hs, err
		}
		svg = xmlProlog.ReplaceAll(svg, []byte("$1"))
		// The SVG comes from gonum/plot's own writer, not from user input.
		hs.Figures = append(hs.Figures, htmlFigure{File: hs.Prefix + f.Name, SVG: template.HTML(svg)}) //nolint:gosec
		if f.Name == "first-packet" && len(f.Panels) > 1 {
			hs.PublishedSource = KEP3866Source
			for _, l := range KEP3866Lookups {
				hs.Published = append(hs.Published, [5]string{l.Backend, groupThousands(l.Services),
					formatValue(l.P50, UnitSeconds), formatValue(l.P90, UnitSeconds), formatValue(l.P99, UnitSeconds)})
			}
		}
	}
	hs.Env = envRows(e)
	hs.Env = append(hs.Env, [2]string{"scenario", r.Scenario})
	if s.Source.Path != "" {
		hs.Env = append(hs.Env, [2]string{"results", s.Source.Path})
	}
	for _, run := range r.Runs {
		if len(run.Labels) > 0 {
			hs.Env = append(hs.Env, [2]string{"labels of " + run.Backend, paramString(run.Labels, ", ")})
		}
	}
	hs.Matrix, hs.Pass, hs.Fail, hs.Skip = caseMatrix(r, hs.Backends)
	return hs, nil
}

// directionText says which way a row's figure is better: "lower is better".
func directionText(cells []answer) string {
	for _, c := range cells {
		switch c.Better {
		case LowerIsBetter:
			return "lower is better"
		case HigherIsBetter:
			return "higher is better"
		}
	}
	return ""
}

// answerCell renders one answer: the winner and its figure, how many times better than
// the runner-up, and the slowest when there are three or more.
func answerCell(a answer) htmlAnswerCell {
	best := a.Best()
	if best == nil {
		return htmlAnswerCell{}
	}
	c := htmlAnswerCell{Winner: best.Backend, Value: formatValue(best.Value, best.Unit)}
	if len(a.Missing) > 0 {
		c.Missing = "not measured: " + strings.Join(a.Missing, ", ")
	}
	if len(a.Standings) == 1 {
		c.Vs = "the only backend measured"
		return c
	}
	next := a.Standings[1]
	if !a.Significant && a.Better != NoDirection {
		// No winner without a significant lead: both figures, and why.
		c.Winner = "within noise"
		c.Value = fmt.Sprintf("%s %s, %s %s", best.Backend, formatValue(best.Value, best.Unit), next.Backend, formatValue(next.Value, next.Unit))
		c.Vs = fmt.Sprintf("no significant difference with %d and %d samples", best.Summary.N, next.Summary.N)
		if len(a.Standings) > 2 {
			last := a.Standings[len(a.Standings)-1]
			c.Last = fmt.Sprintf("last: %s %s", last.Backend, formatValue(last.Value, last.Unit))
		}
		return c
	}
	if ratio, ok := a.Ratio(); ok && ratio < 1.05 {
		c.Vs = fmt.Sprintf("within 5%% of %s (%s)", next.Backend, formatValue(next.Value, next.Unit))
	} else if ok {
		c.Vs = fmt.Sprintf("%s %s than %s (%s)", ratioString(ratio), comparative(best.Unit, a.Better), next.Backend, formatValue(next.Value, next.Unit))
	} else {
		c.Vs = fmt.Sprintf("next: %s %s", next.Backend, formatValue(next.Value, next.Unit))
	}
	if len(a.Standings) > 2 {
		last := a.Standings[len(a.Standings)-1]
		if spread, ok := a.Spread(); ok {
			c.Last = fmt.Sprintf("last: %s %s (%s)", last.Backend, formatValue(last.Value, last.Unit), ratioString(spread))
		}
	}
	return c
}

// caseMatrix is the conformance matrix of r: case × backend, with counts.
func caseMatrix(r *Results, bs []string) (rows []htmlMatrixRow, pass, fail, skip int) {
	var names []string
	byName := map[string]map[string]Case{}
	for _, c := range r.Cases {
		if byName[c.Name] == nil {
			byName[c.Name] = map[string]Case{}
			names = append(names, c.Name)
		}
		byName[c.Name][c.Backend] = c
	}
	pass, fail, skip = countCases(r.Cases, "")
	for _, n := range names {
		row := htmlMatrixRow{Name: n}
		for _, b := range bs {
			c, ok := byName[n][b]
			if !ok {
				row.Cells = append(row.Cells, htmlCase{})
				continue
			}
			tip := strings.TrimSpace(c.Reason + "\n" + c.Evidence)
			if tip == "" {
				tip = c.Duration.Round(time.Millisecond).String()
			}
			row.Cells = append(row.Cells, htmlCase{Result: c.Result, Reason: c.Reason, Tip: tip})
		}
		rows = append(rows, row)
	}
	return rows, pass, fail, skip
}

// envRows lists the environment as label/value pairs for tables.
func envRows(e Environment) [][2]string {
	mem := ""
	if e.MemoryBytes > 0 {
		mem = formatValue(float64(e.MemoryBytes), UnitBytes)
	}
	date := ""
	if !e.Date.IsZero() {
		date = e.Date.UTC().Format(time.RFC3339)
	}
	cores := ""
	if e.Cores > 0 {
		cores = fmt.Sprint(e.Cores)
	}
	return [][2]string{
		{"kernel", strings.TrimSpace(e.Kernel + " " + e.KernelRelease)},
		{"iptables", e.IPTablesVersion},
		{"iptables-restore", e.IPTablesRestoreVersion},
		{"nft", e.NFTVersion},
		{"tools", joinNonEmpty(" ", e.Tools, e.ToolRoot)},
		{"cores", cores},
		{"memory", mem},
		{"accelerator", e.Accelerator},
		{"kpbench commit", e.KpbenchCommit},
		{"Go", e.GoVersion},
		{"host", e.Hostname},
		{"collected", date},
	}
}
