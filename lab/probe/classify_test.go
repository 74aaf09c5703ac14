//go:build linux

package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"kpbench.dev/kpbench/internal/netns"
)

func TestClassify(t *testing.T) {
	opErr := func(op string, errno syscall.Errno) error {
		return fmt.Errorf("probe 10.96.0.1:80/TCP: connect: %w", &net.OpError{Op: op, Net: "tcp4", Err: os.NewSyscallError(op, errno)})
	}
	tests := []struct {
		name string
		err  error
		want ErrClass
	}{
		{"nil", nil, OK},
		{"RST to SYN", opErr("connect", syscall.ECONNREFUSED), Refused},
		{"ICMP port unreachable on UDP read", opErr("read", syscall.ECONNREFUSED), Refused},
		{"no route", opErr("connect", syscall.ENETUNREACH), Unreachable},
		{"ICMP host unreachable", opErr("connect", syscall.EHOSTUNREACH), Unreachable},
		{"reset while reading", opErr("read", syscall.ECONNRESET), Reset},
		{"broken pipe", opErr("write", syscall.EPIPE), Reset},
		{"deadline", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, Timeout},
		{"context deadline", fmt.Errorf("waiting for a worker: %w", context.DeadlineExceeded), Timeout},
		{"kernel gave up on SYN retries", opErr("connect", syscall.ETIMEDOUT), Timeout},
		{"cancelled", context.Canceled, Other},
		{"bad answer", errors.New(`parse echo answer "x": 1 fields`), Other},
		{"root namespace", fmt.Errorf("probe: %w", netns.ErrRootNamespace), Other},
		{"closed", ErrClosed, Other},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Classify(tt.err))
		})
	}
}

func TestErrClassString(t *testing.T) {
	tests := []struct {
		c    ErrClass
		want string
	}{
		{OK, "ok"}, {Refused, "refused"}, {Timeout, "timeout"}, {Unreachable, "unreachable"},
		{Reset, "reset"}, {Other, "other"}, {ErrClass(42), "other"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.c.String())
	}
}
