package reports

import (
	"bytes"
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

// WriteAll writes everything into dir: results.json, bench.txt, one CSV per measurement
// name, junit.xml, plots/*.png and *.svg, and report.html. It returns the paths written.
// Writing into a directory that already holds results.json rewrites it from r (which is
// what `kpbench report DIR` does after loading it).
func WriteAll(dir string, r *Results) ([]string, error) {
	if err := r.Write(dir); err != nil {
		return nil, err
	}
	files := []string{filepath.Join(dir, ResultsFile)}
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

