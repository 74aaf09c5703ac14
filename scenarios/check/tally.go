//go:build linux

package check

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	"kpbench.dev/kpbench/lab/probe"
)

// Tally is what a series of probes to one target observed.
type Tally struct {
	// N is the number of probes sent.
	N int
	// Classes counts outcomes by class (ok, refused, timeout, ...).
	Classes map[probe.ErrClass]int
	// Pods counts answers by the pod that gave them.
	Pods map[string]int
	// Clients counts the client addresses the pods saw.
	Clients map[netip.Addr]int
	// FirstErr is the first failure, as evidence.
	FirstErr error
	// Slow counts refusals that took longer than RefusalDeadline (the e2e test wants a
	// refusal "within 3s", not after a retransmission).
	Slow int
}

// RefusalDeadline is how quickly a refusal must come to count as one.
const RefusalDeadline = 3 * time.Second

// Requester sends one probe and reads its answer; the lab's *probe.Prober is one.
type Requester interface {
	Request(ctx context.Context, target probe.Destination, opts probe.Options) probe.Result
}

// ProbeN sends n probes (new connections, or datagrams from new ports unless
// opts.SourcePort fixes one) to target, interval apart, and tallies the outcomes. A ctx
// that ends stops it early (N counts what was sent).
func ProbeN(ctx context.Context, pr Requester, target probe.Destination, n int, opts probe.Options, interval time.Duration) Tally {
	t := Tally{Classes: map[probe.ErrClass]int{}, Pods: map[string]int{}, Clients: map[netip.Addr]int{}}
	for i := range n {
		if i > 0 && interval > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(interval):
			}
		}
		if ctx.Err() != nil {
			break
		}
		start := time.Now()
		res := pr.Request(ctx, target, opts)
		t.N++
		class := res.Class
		if class == probe.Refused && time.Since(start) > RefusalDeadline {
			t.Slow++
			class = probe.Timeout
		}
		t.Classes[class]++
		if res.Err != nil {
			if t.FirstErr == nil {
				t.FirstErr = res.Err
			}
			continue
		}
		t.Pods[res.Answer.Pod]++
		t.Clients[res.Answer.Client.Addr()]++
	}
	return t
}

// OK is the number of answered probes.
func (t Tally) OK() int { return t.Classes[probe.OK] }

// ClassSummary renders the outcome counts, e.g. "ok=58 timeout=2".
func (t Tally) ClassSummary() string {
	var parts []string
	for c, k := range t.Classes {
		parts = append(parts, fmt.Sprintf("%s=%d", c, k))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}
