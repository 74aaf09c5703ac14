package kubelet

import (
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons and identifiers the lab kubelet writes.
const (
	// ReasonUnsupported is the reason of the Warning event that lists what a Pod asks for
	// and the lab kubelet ignores.
	ReasonUnsupported = "LabKubeletUnsupported"
	// ReasonInitNotRun is the terminated reason of an init container the lab kubelet did
	// not run (one the echo server would stand for).
	ReasonInitNotRun = "NotRunByLabKubelet"
	// ReasonNotRealisable is the waiting reason, and the Warning event's, of a container
	// the lab kubelet cannot run as its image says (an agnhost container without the
	// agnhost binary).
	ReasonNotRealisable = "NotRealisableByLabKubelet"
	// ImageID is the imageID of a container realised by the echo server (or a pause
	// container, realised by nothing).
	ImageID = "kpbench-echo://"
	// ProcessImageID starts the imageID of a container realised by a process, followed by
	// the agnhost binary's path ("host" for another program of the host).
	ProcessImageID = "kpbench-process://"
)

// containerRun is what the pod worker knows of one container instance, the input of its
// ContainerStatus.
type containerRun struct {
	name, image string
	imageID     string // "" before its first start: ImageID
	sidecar     bool
	init        bool  // a non-restartable init container
	instance    int   // starts so far (the containerID's last part)
	restarts    int32 // restartCount
	running     bool
	startedAt   time.Time
	started     bool // startup probe passed (or none)
	ready       bool // readiness probe passes (or none)
	// waiting is why a container that is neither running nor terminated waits.
	waitingReason, waitingMessage string
	// terminated is the final state (the pod was killed); lastTerm the previous instance's.
	terminated, lastTerm *corev1.ContainerStateTerminated
}

// podRun is what the pod worker knows of its pod, the input of its PodStatus.
type podRun struct {
	uid             string
	hostIP, podIP   netip.Addr
	startTime       time.Time
	sandbox         bool // the pod's network is made (or it is hostNetwork)
	sandboxMessage  string
	restartPolicy   corev1.RestartPolicy
	containers      []*containerRun // init containers (sidecars too) in order, then the others
	terminal        corev1.PodPhase // Failed or Succeeded once ended; "" before
	reason          string          // the status's reason: ReasonEvicted, or ""
	message         string
	readinessGates  []corev1.PodReadinessGate
	otherConditions []corev1.PodCondition // conditions others own (readiness gates')
}

// conditionKeeper keeps each condition's lastTransitionTime while its status stays.
type conditionKeeper map[corev1.PodConditionType]corev1.PodCondition

func (k conditionKeeper) set(t corev1.PodConditionType, ok bool, reason, message string, now metav1.Time) corev1.PodCondition {
	status := corev1.ConditionFalse
	if ok {
		status = corev1.ConditionTrue
	}
	c := corev1.PodCondition{Type: t, Status: status, Reason: reason, Message: message, LastTransitionTime: now}
	if old, found := k[t]; found && old.Status == status {
		c.LastTransitionTime = old.LastTransitionTime
	}
	k[t] = c
	return c
}

// buildStatus renders a pod's status from what the worker knows. Conditions keep their
// transition times in keep.
func buildStatus(r *podRun, keep conditionKeeper, now metav1.Time) corev1.PodStatus {
	st := corev1.PodStatus{Reason: r.reason, Message: r.message}
	if r.hostIP.IsValid() {
		st.HostIP = r.hostIP.String()
		st.HostIPs = []corev1.HostIP{{IP: st.HostIP}}
	}
	if r.podIP.IsValid() && r.terminal == "" {
		st.PodIP = r.podIP.String()
		st.PodIPs = []corev1.PodIP{{IP: st.PodIP}}
	}
	if !r.startTime.IsZero() {
		t := metav1.NewTime(r.startTime)
		st.StartTime = &t
	}
	allReady := true
	var notReady []string
	for _, c := range r.containers {
		cs := c.status(r.uid)
		if c.init || c.sidecar {
			st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
		} else {
			st.ContainerStatuses = append(st.ContainerStatuses, cs)
		}
		if c.init {
			continue
		}
		if !cs.Ready {
			allReady = false
			notReady = append(notReady, c.name)
		}
	}
	incomplete, notRun := initIncomplete(r)
	if len(incomplete) > 0 {
		for i := range st.ContainerStatuses {
			if w := st.ContainerStatuses[i].State.Waiting; w != nil && w.Reason == "ContainerCreating" {
				w.Reason = "PodInitializing"
			}
		}
	}
	st.Phase = r.terminal
	if st.Phase == "" {
		st.Phase = podPhase(r)
	}

	sandboxReason := ""
	if !r.sandbox {
		sandboxReason = "SandboxNotReady"
	}
	initOK, initReason, initMessage := len(incomplete) == 0, "", ""
	switch {
	case !initOK:
		initReason, initMessage = "ContainersNotInitialized", fmt.Sprintf("containers with incomplete status: %v", incomplete)
	case notRun:
		initReason = ReasonInitNotRun // True, but say why it was this quick
	}
	crOK := allReady && r.terminal == ""
	crReason, crMessage := "", ""
	switch {
	case r.terminal != "":
		crReason = "PodCompleted"
	case !allReady:
		crReason, crMessage = "ContainersNotReady", fmt.Sprintf("containers with unready status: %v", notReady)
	}
	readyOK, readyReason, readyMessage := crOK, crReason, crMessage
	for _, g := range r.readinessGates {
		if readyOK && !gateTrue(r.otherConditions, g.ConditionType) {
			readyOK, readyReason = false, "ReadinessGatesNotReady"
			readyMessage = fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist or is not True", g.ConditionType)
		}
	}
	st.Conditions = []corev1.PodCondition{
		keep.set(corev1.PodReadyToStartContainers, r.sandbox && r.terminal == "", sandboxReason, r.sandboxMessage, now),
		keep.set(corev1.PodInitialized, initOK, initReason, initMessage, now),
		keep.set(corev1.ContainersReady, crOK, crReason, crMessage, now),
		keep.set(corev1.PodReady, readyOK, readyReason, readyMessage, now),
	}
	return st
}

// initIncomplete lists the init containers that have not completed (restartable ones:
// not started), and reports whether one of those completed was not run at all.
func initIncomplete(r *podRun) (incomplete []string, notRun bool) {
	for _, c := range r.containers {
		switch {
		case c.init && c.terminated != nil && c.terminated.ExitCode == 0:
			notRun = notRun || c.terminated.Reason == ReasonInitNotRun
		case c.init, c.sidecar && !(c.running && c.started) && r.terminal == "":
			incomplete = append(incomplete, c.name)
		}
	}
	return incomplete, notRun
}

// podPhase is a running pod's phase from its containers, as a kubelet computes it:
// Pending until its network is made and its init containers completed (or an init
// container failed for good: Failed), or while a container waits that never ran; Running
// while one runs (or will be restarted); once every container ended for good, Succeeded
// if they all exited 0, else Failed.
func podPhase(r *podRun) corev1.PodPhase {
	for _, c := range r.containers {
		if c.init && c.terminated != nil && c.terminated.ExitCode != 0 {
			return corev1.PodFailed // an init container failed and is not restarted
		}
	}
	if incomplete, _ := initIncomplete(r); !r.sandbox || len(incomplete) > 0 {
		return corev1.PodPending
	}
	var regular, waiting, running, stopped, succeeded int
	for _, c := range r.containers {
		if c.init || c.sidecar {
			continue
		}
		regular++
		switch {
		case c.running:
			running++
		case c.terminated != nil:
			stopped++
			if c.terminated.ExitCode == 0 {
				succeeded++
			}
		case c.lastTerm != nil:
			running++ // waiting to be restarted
		default:
			waiting++
		}
	}
	switch {
	case regular == 0 || waiting > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case stopped == succeeded:
		return corev1.PodSucceeded
	}
	return corev1.PodFailed
}

// terminalPhase is the final phase of a pod that was stopped: Succeeded if every regular
// container exited 0, else Failed.
func terminalPhase(r *podRun) corev1.PodPhase {
	for _, c := range r.containers {
		if !c.init && !c.sidecar && (c.terminated == nil || c.terminated.ExitCode != 0) {
			return corev1.PodFailed
		}
	}
	return corev1.PodSucceeded
}

// gateTrue reports whether the condition of a readiness gate is True.
func gateTrue(conds []corev1.PodCondition, t corev1.PodConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// status renders one container's status.
func (c *containerRun) status(podUID string) corev1.ContainerStatus {
	started := c.running && c.started
	imageID := c.imageID
	if imageID == "" {
		imageID = ImageID
	}
	cs := corev1.ContainerStatus{
		Name: c.name, Image: c.image, ImageID: imageID,
		Ready:        c.running && c.started && c.ready,
		Started:      &started,
		RestartCount: c.restarts,
	}
	if c.instance > 0 {
		cs.ContainerID = containerID(podUID, c.name, c.instance)
	}
	switch {
	case c.terminated != nil:
		cs.State.Terminated = c.terminated
		cs.Ready = false
		cs.Started = new(bool)
	case c.running:
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.startedAt)}
	default:
		reason := c.waitingReason
		if reason == "" {
			reason = "ContainerCreating"
		}
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: c.waitingMessage}
	}
	if c.lastTerm != nil {
		cs.LastTerminationState.Terminated = c.lastTerm
	}
	return cs
}
