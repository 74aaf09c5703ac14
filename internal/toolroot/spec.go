// Package toolroot prepares and finds the userspace tools a backend runs: the host's own
// (nft, iptables, ipset, conntrack, ipvsadm on PATH), or those of a Debian release installed
// in a root directory built once with mmdebstrap and cached under
// /var/cache/kpbench/tools/<id>/root, e.g. /var/cache/kpbench/tools/debian-trixie/root.
//
// A root is chroot-able: `chroot ROOT nft --version` runs trixie's nft with trixie's
// libraries against the running kernel. The backends run their tools from it inside each
// node's network namespace; this package only builds, lists and describes roots.
//
// Layout of the cache (Cache.Dir):
//
//	<id>/root        the Debian root (usr/sbin/nft, var/lib/dpkg/status, ...)
//	<id>/info.json   Info: how and when it was built, the tools' versions
//	.lock-<id>       flock that serialises builders of <id>
//	.tmp-<id>-*      a build in progress, renamed to <id> when complete
package toolroot

import (
	"fmt"
	"regexp"
	"strings"
)

// HostSpec is the --tools value for the host's own tools, the default.
const HostSpec = "host"

// Spec names a set of tools: the host's, or a distribution release's ("debian:trixie").
type Spec struct {
	// Distro is "" for the host, else the distribution ("debian").
	Distro string
	// Suite is the release's suite or code name ("trixie", "bookworm", "sid").
	Suite string
}

// Host is the Spec of the host's own tools.
var Host = Spec{}

// IsHost reports whether s names the host's own tools.
func (s Spec) IsHost() bool { return s.Distro == "" }

// String is the form Parse reads: "host" or "debian:trixie".
func (s Spec) String() string {
	if s.IsHost() {
		return HostSpec
	}
	return s.Distro + ":" + s.Suite
}

// ID is the cache directory name: "debian-trixie" ("host" for the host).
func (s Spec) ID() string {
	if s.IsHost() {
		return HostSpec
	}
	return s.Distro + "-" + s.Suite
}

// suiteRE is what a Debian suite or code name looks like: trixie, bookworm-backports, sid.
var suiteRE = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

// Parse reads a --tools value: "host", or "DISTRO:SUITE" with a distribution this package
// can build (see Distros).
func Parse(s string) (Spec, error) {
	s = strings.TrimSpace(s)
	if s == HostSpec || s == "" {
		return Host, nil
	}
	distro, suite, ok := strings.Cut(s, ":")
	if !ok {
		return Spec{}, fmt.Errorf("tools %q: want %q or DISTRO:SUITE such as debian:trixie", s, HostSpec)
	}
	if _, known := distros()[distro]; !known {
		return Spec{}, fmt.Errorf("tools %q: unknown distribution %q (known: %s)", s, distro, strings.Join(Distros(), ", "))
	}
	if !suiteRE.MatchString(suite) {
		return Spec{}, fmt.Errorf("tools %q: suite %q: want a release name such as trixie or bookworm", s, suite)
	}
	return Spec{Distro: distro, Suite: suite}, nil
}
