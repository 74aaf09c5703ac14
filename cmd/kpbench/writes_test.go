//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/lab"
)

// TestWritesStayInOutAndCache runs a real `kpbench run` on four backends under strace and
// requires every file it or the tools it runs create, write, rename or remove to be under
// --out, the cache directory or the runtime places documented in the README (the lab
// registry and state under /run/kpbench, namespace mounts /run/netns/kpb-*, iptables's
// /run/xtables.lock, sysctls of lab namespaces). Afterwards the runtime places hold what
// they held before, and the root namespace's rules, links and sysctls are unchanged.
func TestWritesStayInOutAndCache(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "strace", "iptables-nft-restore", "iptables-legacy-restore", "nft")
	dir := t.TempDir()
	out, cwd := filepath.Join(dir, "out"), filepath.Join(dir, "cwd")
	require.NoError(t, os.Mkdir(cwd, 0o755))
	scenario, err := filepath.Abs("../../scenarios/conformance/basic-endpoints.yaml")
	require.NoError(t, err)
	trace := filepath.Join(dir, "strace.txt")

	rootBefore, sysctlsBefore, runtimeBefore := rootState(t), rootSysctls(t), runtimeFiles(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startKpbenchUnder(ctx, t, cwd, []string{"strace", "-f", "-qq", "-y", "-e", "signal=none",
		"-e", "trace=execve," + strings.Join(writingSyscalls, ","), "-o", trace},
		"run", scenario, "--backend", "iptables,iptables-legacy,nftables,userspace", "--out", out)
	require.NoError(t, c.cmd.Wait(), "kpbench run:\n%s", c.out.String())
	require.FileExists(t, filepath.Join(out, "results.json"))

	traced, err := os.ReadFile(trace)
	require.NoError(t, err)
	writes, err := writesInTrace(bytes.NewReader(traced), cwd)
	require.NoError(t, err)
	allowed := writeAllowList(out)
	var outside []string
	seen := map[string]int{}
	// The trace must show kpbench's own writes (report, lab record, lab sysctls) and the
	// tools it ran: then strace followed them all.
	evidence := []string{out, lab.DefaultRegistryDir, "/proc/sys/net"}
	for _, w := range writes {
		if !allowedWrite(w.Path, allowed) {
			outside = append(outside, w.String())
		}
		for _, place := range evidence {
			if allowedWrite(w.Path, []string{place}) {
				seen[place]++
			}
		}
	}
	t.Logf("%d file writes traced, under %v: %v", len(writes), evidence, seen)
	for _, place := range evidence {
		assert.Positive(t, seen[place], "no write traced under %s: the trace missed part of the run", place)
	}
	for _, tool := range []string{"iptables-nft-restore", "iptables-legacy-restore", "nft"} {
		assert.Regexp(t, `execve\("[^"]*/`+tool+`", .* = 0`, string(traced), "%s was run and traced", tool)
	}
	assert.Empty(t, outside, "writes outside --out, the cache directory and the documented runtime places")
	// Other packages' tests run labs at the same time: judge the labs this run recorded.
	ownLabs := map[string]bool{}
	for _, w := range writes {
		if dir, file := filepath.Split(w.Path); filepath.Clean(dir) == lab.DefaultRegistryDir && strings.HasSuffix(file, ".json") {
			ownLabs[strings.TrimSuffix(file, ".json")] = true
		}
	}
	require.NotEmpty(t, ownLabs, "the trace shows no lab record written")
	var left []string
	for _, f := range runtimeFiles(t) {
		for name := range ownLabs {
			if strings.Contains(filepath.Base(f), name) && !slices.Contains(runtimeBefore, f) {
				left = append(left, f)
			}
		}
	}
	assert.Empty(t, left, "/run/kpbench and /run/netns: what the run's labs (%v) left", ownLabs)
	assert.Equal(t, rootBefore, rootState(t), "root namespace's ruleset and links")
	assert.Equal(t, sysctlsBefore, rootSysctls(t), "root namespace's network sysctls")
}

// writingSyscalls are the system calls that create, change or remove a file's name or
// contents (read-only opens are filtered out by their flags).
var writingSyscalls = []string{"open", "openat", "openat2", "creat", "mkdir", "mkdirat", "rmdir",
	"unlink", "unlinkat", "rename", "renameat", "renameat2", "link", "linkat", "symlink",
	"symlinkat", "truncate", "mknod", "mknodat", "chmod", "fchmodat", "utimensat"}

