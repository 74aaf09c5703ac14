package reports

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Source is one results file of a report, and where it was read from.
type Source struct {
	// Path is the directory (or file) the results came from, as the user named it.
	Path string
	// Results are the loaded results.
	Results *Results
}

// LoadSources reads the results of every path: a results file, a run directory (holding
// results.json), or a directory whose subdirectories hold results (a kernel matrix
// `OUT/`, where each OUT/<kernel>/results.json is one source), in sorted order. An
// unreadable path, or a directory with no results at all, is an error naming it.
func LoadSources(paths ...string) ([]Source, error) {
	if len(paths) == 0 {
		return nil, errors.New("no results given")
	}
	var out []Source
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("load results: %w", err)
		}
		if !fi.IsDir() || fileExists(filepath.Join(p, ResultsFile)) {
			r, err := Load(p)
			if err != nil {
				return nil, err
			}
			out = append(out, Source{Path: p, Results: r})
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("load results: %w", err)
		}
		found := 0
		for _, e := range entries {
			sub := filepath.Join(p, e.Name())
			if !e.IsDir() || !fileExists(filepath.Join(sub, ResultsFile)) {
				continue
			}
			r, err := Load(sub)
			if err != nil {
				return nil, err
			}
			out = append(out, Source{Path: sub, Results: r})
			found++
		}
		if found == 0 {
			return nil, fmt.Errorf("load results: %s: no %s in it or in its subdirectories", p, ResultsFile)
		}
	}
	return out, nil
}

func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// section is one source in a report: its environment, its answers, charts and tables.
type section struct {
	// ID names the section in anchors and plot files ("" in a one-source report).
	ID     string
	Source Source
}

// envLabel describes where results ran, for headings: "emulated (TCG), Linux
// 6.1.0-57-amd64, 2 cores".
//
// Results that say which tools they ran (Environment.Tools) name them last: "tools
// debian:trixie (nft v1.1.3, iptables v1.8.11)".
func envLabel(e Environment) string {
	tools := ""
	if e.Tools != "" {
		tools = "tools " + toolsLabel(e)
	}
	return joinNonEmpty(", ", acceleratorLabel(e.Accelerator), strings.TrimSpace(e.Kernel+" "+e.KernelRelease), coresLabel(e.Cores), tools)
}

func coresLabel(n int) string {
	switch {
	case n <= 0:
		return ""
	case n == 1:
		return "1 core"
	}
	return strconv.Itoa(n) + " cores"
}

// acceleratorLabel names how the kernel ran: "native", "VM (KVM)" or "emulated (TCG)".
func acceleratorLabel(a string) string {
	switch a {
	case "tcg":
		return "emulated (TCG)"
	case "kvm":
		return "VM (KVM)"
	case "", "native":
		return "native"
	}
	return a
}

var nonID = regexp.MustCompile(`[^a-z0-9.]+`)

// sectionsOf names the sources' sections uniquely from their accelerator, kernel, tools
// (unless the host's) and scenario.
func sectionsOf(srcs []Source) []section {
	out := make([]section, len(srcs))
	if len(srcs) == 1 {
		out[0] = section{Source: srcs[0]}
		return out
	}
	used := map[string]bool{}
	for i, s := range srcs {
		e := s.Results.Environment
		release := e.KernelRelease
		if f := strings.Fields(release); len(f) > 0 {
			release = f[0] // "6.1.0-57-amd64 (microVM kernel 6.1.0-57)"
		}
		tools := ""
		if t := toolsSpec(e); t != "host" {
			tools = t + "-"
		}
		id := strings.Trim(nonID.ReplaceAllString(strings.ToLower(cmpOr(e.Accelerator, "native")+"-"+release+"-"+tools+s.Results.Scenario), "-"), "-")
		if id == "" {
			id = "run"
		}
		for base, n := id, 2; used[id]; n++ {
			id = base + "-" + strconv.Itoa(n)
		}
		used[id] = true
		out[i] = section{ID: id, Source: s}
	}
	return out
}

// envAxis is what an environment comparison varies between its sources: the kernel (a
// kernel matrix) or the userspace tools (--tools host and --tools debian:trixie).
type envAxis struct {
	// ID is the comparison's anchor in report.html, Title its heading, Noun what a column
	// is ("kernel", "tools") and Plural several of them.
	ID, Title, Noun, Plural string
	// column is the axis's value for an environment (a column's heading); same is what
	// must be equal for two sources to be compared along the axis.
	column, same func(Environment) string
}

// kernelAxis compares kernels with the same accelerator and tools.
var kernelAxis = envAxis{
	ID: "kernels", Title: "Kernel against kernel", Noun: "kernel", Plural: "kernels",
	column: func(e Environment) string { return e.KernelRelease },
	same:   func(e Environment) string { return e.Accelerator + "|" + toolsSpec(e) },
}

