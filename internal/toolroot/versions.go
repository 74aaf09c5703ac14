package toolroot

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Tool is one program a root must hold, and the Debian package that ships it.
type Tool struct {
	// Name is the program ("nft", "iptables-legacy").
	Name string
	// Package is the Debian package that ships it ("nftables").
	Package string
	// Args print its version ("--version").
	Args []string
}

// Tools lists the programs of a root, in the order they are shown: nft, both iptables
// flavours (iptables is the nf_tables one in Debian's default alternatives), ipset,
// conntrack, ipvsadm.
func Tools() []Tool {
	v := []string{"--version"}
	return []Tool{
		{"nft", "nftables", v},
		{"iptables", "iptables", v},
		{"iptables-legacy", "iptables", v},
		{"ipset", "ipset", v},
		{"conntrack", "conntrack", v},
		{"ipvsadm", "ipvsadm", v},
	}
}

// Packages are the Debian packages a root is built with: those of Tools.
func Packages() []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range Tools() {
		if !seen[t.Package] {
			seen[t.Package] = true
			out = append(out, t.Package)
		}
	}
	return out
}

// ToolVersion is what is known of one tool of a root.
type ToolVersion struct {
	// Tool is the program's name.
	Tool string `json:"tool"`
	// Version is the first line the program printed for its version flag, e.g. "nftables
	// v1.1.3 (Commodore Bullmoose #4)"; empty when it failed (ipvsadm needs IPVS in the
	// kernel to print it).
	Version string `json:"version,omitempty"`
	// Error is why Version is empty ("" when it is not).
	Error string `json:"error,omitempty"`
	// Package and PackageVersion are the Debian package and its version from the root's
	// dpkg status ("nftables", "1.1.3-1"); empty when dpkg does not know the tool.
	Package        string `json:"package,omitempty"`
	PackageVersion string `json:"packageVersion,omitempty"`
}

// Versions are the versions of a root's Tools, in their order.
type Versions []ToolVersion

// Get returns the version of tool: the line it printed, else "<package> <version>" from
// dpkg, else "".
func (v Versions) Get(tool string) string {
	for _, t := range v {
		if t.Tool != tool {
			continue
		}
		switch {
		case t.Version != "":
			return t.Version
		case t.PackageVersion != "":
			return t.Package + " " + t.PackageVersion + " (dpkg)"
		}
	}
	return ""
}

// ReadVersions describes the Tools of the root dir ("/" for the host): each tool is run
// with its version flag (inside a chroot unless dir is "/", which needs root), and the
// packages' versions are read from dir/var/lib/dpkg/status. A tool that is missing or fails
// is described by its Error; ReadVersions fails only when the root has no nft at all.
func ReadVersions(ctx context.Context, dir string) (Versions, error) {
	pkgs, err := dpkgVersions(filepath.Join(dir, "var/lib/dpkg/status"))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	var out Versions
	for _, t := range Tools() {
		tv := ToolVersion{Tool: t.Name}
		if v, ok := pkgs[t.Package]; ok {
			tv.Package, tv.PackageVersion = t.Package, v
		}
		line, err := runVersion(ctx, dir, t)
		if err != nil {
			tv.Error = err.Error()
		} else {
			tv.Version = line
		}
		out = append(out, tv)
	}
	if out[0].Version == "" && out[0].PackageVersion == "" {
		return out, fmt.Errorf("root %s: no usable nft: %s", dir, out[0].Error)
	}
	return out, nil
}

// binDirs are where a root's programs are looked for, in PATH order.
func binDirs() []string { return []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin"} }

// lookPathIn finds a program inside root without following its last symlink (Debian's
// /usr/sbin/iptables points at /etc/alternatives/iptables, an absolute path inside the
// root). It returns the path as seen inside the root.
func lookPathIn(root, name string) (string, error) {
	for _, d := range binDirs() {
		p := filepath.Join(d, name)
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in %s of %s", name, strings.Join(binDirs(), ", "), root)
}

// runVersion runs the tool's version command in dir's root and returns its first line.
func runVersion(ctx context.Context, dir string, t Tool) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var c *exec.Cmd
	if dir == "/" {
		p, err := exec.LookPath(t.Name)
		if err != nil {
			return "", err
		}
		c = exec.CommandContext(ctx, p, t.Args...)
	} else {
		p, err := lookPathIn(dir, t.Name)
		if err != nil {
			return "", err
		}
		c = ChrootCommand(ctx, dir, p, t.Args...)
	}
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	line := firstLine(out.String())
	if err != nil {
		if line != "" {
			return "", fmt.Errorf("%s: %w: %s", t.Name, err, line)
		}
		return "", fmt.Errorf("%s: %w", t.Name, err)
	}
	return line, nil
}

// ChrootCommand returns a command that runs path (a path inside root) with args in root:
// chroot(root) then execve, as `chroot ROOT PATH ARGS...` does, with a minimal environment
// (PATH of the root, LC_ALL=C). It needs CAP_SYS_CHROOT. The command inherits the calling
// thread's network namespace, like any exec.
func ChrootCommand(ctx context.Context, root, path string, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, path, args...)
	// Without Path set to an absolute name, exec would look it up on the host's PATH.
	c.Path = path
	c.Dir = "/"
	c.Env = []string{"PATH=" + strings.Join(binDirs(), ":"), "LC_ALL=C"}
	c.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	return c
}

// firstLine is the first non-empty line of s, trimmed.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

// dpkgVersions reads the installed packages' versions from a dpkg status file.
func dpkgVersions(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseDpkgStatus(f)
}

// parseDpkgStatus reads the stanzas of a dpkg status file and returns the version of every
// package whose status is "install ok installed".
func parseDpkgStatus(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	var pkg, version, status string
	flush := func() {
		if pkg != "" && version != "" && status == "install ok installed" {
			out[pkg] = version
		}
		pkg, version, status = "", "", ""
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		if strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
			continue // continuation of a multi-line field
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "Package":
			pkg = strings.TrimSpace(v)
		case "Version":
			version = strings.TrimSpace(v)
		case "Status":
			status = strings.TrimSpace(v)
		}
	}
	flush()
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("dpkg status: %w", err)
	}
	return out, nil
}
