//go:build linux

package kubelet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/lab/echo"
)

// Back-off bounds: of a pod network that could not be made, and of a container that could
// not start or was restarted (a kubelet's CrashLoopBackOff: 10 s doubling to 5 min).
const (
	sandboxBackoffMin = time.Second
	sandboxBackoffMax = 30 * time.Second
	restartBackoffMin = 10 * time.Second
	restartBackoffMax = 5 * time.Minute
	// statusRetry is how soon a failed status patch is tried again.
	statusRetry = time.Second
	// defaultGrace is a Pod's grace period when nothing says otherwise.
	defaultGrace = 30 * time.Second
)

// ExitCodeKilled is the exit code of a container killed at the end of its grace period
// or for a failed liveness probe (128 + SIGKILL).
const ExitCodeKilled = 137

// container is one container of a pod worker.
type container struct {
	r            runnable
	run          containerRun
	srv          *echo.Server // nil when not running, or running without ports
	cancelProbes context.CancelFunc
	retryAt      time.Time
	backoff      time.Duration
}

// podWorker runs one Pod (one UID) on the node, on a goroutine of its own (loop): see the
// package documentation for what it does. Only loop's goroutine touches its state, except
// latest (read by probe goroutines for events) and the channels.
type podWorker struct {
	k       *Kubelet
	uid     types.UID
	updates chan *corev1.Pod // the latest Pod; nil: gone from the API. Capacity 1, newest wins
	results chan probeResult
	latest  atomic.Pointer[corev1.Pod]
	// sandboxRef is the pod's network for the kubelet API, once made (sandbox.go).
	sandboxRef atomic.Pointer[sandbox]

	started        bool
	labName        string // the pod's lab host ("namespace/name"); "" for hostNetwork
	nsPath         string // where its containers listen
	run            podRun
	containers     []*container
	keep           conditionKeeper
	lastPatch      []byte // the last status patch the API server took
	statusRetryAt  time.Time
	labReady       *bool // the readiness last written to the lab's record
	terminating    bool
	killAt         time.Time
	sandboxRetryAt time.Time
	sandboxBackoff time.Duration
}

func newPodWorker(k *Kubelet, uid types.UID) *podWorker {
	return &podWorker{k: k, uid: uid, updates: make(chan *corev1.Pod, 1), results: make(chan probeResult, 16), keep: conditionKeeper{}}
}

// pod returns the latest Pod object the worker got.
func (w *podWorker) pod() *corev1.Pod { return w.latest.Load() }

// loop runs the pod until it is gone, or until ctx ends (the kubelet stops: the pod's
// containers and namespace go, the API is left alone).
func (w *podWorker) loop(ctx context.Context) {
	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	for {
		deleted := false
		select {
		case <-ctx.Done():
			w.teardown(context.WithoutCancel(ctx))
			return
		case p := <-w.updates:
			if p == nil {
				deleted = true
			} else {
				w.latest.Store(p)
			}
		case res := <-w.results:
			w.onProbe(ctx, res)
		case <-wake.C:
		}
		if w.sync(ctx, deleted) {
			return
		}
		wake.Reset(w.nextWake())
	}
}

// nextWake is how long until the worker has something to do by itself.
func (w *podWorker) nextWake() time.Duration {
	next := time.Now().Add(time.Hour)
	earlier := func(t time.Time) {
		if !t.IsZero() && t.Before(next) {
			next = t
		}
	}
	if w.terminating {
		earlier(w.killAt)
	} else {
		if !w.run.sandbox {
			earlier(w.sandboxRetryAt)
		}
		for _, c := range w.containers {
			if !c.run.running {
				earlier(c.retryAt)
			}
		}
	}
	earlier(w.statusRetryAt)
	return max(time.Until(next), time.Millisecond)
}

