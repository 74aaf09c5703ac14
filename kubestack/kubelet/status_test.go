//go:build linux

package kubelet

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// conditions returns a status's conditions as type: status.
func conditions(st corev1.PodStatus) map[corev1.PodConditionType]corev1.ConditionStatus {
	out := map[corev1.PodConditionType]corev1.ConditionStatus{}
	for _, c := range st.Conditions {
		out[c.Type] = c.Status
	}
	return out
}

func TestBuildStatus(t *testing.T) {
	started := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	now := metav1.NewTime(started.Add(time.Minute))
	running := func(name string, ready bool) *containerRun {
		return &containerRun{name: name, image: "img", instance: 1, running: true, startedAt: started, started: true, ready: ready}
	}
	base := func(cs ...*containerRun) *podRun {
		return &podRun{uid: "u1", hostIP: netip.MustParseAddr("172.18.0.10"), podIP: netip.MustParseAddr("10.244.0.2"),
			startTime: started, sandbox: true, containers: cs, message: "m"}
	}
	T, F := corev1.ConditionTrue, corev1.ConditionFalse
	tests := []struct {
		name      string
		run       *podRun
		wantPhase corev1.PodPhase
		wantConds map[corev1.PodConditionType]corev1.ConditionStatus
		check     func(t *testing.T, st corev1.PodStatus)
	}{
		{name: "no network yet", run: &podRun{uid: "u1", hostIP: netip.MustParseAddr("172.18.0.10"), containers: []*containerRun{{name: "c"}}},
			wantPhase: corev1.PodPending,
			wantConds: map[corev1.PodConditionType]corev1.ConditionStatus{corev1.PodReadyToStartContainers: F, corev1.PodInitialized: T, corev1.ContainersReady: F, corev1.PodReady: F},
			check: func(t *testing.T, st corev1.PodStatus) {
				assert.Empty(t, st.PodIP)
				assert.Equal(t, "ContainerCreating", st.ContainerStatuses[0].State.Waiting.Reason)
				assert.Empty(t, st.ContainerStatuses[0].ContainerID)
			}},
		{name: "running and ready", run: base(running("c", true)), wantPhase: corev1.PodRunning,
			wantConds: map[corev1.PodConditionType]corev1.ConditionStatus{corev1.PodReadyToStartContainers: T, corev1.PodInitialized: T, corev1.ContainersReady: T, corev1.PodReady: T},
			check: func(t *testing.T, st corev1.PodStatus) {
				cs := st.ContainerStatuses[0]
				assert.True(t, cs.Ready)
				assert.True(t, *cs.Started)
				assert.Equal(t, "kpbench://u1/c/0", cs.ContainerID)
				assert.Equal(t, ImageID, cs.ImageID)
				assert.Equal(t, metav1.NewTime(started), cs.State.Running.StartedAt)
				assert.Equal(t, "10.244.0.2", st.PodIP)
				assert.Equal(t, []corev1.PodIP{{IP: "10.244.0.2"}}, st.PodIPs)
				assert.Equal(t, "172.18.0.10", st.HostIP)
				assert.Equal(t, "m", st.Message)
			}},
		{name: "one container unready", run: base(running("a", true), running("b", false)), wantPhase: corev1.PodRunning,
			wantConds: map[corev1.PodConditionType]corev1.ConditionStatus{corev1.PodReadyToStartContainers: T, corev1.PodInitialized: T, corev1.ContainersReady: F, corev1.PodReady: F},
			check: func(t *testing.T, st corev1.PodStatus) {
				for _, c := range st.Conditions {
					if c.Type == corev1.PodReady {
						assert.Equal(t, "ContainersNotReady", c.Reason)
						assert.Equal(t, "containers with unready status: [b]", c.Message)
					}
				}
			}},
		{name: "not started: a startup probe has not passed", run: base(&containerRun{name: "c", instance: 1, running: true, startedAt: started, ready: true}),
			wantPhase: corev1.PodRunning,
			wantConds: map[corev1.PodConditionType]corev1.ConditionStatus{corev1.PodReadyToStartContainers: T, corev1.PodInitialized: T, corev1.ContainersReady: F, corev1.PodReady: F}},
		{name: "readiness gate without its condition", run: func() *podRun {
			r := base(running("c", true))
			r.readinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}}
			return r
		}(), wantPhase: corev1.PodRunning,
			wantConds: map[corev1.PodConditionType]corev1.ConditionStatus{corev1.PodReadyToStartContainers: T, corev1.PodInitialized: T, corev1.ContainersReady: T, corev1.PodReady: F}},
		{name: "readiness gate True", run: func() *podRun {
			r := base(running("c", true))
			r.readinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}}
			r.otherConditions = []corev1.PodCondition{{Type: "example.com/lb", Status: T}}
			return r
		}(), wantPhase: corev1.PodRunning,
			wantConds: map[corev1.PodConditionType]corev1.ConditionStatus{corev1.PodReadyToStartContainers: T, corev1.PodInitialized: T, corev1.ContainersReady: T, corev1.PodReady: T}},
		{name: "a container waiting after a failed start", run: base(running("a", true), &containerRun{name: "b", waitingReason: "RunContainerError", waitingMessage: "address already in use"}),
			wantPhase: corev1.PodPending,
			wantConds: map[corev1.PodConditionType]corev1.ConditionStatus{corev1.PodReadyToStartContainers: T, corev1.PodInitialized: T, corev1.ContainersReady: F, corev1.PodReady: F},
			check: func(t *testing.T, st corev1.PodStatus) {
				assert.Equal(t, &corev1.ContainerStateWaiting{Reason: "RunContainerError", Message: "address already in use"}, st.ContainerStatuses[1].State.Waiting)
			}},
		{name: "killed at the end of its grace period", run: func() *podRun {
			r := base(&containerRun{name: "c", instance: 1, restarts: 1,
				terminated: &corev1.ContainerStateTerminated{ExitCode: ExitCodeKilled, Reason: "Error"},
				lastTerm:   &corev1.ContainerStateTerminated{ExitCode: ExitCodeKilled, Reason: "Error"}})
			r.terminal = corev1.PodFailed
			return r
		}(), wantPhase: corev1.PodFailed,
			wantConds: map[corev1.PodConditionType]corev1.ConditionStatus{corev1.PodReadyToStartContainers: F, corev1.PodInitialized: T, corev1.ContainersReady: F, corev1.PodReady: F},
			check: func(t *testing.T, st corev1.PodStatus) {
				cs := st.ContainerStatuses[0]
				assert.Equal(t, int32(ExitCodeKilled), cs.State.Terminated.ExitCode)
				assert.Equal(t, int32(1), cs.RestartCount)
				assert.NotNil(t, cs.LastTerminationState.Terminated)
				assert.False(t, cs.Ready)
				assert.Empty(t, st.PodIP, "a finished pod has no IP any more")
			}},
		{name: "init containers not run, a sidecar runs", run: func() *podRun {
			side := running("side", true)
			side.sidecar = true
			initC := &containerRun{name: "init", image: "busybox", init: true, terminated: &corev1.ContainerStateTerminated{Reason: ReasonInitNotRun}}
			return base(initC, side, running("c", true))
		}(), wantPhase: corev1.PodRunning,
			wantConds: map[corev1.PodConditionType]corev1.ConditionStatus{corev1.PodReadyToStartContainers: T, corev1.PodInitialized: T, corev1.ContainersReady: T, corev1.PodReady: T},
			check: func(t *testing.T, st corev1.PodStatus) {
				require.Len(t, st.InitContainerStatuses, 2)
				assert.Equal(t, ReasonInitNotRun, st.InitContainerStatuses[0].State.Terminated.Reason)
				assert.Equal(t, "side", st.InitContainerStatuses[1].Name)
				assert.NotNil(t, st.InitContainerStatuses[1].State.Running)
				require.Len(t, st.ContainerStatuses, 1)
				for _, c := range st.Conditions {
					if c.Type == corev1.PodInitialized {
						assert.Equal(t, ReasonInitNotRun, c.Reason)
					}
				}
			}},
		{name: "an init container runs: the others wait for it", run: func() *podRun {
			initC := running("init", true)
			initC.init = true
			return base(initC, &containerRun{name: "c"})
		}(), wantPhase: corev1.PodPending,
			wantConds: map[corev1.PodConditionType]corev1.ConditionStatus{corev1.PodReadyToStartContainers: T, corev1.PodInitialized: F, corev1.ContainersReady: F, corev1.PodReady: F},
			check: func(t *testing.T, st corev1.PodStatus) {
				assert.Equal(t, "PodInitializing", st.ContainerStatuses[0].State.Waiting.Reason)
				for _, c := range st.Conditions {
					if c.Type == corev1.PodInitialized {
						assert.Equal(t, "containers with incomplete status: [init]", c.Message)
					}
				}
			}},
		{name: "an init container failed, restartPolicy Never", run: func() *podRun {
			initC := &containerRun{name: "init", init: true, instance: 1, terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}
			r := base(initC, &containerRun{name: "c"})
			r.restartPolicy = corev1.RestartPolicyNever
			return r
		}(), wantPhase: corev1.PodFailed,
			wantConds: map[corev1.PodConditionType]corev1.ConditionStatus{corev1.PodReadyToStartContainers: T, corev1.PodInitialized: F, corev1.ContainersReady: F, corev1.PodReady: F}},
		{name: "every container exited 0", run: base(
			&containerRun{name: "a", instance: 1, terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}},
			&containerRun{name: "b", instance: 1, terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}),
			wantPhase: corev1.PodSucceeded,
			wantConds: map[corev1.PodConditionType]corev1.ConditionStatus{corev1.PodReadyToStartContainers: T, corev1.PodInitialized: T, corev1.ContainersReady: F, corev1.PodReady: F}},
		{name: "one exited 1 for good", run: base(
			&containerRun{name: "a", instance: 1, terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}},
			&containerRun{name: "b", instance: 1, terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}),
			wantPhase: corev1.PodFailed,
			wantConds: map[corev1.PodConditionType]corev1.ConditionStatus{corev1.PodReadyToStartContainers: T, corev1.PodInitialized: T, corev1.ContainersReady: F, corev1.PodReady: F}},
		{name: "crash looping: Running, waiting with the last termination", run: base(
			&containerRun{name: "a", instance: 2, restarts: 2, waitingReason: "CrashLoopBackOff",
				lastTerm: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}),
			wantPhase: corev1.PodRunning,
			wantConds: map[corev1.PodConditionType]corev1.ConditionStatus{corev1.PodReadyToStartContainers: T, corev1.PodInitialized: T, corev1.ContainersReady: F, corev1.PodReady: F},
			check: func(t *testing.T, st corev1.PodStatus) {
				cs := st.ContainerStatuses[0]
				assert.Equal(t, "CrashLoopBackOff", cs.State.Waiting.Reason)
				assert.Equal(t, int32(3), cs.LastTerminationState.Terminated.ExitCode)
				assert.Equal(t, "kpbench://u1/a/1", cs.ContainerID)
			}},
		{name: "a process container reports what runs", run: func() *podRun {
			c := running("c", true)
			c.imageID = ProcessImageID + "/bin/agnhost"
			return base(c)
		}(), wantPhase: corev1.PodRunning,
			wantConds: map[corev1.PodConditionType]corev1.ConditionStatus{corev1.PodReadyToStartContainers: T, corev1.PodInitialized: T, corev1.ContainersReady: T, corev1.PodReady: T},
			check: func(t *testing.T, st corev1.PodStatus) {
				assert.Equal(t, "kpbench-process:///bin/agnhost", st.ContainerStatuses[0].ImageID)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := buildStatus(tt.run, conditionKeeper{}, now)
			assert.Equal(t, tt.wantPhase, st.Phase)
			assert.Equal(t, tt.wantConds, conditions(st))
			if tt.check != nil {
				tt.check(t, st)
			}
		})
	}
}

