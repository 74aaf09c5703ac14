package reports

import (
	"bytes"
	"fmt"
	"io"
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
	// oneFile draws r into the file name of dir with draw.
	oneFile := func(name string, draw func(io.Writer, *Results) error) func(string, *Results) ([]string, error) {
		return func(dir string, r *Results) ([]string, error) {
			var buf bytes.Buffer
			if err := draw(&buf, r); err != nil {
				return nil, err
			}
			path := filepath.Join(dir, name)
			if err := writeFile(path, buf.Bytes()); err != nil {
				return nil, err
			}
			return []string{path}, nil
		}
	}
	var files []string
	for _, write := range []func(string, *Results) ([]string, error){
		oneFile(BenchFile, WriteBench), WriteCSV, oneFile(JUnitFile, WriteJUnit), WritePlots, oneFile(HTMLFile, WriteHTML),
	} {
		paths, err := write(dir, r)
		files = append(files, paths...)
		if err != nil {
			return files, err
		}
	}
	return files, nil
}