// sync moves the pod one step towards what its latest object asks, and reports it. It
// returns true when the worker is done.
func (w *podWorker) sync(ctx context.Context, deleted bool) bool {
	if deleted { // force-deleted (or our own delete went through): nothing to report to
		w.teardown(ctx)
		return true
	}
	pod := w.pod()
	if !w.started {
		w.start(pod)
	}
	w.run.otherConditions, w.run.readinessGates = pod.Status.Conditions, pod.Spec.ReadinessGates
	if pod.DeletionTimestamp != nil && !w.terminating {
		w.beginTermination(pod)
	}
	if w.terminating {
		if !time.Now().Before(w.killAt) {
			w.finish(ctx, pod)
			return true
		}
	} else {
		w.ensureSandbox(ctx, pod)
		w.ensureContainers(ctx, pod)
	}
	w.report(ctx, pod)
	return false
}

// start takes in a new pod: its containers, and what the lab kubelet ignores of it.
func (w *podWorker) start(pod *corev1.Pod) {
	w.started = true
	node := w.k.opts.Node
	w.run.uid, w.run.hostIP, w.run.startTime = string(pod.UID), node.IP, time.Now()
	for _, r := range runnables(pod) {
		c := &container{r: r, run: containerRun{name: r.spec.Name, image: r.spec.Image, sidecar: r.sidecar}}
		w.containers = append(w.containers, c)
		w.run.containers = append(w.run.containers, &c.run)
	}
	for _, ic := range pod.Spec.InitContainers {
		if !isSidecar(ic) {
			w.run.notRunInit = append(w.run.notRunInit, ic)
		}
	}
	ignored := unsupported(pod)
	w.run.message = statusMessage(ignored)
	if len(ignored) > 0 {
		w.k.eventf(pod, corev1.EventTypeWarning, ReasonUnsupported, "ignored by the lab kubelet: %s", strings.Join(ignored, "; "))
	}
}

// ensureSandbox makes the pod's network namespace (on the node's bridge, an address from
// the node's pod block), or takes the node's for a hostNetwork pod.
func (w *podWorker) ensureSandbox(ctx context.Context, pod *corev1.Pod) {
	if w.run.sandbox || time.Now().Before(w.sandboxRetryAt) {
		return
	}
	node := w.k.opts.Node
	if pod.Spec.HostNetwork {
		w.nsPath, w.run.podIP, w.run.sandbox = node.NetNSPath, node.IP, true
		w.publishSandbox()
		return
	}
	var ports []echo.Port
	for _, c := range w.containers {
		ports = append(ports, c.r.ports...)
	}
	name := pod.Namespace + "/" + pod.Name
	h, err := w.k.opts.Network.AddPod(ctx, lab.PodSpec{Name: name, Node: node.Name, Ports: ports, Labels: pod.Labels, NoEcho: true})
	if err != nil {
		_ = w.k.opts.Network.RemovePod(context.WithoutCancel(ctx), name) // what a failed AddPod made
		w.sandboxBackoff = min(max(2*w.sandboxBackoff, sandboxBackoffMin), sandboxBackoffMax)
		w.sandboxRetryAt = time.Now().Add(w.sandboxBackoff)
		w.run.sandboxMessage = err.Error()
		w.k.eventf(pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "pod network: %v", err)
		return
	}
	w.labName, w.nsPath, w.run.podIP, w.run.sandbox, w.run.sandboxMessage = name, h.NetNSPath, h.IP, true, ""
	w.publishSandbox()
}

// ensureContainers starts every container that is not running and whose back-off is over.
func (w *podWorker) ensureContainers(ctx context.Context, pod *corev1.Pod) {
	if !w.run.sandbox {
		return
	}
	for i, c := range w.containers {
		if c.run.running || time.Now().Before(c.retryAt) {
			continue
		}
		w.startContainer(ctx, pod, i)
	}
}

