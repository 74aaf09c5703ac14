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
	// not run.
	ReasonInitNotRun = "NotRunByLabKubelet"
	// ImageID is every container's imageID: what really runs.
	ImageID = "kpbench-echo://"
)

// containerRun is what the pod worker knows of one container instance, the input of its
// ContainerStatus.
type containerRun struct {
	name, image string
	sidecar     bool
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
	containers      []*containerRun
	notRunInit      []corev1.Container // init containers reported as not run
	terminal        corev1.PodPhase    // Failed or Succeeded once killed; "" before
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
	st := corev1.PodStatus{Message: r.message}
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
	for _, c := range r.notRunInit {
		st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: ImageID,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: ReasonInitNotRun, Message: "the lab kubelet does not run init containers",
			}},
		})
	}
	allRunning, allReady := true, true
	var notReady []string
	for _, c := range r.containers {
		cs := c.status(r.uid)
		if c.sidecar {
			st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
		} else {
			st.ContainerStatuses = append(st.ContainerStatuses, cs)
		}
		allRunning = allRunning && c.running
		if !cs.Ready {
			allReady = false
			notReady = append(notReady, c.name)
		}
	}
	switch {
	case r.terminal != "":
		st.Phase = r.terminal
	case r.sandbox && allRunning && len(r.containers) > 0:
		st.Phase = corev1.PodRunning
	default:
		st.Phase = corev1.PodPending
	}

	sandboxReason := ""
	if !r.sandbox {
		sandboxReason = "SandboxNotReady"
	}
	initReason := ""
	if len(r.notRunInit) > 0 {
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
		keep.set(corev1.PodInitialized, true, initReason, "", now),
		keep.set(corev1.ContainersReady, crOK, crReason, crMessage, now),
		keep.set(corev1.PodReady, readyOK, readyReason, readyMessage, now),
	}
	return st
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
	cs := corev1.ContainerStatus{
		Name: c.name, Image: c.image, ImageID: ImageID,
		Ready:        c.running && c.started && c.ready,
		Started:      &started,
		RestartCount: c.restarts,
	}
	if c.instance > 0 {
		cs.ContainerID = fmt.Sprintf("kpbench://%s/%s/%d", podUID, c.name, c.instance-1)
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
