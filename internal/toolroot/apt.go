package toolroot

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// DefaultMirror is the Debian mirror used when the host's apt sources name none.
const DefaultMirror = "http://deb.debian.org/debian"

// aptSource is one "deb" entry of the apt sources: a URI and its suites.
type aptSource struct {
	URI    string
	Suites []string
}

// hostMirror returns the Debian archive the host's apt uses (the first "deb" entry of
// etcApt/sources.list and etcApt/sources.list.d/*.list|*.sources whose path ends in
// /debian), else DefaultMirror.
func hostMirror(etcApt string) string {
	var files []string
	files = append(files, filepath.Join(etcApt, "sources.list"))
	more, _ := filepath.Glob(filepath.Join(etcApt, "sources.list.d", "*"))
	sort.Strings(more)
	files = append(files, more...)
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		var srcs []aptSource
		switch {
		case strings.HasSuffix(f, ".sources"):
			srcs = parseDeb822Sources(fh)
		case strings.HasSuffix(f, ".list") || filepath.Base(f) == "sources.list":
			srcs = parseOneLineSources(fh)
		}
		fh.Close()
		for _, s := range srcs {
			if isDebianArchive(s.URI) {
				return strings.TrimSuffix(s.URI, "/")
			}
		}
	}
	return DefaultMirror
}

// isDebianArchive reports whether uri is Debian's main archive (not -security, -ports or a
// third party's repository): its path ends in /debian.
func isDebianArchive(uri string) bool {
	u := strings.TrimSuffix(uri, "/")
	return (strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://")) && strings.HasSuffix(u, "/debian")
}

// parseOneLineSources reads "deb [options] URI SUITE COMPONENTS..." lines.
func parseOneLineSources(r io.Reader) []aptSource {
	var out []aptSource
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "#"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") {
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) == 0 {
				continue
			}
			f = f[1:]
		}
		if len(f) >= 2 {
			out = append(out, aptSource{URI: f[0], Suites: []string{f[1]}})
		}
	}
	return out
}

// parseDeb822Sources reads the stanzas of a .sources file (Types, URIs, Suites).
func parseDeb822Sources(r io.Reader) []aptSource {
	var out []aptSource
	fields := map[string]string{}
	flush := func() {
		if strings.Contains(" "+fields["types"]+" ", " deb ") && fields["enabled"] != "no" {
			for _, u := range strings.Fields(fields["uris"]) {
				out = append(out, aptSource{URI: u, Suites: strings.Fields(fields["suites"])})
			}
		}
		fields = map[string]string{}
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(line), "#") || strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if ok {
			fields[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
		}
	}
	flush()
	return out
}