// startContainer starts the echo server of container i, and its probes.
func (w *podWorker) startContainer(ctx context.Context, pod *corev1.Pod, i int) {
	c := w.containers[i]
	if len(c.r.ports) > 0 {
		srv, err := echo.Serve(w.nsPath, echo.Identity{
			Pod: pod.Name, PodIP: w.run.podIP.String(), Node: w.k.opts.Node.Name, Hostname: podHostname(pod, w.k.opts.Node.Name),
		}, c.r.ports)
		if err != nil {
			c.backoff = min(max(2*c.backoff, restartBackoffMin), restartBackoffMax)
			c.retryAt = time.Now().Add(c.backoff)
			c.run.waitingReason, c.run.waitingMessage = "RunContainerError", err.Error()
			w.k.eventf(pod, corev1.EventTypeWarning, "Failed", "container %s: %v", c.r.spec.Name, err)
			return
		}
		c.srv = srv
	}
	c.run.instance++
	c.run.running, c.run.startedAt = true, time.Now()
	c.run.waitingReason, c.run.waitingMessage = "", ""
	w.logStart(pod, c)
	c.run.started = c.r.spec.StartupProbe == nil
	c.run.ready = c.r.spec.ReadinessProbe == nil
	pctx, cancel := context.WithCancel(ctx)
	c.cancelProbes = cancel
	if c.r.spec.StartupProbe != nil {
		if supportedProbe(c.r.spec.StartupProbe) {
			go w.runProbe(pctx, i, c.run.instance, startupProbe, c.r.spec.StartupProbe, c.r.spec, w.run.podIP)
		}
	} else {
		w.startProbes(pctx, i)
	}
	w.k.eventf(pod, corev1.EventTypeNormal, "Started", "Started container %s: kpbench echo server on %s", c.r.spec.Name, portList(c.r.ports))
}

// startProbes starts the readiness and liveness probes of container i (once it started).
func (w *podWorker) startProbes(ctx context.Context, i int) {
	c := w.containers[i]
	if supportedProbe(c.r.spec.ReadinessProbe) {
		go w.runProbe(ctx, i, c.run.instance, readinessProbe, c.r.spec.ReadinessProbe, c.r.spec, w.run.podIP)
	}
	if supportedProbe(c.r.spec.LivenessProbe) {
		go w.runProbe(ctx, i, c.run.instance, livenessProbe, c.r.spec.LivenessProbe, c.r.spec, w.run.podIP)
	}
}

func portList(ports []echo.Port) string {
	if len(ports) == 0 {
		return "no ports"
	}
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
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
	case w.terminating:
		// A kubelet does not restart the containers of a pod it is stopping.
	default: // a failed startup or liveness probe: restart
		w.k.eventf(w.pod(), corev1.EventTypeNormal, "Killing", "Container %s failed %s probe, will be restarted", c.r.spec.Name, res.kind)
		w.stopContainer(c, "Error")
		c.run.restarts++
		c.run.lastTerm, c.run.terminated = c.run.terminated, nil
		c.backoff = 0
		if c.run.restarts > 1 {
			c.backoff = min(restartBackoffMin<<(c.run.restarts-2), restartBackoffMax)
			c.run.waitingReason = "CrashLoopBackOff"
			c.run.waitingMessage = fmt.Sprintf("back-off %s restarting failed container %s", c.backoff, c.r.spec.Name)
		}
		c.retryAt = time.Now().Add(c.backoff)
	}
}

// stopContainer kills a container instance: its probes and echo server stop; a running one
// is recorded as terminated with ExitCodeKilled.
func (w *podWorker) stopContainer(c *container, reason string) {
	if c.cancelProbes != nil {
		c.cancelProbes()
		c.cancelProbes = nil
	}
	if c.srv != nil {
		_ = c.srv.Close()
		c.srv = nil
	}
	now := metav1.Now()
	if c.run.running {
		c.run.terminated = &corev1.ContainerStateTerminated{
			ExitCode: ExitCodeKilled, Reason: reason, StartedAt: metav1.NewTime(c.run.startedAt), FinishedAt: now,
			ContainerID: fmt.Sprintf("kpbench://%s/%s/%d", w.uid, c.r.spec.Name, c.run.instance-1),
		}
	} else if c.run.terminated == nil {
		c.run.terminated = &corev1.ContainerStateTerminated{
			ExitCode: ExitCodeKilled, Reason: "ContainerStatusUnknown", Message: "the container never started", FinishedAt: now,
		}
	}
	c.run.running, c.run.ready, c.run.started = false, false, false
}

