//go:build linux

package kubelet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kpbench.dev/kpbench/lab/echo"
)

// killWait bounds how long a killed process group may take to be reaped.
const killWait = 5 * time.Second

// container is one container of a pod worker: its spec, how it is realised, and its
// current instance.
type container struct {
	r   runnable
	run containerRun
	// spec is the current instance's process: its namespaces and environment (every kind:
	// exec probes and hooks run with them), and its argv (kindProcess).
	spec procSpec
	srv  *echo.Server // kindEcho: nil when not running, or running without ports
	proc *proc        // kindProcess: nil when not running
	// probes is the context of the instance's probes and hooks; cancelProbes ends it.
	probes       context.Context
	cancelProbes context.CancelFunc
	retryAt      time.Time
	backoff      time.Duration
	// announced: the event saying the container cannot be realised was sent.
	announced bool
}

// containerEvent is what a container's goroutines tell the pod worker.
type containerEvent struct {
	container, instance int
	// exit: the instance ended (its process exited, or a pause container was stopped);
	// StartedAt and ContainerID are the worker's to fill.
	exit *corev1.ContainerStateTerminated
	// postStart: the postStart hook finished; "" when it succeeded, else why it failed.
	postStart *string
}

// send hands ev to the worker, unless the worker is gone.
func (w *podWorker) send(ev containerEvent) {
	select {
	case w.events <- ev:
	case <-w.gone:
	}
}

// completed reports whether an init container ran to success (or was not run at all).
func (c *container) completed() bool {
	return c.r.init && c.run.terminated != nil && c.run.terminated.ExitCode == 0
}

// startable reports whether the worker may start the container now.
func (c *container) startable() bool {
	return !c.run.running && c.run.terminated == nil && !time.Now().Before(c.retryAt)
}

// ensureContainers starts what the pod runs next: its init containers in order (an init
// container must complete, a restartable one must have started, before the next one
// starts), then every regular container that is not running and whose back-off is over.
func (w *podWorker) ensureContainers(ctx context.Context, pod *corev1.Pod) {
	if !w.run.sandbox {
		return
	}
	for i, c := range w.containers {
		if c.r.init && c.completed() {
			continue
		}
		if c.startable() {
			w.startContainer(ctx, pod, i)
		}
		if c.r.init || (c.r.sidecar && !(c.run.running && c.run.started)) {
			return // the next ones wait for this one
		}
	}
}

// procSpec makes the process of container c: its environment, namespaces, the pod's files
// and argv. An error is a CreateContainerConfigError.
func (w *podWorker) procSpec(ctx context.Context, pod *corev1.Pod, c *container) (procSpec, error) {
	node := w.k.opts.Node
	m, err := readMachine()
	if err != nil {
		return procSpec{}, err
	}
	if m.storage, err = nodeFSBytes(w.k.opts.StateDir); err != nil {
		return procSpec{}, err
	}
	d := downward{podIP: w.run.podIP, hostIP: node.IP, allocatable: corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(m.cpus), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(m.memory, resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(m.storage, resource.BinarySI),
	}}
	env, err := containerEnv(ctx, w.k, pod, c.r.spec, d)
	if err != nil && c.r.real.kind == kindProcess {
		return procSpec{}, err
	}
	binds, err := w.ensurePodFiles(pod)
	if err != nil {
		return procSpec{}, err
	}
	hostname := podHostname(pod, node.Name)
	return procSpec{
		argv: expandArgv(c.r.real.argv, env), env: runtimeEnv(env, hostname), dir: c.r.spec.WorkingDir,
		netns: w.nsPath, hostname: hostname, binds: binds,
	}, nil
}

// ensurePodFiles writes the pod's files (the sandbox's: those a kubectl exec into the pod
// sees too) and returns what its processes get mounted over the host's files.
func (w *podWorker) ensurePodFiles(pod *corev1.Pod) ([][2]string, error) {
	sb := w.sandboxRef.Load()
	if sb == nil {
		return nil, errors.New("pod files: the pod's network is not made")
	}
	return w.k.podFiles(podTarget{pod: pod, sb: sb})
}