// writeAllowList is where a run may write: --out, the cache directory, and the runtime
// places whose contents the test checks are back to what they were.
func writeAllowList(out string) []string {
	return []string{
		out,
		"/var/cache/kpbench",
		"/run/kpbench", // lab records (lab.DefaultRegistryDir), per-lab agent state
		"/run/netns",   // the directory itself; its entries must be kpb-* (below)
		"/run/netns/kpb*",
		"/run/xtables.lock", // iptables's own lock, shared with kube-proxy
		"/proc/sys/net",     // sysctls of lab namespaces (root's are compared)
		"/dev/null",
	}
}

// allowedWrite reports whether path is one of the allowed places or under one. An entry
// ending in "*" is a name prefix; "/run/netns" alone allows the directory, not its entries.
func allowedWrite(path string, allowed []string) bool {
	for _, a := range allowed {
		switch {
		case strings.HasSuffix(a, "*"):
			if strings.HasPrefix(path, strings.TrimSuffix(a, "*")) {
				return true
			}
		case a == "/run/netns":
			if path == a {
				return true
			}
		case strings.HasSuffix(a, "/"):
			if strings.HasPrefix(path, a) {
				return true
			}
		case path == a || strings.HasPrefix(path, a+"/"):
			return true
		}
	}
	return false
}

// fileWrite is one file-changing system call seen in a trace.
type fileWrite struct {
	PID, Syscall, Path string
}

func (w fileWrite) String() string { return fmt.Sprintf("pid %s %s %s", w.PID, w.Syscall, w.Path) }

var (
	// 1234  openat(AT_FDCWD</x>, "p", O_RDONLY) = 3</x/p>
	traceLine = regexp.MustCompile(`^(\d+)\s+(\w+)\((.*)\)\s+= (.*)$`)
	// 1234  openat(AT_FDCWD</x>, "p", O_RDONLY <unfinished ...>   (another thread ran)
	unfinishedLine = regexp.MustCompile(`^((\d+)\s+\w+\(.*?) ?<unfinished \.\.\.>$`)
	// 1234  <... openat resumed>) = 3</x/p>
	resumedLine = regexp.MustCompile(`^(\d+)\s+<\.\.\. \w+ resumed>(.*)$`)
	// AT_FDCWD</dir>, 4</dir>, or a bare descriptor
	decoratedFD = regexp.MustCompile(`^(?:AT_FDCWD|-?\d+)(?:<(.*)>)?$`)
)

