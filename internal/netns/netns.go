//go:build linux

// Package netns is the one careful place where kpbench enters network namespaces.
//
// A network namespace belongs to an OS thread, not to a goroutine. The rules this package
// follows, and that every caller must respect:
//
//   - A function that must run inside a namespace runs on a goroutine locked to its OS thread
//     (runtime.LockOSThread) that has switched with setns(2). Goroutines it starts do NOT
//     inherit the namespace.
//   - Sockets created while the thread is inside a namespace stay in that namespace for their
//     whole life, so listeners and probe sockets may be served by ordinary goroutines afterwards.
//   - Processes started (fork/exec) from such a thread inherit its namespace. That is how
//     iptables-restore, nft and ipset are run inside a node.
//   - Files under /proc/sys/net opened from such a thread belong to the namespace.
//   - If a thread cannot be switched back to the namespace it came from, it is never unlocked:
//     the goroutine exits while locked and the Go runtime destroys the thread.
//
// Named namespaces live at /run/netns/<name> (the iproute2 convention), so `ip netns exec`
// works on them too.
package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Dir is where named network namespaces are bind-mounted (iproute2's convention).
const Dir = "/run/netns"

// Prefix starts the name of every namespace and link that kpbench creates, so that leftovers
// of crashed runs can be found and swept.
const Prefix = "kpb"

// TestPrefix starts the names of throwaway namespaces made by tests, and by short-lived
// helpers such as backends/all.ToolVersions: `kpbt<pid>-<random>`. `kpbench lab down
// --all` leaves them alone while process pid runs.
// Lab namespaces are `kpb-<lab>-<host>`; the two forms never collide.
const TestPrefix = "kpbt"

// ErrRootNamespace is returned by Guard when the calling thread is in the host's initial
// network namespace, where lab traffic would leave the machine.
var ErrRootNamespace = errors.New("refusing to send: thread is in the host's root network namespace, not in a lab namespace")

// Path returns the bind-mount path of the named namespace.
func Path(name string) string { return filepath.Join(Dir, name) }

// Create makes a new named network namespace and returns its path. The calling thread's
// namespace is not changed. The loopback interface of the new namespace is still down.
//
// Equivalent to: `ip netns add $name`.
func Create(name string) (string, error) {
	if !strings.HasPrefix(name, Prefix) {
		return "", fmt.Errorf("create netns %q: name must start with %q", name, Prefix)
	}
	if err := prepareDir(); err != nil {
		return "", fmt.Errorf("create netns %q: %w", name, err)
	}
	err := onThreadIn(fmt.Sprintf("create netns %q", name), func() error {
		h, err := vnetns.NewNamed(name) // unshares this thread into the new namespace
		if err != nil {
			return fmt.Errorf("create netns %q: %w", name, err)
		}
		h.Close() // the name's bind mount keeps the namespace
		return nil
	}, func() error { return nil })
	if err != nil {
		return "", err
	}
	return Path(name), nil
}

// prepareDir makes Dir a shared mount point of its own, as iproute2 does on its first
// `ip netns add`. Without it, a later `ip netns add` bind-mounts Dir over itself and
// shadows every namespace mounted before: those can then be neither unmounted (EINVAL)
// nor removed (EBUSY) by path. Doing it first makes iproute2 find it done.
//
// Equivalent to: `mount --make-rshared /run/netns || (mount --rbind /run/netns /run/netns
// && mount --make-rshared /run/netns)`.
func prepareDir() error {
	if err := os.MkdirAll(Dir, 0o755); err != nil {
		return err
	}
	err := unix.Mount("", Dir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EINVAL) { // EINVAL: not a mount point yet
		return fmt.Errorf("make %s shared: %w", Dir, err)
	}
	if err := unix.Mount(Dir, Dir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s onto itself: %w", Dir, err)
	}
	if err := unix.Mount("", Dir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make %s shared: %w", Dir, err)
	}
	return nil
}

// Delete unmounts and removes a named namespace. The kernel frees the namespace once no
// process, socket or handle refers to it any more. Deleting a namespace that does not exist
// is not an error.
//
// Equivalent to: `ip netns delete $name`.
func Delete(name string) error {
	p := Path(name)
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("delete netns %q: unmount: %w", name, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete netns %q: %w", name, err)
	}
	return nil
}

// List returns the names of the named namespaces under Dir that start with prefix.
func List(prefix string) ([]string, error) {
	entries, err := os.ReadDir(Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list netns: %w", err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// Do runs fn on a locked OS thread that has entered the namespace at nsPath, and waits for
// it. Goroutines started by fn do not run in the namespace. Processes exec'd by fn do.
// If the thread cannot return to its original namespace it is destroyed, never reused.
func Do(nsPath string, fn func() error) error {
	target, err := vnetns.GetFromPath(nsPath)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", nsPath, err)
	}
	defer target.Close()
	return onThreadIn("netns "+nsPath, func() error {
		if err := vnetns.Set(target); err != nil {
			return fmt.Errorf("enter netns %s: %w", nsPath, err)
		}
		return nil
	}, fn)
}

// onThreadIn runs fn on a locked OS thread that enter has moved into another namespace,
// and waits for it; fn is not run when enter fails. The thread then goes back to the
// namespace it came from and is unlocked. A thread that cannot go back (enter may have
// left it anywhere) stays locked, and the runtime destroys it with its goroutine: it is
// never reused in the wrong namespace. what names the operation in errors.
func onThreadIn(what string, enter, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("%s: get current: %w", what, err)
			return
		}
		defer orig.Close()
		ferr := enter()
		if ferr == nil {
			ferr = fn()
		}
		if err := vnetns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("%s: restore thread namespace: %w", what, err))
			return // stays locked: the runtime destroys this thread
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Worker is a goroutine locked to an OS thread inside one namespace for its whole life. It
// runs submitted functions one at a time, so hot paths (probes, sysctls) pay for setns once.
// When the worker stops, its thread goes back to the namespace it came from before it is
// unlocked; a thread that cannot go back stays locked and dies. (A thread is not always
// destroyed by exiting locked: the process's main thread is parked instead, and would stay in
// the lab's namespace for the process's life, where /proc/self/net reads it.)
type Worker struct {
	nsPath string
	jobs   chan func()
	done   chan struct{}
}

// StartWorker starts a worker inside the namespace at nsPath.
func StartWorker(nsPath string) (*Worker, error) {
	target, err := vnetns.GetFromPath(nsPath)
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", nsPath, err)
	}
	w := &Worker{nsPath: nsPath, jobs: make(chan func()), done: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		defer close(w.done)
		runtime.LockOSThread()
		defer target.Close()
		orig, err := vnetns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			ready <- fmt.Errorf("netns %s: get current: %w", nsPath, err)
			return
		}
		defer orig.Close()
		if err := vnetns.Set(target); err != nil {
			if vnetns.Set(orig) == nil { // a failed setns may still have moved the thread
				runtime.UnlockOSThread()
			}
			ready <- fmt.Errorf("enter netns %s: %w", nsPath, err)
			return
		}
		ready <- nil
		for job := range w.jobs {
			job()
		}
		if vnetns.Set(orig) == nil {
			runtime.UnlockOSThread()
		} // else: stays locked, and the runtime destroys the thread with this goroutine
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return w, nil
}

