package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The files `kpbench e2e` writes into --out, beside one directory per proxy mode
// (<mode>/junit_01.xml and <mode>/e2e.log).
const (
	ReportJSON     = "e2e.json"
	ReportMarkdown = "e2e.md"
	JUnitFile      = "junit_01.xml"
	LogFile        = "e2e.log"
)

// Report is the result of `kpbench e2e`: one Run per proxy mode. e2e.json is its JSON form
// (a contract: add fields, never rename); e2e.md its table.
type Report struct {
	// Kubernetes is the version of e2e.test and the cluster's components.
	Kubernetes string `json:"kubernetesVersion"`
	// Focus and Skip are the ginkgo patterns e2e.test ran with (Skip includes the
	// \[Serial\]|\[Disruptive\] that is always skipped).
	Focus string `json:"focus"`
	Skip  string `json:"skip"`
	// Nodes is the clusters' node count; KubeProxy the kube-proxy binary they ran;
	// BackgroundServices the extra Services each cluster had during the run.
	Nodes              int    `json:"nodes"`
	KubeProxy          string `json:"kubeProxy"`
	BackgroundServices int    `json:"backgroundServices"`
	// DryRun is set when the specs were only listed (--dry-run): nothing ran.
	DryRun bool `json:"dryRun,omitempty"`
	// Started is when the command started.
	Started time.Time `json:"started"`
	// Runs are the proxy modes' runs, in the order given.
	Runs []ModeRun `json:"runs"`
}

// ModeRun is the suite's run against one cluster, one proxy mode.
type ModeRun struct {
	// Mode is kube-proxy's mode: iptables, nftables or ipvs.
	Mode string `json:"mode"`
	// ClusterUpSeconds is the time `cluster up` took; E2ESeconds the wall time of e2e.test.
	ClusterUpSeconds float64 `json:"clusterUpSeconds,omitempty"`
	E2ESeconds       float64 `json:"e2eSeconds,omitempty"`
	// BackgroundSeconds is the time the --background-services took to make through the
	// API server; BackgroundSyncSeconds the time after that until every node's kube-proxy
	// had programmed them (e2e.test starts only then).
	BackgroundSeconds     float64 `json:"backgroundSeconds,omitempty"`
	BackgroundSyncSeconds float64 `json:"backgroundSyncSeconds,omitempty"`
	// Error says why the run is incomplete: the cluster did not come up, e2e.test could not
	// start or crashed, the timeout passed, or it was interrupted. A run with an error fails
	// the command even when its tests passed.
	Error string `json:"error,omitempty"`
	// JUnit and Log are e2e.test's report and output, relative to the output directory.
	JUnit string `json:"junit,omitempty"`
	Log   string `json:"log,omitempty"`
	// Suite is what the JUnit report says (nil when e2e.test wrote none).
	Suite *Suite `json:"suite,omitempty"`
}

// Failed reports whether any run has an error or a failed test.
func (r *Report) Failed() bool {
	for _, run := range r.Runs {
		if run.Error != "" || run.Suite == nil {
			return true
		}
		if _, f, _ := run.Suite.Counts(); f > 0 {
			return true
		}
	}
	return false
}

// Unseen names, per mode, what a run did not check: its skipped tests, or a run in which
// no test passed (a focus that selected nothing). A gate that must see every selected
// test (--require-all) fails on any of them.
func (r *Report) Unseen() []string {
	var out []string
	for _, run := range r.Runs {
		if run.Suite == nil {
			continue // Failed already says so
		}
		if p, _, _ := run.Suite.Counts(); p == 0 {
			out = append(out, fmt.Sprintf("%s: no test passed", run.Mode))
		}
		for _, t := range run.Suite.Tests {
			if t.Outcome == Skipped {
				out = append(out, fmt.Sprintf("%s: skipped %s", run.Mode, t.Name))
			}
		}
	}
	return out
}

// WriteFiles writes e2e.json and e2e.md into dir.
func (r *Report) WriteFiles(dir string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("e2e report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ReportJSON), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("e2e report: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, ReportMarkdown))
	if err != nil {
		return fmt.Errorf("e2e report: %w", err)
	}
	if err := WriteMarkdown(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("e2e report: %w", err)
	}
	return nil
}

// maxReasonCell bounds a reason in the table; e2e.json and the JUnit file keep it whole.
const maxReasonCell = 300

