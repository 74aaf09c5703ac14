//go:build linux

package kubelet

import (
	"bytes"
	"context"
	"encoding/json"
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

// podWorker runs one Pod (one UID) on the node, on a goroutine of its own (loop): see the
// package documentation for what it does. Only loop's goroutine touches its state, except
// latest (read by probe goroutines for events) and the channels.
type podWorker struct {
	k       *Kubelet
	uid     types.UID
	updates chan *corev1.Pod // the latest Pod; nil: gone from the API. Capacity 1, newest wins
	results chan probeResult
	events  chan containerEvent
	gone    chan struct{} // closed when loop returns
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
	cancelGrace    context.CancelFunc // ends the preStop hooks at the end of the grace period
	sandboxRetryAt time.Time
	sandboxBackoff time.Duration
	// storageCheckAt is when the containers' ephemeral storage is read next (eviction.go).
	storageCheckAt time.Time
	// storageUsed is the last reading of it, for those who watch the worker (tests).
	storageUsed atomic.Pointer[storageReading]
}

func newPodWorker(k *Kubelet, uid types.UID) *podWorker {
	return &podWorker{k: k, uid: uid, updates: make(chan *corev1.Pod, 1), results: make(chan probeResult, 16),
		events: make(chan containerEvent, 4), gone: make(chan struct{}), keep: conditionKeeper{}}
}

// pod returns the latest Pod object the worker got.
func (w *podWorker) pod() *corev1.Pod { return w.latest.Load() }

// loop runs the pod until it is gone, or until ctx ends (the kubelet stops: the pod's
// containers and namespace go, the API is left alone).
func (w *podWorker) loop(ctx context.Context) {
	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	defer close(w.gone)
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
		case ev := <-w.events:
			w.onEvent(ev)
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
			if !c.run.running && c.run.terminated == nil {
				earlier(c.retryAt)
			}
		}
		if p := w.pod(); w.run.terminal == "" && p != nil && storageLimited(p) {
			earlier(w.storageCheckAt)
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
		w.beginTermination(ctx, pod)
	}
	switch {
	case w.terminating:
		if !time.Now().Before(w.killAt) || w.allStopped() {
			if w.run.reason == ReasonEvicted && pod.DeletionTimestamp == nil {
				w.endEviction(ctx) // an evicted Pod stays, Failed, until it is deleted
				break
			}
			w.finish(ctx, pod)
			return true
		}
	case w.run.terminal != "":
		// Completed: nothing runs; the Pod waits to be deleted.
	default:
		w.ensureSandbox(ctx, pod)
		w.ensureContainers(ctx, pod)
		if w.checkStorage(ctx, pod) {
			break // evicted: its containers get their grace period
		}
		if phase := podPhase(&w.run); phase == corev1.PodSucceeded || phase == corev1.PodFailed {
			w.complete(ctx, phase)
		}
	}
	w.report(ctx, pod)
	return false
}

// allStopped reports whether no container of the pod runs any more.
func (w *podWorker) allStopped() bool {
	for _, c := range w.containers {
		if c.run.running {
			return false
		}
	}
	return true
}

// complete ends a pod whose containers all ended for good (restartPolicy Never or
// OnFailure): what still runs is stopped, its network goes, and its phase is final.
func (w *podWorker) complete(ctx context.Context, phase corev1.PodPhase) {
	for _, c := range w.containers {
		if c.run.running {
			w.stopContainer(c, "Error")
		}
	}
	w.teardown(ctx)
	w.run.terminal = phase
	w.k.eventf(w.pod(), corev1.EventTypeNormal, "Completed", "pod %s: every container ended", phase)
}

// start takes in a new pod: its containers, and what the lab kubelet ignores of it.
func (w *podWorker) start(pod *corev1.Pod) {
	w.started = true
	node := w.k.opts.Node
	w.run.uid, w.run.hostIP, w.run.startTime = string(pod.UID), node.IP, time.Now()
	w.run.restartPolicy = pod.Spec.RestartPolicy
	rs := runnables(pod, w.k.launcher.agnhost)
	for _, r := range rs {
		c := &container{r: r, run: containerRun{name: r.spec.Name, image: r.spec.Image, sidecar: r.sidecar, init: r.init}}
		if r.init && r.real.kind != kindProcess && r.real.kind != kindUnrealisable {
			// An init container the echo server stands for has nothing to do: done.
			c.run.terminated = &corev1.ContainerStateTerminated{ExitCode: 0, Reason: ReasonInitNotRun, Message: "the lab kubelet runs only agnhost init containers"}
		}
		w.containers = append(w.containers, c)
		w.run.containers = append(w.run.containers, &c.run)
	}
	ignored := unsupported(pod, rs)
	w.run.message = statusMessage(rs, ignored)
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

// beginTermination starts the grace period of a deleted Pod: every running container runs
// its preStop hook and is then told to stop (SIGTERM; netexec's /readyz answers 503 in an
// echo server, which goes on serving until the period ends).
func (w *podWorker) beginTermination(ctx context.Context, pod *corev1.Pod) {
	grace := defaultGrace
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		grace = time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	if !w.run.sandbox || w.run.terminal != "" {
		grace = 0 // nothing runs
	}
	w.stopAll(ctx, pod, grace)
}

// stopAll begins to stop every running container with a grace period: the pod is
// terminating until the period ends or they all stopped (sync).
func (w *podWorker) stopAll(ctx context.Context, pod *corev1.Pod, grace time.Duration) {
	if w.cancelGrace != nil {
		w.cancelGrace() // an eviction's, when the evicted pod is then deleted
	}
	w.terminating = true
	w.killAt = time.Now().Add(grace)
	gctx, cancel := context.WithDeadline(ctx, w.killAt)
	w.cancelGrace = cancel
	for i, c := range w.containers {
		if c.run.running {
			w.k.eventf(pod, corev1.EventTypeNormal, "Killing", "Stopping container %s (grace period %s)", c.r.spec.Name, grace)
			go w.stopGracefully(gctx, i, c.run.instance, c.r, c.spec, c.proc, c.srv)
		}
	}
}

// finish ends a deleted pod at the end of its grace period: its containers are killed,
// its status says Failed, its namespace goes, and the Pod object is deleted for good.
func (w *podWorker) finish(ctx context.Context, pod *corev1.Pod) {
	for _, c := range w.containers {
		w.stopContainer(c, "Error")
	}
	if w.run.terminal == "" {
		w.run.terminal = terminalPhase(&w.run)
	}
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

// teardown stops every container and removes the pod's namespace and files; it writes
// nothing to the API.
func (w *podWorker) teardown(ctx context.Context) {
	if w.cancelGrace != nil {
		w.cancelGrace()
	}
	for _, c := range w.containers {
		if c.run.running {
			w.release(c)
		}
	}
	w.withdrawSandbox()
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
