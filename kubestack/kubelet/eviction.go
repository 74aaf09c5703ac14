//go:build linux

package kubelet

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Local ephemeral storage limits, enforced as a kubelet's eviction manager enforces them:
// a pod whose containers together use more than the sum of their ephemeral-storage limits,
// or a container that uses more than its own, is evicted.
//
// What counts as a container's usage: the bytes used in the private tmpfs root that the
// exec helper makes for the container's process (RunPodExec), read with statfs on
// /proc/<pid>/root. That tmpfs is where a container's own writes land: its working
// directory (/ unless workingDir says otherwise) and every new top-level path. It is the
// lab's stand-in for a container's writable layer. Not counted, unlike a kubelet:
//   - writes under the top-level directories bound from the host (/tmp, /var, /root...):
//     those are the host's files, shared by every container and the host, not the
//     container's; a container that writes there is never evicted for it;
//   - the container's logs, the pod's /etc/hosts and emptyDir volumes (the lab mounts
//     none);
//   - the writes of commands run by kubectl exec, probes and hooks: each runs in a tmpfs
//     root of its own, gone when it ends;
//   - a container that is not running: its tmpfs went with its process (a restarted
//     container starts empty, where a runtime keeps the writable layer).

const (
	// ReasonEvicted is the reason of an evicted pod's status and of its Warning event (a
	// kubelet's).
	ReasonEvicted = "Evicted"
	// storageCheckPeriod is how often the usage of a pod with ephemeral-storage limits is
	// read. A kubelet's eviction manager looks every 10 s on statistics its housekeeping
	// gathers every 10 s or so; reading one statfs per container is cheap, and a shorter
	// period keeps a tmpfs (memory) that outgrows its limit from growing long unnoticed.
	storageCheckPeriod = 2 * time.Second
	// evictionGrace is how long an evicted pod's containers get to stop: a kubelet evicts
	// for local storage with a grace period of 1 s, which its runtime raises to its minimal
	// shutdown window of 2 s.
	evictionGrace = 2 * time.Second
)

// containerStorage is one container's ephemeral-storage limit and usage.
type containerStorage struct {
	name string
	// limit is its limits.ephemeral-storage; nil when it sets none.
	limit *resource.Quantity
	// used is its usage in bytes (see above).
	used int64
}

// storageReading is the last check of a pod's ephemeral storage: its containers' total
// usage, and whether it got the pod evicted.
type storageReading struct {
	used    int64
	evicted bool
}

// podStorageLimit is a pod's ephemeral-storage limit as a kubelet sums it: the regular
// containers' and restartable init containers' limits added up, or an init container's
// (with the restartable ones started before it) when that is larger. It reports false
// when no container sets one.
func podStorageLimit(pod *corev1.Pod) (resource.Quantity, bool) {
	var sum, sidecars, initMax resource.Quantity
	found := false
	limit := func(c *corev1.Container) (resource.Quantity, bool) {
		q, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]
		found = found || ok
		return q, ok
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		q, ok := limit(c)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			if ok {
				sidecars.Add(q)
			}
			continue
		}
		if ok {
			q.Add(sidecars)
			if q.Cmp(initMax) > 0 {
				initMax = q
			}
		}
	}
	for i := range pod.Spec.Containers {
		if q, ok := limit(&pod.Spec.Containers[i]); ok {
			sum.Add(q)
		}
	}
	sum.Add(sidecars)
	if initMax.Cmp(sum) > 0 {
		sum = initMax
	}
	return sum, found
}

