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
	"slices"
	"syscall"
	"time"

	"kpbench.dev/kpbench/internal/netns"
)

// The processes of containers (kindProcess), and the commands of exec probes and hooks,
// run as `kubectl exec` runs a command in a lab pod: through the exec helper (RunPodExec),
// in the pod's network namespace (the node's for a hostNetwork pod), a UTS namespace whose
// hostname is the pod's, and a private mount namespace with the pod's /etc/hosts,
// /etc/resolv.conf and /etc/hostname, a sysfs of the pod's network and /agnhost. One way
// into a pod serves containers, probes, hooks and exec alike; the helper replaces itself
// with the container's program, so the process the kubelet waits for is the container.
//
// Every child is forked from one thread of the kubelet that stays locked in the node's
// namespace for the kubelet's life (launcher.spawner): never from the host's namespace,
// and Pdeathsig (which fires when the forking thread ends) kills it only when kpbench
// dies. Each child leads its own process group, which is killed as a whole.

// launcher starts the processes of one node's containers.
type launcher struct {
	// spawner is the thread every child is forked from (see above).
	spawner *netns.Worker
	// helper is the exec helper's command line up to PodExecCommand (Options.ExecHelper),
	// and root the empty directory it mounts a pod's private root on.
	helper []string
	root   string
	// agnhost is the agnhost binary ("" when absent), which the pod files bind on /agnhost.
	agnhost string
}

// newLauncher starts the spawner thread in the node's namespace.
func newLauncher(nodeNetNS, agnhost string, helper []string, root string) (*launcher, error) {
	l := &launcher{agnhost: agnhost, helper: helper, root: root}
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

// startProcesses readies the kubelet to run processes in pods: the exec helper's root,
// the agnhost binary (if any) and the launcher.
func (k *Kubelet) startProcesses() error {
	root, err := execRootDir(k.opts.StateDir)
	if err != nil {
		return err
	}
	k.execRoot, k.execer = root, helperExecutor(k.opts.ExecHelper)
	agnhost := k.opts.Agnhost
	if st, err := os.Stat(agnhost); err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		k.log.Info("no agnhost binary: agnhost containers are emulated by the echo server where they can be, else not realisable", "path", agnhost)
		agnhost = ""
	}
	k.launcher, err = newLauncher(k.opts.Node.NetNSPath, agnhost, k.opts.ExecHelper, root)
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
	// binds are the pod's files mounted over the host's (Kubelet.podFiles), source first.
	binds [][2]string
}

// commandLine is the exec helper's command line that runs s.
func (l *launcher) commandLine(s procSpec) []string {
	spec := podExecSpec{NetNS: s.netns, Hostname: s.hostname, Root: l.root, Dir: s.dir, Binds: s.binds, Argv: s.argv}
	return append(slices.Clone(l.helper), spec.args()...)
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
	cmd := &exec.Cmd{Path: line[0], Args: line, Env: s.env, Dir: "/", Stdout: stdout, Stderr: stderr}
	// The helper needs mount and UTS namespaces of its own (RunPodExec).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS}
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