// writesInTrace reads `strace -f -y` output and returns the successful calls that changed
// a file, with absolute paths (relative ones resolved against their directory descriptor,
// or cwd for the calls without one).
func writesInTrace(r io.Reader, cwd string) ([]fileWrite, error) {
	var writes []fileWrite
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	pending := map[string]string{} // pid -> the first half of its unfinished call
	for sc.Scan() {
		line := sc.Text()
		if m := unfinishedLine.FindStringSubmatch(line); m != nil {
			pending[m[2]] = m[1]
			continue
		}
		if m := resumedLine.FindStringSubmatch(line); m != nil {
			first, ok := pending[m[1]]
			if !ok {
				continue
			}
			delete(pending, m[1])
			line = first + m[2]
		}
		m := traceLine.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(m[4], "-1 ") || strings.HasPrefix(m[4], "?") {
			continue // not a finished call, or it failed: nothing was written
		}
		pid, call, args := m[1], m[2], splitTraceArgs(m[3])
		at := func(dirArg, pathArg int) (string, bool) {
			if pathArg >= len(args) {
				return "", false
			}
			p, err := unquoteTrace(args[pathArg])
			if err != nil {
				return "", false
			}
			if filepath.IsAbs(p) {
				return filepath.Clean(p), true
			}
			base := cwd
			if dirArg >= 0 && dirArg < len(args) {
				d := decoratedFD.FindStringSubmatch(args[dirArg])
				if d == nil || d[1] == "" {
					return "", false
				}
				base = d[1]
			}
			return filepath.Join(base, p), true
		}
		var paths []string
		add := func(p string, ok bool) {
			if ok {
				paths = append(paths, p)
			}
		}
		switch call {
		case "open", "openat", "openat2", "creat":
			flagArg, pathArg, dirArg := 1, 0, -1
			if call != "open" && call != "creat" {
				flagArg, pathArg, dirArg = 2, 1, 0
			}
			if call == "creat" || (flagArg < len(args) && opensForWriting(args[flagArg])) {
				if d := decoratedFD.FindStringSubmatch(m[4]); d != nil && d[1] != "" {
					paths = append(paths, d[1]) // the kernel's own name for what was opened
				} else {
					add(at(dirArg, pathArg))
				}
			}
		case "mkdir", "rmdir", "unlink", "truncate", "mknod", "chmod":
			add(at(-1, 0))
		case "mkdirat", "unlinkat", "mknodat", "fchmodat":
			add(at(0, 1))
		case "utimensat":
			if len(args) > 1 && args[1] == "NULL" { // futimens on the descriptor itself
				if d := decoratedFD.FindStringSubmatch(args[0]); d != nil && d[1] != "" {
					paths = append(paths, d[1])
				}
			} else {
				add(at(0, 1))
			}
		case "rename", "link", "symlink":
			if call != "symlink" {
				add(at(-1, 0))
			}
			add(at(-1, 1))
		case "renameat", "renameat2", "linkat":
			add(at(0, 1))
			add(at(2, 3))
		case "symlinkat":
			add(at(1, 2))
		}
		for _, p := range paths {
			writes = append(writes, fileWrite{PID: pid, Syscall: call, Path: p})
		}
	}
	return writes, sc.Err()
}

// opensForWriting reports whether open flags can create or change a file.
func opensForWriting(flags string) bool {
	for _, f := range strings.Split(flags, "|") {
		switch strings.TrimSpace(f) {
		case "O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND", "O_TMPFILE":
			return true
		}
	}
	return false
}