// storageEviction decides whether a pod is evicted for its ephemeral storage, in a
// kubelet's order: the pod's total usage over its limit (podLimit, when set), then a
// container's usage over its own limit (a limit of 0 is none). It returns the eviction's
// message, a kubelet's (trailing space included), or "" when the pod stays.
func storageEviction(podLimit *resource.Quantity, cs []containerStorage) string {
	if podLimit != nil {
		var total int64
		for _, c := range cs {
			total += c.used
		}
		if resource.NewQuantity(total, resource.BinarySI).Cmp(*podLimit) > 0 {
			return fmt.Sprintf("Pod ephemeral local storage usage exceeds the total limit of containers %s. ", podLimit.String())
		}
	}
	for _, c := range cs {
		if c.limit != nil && c.limit.Value() != 0 && resource.NewQuantity(c.used, resource.BinarySI).Cmp(*c.limit) > 0 {
			return fmt.Sprintf("Container %s exceeded its local ephemeral storage limit %q. ", c.name, c.limit.String())
		}
	}
	return ""
}

// rootUsage is the bytes used in the filesystem of process pid's root directory: for a
// container's process, its private tmpfs root. It reports false while the process has
// not entered that root yet (the exec helper's first moments, when its root is still the
// kubelet's: the host's filesystem, whose usage is nobody's), or when it is gone.
func rootUsage(pid int) (int64, bool) {
	root := fmt.Sprintf("/proc/%d/root", pid)
	var own, its unix.Stat_t
	if unix.Stat("/proc/self/root", &own) != nil || unix.Stat(root, &its) != nil || own.Dev == its.Dev {
		return 0, false
	}
	var st unix.Statfs_t
	if unix.Statfs(root, &st) != nil || st.Type != unix.TMPFS_MAGIC {
		return 0, false
	}
	return int64(st.Blocks-st.Bfree) * fsUnit(&st), true
}

// storageLimited reports whether a pod has an ephemeral-storage limit to enforce.
func storageLimited(pod *corev1.Pod) bool {
	_, ok := podStorageLimit(pod)
	return ok
}

// checkStorage reads the usage of the pod's containers when a check is due, and evicts
// the pod when it exceeds a limit. It reports whether the pod is being evicted.
func (w *podWorker) checkStorage(ctx context.Context, pod *corev1.Pod) bool {
	if !storageLimited(pod) || time.Now().Before(w.storageCheckAt) {
		return false
	}
	w.storageCheckAt = time.Now().Add(storageCheckPeriod)
	var cs []containerStorage
	for _, c := range w.containers {
		if c.r.init && !c.r.sidecar {
			continue // a kubelet checks the limits of regular and restartable containers
		}
		s := containerStorage{name: c.r.spec.Name}
		if q, ok := c.r.spec.Resources.Limits[corev1.ResourceEphemeralStorage]; ok {
			s.limit = &q
		}
		if c.proc != nil {
			// A process that just ended, or has not entered its root yet, uses nothing.
			if used, ok := rootUsage(c.proc.cmd.Process.Pid); ok {
				s.used = used
			}
		}
		cs = append(cs, s)
	}
	podLimit, _ := podStorageLimit(pod)
	msg := storageEviction(&podLimit, cs)
	var total int64
	for _, c := range cs {
		total += c.used
	}
	w.storageUsed.Store(&storageReading{used: total, evicted: msg != ""})
	if msg == "" {
		return false
	}
	w.evict(ctx, pod, msg)
	return true
}

// evict evicts the pod as a kubelet's eviction manager does: a Warning event Evicted, its
// containers stopped with evictionGrace, then its status Failed with reason Evicted and
// the message. The Pod object stays (sync: endEviction) until someone deletes it. A
// kubelet adds no DisruptionTarget condition for a limit it enforces (only for node
// pressure), and neither does the lab kubelet.
func (w *podWorker) evict(ctx context.Context, pod *corev1.Pod, msg string) {
	w.k.eventf(pod, corev1.EventTypeWarning, ReasonEvicted, "%s", msg)
	w.run.reason, w.run.message = ReasonEvicted, msg
	w.stopAll(ctx, pod, evictionGrace)
}

// endEviction ends an evicted pod once its containers stopped (or their grace period is
// over): what still runs is killed, its network goes, and its phase is Failed.
func (w *podWorker) endEviction(ctx context.Context) {
	for _, c := range w.containers {
		w.stopContainer(c, "Error")
	}
	w.teardown(ctx)
	w.terminating, w.run.terminal = false, corev1.PodFailed
}
