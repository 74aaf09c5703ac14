//go:build linux

package kubelet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"kpbench.dev/kpbench/internal/netns"
)

// The processes of containers (kindProcess), and the commands of exec probes and hooks,
// run on the host's file system with the pod's network namespace (the node's for a
// hostNetwork pod), a UTS namespace of their own whose hostname is the pod's, and a
// private mount namespace in which the pod's /etc/hosts and /etc/resolv.conf (and the
// agnhost binary at /agnhost, where the host has that path to mount it on) are bind
// mounts. A container-less exec, as `kubectl exec` into a lab pod is.
//
// Entering namespaces is per thread and a mount namespace needs a single-threaded caller,
// so no goroutine of kpbench ever enters them: util-linux does it in the child, before the
// container's program is exec'd, in the one process that becomes the container
// (nothing forks):
//
//	nsenter --net=<pod netns> -- unshare --uts --mount --propagation private -- \
//	    /bin/sh -c '<set hostname, bind the pod files>; exec "$@"' ... <argv>
//
// Every child is forked from one thread of the kubelet that stays locked in the node's
// namespace for the kubelet's life (launcher.spawner): never from the host's namespace,
// and Pdeathsig (which fires when the forking thread ends) kills it only when kpbench
// dies. Each child leads its own process group, which is killed as a whole.

// containerSetup is the script that prepares a container's namespaces before its program
// runs: $1 hostname, $2 hosts file, $3 resolv.conf, $4 agnhost binary to mount on
// /agnhost (or ""); the program and its arguments follow. A setup failure exits 128, as
// a container runtime's StartError does.
const containerSetup = `hostname "$1" && mount --bind "$2" /etc/hosts && mount --bind "$3" /etc/resolv.conf && { [ -z "$4" ] || mount --bind "$4" /agnhost; } || exit 128
shift 4
exec "$@"`

// launcher starts the processes of one node's containers.
type launcher struct {
	// spawner is the thread every child is forked from (see above).
	spawner *netns.Worker
	// nsenter, unshare and sh are the util-linux and shell programs of the host.
	nsenter, unshare, sh string
	// agnhost is the agnhost binary ("" when absent); mountAgnhost says the host has an
	// /agnhost to bind it on, else an argv[0] of /agnhost is replaced by the binary's path.
	agnhost      string
	mountAgnhost bool
}

// newLauncher finds the tools and starts the spawner thread in the node's namespace.
func newLauncher(nodeNetNS, agnhost string) (*launcher, error) {
	l := &launcher{agnhost: agnhost}
	for _, t := range []struct {
		dst  *string
		name string
	}{{&l.nsenter, "nsenter"}, {&l.unshare, "unshare"}, {&l.sh, "sh"}} {
		p, err := exec.LookPath(t.name)
		if err != nil {
			return nil, fmt.Errorf("container processes need %s (util-linux): %w", t.name, err)
		}
		*t.dst = p
	}
	if st, err := os.Stat(agnhostEntrypoint); err == nil && st.Mode().IsRegular() && agnhost != "" {
		l.mountAgnhost = true
	}
	var err error
	if l.spawner, err = netns.StartWorker(nodeNetNS); err != nil {
		return nil, fmt.Errorf("container process spawner: %w", err)
	}
	return l, nil
}

// stop ends the spawner thread (after every child is gone).
func (l *launcher) stop() {
	if l != nil && l.spawner != nil {
		l.spawner.Stop()
	}
}

// startProcesses readies the kubelet to run processes: the agnhost binary (if any) and
// the launcher.
func (k *Kubelet) startProcesses() error {
	agnhost := k.opts.Agnhost
	if st, err := os.Stat(agnhost); err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		k.log.Info("no agnhost binary: agnhost containers are emulated by the echo server where they can be, else not realisable", "path", agnhost)
		agnhost = ""
	}
	var err error
	k.launcher, err = newLauncher(k.opts.Node.NetNSPath, agnhost)
	return err
}

// stopProcesses ends the launcher (the pod workers killed every process before) and
// removes a temporary state directory.
func (k *Kubelet) stopProcesses() {
	k.launcher.stop()
	if k.ownStateDir {
		_ = os.RemoveAll(k.opts.StateDir)
	}
}