// toolsAxis compares sets of tools on the same kernel and accelerator.
var toolsAxis = envAxis{
	ID: "tools", Title: "Tools against tools", Noun: "tools", Plural: "sets of tools",
	column: toolsLabel,
	same:   func(e Environment) string { return e.Accelerator + "|" + e.KernelRelease },
}

// toolsSpec is the --tools value results ran with ("host" for results written before the
// field existed: they ran the host's).
func toolsSpec(e Environment) string { return cmpOr(e.Tools, "host") }

// toolsLabel names the tools of an environment with their versions: "debian:trixie (nft
// v1.1.3, iptables v1.8.11)".
func toolsLabel(e Environment) string {
	v := joinNonEmpty(", ", prefixed("nft ", versionWord(e.NFTVersion)), prefixed("iptables ", versionWord(e.IPTablesVersion)))
	if v == "" {
		return toolsSpec(e)
	}
	return toolsSpec(e) + " (" + v + ")"
}

// versionWord is the first word of a --version line that starts with v and a digit
// ("v1.0.6" of "nftables v1.0.6 (Lester Gooch #5)"), else the whole line.
func versionWord(line string) string {
	for _, w := range strings.Fields(line) {
		if len(w) > 1 && w[0] == 'v' && w[1] >= '0' && w[1] <= '9' {
			return w
		}
	}
	return line
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

// kernelComparison is one scenario run in several environments that differ along one
// axis (kernels, or tools): every question, backend and size across them.
type kernelComparison struct {
	Scenario string
	// Axis is what differs between the columns.
	Axis envAxis
	// Label says how the kernels ran ("emulated (TCG)"), and for the tools axis on which
	// kernel.
	Label string
	// Kernels are the columns: the axis's values (kernel releases, or tools labels).
	Kernels []string
	Rows    []kernelRow
}

// kernelRow is one question on one backend at one size, across the columns.
type kernelRow struct {
	Question, Backend, Size string
	// Values per column, in Kernels order (nil: not measured there).
	Values []*standing
	// Best is the index of the best column, -1 when fewer than two have a figure or the
	// figure has no direction; Ratio how much better it is than the worst.
	Best  int
	Ratio float64
	Unit  string
	// Better is the figure's direction.
	Better Better
}

// kernelComparisons finds the scenarios run on two or more kernels among srcs and
// compares, for each, kernel against kernel for the same backend and size: ratios are
// taken between kernels, never between backends or across accelerators or tools.
func kernelComparisons(srcs []Source) []kernelComparison {
	return envComparisons(srcs, kernelAxis)
}

// toolsComparisons finds the scenarios run with two or more sets of tools on one kernel
// and compares tools against tools for the same backend and size.
func toolsComparisons(srcs []Source) []kernelComparison {
	return envComparisons(srcs, toolsAxis)
}

// envComparisons groups srcs by scenario and by what the axis keeps the same, and
// compares, in each group whose sources all differ along the axis (two or more), column
// against column for the same backend and size.
func envComparisons(srcs []Source, axis envAxis) []kernelComparison {
	type group struct {
		scenario, same string
		srcs           []Source
	}
	var groups []*group
	for _, s := range srcs {
		same := axis.same(s.Results.Environment)
		i := slices.IndexFunc(groups, func(g *group) bool { return g.scenario == s.Results.Scenario && g.same == same })
		if i < 0 {
			groups = append(groups, &group{scenario: s.Results.Scenario, same: same})
			i = len(groups) - 1
		}
		groups[i].srcs = append(groups[i].srcs, s)
	}
	var out []kernelComparison
	for _, g := range groups {
		var cols []string
		for _, s := range g.srcs {
			if k := axis.column(s.Results.Environment); !slices.Contains(cols, k) {
				cols = append(cols, k)
			}
		}
		if len(cols) < 2 || len(cols) != len(g.srcs) {
			continue
		}
		e := g.srcs[0].Results.Environment
		label := acceleratorLabel(e.Accelerator)
		if axis.ID == toolsAxis.ID {
			label = joinNonEmpty(", ", label, strings.TrimSpace(e.Kernel+" "+e.KernelRelease))
		}
		kc := kernelComparison{Scenario: g.scenario, Axis: axis, Label: label, Kernels: cols}
		tables := make([]answersTable, len(g.srcs))
		var sizes []string
		for i, s := range g.srcs {
			tables[i] = answers(s.Results)
			for _, sz := range tables[i].Sizes {
				if !slices.Contains(sizes, sz) {
					sizes = append(sizes, sz)
				}
			}
		}
		slices.SortFunc(sizes, compareSizes)
		var bs []string
		for _, s := range g.srcs {
			for _, b := range backends(s.Results) {
				if !slices.Contains(bs, b) {
					bs = append(bs, b)
				}
			}
		}
		for _, q := range questions() {
			for _, size := range sizes {
				for _, b := range bs {
					row := kernelRow{Question: q.Title, Backend: b, Size: size, Values: make([]*standing, len(cols)), Best: -1}
					better := NoDirection
					n := 0
					for ki, t := range tables {
						if st, bt, ok := t.lookup(q.Title, size, b); ok {
							row.Values[ki] = &st
							row.Unit = st.Unit
							better = bt
							n++
						}
					}
					if n == 0 {
						continue
					}
					row.Best, row.Ratio = bestOf(row.Values, better)
					row.Better = better
					kc.Rows = append(kc.Rows, row)
				}
			}
		}
		out = append(out, kc)
	}
	return out
}

// lookup finds backend's standing for the question titled q at size.
func (t answersTable) lookup(q, size, backend string) (standing, Better, bool) {
	si := slices.Index(t.Sizes, size)
	if si < 0 {
		return standing{}, NoDirection, false
	}
	for _, row := range t.Rows {
		if row.Question.Title != q {
			continue
		}
		cell := row.Cells[si]
		for _, st := range cell.Standings {
			if st.Backend == backend {
				return st, cell.Better, true
			}
		}
	}
	return standing{}, NoDirection, false
}

// bestOf returns the index of the best of vs by better, and how many times better it is
// than the worst; -1 and 0 when fewer than two are positive or there is no direction.
func bestOf(vs []*standing, better Better) (int, float64) {
	best, worst := -1, -1
	for i, v := range vs {
		if v == nil || v.Value <= 0 {
			continue
		}
		if best < 0 || (better == LowerIsBetter && v.Value < vs[best].Value) || (better == HigherIsBetter && v.Value > vs[best].Value) {
			best = i
		}
		if worst < 0 || (better == LowerIsBetter && v.Value > vs[worst].Value) || (better == HigherIsBetter && v.Value < vs[worst].Value) {
			worst = i
		}
	}
	if better == NoDirection || best < 0 || best == worst {
		return -1, 0
	}
	if better == LowerIsBetter {
		return best, vs[worst].Value / vs[best].Value
	}
	return best, vs[best].Value / vs[worst].Value
}

// hasIPVS reports whether any source ran an IPVS mode (ours or kube-proxy's).
func hasIPVS(srcs []Source) bool {
	for _, s := range srcs {
		for _, b := range backends(s.Results) {
			if strings.Contains(b, "ipvs") {
				return true
			}
		}
	}
	return false
}

// KEP5495Note is what a report says when IPVS is in it.
const KEP5495Note = "kube-proxy's IPVS mode is being deprecated (KEP-5495): a feature gate KubeProxyIPVS in 1.37 " +
	"(on by default), off by default in 1.40 (kube-proxy refuses ipvs without the gate), the code removed in 1.43. " +
	"nftables is the mode that replaces it."

// WriteMerged writes one report of several sources into dir: report.html, with a
// labelled section per source (its answers, charts and tables; ratios only within a
// section), kernel against kernel for a scenario run on several kernels, tools against
// tools for a scenario run with several sets of tools on one kernel, and every chart
// as plots/<section>-<name>.png and .svg. The sources' own files are not touched.
func WriteMerged(dir string, srcs []Source) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("write report: %w", err)
	}
	secs := sectionsOf(srcs)
	palette := paletteOf(srcs)
	var files []string
	for _, s := range secs {
		figs, err := figuresWith(s.Source.Results, palette)
		if err != nil {
			return files, err
		}
		prefix := ""
		if s.ID != "" {
			prefix = s.ID + "-"
		}
		fs, err := writeFigures(dir, prefix, figs)
		files = append(files, fs...)
		if err != nil {
			return files, err
		}
	}
	var page bytes.Buffer
	if err := writeHTMLReport(&page, secs, palette); err != nil {
		return files, err
	}
	path := filepath.Join(dir, HTMLFile)
	if err := writeFile(path, page.Bytes()); err != nil {
		return files, fmt.Errorf("write report: %w", err)
	}
	return append(files, path), nil
}

// paletteOf orders the backends of every source (first seen first), so that a backend
// has one colour in the whole report.
func paletteOf(srcs []Source) []string {
	var out []string
	for _, s := range srcs {
		for _, b := range backends(s.Results) {
			if !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	return out
}

// dateOf renders a time for people, "" when zero.
func dateOf(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}
