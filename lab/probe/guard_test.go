//go:build linux

package probe

import (
	"context"
	"net/netip"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/lab/echo"
)

// requireHostNamespace skips when the test itself runs inside a lab-like namespace (e.g.
// under `ip netns exec`), where there is no root-namespace refusal to test; CI runs it
// in the host's namespace, where it must run (testutil.Missing).
func requireHostNamespace(t *testing.T) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if !netns.InRootNamespace() {
		testutil.Missing(t, "the test process does not run in the host's network namespace")
	}
}

// TestProbeRefusesRootNamespace runs the probe path of every Prober worker on the test's
// own thread, which is in the host's namespace: it must refuse before creating a socket.
// It needs no root.
func TestProbeRefusesRootNamespace(t *testing.T) {
	requireHostNamespace(t)
	// TEST-NET-1: even if a probe leaked, it would go nowhere.
	dst := netip.MustParseAddrPort("192.0.2.1:80")
	tests := []struct {
		name   string
		target Destination
		m      mode
		src    uint16
	}{
		{"tcp request", Destination{Addr: dst, Protocol: echo.TCP}, modeRequest, 0},
		{"tcp connect", Destination{Addr: dst, Protocol: echo.TCP}, modeConnect, 0},
		{"tcp from a fixed port", Destination{Addr: dst, Protocol: echo.TCP}, modeRequest, 40000},
		{"udp request", Destination{Addr: dst, Protocol: echo.UDP}, modeRequest, 0},
		{"udp from a fixed port", Destination{Addr: dst, Protocol: echo.UDP}, modeRequest, 40000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sockets atomic.Int32
			d := dialer{control: func(string, string, syscall.RawConn) error {
				sockets.Add(1)
				return nil
			}}
			runtime.LockOSThread()
			res := probeWith(context.Background(), d.dial, tt.target, Options{Timeout: time.Second, SourcePort: tt.src}, tt.m)
			runtime.UnlockOSThread()
			require.ErrorIs(t, res.Err, netns.ErrRootNamespace)
			assert.Equal(t, Other, res.Class)
			assert.Zero(t, sockets.Load(), "a socket was created")
			assert.Zero(t, res.Connect)
			assert.False(t, res.Local.IsValid())
		})
	}
}

// TestNewRefusesRootNamespace checks that a Prober cannot be started in the host's
// namespace. /proc/1/ns/net is refused by the guard where it can be opened, and by the
// kernel where even root may not open it (as on the project's VM).
func TestNewRefusesRootNamespace(t *testing.T) {
	testutil.RequireRoot(t)
	requireHostNamespace(t)
	tests := []struct {
		name   string
		nsPath string
		guard  bool // the refusal must come from netns.Guard
	}{
		// The test goroutine is not locked, so its thread is in the namespace the process
		// started in (no unlocked thread ever leaves it).
		{"own namespace", "/proc/thread-self/ns/net", true},
		{"pid 1", "/proc/1/ns/net", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.nsPath, WithWorkers(2))
			require.Error(t, err)
			assert.Nil(t, p)
			if tt.guard {
				assert.ErrorIs(t, err, netns.ErrRootNamespace)
			}
		})
	}
}
