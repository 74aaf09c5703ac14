//go:build linux

package testbed

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"kpbench.dev/kpbench/apistore"
	"kpbench.dev/kpbench/internal/chans"
	"kpbench.dev/kpbench/lab"
)

// kubelet turns the Pods the control plane schedules into lab pods, and reports their IP
// and readiness back, in the order the events come.
type kubelet struct {
	lab     *lab.Lab
	cluster *apistore.Store

	mu        sync.Mutex
	processed uint64
	err       error // first failure, reported by waitProcessed
	progress  chan struct{}
}

func newKubelet(l *lab.Lab, c *apistore.Store) *kubelet {
	return &kubelet{lab: l, cluster: c, progress: make(chan struct{})}
}

// HostName is the lab host name of a cluster pod: its name in the default namespace,
// namespace.name elsewhere.
func HostName(namespace, name string) string {
	if namespace == "" || namespace == "default" {
		return name
	}
	return namespace + "." + name
}

func (k *kubelet) run(ctx context.Context, events <-chan apistore.Event) {
	for ev := range chans.Each(ctx, events) {
		var err error
		if pod, isPod := ev.Object.(*corev1.Pod); isPod {
			err = k.handle(ctx, ev.Type, pod)
		}
		k.mu.Lock()
		if err != nil && k.err == nil {
			k.err = err
		}
		if ev.ResourceVersion > k.processed {
			k.processed = ev.ResourceVersion
		}
		close(k.progress)
		k.progress = make(chan struct{})
		k.mu.Unlock()
	}
}

func (k *kubelet) handle(ctx context.Context, typ apistore.EventType, pod *corev1.Pod) error {
	host := HostName(pod.Namespace, pod.Name)
	_, exists := k.lab.Host(host)
	switch {
	case typ == apistore.Deleted:
		if exists {
			return k.lab.RemovePod(ctx, host)
		}
		return nil
	case !exists && pod.Spec.NodeName != "":
		ports, err := podPorts(pod)
		if err != nil {
			return err
		}
		h, err := k.lab.AddPod(ctx, lab.PodSpec{Name: host, Node: pod.Spec.NodeName, Ports: ports, Labels: pod.Labels})
		if err != nil {
			return fmt.Errorf("kubelet: %w", err)
		}
		return k.cluster.SetPodStatus(pod.Namespace, pod.Name, apistore.PodStatus{IP: h.IP, Ready: true})
	case exists && pod.DeletionTimestamp != nil:
		h, _ := k.lab.Host(host)
		return k.lab.SetPodConditions(host, h.Ready, true)
	}
	return nil
}

// podPorts returns the ports the pod's echo server listens on: every declared container
// port (TCP and UDP; SCTP cannot be served), or the lab's defaults when none is declared.
func podPorts(pod *corev1.Pod) ([]lab.Port, error) {
	var ports []lab.Port
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			proto := lab.Protocol(strings.ToUpper(string(p.Protocol)))
			if proto == "" {
				proto = lab.TCP
			}
			if proto != lab.TCP && proto != lab.UDP {
				return nil, fmt.Errorf("pod %s/%s: port %d/%s: the lab's echo server speaks TCP and UDP only", pod.Namespace, pod.Name, p.ContainerPort, p.Protocol)
			}
			ports = append(ports, lab.Port{Number: p.ContainerPort, Protocol: proto})
		}
	}
	return ports, nil
}

// waitProcessed waits until every event up to rv was handled, and reports the first
// failure of the kubelet.
func (k *kubelet) waitProcessed(ctx context.Context, rv uint64) error {
	for {
		k.mu.Lock()
		done, err, ch := k.processed >= rv, k.err, k.progress
		k.mu.Unlock()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubelet: pods not started: %w", ctx.Err())
		case <-ch:
		}
	}
}

// setConditions updates a pod's readiness in the control plane and in the lab's record.
func (k *kubelet) setConditions(namespace, name string, ready, terminating bool) error {
	host := HostName(namespace, name)
	h, ok := k.lab.Host(host)
	if !ok {
		return fmt.Errorf("no pod %s/%s in the lab", namespace, name)
	}
	if terminating {
		if err := k.cluster.MarkTerminating(namespace, name); err != nil {
			return err
		}
	}
	st := apistore.PodStatus{IP: h.IP, Ready: ready, Terminating: terminating}
	if !h.IP.IsValid() {
		st.IP = netip.Addr{}
	}
	return errors.Join(k.cluster.SetPodStatus(namespace, name, st), k.lab.SetPodConditions(host, ready, terminating))
}
