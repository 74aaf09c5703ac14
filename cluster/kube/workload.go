package kube

import (
	"kpbench.dev/kpbench/internal/upstream"

	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// RunLabel labels everything kpbench creates with its run's id; `cluster cleanup` finds
// the namespaces by it.
const RunLabel = "kpbench.dev/run"

// OwnerAnnotation records the host and pid of the kpbench process that owns a namespace.
const OwnerAnnotation = "kpbench.dev/owner"

// freePortBase is where ports for netexec's HTTP server are taken from when a container
// declares UDP ports only (netexec always serves HTTP).
const freePortBase = 20080

// WorkloadOptions say how manifests become the objects created in the run's namespace.
type WorkloadOptions struct {
	// Namespace is the run's namespace; every object is moved there.
	Namespace string
	// RunID labels every object.
	RunID string
	// Image replaces every container's image (default upstream.AgnhostImage).
	Image string
	// KeepImages keeps the containers as written (only reachability can be checked then).
	KeepImages bool
	// IdlePort, when set, is the port netexec serves in a container that declares none
	// (instead of pause): such pods can then send probes (a scenario's client pods).
	IdlePort int32
}

// Workload turns the manifests' objects into what kpbench creates: the same objects in
// the run's namespace, labelled with the run, and (unless KeepImages) each pod's
// containers replaced by agnhost netexec listening on the container's declared ports, so
// that every answer names its pod. It returns the objects and a note per change.
func Workload(objs []runtime.Object, o WorkloadOptions) ([]runtime.Object, []string, error) {
	if o.Image == "" {
		o.Image = upstream.AgnhostImage
	}
	var out []runtime.Object
	var notes []string
	seen := map[string]string{}
	for _, obj := range objs {
		obj = obj.DeepCopyObject()
		m, ok := obj.(metav1.Object)
		if !ok {
			return nil, nil, fmt.Errorf("%T: not a Kubernetes object", obj)
		}
		kind := kindOf(obj)
		key := kind + "/" + m.GetName()
		if prev, dup := seen[key]; dup {
			return nil, nil, fmt.Errorf("%s %s: namespaces %s and %s both move to %s", kind, m.GetName(), prev, m.GetNamespace(), o.Namespace)
		}
		seen[key] = m.GetNamespace()
		m.SetNamespace(o.Namespace)
		m.SetResourceVersion("")
		m.SetUID("")
		m.SetLabels(withLabel(m.GetLabels(), RunLabel, o.RunID))
		switch t := obj.(type) {
		case *corev1.Pod:
			if !o.KeepImages {
				notes = append(notes, replaceContainers(&t.Spec, o.Image, "Pod "+t.Name, o.IdlePort)...)
			}
		case *appsv1.Deployment:
			t.Spec.Template.Labels = withLabel(t.Spec.Template.Labels, RunLabel, o.RunID)
			if !o.KeepImages {
				notes = append(notes, replaceContainers(&t.Spec.Template.Spec, o.Image, "Deployment "+t.Name, o.IdlePort)...)
			}
		case *corev1.Service:
			t.Spec.ClusterIPs = nil
			if t.Spec.ClusterIP != corev1.ClusterIPNone {
				t.Spec.ClusterIP = ""
			}
		case *discoveryv1.EndpointSlice:
		default:
			return nil, nil, fmt.Errorf("%s %s: kind not supported on a cluster (Service, EndpointSlice, Deployment, Pod)", kind, m.GetName())
		}
		out = append(out, obj)
	}
	return out, notes, nil
}

// kindOf names an object's kind from its Go type.
func kindOf(obj runtime.Object) string {
	switch obj.(type) {
	case *corev1.Pod:
		return "Pod"
	case *corev1.Service:
		return "Service"
	case *appsv1.Deployment:
		return "Deployment"
	case *discoveryv1.EndpointSlice:
		return "EndpointSlice"
	case *corev1.Namespace:
		return "Namespace"
	}
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	return fmt.Sprintf("%T", obj)
}

func withLabel(l map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(l)+1)
	for a, b := range l {
		out[a] = b
	}
	out[k] = v
	return out
}

