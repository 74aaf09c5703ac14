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
func envLabel(e Environment) string {
	return joinNonEmpty(", ", acceleratorLabel(e.Accelerator), strings.TrimSpace(e.Kernel+" "+e.KernelRelease), coresLabel(e.Cores))
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

// sectionsOf names the sources' sections uniquely from their accelerator, kernel and
// scenario.
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
		id := strings.Trim(nonID.ReplaceAllString(strings.ToLower(cmpOr(e.Accelerator, "native")+"-"+release+"-"+s.Results.Scenario), "-"), "-")
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

// kernelComparison is one scenario run on several kernels: every question, backend and
// size across the kernels.
type kernelComparison struct {
	Scenario string
	// Label says how the kernels ran ("emulated (TCG)").
	Label   string
	Kernels []string
	Rows    []kernelRow
}

// kernelRow is one question on one backend at one size, across kernels.
type kernelRow struct {
	Question, Backend, Size string
	// Values per kernel, in Kernels order (nil: not measured on that kernel).
	Values []*standing
	// Best is the index of the best kernel, -1 when fewer than two have a figure or the
	// figure has no direction; Ratio how much better it is than the worst.
	Best  int
	Ratio float64
	Unit  string
}

// kernelComparisons finds the scenarios run on two or more kernels among srcs and
// compares, for each, kernel against kernel for the same backend and size: ratios are
// taken between kernels, never between backends or across accelerators.
func kernelComparisons(srcs []Source) []kernelComparison {
	type group struct {
		scenario, accel string
		srcs            []Source
	}
	var groups []*group
	for _, s := range srcs {
		e := s.Results.Environment
		i := slices.IndexFunc(groups, func(g *group) bool { return g.scenario == s.Results.Scenario && g.accel == e.Accelerator })
		if i < 0 {
			groups = append(groups, &group{scenario: s.Results.Scenario, accel: e.Accelerator})
			i = len(groups) - 1
		}
		groups[i].srcs = append(groups[i].srcs, s)
	}
	var out []kernelComparison
	for _, g := range groups {
		var kernels []string
		for _, s := range g.srcs {
			if k := s.Results.Environment.KernelRelease; !slices.Contains(kernels, k) {
				kernels = append(kernels, k)
			}
		}
		if len(kernels) < 2 || len(kernels) != len(g.srcs) {
			continue
		}
		kc := kernelComparison{Scenario: g.scenario, Label: acceleratorLabel(g.accel), Kernels: kernels}
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
		for _, q := range questions {
			for _, size := range sizes {
				for _, b := range bs {
					row := kernelRow{Question: q.Title, Backend: b, Size: size, Values: make([]*standing, len(kernels)), Best: -1}
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
// section), kernel against kernel for a scenario run on several kernels, and every chart
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