// WriteMarkdown writes the report as Markdown: a summary row per mode, then one row per
// test with its outcome and duration on each mode and, for a failure or a skip, the reason
// (once when every mode gives the same).
func WriteMarkdown(w io.Writer, r *Report) error {
	var b strings.Builder
	title := "kpbench e2e"
	if r.DryRun {
		title += " (dry run: listed, not run)"
	}
	fmt.Fprintf(&b, "# %s: Kubernetes %s\n\n", title, r.Kubernetes)
	fmt.Fprintf(&b, "Focus `%s`, skip `%s`; %d nodes, kube-proxy %s", r.Focus, r.Skip, r.Nodes, r.KubeProxy)
	if r.BackgroundServices > 0 {
		fmt.Fprintf(&b, ", %d background Services", r.BackgroundServices)
	}
	b.WriteString(".\n\n")
	if r.DryRun {
		for _, run := range r.Runs {
			if run.Suite != nil {
				fmt.Fprintf(&b, "%d specs selected, %d left out.\n\n", len(run.Suite.Tests), run.Suite.NotSelected)
			}
		}
	}

	bg := r.BackgroundServices > 0
	b.WriteString("| mode | passed | failed | skipped | not selected | cluster up |")
	if bg {
		b.WriteString(" background made | background programmed |")
	}
	b.WriteString(" e2e.test | error |\n| --- | ---: | ---: | ---: | ---: | ---: |")
	if bg {
		b.WriteString(" ---: | ---: |")
	}
	b.WriteString(" ---: | --- |\n")
	for _, run := range r.Runs {
		p, f, s, ns := "—", "—", "—", "—"
		if run.Suite != nil {
			pi, fi, si := run.Suite.Counts()
			p, f, s, ns = fmt.Sprint(pi), fmt.Sprint(fi), fmt.Sprint(si), fmt.Sprint(run.Suite.NotSelected)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |", run.Mode, p, f, s, ns, secs(run.ClusterUpSeconds))
		if bg {
			fmt.Fprintf(&b, " %s | %s |", secs(run.BackgroundSeconds), secs(run.BackgroundSyncSeconds))
		}
		fmt.Fprintf(&b, " %s | %s |\n", secs(run.E2ESeconds), cell(run.Error, maxReasonCell))
	}

	names := testNames(r)
	if len(names) == 0 {
		b.WriteString("\nNo test ran.\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	b.WriteString("\n| test |")
	for _, run := range r.Runs {
		fmt.Fprintf(&b, " %s |", run.Mode)
	}
	b.WriteString(" reason |\n| --- |")
	for range r.Runs {
		b.WriteString(" --- |")
	}
	b.WriteString(" --- |\n")
	for _, name := range names {
		fmt.Fprintf(&b, "| %s |", cell(name, 0))
		var reasons, modes []string
		have := 0
		for _, run := range r.Runs {
			t, ok := run.test(name)
			if !ok {
				b.WriteString(" — |")
				continue
			}
			have++
			fmt.Fprintf(&b, " %s %s |", t.Outcome, secs(t.Seconds))
			if t.Reason != "" {
				reason := t.Reason
				if t.Location != "" {
					reason += " (" + t.Location + ")"
				}
				reasons = append(reasons, reason)
				modes = append(modes, run.Mode)
			}
		}
		fmt.Fprintf(&b, " %s |\n", reasonCell(modes, reasons, have))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// reasonCell renders the reasons of one test: once when every mode that ran it (have) gave
// the same one, else each prefixed by its mode.
func reasonCell(modes, reasons []string, have int) string {
	if len(reasons) == 0 {
		return ""
	}
	same := true
	for _, r := range reasons[1:] {
		same = same && r == reasons[0]
	}
	if same && len(reasons) == have {
		return cell(reasons[0], maxReasonCell)
	}
	parts := make([]string, len(reasons))
	for i := range reasons {
		parts[i] = modes[i] + ": " + cell(reasons[i], maxReasonCell)
	}
	return strings.Join(parts, "<br>")
}

// test returns the run's result for the named test.
func (run *ModeRun) test(name string) (Test, bool) {
	if run.Suite == nil {
		return Test{}, false
	}
	for _, t := range run.Suite.Tests {
		if t.Name == name {
			return t, true
		}
	}
	return Test{}, false
}

// testNames returns the names of every test of every run, sorted.
func testNames(r *Report) []string {
	var names []string
	for _, run := range r.Runs {
		if run.Suite == nil {
			continue
		}
		for _, t := range run.Suite.Tests {
			names = append(names, t.Name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func sortTests(ts []Test) {
	slices.SortStableFunc(ts, func(a, b Test) int { return strings.Compare(a.Name, b.Name) })
}

// secs renders seconds for the table; a figure that was not measured is "—".
func secs(s float64) string {
	if s <= 0 {
		return "—"
	}
	if s < 10 {
		return fmt.Sprintf("%.1f s", s)
	}
	return fmt.Sprintf("%.0f s", s)
}

// cell makes text safe for a Markdown table cell, cut to max runes (0: no limit).
func cell(text string, limit int) string {
	text = strings.TrimSpace(text)
	if r := []rune(text); limit > 0 && len(r) > limit {
		text = string(r[:limit]) + "…"
	}
	text = strings.ReplaceAll(text, "|", `\|`)
	return strings.ReplaceAll(text, "\n", "<br>")
}