// replaceContainers makes every container agnhost netexec on its declared ports (one
// extra netexec container per further TCP/UDP port pair, since netexec opens one of
// each), drops what would not work in the run's namespace or with another image
// (volumes, env, init containers, service account, hooks, security contexts, exec
// probes), and returns what it changed.
func replaceContainers(spec *corev1.PodSpec, image, what string, idlePort int32) []string {
	var notes []string
	if len(spec.Volumes) > 0 || len(spec.InitContainers) > 0 || spec.ServiceAccountName != "" {
		notes = append(notes, fmt.Sprintf("%s: volumes, init containers and service account dropped", what))
	}
	declared := map[int32]bool{}
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			declared[p.ContainerPort] = true
		}
	}
	next := int32(freePortBase)
	freePort := func() int32 {
		for declared[next] {
			next++
		}
		declared[next] = true
		return next
	}
	var containers []corev1.Container
	for _, c := range spec.Containers {
		var tcp, udp []int32
		for _, p := range c.Ports {
			switch p.Protocol {
			case corev1.ProtocolUDP:
				udp = append(udp, p.ContainerPort)
			case corev1.ProtocolSCTP:
				notes = append(notes, fmt.Sprintf("%s: container %s: SCTP port %d not served (agnhost netexec's SCTP server is not started)", what, c.Name, p.ContainerPort))
			default:
				tcp = append(tcp, p.ContainerPort)
			}
		}
		n := max(len(tcp), len(udp))
		for i := range max(n, 1) {
			nc := corev1.Container{
				Name:            c.Name,
				Image:           image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Resources:       c.Resources,
			}
			if i > 0 {
				nc.Name = fmt.Sprintf("%s-kpb%d", c.Name, i)
			} else {
				nc.ReadinessProbe = tcpProbe(c.ReadinessProbe)
			}
			// Each container declares the ports it serves (a kubelet that serves the
			// declared ports, as the lab's does, would otherwise bind them twice).
			for _, p := range c.Ports {
				if i < len(tcp) && p.ContainerPort == tcp[i] && p.Protocol != corev1.ProtocolUDP && p.Protocol != corev1.ProtocolSCTP ||
					i < len(udp) && p.ContainerPort == udp[i] && p.Protocol == corev1.ProtocolUDP ||
					i == 0 && p.Protocol == corev1.ProtocolSCTP {
					nc.Ports = append(nc.Ports, p)
				}
			}
			if n == 0 && idlePort != 0 && i == 0 && len(containers) == 0 {
				nc.Args = []string{"netexec", "--http-port=" + strconv.Itoa(int(idlePort)), "--udp-port=-1"}
			} else if n == 0 {
				nc.Args = []string{"pause"}
			} else {
				httpPort, udpPort := int32(-1), int32(-1)
				if i < len(tcp) {
					httpPort = tcp[i]
				} else {
					httpPort = freePort()
				}
				if i < len(udp) {
					udpPort = udp[i]
				}
				nc.Args = []string{"netexec", "--http-port=" + strconv.Itoa(int(httpPort)), "--udp-port=" + strconv.Itoa(int(udpPort))}
				if nc.ReadinessProbe == nil {
					// Ready once netexec listens, not when its process starts: a probe
					// sent at once would otherwise meet a refusal from a Ready endpoint.
					nc.ReadinessProbe = &corev1.Probe{
						ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(httpPort)}},
						PeriodSeconds: 1,
					}
				}
			}
			containers = append(containers, nc)
		}
		notes = append(notes, fmt.Sprintf("%s: container %s: image %s → %s %s", what, c.Name, c.Image, image, strings.Join(containers[len(containers)-1].Args, " ")))
	}
	spec.Containers = containers
	spec.InitContainers = nil
	spec.EphemeralContainers = nil
	spec.Volumes = nil
	spec.ServiceAccountName = ""
	spec.DeprecatedServiceAccount = ""
	no := false
	spec.AutomountServiceAccountToken = &no
	spec.ImagePullSecrets = nil
	spec.SecurityContext = nil
	spec.ResourceClaims = nil
	one := int64(1)
	spec.TerminationGracePeriodSeconds = &one
	return slices.Compact(notes)
}

// tcpProbe keeps a readiness probe's port as a tcpSocket probe (netexec answers no
// application path but /healthz); exec and grpc probes are dropped.
func tcpProbe(p *corev1.Probe) *corev1.Probe {
	if p == nil {
		return nil
	}
	var port intstr.IntOrString
	switch {
	case p.HTTPGet != nil:
		port = p.HTTPGet.Port
	case p.TCPSocket != nil:
		port = p.TCPSocket.Port
	default:
		return nil
	}
	q := p.DeepCopy()
	q.ProbeHandler = corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port}}
	return q
}
