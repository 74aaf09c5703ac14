//go:build linux

package kubelet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// sandbox is what the kubelet API needs of a running pod: where its network is, and the
// files its exec'd commands see. The pod worker publishes it once the pod's network
// exists and withdraws it at teardown, which ends every exec and port-forward into it.
type sandbox struct {
	nsPath string
	podIP  netip.Addr
	// dir holds the pod's files (resolv.conf, hosts, hostname): <state>/pods/<uid>.
	dir string
	// ctx ends at the pod's teardown.
	ctx    context.Context
	cancel context.CancelFunc

	once     sync.Once
	filesErr error
}

// podTarget is a pod the kubelet API acts on: its latest object and its sandbox.
type podTarget struct {
	pod *corev1.Pod
	sb  *sandbox
}

// ref names the pod for its logs.
func (t podTarget) ref() PodRef {
	return PodRef{Namespace: t.pod.Namespace, Name: t.pod.Name, UID: t.pod.UID}
}

// publishSandbox makes the pod reachable through the kubelet API (see sandbox).
func (w *podWorker) publishSandbox() {
	ctx, cancel := context.WithCancel(w.k.runCtx)
	w.sandboxRef.Store(&sandbox{
		nsPath: w.nsPath, podIP: w.run.podIP, ctx: ctx, cancel: cancel,
		dir: filepath.Join(w.k.opts.StateDir, "pods", string(w.uid)),
	})
}

// withdrawSandbox ends the pod's execs and port-forwards and removes its files and logs.
func (w *podWorker) withdrawSandbox() {
	sb := w.sandboxRef.Swap(nil)
	if sb == nil {
		return
	}
	sb.cancel()
	if err := os.RemoveAll(sb.dir); err != nil {
		w.k.log.Warn("remove pod files", "dir", sb.dir, "err", err)
	}
	if pod := w.pod(); pod != nil && w.k.logs != nil {
		if err := w.k.logs.RemovePod(PodRef{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}); err != nil {
			w.k.log.Warn("remove pod logs", "err", err)
		}
	}
}

// findPod returns the pod namespace/name (of that UID when uid is set) that runs on this
// node with its network made.
func (k *Kubelet) findPod(namespace, name string, uid types.UID) (podTarget, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var found podTarget
	for id, w := range k.pods {
		pod, sb := w.pod(), w.sandboxRef.Load()
		if pod == nil || sb == nil || pod.Namespace != namespace || pod.Name != name || (uid != "" && uid != id) {
			continue
		}
		// A pod being deleted and its successor of the same name: the successor.
		if found.pod == nil || found.pod.DeletionTimestamp != nil {
			found = podTarget{pod: pod, sb: sb}
		}
	}
	return found, found.pod != nil
}

// podFiles writes (once per sandbox) the pod's resolv.conf, hosts and hostname, as a
// kubelet writes them for a container, and returns the mounts of an exec: what goes over
// /etc/resolv.conf, /etc/hosts, /etc/hostname and /agnhost, source first.
func (k *Kubelet) podFiles(t podTarget) ([][2]string, error) {
	sb := t.sb
	hostname := podHostname(t.pod, k.opts.Node.Name)
	sb.once.Do(func() {
		hostResolv, err := os.ReadFile("/etc/resolv.conf")
		if err != nil {
			sb.filesErr = fmt.Errorf("node's resolv.conf: %w", err)
			return
		}
		hostHosts, err := os.ReadFile("/etc/hosts")
		if err != nil {
			sb.filesErr = fmt.Errorf("node's hosts: %w", err)
			return
		}
		dns := podDNS(t.pod, k.opts.ClusterDNS, k.opts.ClusterDomain, parseResolvConf(hostResolv))
		if err := os.MkdirAll(sb.dir, 0o755); err != nil {
			sb.filesErr = err
			return
		}
		for name, data := range map[string][]byte{
			"resolv.conf": dns.resolvConf(),
			"hosts":       podHostsFile(t.pod, sb.podIP, hostname, k.opts.ClusterDomain, hostHosts),
			"hostname":    []byte(hostname + "\n"),
		} {
			if err := os.WriteFile(filepath.Join(sb.dir, name), data, 0o644); err != nil {
				sb.filesErr = err
				return
			}
		}
	})
	if sb.filesErr != nil {
		return nil, fmt.Errorf("files of pod %s/%s: %w", t.pod.Namespace, t.pod.Name, sb.filesErr)
	}
	var binds [][2]string
	for _, f := range []string{"resolv.conf", "hosts", "hostname"} {
		// Only over what the node has: a missing one would be made on the host's disk.
		if _, err := os.Stat("/etc/" + f); err == nil {
			binds = append(binds, [2]string{filepath.Join(sb.dir, f), "/etc/" + f})
		}
	}
	if k.opts.Agnhost != "" {
		if fi, err := os.Stat(k.opts.Agnhost); err == nil && fi.Mode().IsRegular() {
			binds = append(binds, [2]string{k.opts.Agnhost, "/agnhost"})
		}
	}
	return binds, nil
}

// logStart writes the first line of a container instance's log: what runs instead of
// its image (the echo server on its ports), so that `kubectl logs` says it.
func (w *podWorker) logStart(pod *corev1.Pod, c *container) {
	if w.k.logs == nil {
		return
	}
	ref := PodRef{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
	out, err := w.k.logs.Writer(ref, c.r.spec.Name, c.run.instance-1, StreamStdout)
	if err != nil {
		w.k.log.Warn("container log", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		return
	}
	_, err = fmt.Fprintf(out, "kpbench lab kubelet: container %s (image %s) runs kpbench's echo server on %s\n", c.r.spec.Name, c.r.spec.Image, portList(c.r.ports))
	if err = errors.Join(err, out.Close()); err != nil {
		w.k.log.Warn("container log", "pod", pod.Namespace+"/"+pod.Name, "err", err)
	}
}
