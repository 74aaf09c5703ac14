//go:build linux

package kubelet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"kpbench.dev/kpbench/internal/netns"
)

// dialTimeout bounds a port-forward's connection to the pod's port.
const dialTimeout = 10 * time.Second

// dialInPod connects to the pod's port on its loopback, as a container runtime's
// port-forward does ("localhost:PORT" inside the pod's network namespace): the socket is
// made on a locked thread inside the namespace, then used from anywhere.
func dialInPod(ctx context.Context, nsPath string, port int32) (net.Conn, error) {
	var conn net.Conn
	err := netns.Do(nsPath, func() error {
		if err := netns.Guard(); err != nil {
			return err
		}
		d := net.Dialer{Timeout: dialTimeout}
		var errs []error
		for _, host := range []string{"127.0.0.1", "::1"} {
			c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(int(port))))
			if err == nil {
				conn = c
				return nil
			}
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
	return conn, err
}

// portForward copies between a port-forward's stream and a new connection to the pod's
// port, until either side ends, the request ends or the pod is torn down.
func (k *Kubelet) portForward(ctx context.Context, t podTarget, port int32, stream io.ReadWriteCloser) error {
	conn, err := dialInPod(ctx, t.sb.nsPath, port)
	if err != nil {
		return fmt.Errorf("port-forward to %s/%s port %d: %w", t.pod.Namespace, t.pod.Name, port, err)
	}
	splice(ctx, t.sb.ctx, conn, stream)
	return nil
}

// splice copies between a connection to a pod and a port-forward's stream, and closes the
// connection when the pod closes its side, the client resets the stream, or ctx or podCtx
// ends.
func splice(ctx, podCtx context.Context, conn net.Conn, stream io.ReadWriteCloser) {
	defer conn.Close()
	defer context.AfterFunc(podCtx, func() { _ = conn.Close() })()
	defer context.AfterFunc(ctx, func() { _ = conn.Close() })()
	go func() {
		if _, err := io.Copy(conn, stream); err != nil {
			_ = conn.Close() // the client reset the stream
			return
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.CloseWrite() // the client is done sending: tell the pod, which may answer
		}
	}()
	// The pair ends when the pod closes its side (or the client resets the stream, which
	// fails this copy's writes).
	_, _ = io.Copy(stream, conn)
}