// procSpec is one process to run in a pod.
type procSpec struct {
	// argv is the program and its arguments, $(VAR) references expanded.
	argv []string
	// env is the process's whole environment (runtimeEnv).
	env []string
	// dir is the working directory ("" is /).
	dir string
	// netns is the network namespace: the pod's, or the node's for a hostNetwork pod.
	netns string
	// hostname is the UTS namespace's hostname.
	hostname string
	// hosts and resolv are the files bind-mounted on /etc/hosts and /etc/resolv.conf.
	hosts, resolv string
}

// commandLine is the whole command line that runs s (see the comment at the top).
func (l *launcher) commandLine(s procSpec) []string {
	argv := append([]string(nil), s.argv...)
	if len(argv) > 0 && isAgnhostPath(argv[0]) && l.agnhost != "" && !l.mountAgnhost {
		argv[0] = l.agnhost
	}
	mount := ""
	if l.mountAgnhost {
		mount = l.agnhost
	}
	return append([]string{
		l.nsenter, "--net=" + s.netns, "--",
		l.unshare, "--uts", "--mount", "--propagation", "private", "--",
		l.sh, "-c", containerSetup, "kpbench-container", s.hostname, s.hosts, s.resolv, mount,
	}, argv...)
}

// proc is a running container process.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it is reaped
	// state is its exit status, set before done is closed.
	state *os.ProcessState
}

// start starts s with its stdout and stderr going to files (the child writes to them
// directly) and returns once it runs; the returned proc's done closes when it ends.
func (l *launcher) start(ctx context.Context, s procSpec, stdout, stderr *os.File) (*proc, error) {
	line := l.commandLine(s)
	cmd := &exec.Cmd{Path: line[0], Args: line, Env: s.env, Dir: s.dir, Stdout: stdout, Stderr: stderr}
	if cmd.Dir == "" {
		cmd.Dir = "/"
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := l.spawner.Run(ctx, cmd.Start); err != nil {
		return nil, fmt.Errorf("start %s: %w", filepath.Base(s.argv[0]), err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit status is in ProcessState
		p.state = cmd.ProcessState
		close(p.done)
	}()
	return p, nil
}

// signal sends sig to the process itself (as a container runtime stops PID 1).
func (p *proc) signal(sig syscall.Signal) {
	_ = p.cmd.Process.Signal(sig)
}

// kill sends SIGKILL to the process's whole group and waits up to wait for it to end; it
// reports whether it ended.
func (p *proc) kill(wait time.Duration) bool {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
		return true
	case <-time.After(wait):
		return false
	}
}

// exitCode is the process's exit code as a container runtime reports it: its status, or
// 128+signal when a signal ended it.
func exitCode(st *os.ProcessState) int32 {
	if st == nil {
		return ExitCodeKilled
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int32(ws.Signal())
	}
	return int32(st.ExitCode())
}

// maxExecOutput bounds what an exec probe or hook keeps of its output (a kubelet keeps
// 10 KiB of a probe's).
const maxExecOutput = 10 << 10

// errExecTimeout is the error of an exec that outlived its timeout.
var errExecTimeout = errors.New("command timed out")

// run runs s to completion, killed when ctx ends, and returns its exit code and the first
// maxExecOutput bytes of its combined output. It is the exec of probes and hooks, which
// the kubelet API's exec (kubectl exec) does too, with a terminal and streams.
func (l *launcher) run(ctx context.Context, s procSpec) (int32, []byte, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return 0, nil, err
	}
	p, err := l.start(ctx, s, w, w)
	w.Close()
	if err != nil {
		r.Close()
		return 0, nil, err
	}
	var out bytes.Buffer
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(&out, io.LimitReader(r, maxExecOutput))
		_, _ = io.Copy(io.Discard, r)
		close(copied)
	}()
	select {
	case <-p.done:
	case <-ctx.Done():
		p.kill(5 * time.Second)
		r.Close()
		<-copied
		return 0, out.Bytes(), fmt.Errorf("%s: %w", s.argv[0], errExecTimeout)
	}
	// A child the command left behind may hold the pipe open: its group goes too.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-copied
	r.Close()
	return exitCode(p.state), out.Bytes(), nil
}