// beginTermination starts the grace period of a deleted Pod: every container is told to
// shut down (netexec's /readyz answers 503) and goes on serving until the period ends.
func (w *podWorker) beginTermination(pod *corev1.Pod) {
	w.terminating = true
	grace := defaultGrace
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		grace = time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	if !w.run.sandbox {
		grace = 0 // nothing runs yet
	}
	w.killAt = time.Now().Add(grace)
	for _, c := range w.containers {
		if c.run.running {
			if c.srv != nil {
				c.srv.MarkShuttingDown()
			}
			w.k.eventf(pod, corev1.EventTypeNormal, "Killing", "Stopping container %s (grace period %s)", c.r.spec.Name, grace)
		}
	}
}

// finish ends a deleted pod at the end of its grace period: its containers are killed,
// its status says Failed, its namespace goes, and the Pod object is deleted for good.
func (w *podWorker) finish(ctx context.Context, pod *corev1.Pod) {
	for _, c := range w.containers {
		w.stopContainer(c, "Error")
	}
	w.run.terminal = corev1.PodFailed
	w.report(ctx, pod)
	w.teardown(ctx)
	zero := int64(0)
	uid := pod.UID
	opts := metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}}
	for attempt := range 3 {
		err := w.k.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, opts)
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) || ctx.Err() != nil {
			return
		}
		w.k.log.Warn("delete pod", "pod", pod.Namespace+"/"+pod.Name, "attempt", attempt+1, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// teardown stops every container and removes the pod's namespace; it writes nothing to the
// API.
func (w *podWorker) teardown(ctx context.Context) {
	w.withdrawSandbox()
	for _, c := range w.containers {
		if c.cancelProbes != nil {
			c.cancelProbes()
		}
		if c.srv != nil {
			_ = c.srv.Close()
			c.srv = nil
		}
	}
	if w.labName != "" {
		if err := w.k.opts.Network.RemovePod(ctx, w.labName); err != nil {
			w.k.log.Warn("remove pod network", "pod", w.labName, "err", err)
		}
		w.labName = ""
	}
}

// report patches the Pod's status when it changed, and the lab record's readiness.
func (w *podWorker) report(ctx context.Context, pod *corev1.Pod) {
	st := buildStatus(&w.run, w.keep, metav1.Now())
	if w.labName != "" {
		ready := podReady(st)
		if w.labReady == nil || *w.labReady != ready {
			if err := w.k.opts.Network.SetPodConditions(w.labName, ready, w.terminating); err == nil {
				w.labReady = &ready
			}
		}
	}
	// The UID makes the patch fail on a new Pod of the same name (as a kubelet's does);
	// conditions merge by type, so the scheduler's and the readiness gates' stay.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": pod.UID}, "status": st})
	if err == nil && bytes.Equal(patch, w.lastPatch) {
		return
	}
	if err == nil {
		_, err = w.k.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	}
	if err != nil {
		if ctx.Err() == nil && !apierrors.IsNotFound(err) {
			w.k.log.Warn("patch pod status", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		}
		w.statusRetryAt = time.Now().Add(statusRetry)
		return
	}
	w.lastPatch, w.statusRetryAt = patch, time.Time{}
}

// podReady reports the Ready condition of a status.
func podReady(st corev1.PodStatus) bool {
	for _, c := range st.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podIsTerminal reports whether a pod has finished for good.
func podIsTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
}
