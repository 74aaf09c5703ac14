//go:build linux

// Package netnstest makes fake tool roots for tests of code that runs external tools
// through netns.Tools: a directory holding a shell (the host's, with its libraries) and,
// for each tool name, a script that records its command line and succeeds. Tests then see
// which tools ran, with which arguments, and that none of the host's ran instead.
package netnstest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// FakeVersion is what every fake tool prints for --version (and -V): a version in the
// vMAJOR.MINOR.PATCH form that tools' callers parse.
const FakeVersion = "v9.8.7"

// FakeRoot is a tool root made by NewFakeRoot.
type FakeRoot struct {
	// Dir is the root directory (pass it as netns.Tools.Root).
	Dir string
}

// logFile is where the fake tools append their command lines, inside the root.
const logFile = "/kpbench-argv.log"

// NewFakeRoot makes a tool root in a temporary directory (removed after the test) with
// /bin/sh, /dev/null and, in /usr/sbin, one script per name. Each script appends one line to the
// root's log, "NAME ARGS..." (NAME as the tool was invoked, without directory), and exits
// 0; with --version or -V as its first argument it first prints "NAME v9.8.7 (fake)", and
// whatever stdout holds is given by outputs[NAME] (printed for any other invocation).
func NewFakeRoot(t testing.TB, outputs map[string]string, names ...string) *FakeRoot {
	t.Helper()
	dir := t.TempDir()
	sh, err := filepath.EvalSymlinks("/bin/sh")
	require.NoError(t, err)
	copyFile(t, sh, filepath.Join(dir, "bin", "sh"))
	for _, lib := range sharedLibraries(t, sh) {
		copyFile(t, lib, filepath.Join(dir, lib))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "dev"), 0o755))
	// os/exec opens /dev/null for a child's unset stdin or stdout, inside the root when
	// it starts the child from a chrooted thread (netns.Tools.Do), as a real root has it.
	require.NoError(t, unix.Mknod(filepath.Join(dir, "dev", "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "usr", "sbin"), 0o755))
	for _, n := range names {
		var s strings.Builder
		fmt.Fprintf(&s, "#!/bin/sh\necho \"${0##*/} $*\" >> %s\n", logFile)
		fmt.Fprintf(&s, "case \"$1\" in --version|-V) echo \"%s %s (fake)\"; exit 0;; esac\n", n, FakeVersion)
		if out := outputs[n]; out != "" {
			s.WriteString("printf '%s\\n'") // the root has no cat: the shell prints
			for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
				s.WriteString(" '" + strings.ReplaceAll(line, "'", `'\''`) + "'")
			}
			s.WriteString("\n")
		}
		s.WriteString("exit 0\n")
		require.NoError(t, os.WriteFile(filepath.Join(dir, "usr", "sbin", n), []byte(s.String()), 0o755))
	}
	return &FakeRoot{Dir: dir}
}

// Calls returns the command lines the fake tools recorded, in order ("nft --version").
func (r *FakeRoot) Calls(t testing.TB) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(r.Dir, logFile))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		out = append(out, strings.TrimSpace(sc.Text()))
	}
	return out
}

// Tools returns the distinct tool names that ran, in order of first use.
func (r *FakeRoot) Tools(t testing.TB) []string {
	t.Helper()
	var out []string
	seen := map[string]bool{}
	for _, c := range r.Calls(t) {
		name, _, _ := strings.Cut(c, " ")
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}

// sharedLibraries lists the libraries (and the loader) that bin needs, from ldd.
func sharedLibraries(t testing.TB, bin string) []string {
	t.Helper()
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		// A static shell needs none; ldd says so with an error.
		return nil
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			libs = append(libs, f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			libs = append(libs, f[0])
		}
	}
	return libs
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(to), 0o755))
	require.NoError(t, os.WriteFile(to, data, 0o755))
}