// Run executes fn on the worker's thread and waits for it, or for ctx to end first (in which
// case fn may still run later, and its result is dropped).
func (w *Worker) Run(ctx context.Context, fn func() error) error {
	errc := make(chan error, 1)
	job := func() { errc <- fn() }
	select {
	case w.jobs <- job:
	case <-ctx.Done():
		return ctx.Err()
	case <-w.done:
		return fmt.Errorf("netns worker %s stopped", w.nsPath)
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Dial connects with d from inside the worker's namespace, after Guard: the socket belongs
// to that namespace, whichever thread reads or writes it later (HTTP clients that reach a
// lab address use it as their DialContext). It waits for the job whatever ctx does (the
// dial itself honours ctx), so that no connection is made after the caller gave up.
//
// Equivalent to: `ip netns exec $ns socat - TCP:$address`.
func (w *Worker) Dial(ctx context.Context, d *net.Dialer, network, address string) (net.Conn, error) {
	var c net.Conn
	err := w.Run(context.Background(), dialJob(ctx, d, network, address, &c))
	return c, err
}

// Dial connects with d from a thread inside the namespace at nsPath, after Guard: the
// socket stays in that namespace. For one dial; a client that dials often keeps a Worker.
//
// Equivalent to: `ip netns exec $ns socat - TCP:$address`.
func Dial(ctx context.Context, nsPath string, d *net.Dialer, network, address string) (net.Conn, error) {
	var c net.Conn
	err := Do(nsPath, dialJob(ctx, d, network, address, &c))
	return c, err
}

// dialJob is the job of Dial and Worker.Dial, run on a thread in the namespace: it sets *c.
func dialJob(ctx context.Context, d *net.Dialer, network, address string, c *net.Conn) func() error {
	return func() error {
		if err := Guard(); err != nil {
			return err
		}
		var err error
		*c, err = d.DialContext(ctx, network, address)
		return err
	}
}

// Stop ends the worker after the job it is running; its thread is back in its first
// namespace (or destroyed) when Stop returns.
func (w *Worker) Stop() {
	select {
	case <-w.done:
	default:
		close(w.jobs)
		<-w.done
	}
}

// nsID identifies a network namespace by the device and inode of its nsfs file.
type nsID struct{ dev, ino uint64 }

func statNS(path string) (nsID, bool) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nsID{}, false
	}
	return nsID{uint64(st.Dev), st.Ino}, true
}

// startNS is the namespace this process started in, read while package init runs on the
// main thread, before any code of ours can move a thread. It is never written again.
var startNS, startNSKnown = statNS("/proc/self/ns/net")

// InRootNamespace reports whether the calling thread is in the host's initial network
// namespace (the one of PID 1, when this process may read it) or in the namespace this
// process started in (kpbench is started from the host's namespace: it is never a lab
// namespace). When it cannot tell, it answers true, so that callers that guard sends fail
// closed.
func InRootNamespace() bool {
	self, ok := statNS("/proc/thread-self/ns/net")
	if !ok || !startNSKnown || self == startNS {
		return true
	}
	if root, ok := statNS("/proc/1/ns/net"); ok && self == root {
		return true
	}
	return false
}

// Guard returns ErrRootNamespace when the calling thread is in the host's root namespace.
// Every probe and client calls it, on the thread that owns its socket, before sending.
func Guard() error {
	if InRootNamespace() {
		return ErrRootNamespace
	}
	return nil
}

// LoopbackUp brings up the loopback interface of the namespace at nsPath (a fresh namespace
// has it down, and IPVS refuses real servers until it is up).
//
// Equivalent to: `ip -n $ns link set lo up`.
func LoopbackUp(nsPath string) error {
	h, err := vnetns.GetFromPath(nsPath)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", nsPath, err)
	}
	defer h.Close()
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		return fmt.Errorf("netlink handle in %s: %w", nsPath, err)
	}
	defer nl.Close()
	lo, err := nl.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("lo in %s: %w", nsPath, err)
	}
	if err := nl.LinkSetUp(lo); err != nil {
		return fmt.Errorf("lo up in %s: %w", nsPath, err)
	}
	return nil
}