// openLog returns the stdout and stderr of instance restart of c: pipes whose other ends
// are copied into the node's ContainerLogs, line by line with their times, until every
// holder of the write ends (the process and what it left behind) has closed them. The
// caller closes its own write ends once the process has them.
func (w *podWorker) openLog(pod *corev1.Pod, c *container, restart int) (stdout, stderr *os.File, err error) {
	ref := PodRef{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
	var ends []*os.File
	for _, stream := range []string{StreamStdout, StreamStderr} {
		lw, err := w.k.logs.Writer(ref, c.r.spec.Name, restart, stream)
		if err != nil {
			closeAll(ends)
			return nil, nil, fmt.Errorf("container log: %w", err)
		}
		r, wr, err := os.Pipe()
		if err != nil {
			_ = lw.Close()
			closeAll(ends)
			return nil, nil, fmt.Errorf("container log: %w", err)
		}
		go func() {
			_, _ = io.Copy(lw, r)
			_ = r.Close()
			_ = lw.Close()
		}()
		ends = append(ends, wr)
	}
	return ends[0], ends[1], nil
}

// closeAll closes files.
func closeAll(files []*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// startFailed records a container that could not start and schedules the next try.
func (w *podWorker) startFailed(pod *corev1.Pod, c *container, reason string, err error) {
	c.backoff = min(max(2*c.backoff, restartBackoffMin), restartBackoffMax)
	c.retryAt = time.Now().Add(c.backoff)
	c.run.waitingReason, c.run.waitingMessage = reason, err.Error()
	w.k.eventf(pod, corev1.EventTypeWarning, "Failed", "container %s: %s: %v", c.r.spec.Name, reason, err)
}

// startContainer starts a new instance of container i as its realisation says (echo
// server, process, or nothing for a pause container), then its postStart hook and its
// probes. An unrealisable container is left waiting, with an event.
func (w *podWorker) startContainer(ctx context.Context, pod *corev1.Pod, i int) {
	c := w.containers[i]
	real := c.r.real
	if real.kind == kindUnrealisable {
		c.run.waitingReason, c.run.waitingMessage = real.reason, real.message
		c.retryAt = time.Now().Add(restartBackoffMax) // nothing here changes by itself
		if !c.announced {
			c.announced = true
			w.k.eventf(pod, corev1.EventTypeWarning, ReasonNotRealisable, "container %s: %s", c.r.spec.Name, real.message)
		}
		return
	}
	spec, err := w.procSpec(ctx, pod, c)
	if err != nil {
		w.startFailed(pod, c, "CreateContainerConfigError", err)
		return
	}
	instance := c.run.instance + 1
	switch real.kind {
	case kindEcho:
		if len(c.r.ports) > 0 {
			srv, err := echo.Serve(w.nsPath, echo.Identity{
				Pod: pod.Name, PodIP: w.run.podIP.String(), Node: w.k.opts.Node.Name, Hostname: podHostname(pod, w.k.opts.Node.Name),
			}, c.r.ports)
			if err != nil {
				w.startFailed(pod, c, "RunContainerError", err)
				return
			}
			c.srv = srv
		}
	case kindPause:
	case kindProcess:
		stdout, stderr, err := w.openLog(pod, c, c.run.instance)
		if err != nil {
			w.startFailed(pod, c, "CreateContainerError", err)
			return
		}
		p, err := w.k.launcher.start(ctx, spec, stdout, stderr)
		closeAll([]*os.File{stdout, stderr}) // the child has its own descriptors
		if err != nil {
			w.startFailed(pod, c, "StartError", err)
			return
		}
		c.proc = p
		go func() {
			<-p.done
			w.send(containerEvent{container: i, instance: instance, exit: &corev1.ContainerStateTerminated{
				ExitCode: exitCode(p.state), FinishedAt: metav1.Now(),
			}})
		}()
	}
	c.spec = spec
	c.run.instance = instance
	c.run.running, c.run.startedAt = true, time.Now()
	c.run.imageID = imageIDOf(real, w.k.launcher.agnhost)
	c.run.waitingReason, c.run.waitingMessage = "", ""
	if real.kind == kindEcho {
		w.logStart(pod, c)
	}
	c.run.started = c.r.spec.StartupProbe == nil
	c.run.ready = c.r.spec.ReadinessProbe == nil
	pctx, cancel := context.WithCancel(ctx)
	c.probes, c.cancelProbes = pctx, cancel
	if h := c.r.spec.Lifecycle; h != nil && h.PostStart != nil {
		c.run.started = false // until the hook is done, as a kubelet starts nothing else before
		go func() {
			msg := ""
			if err := w.runHook(pctx, h.PostStart, c.r.spec, spec); err != nil {
				msg = err.Error()
			}
			if pctx.Err() == nil {
				w.send(containerEvent{container: i, instance: instance, postStart: &msg})
			}
		}()
	} else {
		w.afterStart(pctx, i)
	}
	w.k.eventf(pod, corev1.EventTypeNormal, "Started", "Started container %s: %s", c.r.spec.Name, real.what)
}

// afterStart starts the probes of container i once it started (and its postStart hook
// succeeded): its startup probe, or its readiness and liveness probes.
func (w *podWorker) afterStart(ctx context.Context, i int) {
	c := w.containers[i]
	if c.r.spec.StartupProbe != nil {
		if supportedProbe(c.r.spec.StartupProbe) {
			go w.runProbe(ctx, i, c.run.instance, startupProbe, c.r.spec.StartupProbe, c.r.spec, w.run.podIP, c.spec)
		}
		return
	}
	c.run.started = true
	w.startProbes(ctx, i)
}

// startProbes starts the readiness and liveness probes of container i (once it started).
func (w *podWorker) startProbes(ctx context.Context, i int) {
	c := w.containers[i]
	if supportedProbe(c.r.spec.ReadinessProbe) {
		go w.runProbe(ctx, i, c.run.instance, readinessProbe, c.r.spec.ReadinessProbe, c.r.spec, w.run.podIP, c.spec)
	}
	if supportedProbe(c.r.spec.LivenessProbe) {
		go w.runProbe(ctx, i, c.run.instance, livenessProbe, c.r.spec.LivenessProbe, c.r.spec, w.run.podIP, c.spec)
	}
}

// imageIDOf is a running container's imageID: what really runs.
func imageIDOf(r realisation, agnhost string) string {
	if r.kind != kindProcess {
		return ImageID
	}
	if len(r.argv) > 0 && isAgnhostPath(r.argv[0]) {
		return ProcessImageID + agnhost
	}
	return ProcessImageID + "host"
}

// onProbe applies a probe's verdict.
func (w *podWorker) onProbe(ctx context.Context, res probeResult) {
	if res.container >= len(w.containers) {
		return
	}
	c := w.containers[res.container]
	if res.instance != c.run.instance || !c.run.running {
		return // an earlier instance's
	}
	switch {
	case res.kind == readinessProbe:
		c.run.ready = res.ok
	case res.kind == startupProbe && res.ok:
		c.run.started = true
		w.startProbes(ctx, res.container)
	case res.ok:
		// A liveness probe that passes (again) changes nothing.
	case w.terminating:
		// A kubelet does not restart the containers of a pod it is stopping.
	default: // a failed startup or liveness probe: restart
		w.k.eventf(w.pod(), corev1.EventTypeNormal, "Killing", "Container %s failed %s probe, will be restarted", c.r.spec.Name, res.kind)
		w.stopContainer(c, "Error")
		w.scheduleRestart(c)
	}
}

// onEvent applies what a container's goroutines report: its end, or its postStart hook's.
func (w *podWorker) onEvent(ev containerEvent) {
	if ev.container >= len(w.containers) {
		return
	}
	c := w.containers[ev.container]
	if ev.instance != c.run.instance || !c.run.running {
		return // an earlier instance's, or one the worker stopped itself
	}
	if ev.postStart != nil {
		if *ev.postStart == "" {
			w.afterStart(c.probes, ev.container)
			return
		}
		w.k.eventf(w.pod(), corev1.EventTypeWarning, "FailedPostStartHook", "container %s: %s", c.r.spec.Name, *ev.postStart)
		w.stopContainer(c, "Error")
		if !w.terminating && w.restarts(c, ExitCodeKilled) {
			w.scheduleRestart(c)
		}
		return
	}
	term := ev.exit
	term.StartedAt = metav1.NewTime(c.run.startedAt)
	term.ContainerID = containerID(string(w.uid), c.r.spec.Name, c.run.instance)
	term.Reason = "Completed"
	if term.ExitCode != 0 {
		term.Reason = "Error"
	}
	w.release(c)
	c.run.terminated = term
	if !w.terminating && w.restarts(c, term.ExitCode) {
		w.scheduleRestart(c)
	}
}

// restarts reports whether a container that ended with code is started again: a sidecar
// always, an init container after a failure unless the pod's restartPolicy is Never, a
// regular container as the restartPolicy says.
func (w *podWorker) restarts(c *container, code int32) bool {
	policy := w.run.restartPolicy
	switch {
	case c.r.sidecar:
		return true
	case c.r.init:
		return code != 0 && policy != corev1.RestartPolicyNever
	case policy == corev1.RestartPolicyNever:
		return false
	case policy == corev1.RestartPolicyOnFailure:
		return code != 0
	}
	return true
}

// scheduleRestart makes an ended container wait for its restart: its termination becomes
// its last state, with a kubelet's back-off (none for the first restart, then 10 s
// doubling to 5 min: CrashLoopBackOff).
func (w *podWorker) scheduleRestart(c *container) {
	c.run.restarts++
	c.run.lastTerm, c.run.terminated = c.run.terminated, nil
	c.backoff = 0
	if c.run.restarts > 1 {
		c.backoff = min(restartBackoffMin<<min(c.run.restarts-2, 10), restartBackoffMax)
		c.run.waitingReason = "CrashLoopBackOff"
		c.run.waitingMessage = fmt.Sprintf("back-off %s restarting failed container %s", c.backoff, c.r.spec.Name)
	}
	c.retryAt = time.Now().Add(c.backoff)
}

// release stops what a container instance holds: probes and hooks, echo server,
// process (killed with its group if it still runs). It reports the process's exit code
// (ExitCodeKilled when none was reaped).
func (w *podWorker) release(c *container) int32 {
	if c.cancelProbes != nil {
		c.cancelProbes()
		c.cancelProbes = nil
	}
	if c.srv != nil {
		_ = c.srv.Close()
		c.srv = nil
	}
	code := int32(ExitCodeKilled)
	if c.proc != nil {
		if c.proc.kill(killWait) {
			code = exitCode(c.proc.state)
		}
		c.proc = nil
	}
	c.run.running, c.run.ready, c.run.started = false, false, false
	return code
}

// stopContainer kills a container instance now: a running one is recorded as
// terminated (ExitCodeKilled, or its process's code if it had ended meanwhile).
func (w *podWorker) stopContainer(c *container, reason string) {
	running := c.run.running
	code := w.release(c)
	now := metav1.Now()
	switch {
	case running:
		c.run.terminated = &corev1.ContainerStateTerminated{
			ExitCode: code, Reason: reason, StartedAt: metav1.NewTime(c.run.startedAt), FinishedAt: now,
			ContainerID: containerID(string(w.uid), c.r.spec.Name, c.run.instance),
		}
	case c.run.terminated == nil:
		c.run.terminated = &corev1.ContainerStateTerminated{
			ExitCode: ExitCodeKilled, Reason: "ContainerStatusUnknown", Message: "the container never started", FinishedAt: now,
		}
	}
}

// stopGracefully stops a running container instance of a pod being deleted: its preStop
// hook runs (within the grace period, ctx), then it gets SIGTERM: a process gets the
// signal, a pause container ends, an echo server's netexec /readyz starts failing while it
// goes on serving (as a process that ignores SIGTERM does) until it is killed.
func (w *podWorker) stopGracefully(ctx context.Context, i, instance int, r runnable, spec procSpec, p *proc, srv *echo.Server) {
	if h := r.spec.Lifecycle; h != nil && h.PreStop != nil {
		if err := w.runHook(ctx, h.PreStop, r.spec, spec); err != nil && ctx.Err() == nil {
			w.k.eventf(w.pod(), corev1.EventTypeWarning, "FailedPreStopHook", "container %s: %v", r.spec.Name, err)
		}
	}
	switch r.real.kind {
	case kindProcess:
		p.signal(syscall.SIGTERM)
	case kindPause:
		w.send(containerEvent{container: i, instance: instance, exit: &corev1.ContainerStateTerminated{
			ExitCode: r.real.exitCode, FinishedAt: metav1.Now(),
		}})
	case kindEcho:
		if srv != nil {
			srv.MarkShuttingDown()
		}
	}
}

// runHook runs a lifecycle hook of container c (exec in the pod's namespaces with the
// container's environment, HTTP GET from the node, or sleep), until it is done or ctx
// ends.
func (w *podWorker) runHook(ctx context.Context, h *corev1.LifecycleHandler, c corev1.Container, spec procSpec) error {
	switch {
	case h.Exec != nil:
		s := spec
		s.argv = h.Exec.Command
		if len(s.argv) == 0 {
			return errors.New("exec hook without a command")
		}
		code, out, err := w.k.launcher.run(ctx, s)
		if err != nil {
			return err
		}
		if code != 0 {
			return fmt.Errorf("command %q exited with %d: %s", strings.Join(s.argv, " "), code, strings.TrimSpace(string(out)))
		}
		return nil
	case h.HTTPGet != nil:
		p := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: h.HTTPGet}, TimeoutSeconds: hookHTTPTimeout}
		if ok, msg := w.k.prober.once(ctx, p, c, w.run.podIP, spec); !ok {
			return errors.New(msg)
		}
		return nil
	case h.Sleep != nil:
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(h.Sleep.Seconds) * time.Second):
		}
		return nil
	}
	return errors.New("hook kind not supported by the lab kubelet (tcpSocket is deprecated and never run)")
}

// hookHTTPTimeout bounds an HTTP hook's request, in seconds (the grace period bounds a
// preStop hook too).
const hookHTTPTimeout = 30

// containerID is the ID of a container instance (instance counts from 1).
func containerID(uid, name string, instance int) string {
	return fmt.Sprintf("kpbench://%s/%s/%d", uid, name, instance-1)
}

// configMap implements envObjects with the kubelet's client.
func (k *Kubelet) configMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	cm, err := k.client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("configmap %q not found", name)
	}
	return cm, err
}

// secret implements envObjects with the kubelet's client.
func (k *Kubelet) secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	s, err := k.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("secret %q not found", name)
	}
	return s, err
}
