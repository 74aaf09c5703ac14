package reports

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
)

// WriteCSV writes one DIR/<measurement>.csv per measurement name, with one row per raw
// sample and the columns
//
//	backend,<param>...,unit,sample,value
//
// where the params are the union of the parameter names of that measurement (empty when
// a row lacks one), sample is the index of the sample in its series, and value is in
// unit. It returns the files written.
func WriteCSV(dir string, r *Results) ([]string, error) {
	byName := map[string][]point{}
	var names []string
	for _, p := range points(r) {
		if _, ok := byName[p.m.Name]; !ok {
			names = append(names, p.m.Name)
		}
		byName[p.m.Name] = append(byName[p.m.Name], p)
	}
	var files []string
	for _, name := range names {
		ps := byName[name]
		union := map[string]string{}
		for _, p := range ps {
			for k := range p.m.Params {
				union[k] = ""
			}
		}
		keys := orderedKeys(union)
		var buf bytes.Buffer
		w := csv.NewWriter(&buf)
		header := append(append([]string{"backend"}, keys...), "unit", "sample", "value")
		_ = w.Write(header) // writes go to a bytes.Buffer; errors surface in w.Error below
		for _, p := range ps {
			row := make([]string, 0, len(header))
			row = append(row, p.backend)
			for _, k := range keys {
				row = append(row, p.m.Params[k])
			}
			row = append(row, p.m.Unit, "", "")
			for i, v := range p.m.Samples {
				row[len(row)-2] = strconv.Itoa(i)
				row[len(row)-1] = strconv.FormatFloat(v, 'g', -1, 64)
				_ = w.Write(slices.Clone(row))
			}
		}
		w.Flush()
		if err := w.Error(); err != nil {
			return files, fmt.Errorf("write %s.csv: %w", name, err)
		}
		path := filepath.Join(dir, safeFileName(name)+".csv")
		if err := writeFile(path, buf.Bytes()); err != nil {
			return files, err
		}
		files = append(files, path)
	}
	return files, nil
}

// safeFileName keeps letters, digits, '-', '_', '.' and '=' and replaces the rest by '_'.
func safeFileName(s string) string {
	b := []byte(s)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '='
		if !ok {
			b[i] = '_'
		}
	}
	return string(b)
}
