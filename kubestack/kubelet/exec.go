//go:build linux

package kubelet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"time"

	"github.com/creack/pty"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// execEnvPath is the PATH of an exec'd command: a container image's usual one.
const execEnvPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// outputDrain is how long an exec waits, once its command exited, for the pipes that a
// background child of the command may keep open, before it ends the streams.
const outputDrain = 2 * time.Second

// procExecutor runs the commands of `kubectl exec` as processes.
type procExecutor struct {
	// argv turns what to run into the command line of the process to start: the exec
	// helper's (RunPodExec), or in unit tests the command itself.
	argv func(podExecSpec) []string
	// isolate starts the process in new mount and UTS namespaces (the helper needs them).
	isolate bool
}

// helperExecutor starts the exec helper: prefix is its command line up to PodExecCommand
// included (the kpbench binary and "__podexec").
func helperExecutor(prefix []string) procExecutor {
	return procExecutor{isolate: true, argv: func(s podExecSpec) []string {
		return append(slices.Clone(prefix), s.args()...)
	}}
}

// execEnv is the environment of an exec'd command: PATH, HOSTNAME, HOME, TERM with a
// terminal, and the container's env entries that have a literal value (those from
// fieldRef, secrets or config maps are not resolved).
func execEnv(c *corev1.Container, hostname string, tty bool) []string {
	env := []string{execEnvPath, "HOSTNAME=" + hostname, "HOME=/root"}
	if tty {
		env = append(env, "TERM=xterm")
	}
	if c != nil {
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				env = append(env, e.Name+"="+e.Value)
			}
		}
	}
	return env
}

// run runs spec's command with the streams of an exec and returns its exit status as
// utilexec.ExitError when it is not 0 (128+N when killed by signal N). It ends the
// command's process group when ctx ends.
func (e procExecutor) run(ctx context.Context, spec podExecSpec, env []string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	argv := e.argv(spec)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	// The command dies with kpbench (the signal goes when the thread that forked it ends,
	// and os/exec forks from ordinary threads, which live as long as the process).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if e.isolate {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = outputDrain
	if tty {
		return e.runTTY(cmd, in, out, resize)
	}
	cmd.SysProcAttr.Setpgid = true // a group of its own, so that Cancel kills its children too
	if out != nil {
		cmd.Stdout = out
	}
	if errOut != nil {
		cmd.Stderr = errOut
	}
	var stdin io.WriteCloser
	if in != nil {
		var err error
		if stdin, err = cmd.StdinPipe(); err != nil {
			return err
		}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", argv[0], err)
	}
	if stdin != nil {
		// Not waited for: a command may exit without reading its input, which stays open.
		go func() {
			_, _ = io.Copy(stdin, in)
			_ = stdin.Close()
		}()
	}
	return exitStatus(cmd.Wait())
}

// runTTY runs cmd on a new pseudo-terminal, its controlling terminal, in a session of its
// own: in is the terminal's input, out its output (a terminal merges stderr into it), and
// resize events set its size.
func (e procExecutor) runTTY(cmd *exec.Cmd, in io.Reader, out io.Writer, resize <-chan remotecommand.TerminalSize) error {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return fmt.Errorf("open a terminal: %w", err)
	}
	defer ptmx.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, true, 0
	err = cmd.Start()
	_ = tty.Close() // the command's now
	if err != nil {
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	stop := make(chan struct{})
	defer close(stop)
	if resize != nil {
		go func() {
			for {
				select {
				case <-stop:
					return
				case size, ok := <-resize:
					if !ok {
						return
					}
					_ = pty.Setsize(ptmx, &pty.Winsize{Rows: size.Height, Cols: size.Width})
				}
			}
		}()
	}
	if in != nil {
		go func() { _, _ = io.Copy(ptmx, in) }()
	}
	if out == nil {
		out = io.Discard
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, ptmx) // ends with EIO once every holder of the terminal closed it
	}()
	werr := cmd.Wait()
	select {
	case <-copied:
	case <-time.After(outputDrain): // a background child holds the terminal
	}
	return exitStatus(werr)
}

// exitStatus turns Wait's error into the ExitError the streaming library reports to
// kubectl (nil for status 0).
func exitStatus(err error) error {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		if errors.Is(err, exec.ErrWaitDelay) {
			return nil // exited 0; a background child kept the output open
		}
		return err
	}
	code := ee.ExitCode()
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	if code == 0 {
		return nil
	}
	return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", code), Code: code}
}

// exec runs an exec request's command in a pod through the exec helper, in the pod's
// namespaces (see RunPodExec), until it exits, the request ends or the pod is torn down.
func (k *Kubelet) exec(ctx context.Context, t podTarget, container string, cmd []string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	binds, err := k.podFiles(t)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(t.sb.ctx, cancel)()
	hostname := podHostname(t.pod, k.opts.Node.Name)
	spec := podExecSpec{NetNS: t.sb.nsPath, Hostname: hostname, Root: k.execRoot, Binds: binds, Argv: cmd}
	c := podContainer(t.pod, container)
	if c != nil {
		spec.Dir = c.WorkingDir
	}
	return k.execer.run(ctx, spec, execEnv(c, hostname, tty), in, out, errOut, tty, resize)
}

// podContainer returns the spec of a pod's container (regular, init or ephemeral), or nil.
func podContainer(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			c := corev1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
			return &c
		}
	}
	return nil
}

// execRootDir makes the empty directory the exec helper mounts its private roots on (each
// in its own mount namespace: one directory serves every exec).
func execRootDir(stateDir string) (string, error) {
	dir := stateDir + "/exec-root"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("exec root: %w", err)
	}
	return dir, nil
}
