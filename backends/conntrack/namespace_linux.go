//go:build linux

package conntrack

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/ti-mo/conntrack"
	"golang.org/x/sys/unix"

	"kpbench.dev/kpbench/internal/netns"
)

// Namespace is the conntrack table of the network namespace at Path, over netlink.
type Namespace struct{ Path string }

// DeleteMatching dumps the table and deletes matching entries one by one, on a socket
// opened inside the namespace (internal/netns.Do; the socket stays there).
//
// Equivalent to: `conntrack -D -p udp --orig-dst $svcIP --orig-port-dst $port --reply-src $ep`.
func (c Namespace) DeleteMatching(ctx context.Context, match func(Flow) bool) (int, error) {
	deleted := 0
	err := netns.Do(c.Path, func() error {
		conn, err := conntrack.Dial(nil)
		if err != nil {
			return fmt.Errorf("conntrack dial: %w", err)
		}
		defer conn.Close()
		flows, err := conn.Dump(nil)
		if err != nil {
			return fmt.Errorf("conntrack dump: %w", err)
		}
		var errs []error
		for _, f := range flows {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fl := Flow{
				Proto:    f.TupleOrig.Proto.Protocol,
				OrigSrc:  netip.AddrPortFrom(f.TupleOrig.IP.SourceAddress, f.TupleOrig.Proto.SourcePort),
				OrigDst:  netip.AddrPortFrom(f.TupleOrig.IP.DestinationAddress, f.TupleOrig.Proto.DestinationPort),
				ReplySrc: netip.AddrPortFrom(f.TupleReply.IP.SourceAddress, f.TupleReply.Proto.SourcePort),
			}
			if !match(fl) {
				continue
			}
			if err := conn.Delete(f); err != nil {
				if !errors.Is(err, unix.ENOENT) { // gone meanwhile: what we wanted
					errs = append(errs, fmt.Errorf("conntrack delete %v: %w", fl, err))
				}
				continue
			}
			deleted++
		}
		return errors.Join(errs...)
	})
	return deleted, err
}
