package reports

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// Files written by WriteAll, relative to its directory.
const (
	// BenchFile is the Go benchmark format text (WriteBench).
	BenchFile = "bench.txt"
	// JUnitFile is the JUnit XML of the cases (WriteJUnit).
	JUnitFile = "junit.xml"
	// HTMLFile is the self-contained report page (WriteHTML).
	HTMLFile = "report.html"
)

// WriteAll writes everything into dir: results.json, then what WriteReports draws from
// it. It returns the paths written.
func WriteAll(dir string, r *Results) ([]string, error) {
	if err := r.Write(dir); err != nil {
		return nil, err
	}
	files, err := WriteReports(dir, r)
	return append([]string{filepath.Join(dir, ResultsFile)}, files...), err
}

// WriteReports writes everything drawn from r into dir, leaving results.json alone:
// bench.txt, one CSV per measurement name, junit.xml, plots/*.png and *.svg, and
// report.html. It is what `kpbench report DIR` runs on saved results. It returns the
// paths written.
func WriteReports(dir string, r *Results) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("write reports: %w", err)
	}
	var files []string
	write := func(name string, f func(*bytes.Buffer) error) error {
		var buf bytes.Buffer
		if err := f(&buf); err != nil {
			return err
		}
		path := filepath.Join(dir, name)
		if err := writeFile(path, buf.Bytes()); err != nil {
			return err
		}
		files = append(files, path)
		return nil
	}
	if err := write(BenchFile, func(b *bytes.Buffer) error { return WriteBench(b, r) }); err != nil {
		return files, err
	}
	csvs, err := WriteCSV(dir, r)
	files = append(files, csvs...)
	if err != nil {
		return files, err
	}
	if err := write(JUnitFile, func(b *bytes.Buffer) error { return WriteJUnit(b, r) }); err != nil {
		return files, err
	}
	plots, err := WritePlots(dir, r)
	files = append(files, plots...)
	if err != nil {
		return files, err
	}
	if err := write(HTMLFile, func(b *bytes.Buffer) error { return WriteHTML(b, r) }); err != nil {
		return files, err
	}
	return files, nil
}