// TestBuildStatusKeepsTransitionTimes: a condition's lastTransitionTime moves only when its
// status does.
func TestBuildStatusKeepsTransitionTimes(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	t1, t2 := metav1.NewTime(t0.Add(time.Second)), metav1.NewTime(t0.Add(2*time.Second))
	c := &containerRun{name: "c", instance: 1, running: true, started: true}
	r := &podRun{uid: "u", sandbox: true, containers: []*containerRun{c}}
	keep := conditionKeeper{}
	readyAt := func(st corev1.PodStatus) metav1.Time {
		for _, cond := range st.Conditions {
			if cond.Type == corev1.PodReady {
				return cond.LastTransitionTime
			}
		}
		t.Fatal("no Ready condition")
		return metav1.Time{}
	}
	assert.Equal(t, t0, readyAt(buildStatus(r, keep, t0)), "not ready since t0")
	assert.Equal(t, t0, readyAt(buildStatus(r, keep, t1)), "still not ready")
	c.ready = true
	assert.Equal(t, t2, readyAt(buildStatus(r, keep, t2)), "ready since t2")
}

func TestTerminalPhase(t *testing.T) {
	exited := func(code int32) *containerRun {
		return &containerRun{name: "c", terminated: &corev1.ContainerStateTerminated{ExitCode: code}}
	}
	sidecar := exited(137)
	sidecar.sidecar = true
	tests := []struct {
		name string
		cs   []*containerRun
		want corev1.PodPhase
	}{
		{name: "all exited 0 (sidecars do not count)", cs: []*containerRun{exited(0), exited(0), sidecar}, want: corev1.PodSucceeded},
		{name: "agnhost pause exits 2 at SIGTERM", cs: []*containerRun{exited(0), exited(2)}, want: corev1.PodFailed},
		{name: "never started", cs: []*containerRun{{name: "c"}}, want: corev1.PodFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, terminalPhase(&podRun{containers: tt.cs}))
		})
	}
}