// splitTraceArgs splits strace's argument list at top-level commas, keeping quoted strings
// and <...>, {...}, [...] decorations whole.
func splitTraceArgs(s string) []string {
	var args []string
	depth, quoted, start := 0, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == '<' || c == '{' || c == '[':
			depth++
		case c == '>' || c == '}' || c == ']':
			depth--
		case c == ',' && depth == 0:
			args = append(args, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	return append(args, strings.TrimSpace(s[start:]))
}

// unquoteTrace turns strace's "path" (C escapes) into the path.
func unquoteTrace(s string) (string, error) {
	s = strings.TrimSuffix(s, "...") // a truncated string: the prefix is still the place
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", fmt.Errorf("not a string: %s", s)
	}
	var b strings.Builder
	for i := 1; i < len(s)-1; i++ {
		if s[i] == '\\' && i+1 < len(s)-1 {
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'x':
				var v byte
				if i+2 < len(s) {
					_, _ = fmt.Sscanf(s[i+1:i+3], "%02x", &v)
					i += 2
				}
				b.WriteByte(v)
			default:
				b.WriteByte(s[i])
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String(), nil
}

// TestWritesInTrace proves the trace reading finds writes in every form the run's tools
// make them, ignores reads and failed calls, and that the allow-list refuses the rest.
func TestWritesInTrace(t *testing.T) {
	cases := []struct {
		name, line string
		want       []string // paths written
		allowed    bool     // under writeAllowList("/o")
	}{
		{"read-only open", `7 openat(AT_FDCWD</c>, "/etc/hosts", O_RDONLY|O_CLOEXEC) = 3</etc/hosts>`, nil, true},
		{"failed create", `7 openat(AT_FDCWD</c>, "/etc/x", O_WRONLY|O_CREAT, 0666) = -1 EACCES (Permission denied)`, nil, true},
		{"report written", `7 openat(AT_FDCWD</c>, "/o/results.json", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0666) = 3</o/results.json>`, []string{"/o/results.json"}, true},
		{"relative create in cwd", `7 openat(AT_FDCWD</c>, "x.txt", O_RDWR|O_CREAT, 0600) = 3</c/x.txt>`, []string{"/c/x.txt"}, false},
		{"temp file", `7 openat(AT_FDCWD</c>, "/tmp/kpb123", O_RDWR|O_CREAT|O_EXCL, 0600) = 5</tmp/kpb123>`, []string{"/tmp/kpb123"}, false},
		{"registry rename", `7 renameat(AT_FDCWD</c>, "/run/kpbench/labs/a.json.1.tmp", AT_FDCWD</c>, "/run/kpbench/labs/a.json") = 0`, []string{"/run/kpbench/labs/a.json.1.tmp", "/run/kpbench/labs/a.json"}, true},
		{"rename into /etc", `7 renameat2(AT_FDCWD</c>, "/o/a", AT_FDCWD</c>, "/etc/a", RENAME_NOREPLACE) = 0`, []string{"/o/a", "/etc/a"}, false},
		{"unlink relative to a directory fd", `7 unlinkat(4</run/netns>, "kpb-l-node0", 0) = 0`, []string{"/run/netns/kpb-l-node0"}, true},
		{"namespace mount of someone else", `7 mknodat(AT_FDCWD</c>, "/run/netns/cni-1", S_IFREG|0444) = 0`, []string{"/run/netns/cni-1"}, false},
		{"mkdir without dirfd", `7 mkdir("state", 0755) = 0`, []string{"/c/state"}, false},
		{"touch by descriptor", `7 utimensat(3</var/lib/x>, NULL, NULL, 0) = 0`, []string{"/var/lib/x"}, false},
		{"xtables lock", `9 openat(AT_FDCWD</c>, "/run/xtables.lock", O_RDONLY|O_CREAT, 0600) = 3</run/xtables.lock>`, []string{"/run/xtables.lock"}, true},
		{"sysctl in a lab namespace", `7 openat(AT_FDCWD</c>, "/proc/sys/net/ipv4/ip_forward", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0644) = 6</proc/sys/net/ipv4/ip_forward>`, []string{"/proc/sys/net/ipv4/ip_forward"}, true},
		{"quoted path with escape", `7 openat(AT_FDCWD</c>, "/etc/a\"b", O_WRONLY) = 3`, []string{`/etc/a"b`}, false},
		{"unfinished call", `7 openat(AT_FDCWD</c>, "/etc/x", O_WRONLY <unfinished ...>`, nil, true},
		{"call interrupted by another thread's", "7 openat(AT_FDCWD</c>, \"/etc/x\", O_WRONLY|O_CREAT <unfinished ...>\n" +
			`8 openat(AT_FDCWD</c>, "/o/a", O_RDONLY) = 3</o/a>` + "\n7 <... openat resumed>, 0666) = 4</etc/x>",
			[]string{"/etc/x"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			writes, err := writesInTrace(strings.NewReader(tc.line+"\n"), "/c")
			require.NoError(t, err)
			var got []string
			ok := true
			for _, w := range writes {
				got = append(got, w.Path)
				ok = ok && allowedWrite(w.Path, writeAllowList("/o"))
			}
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.allowed, ok)
		})
	}
}

// rootSysctls reads the root namespace's forwarding and per-interface defaults, on a
// thread checked to be in the root namespace (/proc/sys/net follows the reading thread).
func rootSysctls(t *testing.T) map[string]string {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	require.ErrorIs(t, netns.Guard(), netns.ErrRootNamespace, "this thread must be in the root namespace")
	got := map[string]string{}
	for _, pattern := range []string{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv4/conf/all/*",
		"/proc/sys/net/ipv4/conf/default/*", "/proc/sys/net/bridge/*", "/proc/sys/net/ipv6/conf/all/*"} {
		files, err := filepath.Glob(pattern)
		require.NoError(t, err)
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil { // some are write-only
				got[f] = strings.TrimSpace(string(b))
			}
		}
	}
	require.NotEmpty(t, got)
	return got
}

// runtimeFiles lists everything under /run/kpbench and /run/netns but the directories a
// first run creates and leaves (empty) for the next.
func runtimeFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, root := range []string{"/run/kpbench", "/run/netns"} {
		err := filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			switch p {
			case "/run/kpbench", lab.DefaultRegistryDir, "/run/kpbench/state", "/run/netns":
			default:
				files = append(files, p)
			}
			return nil
		})
		require.NoError(t, err)
	}
	sort.Strings(files)
	return files
}
