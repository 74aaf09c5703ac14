package reports

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"regexp"
	"strings"
	"time"
)

// htmlPage is report.html's template. Everything is inline: styles, and the plots as SVG
// elements, so the file can be mailed or attached to a CI run alone.
const htmlPage = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>kpbench report: {{.R.Scenario}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.best { font-weight: bold; }
td.pass { background: #d9f2d9; } td.fail { background: #f8d0d0; } td.skip { background: #eee; color: #666; }
figure { margin: 1.5em 0; } figcaption { font-size: 0.9em; color: #555; }
figure svg { max-width: 100%; height: auto; }
.muted { color: #666; font-size: 0.9em; }
</style>
</head>
<body>
<h1>kpbench report: {{.R.Scenario}}</h1>
<p class="muted">Run from {{.Started}} to {{.Finished}} ({{.Duration}}); schema {{.R.SchemaVersion}}.
Figures are medians of the raw samples in results.json; ratios compare backends measured in this run, on this kernel.</p>

<h2 id="environment">Environment</h2>
<table>
{{range .Env}}<tr><th>{{index . 0}}</th><td>{{index . 1}}</td></tr>
{{end}}</table>

<h2 id="summary">Summary</h2>
{{if .Rows}}<table>
<tr><th>metric</th><th>parameters</th>{{range .Backends}}<th>{{.}}</th>{{end}}<th>ratio (worst / best)</th></tr>
{{range .Rows}}<tr><td>{{.Name}}</td><td>{{.Params}}</td>{{range .Cells}}<td class="num{{if .Best}} best{{end}}">{{.Text}}</td>{{end}}<td class="num">{{.Ratio}}</td></tr>
{{end}}</table>{{else}}<p>No measurements in this run.</p>{{end}}

<h2 id="plots">Plots</h2>
{{range .Figures}}<figure id="plot-{{.Name}}">{{.SVG}}<figcaption>{{.Title}} (<a href="plots/{{.Name}}.png">PNG</a>, <a href="plots/{{.Name}}.svg">SVG</a>)</figcaption></figure>
{{else}}<p>No plottable measurements in this run.</p>
{{end}}
<h2 id="conformance">Conformance</h2>
{{if .Matrix}}<p>{{.Pass}} passed, {{.Fail}} failed, {{.Skip}} skipped. Hover a cell for the reason.</p>
<table>
<tr><th>case</th>{{range .Backends}}<th>{{.}}</th>{{end}}</tr>
{{range .Matrix}}<tr><td>{{.Name}}</td>{{range .Cells}}{{if .Result}}<td class="{{.Result}}" title="{{.Tip}}">{{.Result}}{{if .Reason}}: {{.Reason}}{{end}}</td>{{else}}<td class="muted">not run</td>{{end}}{{end}}</tr>
{{end}}</table>{{else}}<p>No expectations or conformance cases in this run.</p>{{end}}
</body>
</html>
`

type htmlCell struct {
	Text string
	Best bool
}

type htmlRow struct {
	Name, Params, Ratio string
	Cells               []htmlCell
}

type htmlFigure struct {
	Name, Title string
	SVG         template.HTML
}

type htmlCase struct {
	Result, Reason, Tip string
}

type htmlMatrixRow struct {
	Name  string
	Cells []htmlCase
}

type htmlData struct {
	R                           *Results
	Started, Finished, Duration string
	Env                         [][2]string
	Backends                    []string
	Rows                        []htmlRow
	Figures                     []htmlFigure
	Matrix                      []htmlMatrixRow
	Pass, Fail, Skip            int
}

// xmlProlog matches what precedes the <svg> element in a standalone SVG file.
var xmlProlog = regexp.MustCompile(`(?s)^.*?(<svg[\s>])`)

// WriteHTML writes report.html: one self-contained page with the environment, a summary
// table of every metric across the backends of the run (medians and the worst/best
// ratio), every plot inlined as SVG, and the conformance matrix (case × backend, the
// reason in the cell and the evidence as a tooltip).
func WriteHTML(w io.Writer, r *Results) error {
	tmpl, err := template.New("report").Parse(htmlPage)
	if err != nil {
		return fmt.Errorf("report.html template: %w", err)
	}
	d := htmlData{R: r, Backends: backends(r)}
	if !r.Started.IsZero() {
		d.Started = r.Started.UTC().Format(time.RFC3339)
	}
	if !r.Finished.IsZero() {
		d.Finished = r.Finished.UTC().Format(time.RFC3339)
		d.Duration = r.Finished.Sub(r.Started).Round(time.Second).String()
	}
	d.Env = envRows(r.Environment)
	for _, run := range r.Runs {
		if len(run.Labels) > 0 {
			d.Env = append(d.Env, [2]string{"labels of " + run.Backend, paramString(run.Labels, ", ")})
		}
	}
	for _, row := range comparisonRows(r) {
		hr := htmlRow{Name: row.Name, Params: row.Params, Ratio: row.ratioText()}
		for _, b := range d.Backends {
			v, ok := row.Values[b]
			c := htmlCell{Text: "–"}
			if ok {
				c = htmlCell{Text: formatValue(v, row.Unit), Best: row.Ratio > 0 && b == row.Best}
			}
			hr.Cells = append(hr.Cells, c)
		}
		d.Rows = append(d.Rows, hr)
	}
	figs, err := Figures(r)
	if err != nil {
		return err
	}
	for _, f := range figs {
		svg, err := render(f, "svg")
		if err != nil {
			return err
		}
		svg = xmlProlog.ReplaceAll(svg, []byte("$1"))
		// The SVG comes from gonum/plot's own writer, not from user input.
		d.Figures = append(d.Figures, htmlFigure{Name: f.Name, Title: f.Title, SVG: template.HTML(svg)}) //nolint:gosec
	}
	var names []string
	byName := map[string]map[string]Case{}
	for _, c := range r.Cases {
		if byName[c.Name] == nil {
			byName[c.Name] = map[string]Case{}
			names = append(names, c.Name)
		}
		byName[c.Name][c.Backend] = c
		switch c.Result {
		case CasePass:
			d.Pass++
		case CaseFail:
			d.Fail++
		case CaseSkip:
			d.Skip++
		}
	}
	for _, n := range names {
		row := htmlMatrixRow{Name: n}
		for _, b := range d.Backends {
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
		d.Matrix = append(d.Matrix, row)
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
		{"nft", e.NFTVersion},
		{"cores", cores},
		{"memory", mem},
		{"accelerator", e.Accelerator},
		{"kpbench commit", e.KpbenchCommit},
		{"Go", e.GoVersion},
		{"host", e.Hostname},
		{"collected", date},
	}
}
