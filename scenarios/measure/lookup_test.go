//go:build linux

package measure

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/cluster"
	"kpbench.dev/kpbench/lab/probe"
	"kpbench.dev/kpbench/reports"
)

// clockProber answers every probe with the current "machine slowness": each connect
// takes 10 µs × slow and each request over the kept connection 5 µs × slow; slow goes
// up by one after every request (the machine gets busier round by round). Connect
// number failAt (1-based) fails.
type clockProber struct {
	slow     float64
	connects int
	failAt   int
	noDial   bool
}

func (p *clockProber) Request(context.Context, probe.Destination, probe.Options) probe.Result {
	return probe.Result{Err: errors.New("not scripted")}
}

func (p *clockProber) Connect(context.Context, probe.Destination, probe.Options) probe.Result {
	p.connects++
	if p.connects == p.failAt {
		return probe.Result{Err: errors.New("timeout")}
	}
	d := time.Duration(10e3 * p.slow)
	return probe.Result{Connect: d, Total: d}
}

func (p *clockProber) Dial(context.Context, probe.Destination, probe.Options) (cluster.Conn, error) {
	if p.noDial {
		return nil, cluster.ErrNotAvailable
	}
	return clockConn{p}, nil
}

func (p *clockProber) DialContext(context.Context, string, string) (net.Conn, error) {
	return nil, cluster.ErrNotAvailable
}

type clockConn struct{ p *clockProber }

func (c clockConn) Request(context.Context) probe.Result {
	d := time.Duration(5e3 * c.p.slow)
	c.p.slow++
	return probe.Result{Total: d}
}
func (clockConn) Close() error { return nil }

// TestLookupInterleavesTheControl: the established control is taken in every round,
// after that round's connects, so that sample i of each position and of the control saw
// the same machine (their ratio is constant here while the machine slows 5x); a round
// with a failed connect is dropped whole; a prober without kept connections measures
// no control.
func TestLookupInterleavesTheControl(t *testing.T) {
	ap := netip.MustParseAddrPort("10.96.0.1:80")
	targets := map[string]netip.AddrPort{"first": ap, "last": ap}
	t.Run("paired", func(t *testing.T) {
		ms, err := Lookup(context.Background(), &clockProber{slow: 1, failAt: 3}, "h", targets, 5, nil)
		require.NoError(t, err)
		require.Len(t, ms, 3)
		ctl := ms[2]
		assert.Equal(t, "established", ctl.Params["kind"])
		assert.Equal(t, 1.0, ctl.Extra[reports.ExtraInterleaved])
		for _, m := range ms[:2] {
			require.Len(t, m.Samples, len(ctl.Samples), m.Params["position"])
			for i := range m.Samples {
				assert.InDelta(t, 2.0, m.Samples[i]/ctl.Samples[i], 1e-9, "%s round %d", m.Params["position"], i)
			}
		}
		assert.Len(t, ctl.Samples, 5)
	})
	t.Run("no kept connection", func(t *testing.T) {
		ms, err := Lookup(context.Background(), &clockProber{slow: 1, noDial: true}, "h", targets, 4, nil)
		require.NoError(t, err)
		require.Len(t, ms, 2)
		assert.Len(t, ms[0].Samples, 4)
	})
	t.Run("too many failures", func(t *testing.T) {
		p := &clockProber{slow: 1}
		p.failAt = 1
		_, err := Lookup(context.Background(), &alwaysFail{p}, "h", targets, 4, nil)
		require.ErrorContains(t, err, "timeout")
	})
}

// alwaysFail fails every connect.
type alwaysFail struct{ *clockProber }

func (a *alwaysFail) Connect(context.Context, probe.Destination, probe.Options) probe.Result {
	return probe.Result{Err: errors.New("timeout")}
}
