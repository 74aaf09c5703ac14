//go:build linux

package toolroot

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fmt"
	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/testutil"
)

// EnvPrepare makes TestPrepareTrixie build the debian:trixie root when the cache lacks it
// (1-2.5 min here, and it needs Debian's mirror).
const EnvPrepare = "KPBENCH_TOOLS_PREPARE"

// TestPrepareTrixie prepares (or reuses) the debian:trixie root in the default cache, then
// runs its tools the way the backends will: chroot into the root inside a kpb namespace,
// program a table with trixie's nft and read it back, and check that the versions are
// trixie's (nft 1.1.x, iptables 1.8.11), not the host's.
func TestPrepareTrixie(t *testing.T) {
	testutil.RequireRoot(t)
	trixie := Spec{"debian", "trixie"}
	var c Cache
	root, err := c.Resolve(trixie)
	switch {
	case err == nil:
		t.Logf("reusing %s, prepared %s in %s", root.Dir, root.Info.Prepared.Format(time.RFC3339), root.Info.Took.Round(time.Second))
	case os.Getenv(EnvPrepare) != "1":
		// make test prepares it first (make tools-matrix): CI fails without it.
		testutil.Missing(t, fmt.Sprintf("debian:trixie is not prepared (%v), and building it takes 1-2.5 min from Debian's mirror: run make tools-matrix, or set %s=1 to build it here", err, EnvPrepare))
	default:
		var progress bytes.Buffer
		start := time.Now()
		root, err = c.Prepare(context.Background(), trixie, PrepareOptions{Progress: &progress})
		require.NoError(t, err, "output:\n%s", progress.String())
		t.Logf("prepared %s in %s (%d MB)", root.Dir, time.Since(start).Round(time.Second), root.Info.Bytes>>20)
	}
	assert.Regexp(t, `^nftables v1\.1\.\d+ `, root.Info.Versions.Get("nft"))
	assert.Regexp(t, `^iptables v1\.8\.1\d+ \(nf_tables\)`, root.Info.Versions.Get("iptables"))
	assert.Regexp(t, `^iptables v1\.8\.1\d+ \(legacy\)`, root.Info.Versions.Get("iptables-legacy"))
	assert.NotEmpty(t, root.Info.Versions.Get("ipset"))
	assert.NotEmpty(t, root.Info.Versions.Get("conntrack"))
	assert.NotEmpty(t, root.Info.Versions.Get("ipvsadm"), "printed, or dpkg's version without IPVS")

	_, nsPath := testutil.NewNetNS(t)
	ctx := context.Background()
	var listed bytes.Buffer
	err = netns.Do(nsPath, func() error {
		add := ChrootCommand(ctx, root.ChrootDir(), "/usr/sbin/nft", "-f", "-")
		add.Stdin = strings.NewReader("table ip kpb-toolroot {\n set s { type ipv4_addr; elements = { 10.0.0.1 } }\n}\n")
		if out, err := add.CombinedOutput(); err != nil {
			return &cmdError{err, out}
		}
		list := ChrootCommand(ctx, root.ChrootDir(), "/usr/sbin/nft", "list", "table", "ip", "kpb-toolroot")
		list.Stdout, list.Stderr = &listed, &listed
		return list.Run()
	})
	require.NoError(t, err, listed.String())
	assert.Contains(t, listed.String(), "10.0.0.1")
}

// cmdError is a command's error with its output.
type cmdError struct {
	err error
	out []byte
}

func (e *cmdError) Error() string { return e.err.Error() + ": " + string(e.out) }

// TestReadVersionsHost reads the host's own tools' versions (make deps installs them; CI
// fails without them).
func TestReadVersionsHost(t *testing.T) {
	if _, err := os.Stat("/usr/sbin/nft"); err != nil {
		testutil.Missing(t, "the host has no nft (make deps installs it)")
	}
	v, err := ReadVersions(context.Background(), "/")
	require.NoError(t, err)
	require.Len(t, v, len(Tools()))
	assert.Regexp(t, `^nftables v\d+\.\d+`, v.Get("nft"))
	assert.Regexp(t, `^iptables v\d+\.\d+\.\d+ \(nf_tables\)`, v.Get("iptables"))
	assert.Regexp(t, `^iptables v\d+\.\d+\.\d+ \(legacy\)`, v.Get("iptables-legacy"))
}
