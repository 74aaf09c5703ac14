package kubelet

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"kpbench.dev/kpbench/lab/echo"
)

// runnable is a container of a pod as the lab kubelet runs it: an init container (run to
// completion, in order), a restartable init container (a sidecar) or a regular container,
// and how it is realised.
type runnable struct {
	spec    corev1.Container
	init    bool // a non-restartable init container
	sidecar bool
	ports   []echo.Port
	real    realisation
}

// runnables returns the containers of pod in the order a kubelet starts them: the init
// containers (sidecars among them) in order, then the regular containers. agnhost is the
// agnhost binary ("" when absent).
func runnables(pod *corev1.Pod, agnhost string) []runnable {
	var out []runnable
	for _, c := range pod.Spec.InitContainers {
		out = append(out, runnable{spec: c, init: !isSidecar(c), sidecar: isSidecar(c), ports: containerPorts(c), real: realise(c, agnhost)})
	}
	for _, c := range pod.Spec.Containers {
		out = append(out, runnable{spec: c, ports: containerPorts(c), real: realise(c, agnhost)})
	}
	return out
}

// isSidecar reports whether an init container is restartable (a native sidecar).
func isSidecar(c corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// containerPorts returns the TCP and UDP ports the container's echo server listens on: its
// declared ports, and, for `agnhost netexec`, the ports netexec itself would open
// (--http-port, default 8080, and --udp-port, default 8081; -1 turns one off), so that
// agnhost manifests that do not declare them work as on a real cluster. SCTP ports are
// left out (see unsupported).
func containerPorts(c corev1.Container) []echo.Port {
	var ports []echo.Port
	add := func(p echo.Port) {
		if !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	for _, p := range c.Ports {
		switch p.Protocol {
		case corev1.ProtocolTCP, "":
			add(echo.Port{Number: p.ContainerPort, Protocol: echo.TCP})
		case corev1.ProtocolUDP:
			add(echo.Port{Number: p.ContainerPort, Protocol: echo.UDP})
		}
	}
	if httpPort, udpPort, ok := netexecPorts(c); ok {
		if httpPort > 0 {
			add(echo.Port{Number: httpPort, Protocol: echo.TCP})
		}
		if udpPort > 0 {
			add(echo.Port{Number: udpPort, Protocol: echo.UDP})
		}
	}
	return ports
}

// netexecPorts finds `netexec` in the container's command and args (agnhost's
// subcommand) and returns the HTTP and UDP ports it would listen on.
func netexecPorts(c corev1.Container) (httpPort, udpPort int32, ok bool) {
	argv := append(slices.Clone(c.Command), c.Args...)
	i := slices.Index(argv, "netexec")
	if i < 0 {
		return 0, 0, false
	}
	httpPort, udpPort = 8080, 8081
	flags := argv[i+1:]
	for j := 0; j < len(flags); j++ {
		name, value, hasValue := strings.Cut(strings.TrimLeft(flags[j], "-"), "=")
		if !strings.HasPrefix(flags[j], "-") || (name != "http-port" && name != "udp-port") {
			continue
		}
		if !hasValue && j+1 < len(flags) {
			j++
			value = flags[j]
		}
		n, err := strconv.ParseInt(value, 10, 32)
		if err != nil || n > 65535 {
			continue // netexec would refuse to start; the declared ports still count
		}
		if name == "http-port" {
			httpPort = int32(n)
		} else {
			udpPort = int32(n)
		}
	}
	return httpPort, udpPort, true
}

// podHostname is the hostname of the pod's containers: the node's for a hostNetwork pod
// (it shares the node's UTS namespace), else spec.hostname, else the pod's name.
func podHostname(pod *corev1.Pod, node string) string {
	if pod.Spec.HostNetwork {
		return node
	}
	if pod.Spec.Hostname != "" {
		return pod.Spec.Hostname
	}
	return pod.Name
}

// unsupported lists what the lab kubelet ignores in pod, whose containers are rs, one short
// item each, for the Pod's event and status message (see the package documentation). The
// items are stable, in spec order. A container that cannot be realised at all is not
// listed: it waits, with its own event.
func unsupported(pod *corev1.Pod, rs []runnable) []string {
	var out []string
	if len(pod.Spec.Volumes) > 0 {
		names := make([]string, len(pod.Spec.Volumes))
		for i, v := range pod.Spec.Volumes {
			names[i] = v.Name
		}
		out = append(out, fmt.Sprintf("volumes not mounted (%s)", strings.Join(names, ", ")))
	}
	for _, r := range rs {
		if r.init && r.real.kind != kindProcess && r.real.kind != kindUnrealisable {
			out = append(out, fmt.Sprintf("init container %s not run", r.spec.Name))
		}
	}
	if len(pod.Spec.EphemeralContainers) > 0 {
		out = append(out, "ephemeral containers not run")
	}
	if sc := pod.Spec.SecurityContext; sc != nil && !reflect.DeepEqual(*sc, corev1.PodSecurityContext{}) {
		out = append(out, "pod securityContext")
	}
	for _, r := range rs {
		c := r.spec
		if r.init && r.real.kind != kindProcess {
			continue // not run at all: said above (or unrealisable)
		}
		var what []string
		if r.real.kind == kindEcho || r.real.kind == kindPause {
			if len(c.Command) > 0 || len(c.Args) > 0 {
				what = append(what, "command/args")
			}
			if len(c.Env) > 0 || len(c.EnvFrom) > 0 {
				what = append(what, "env (only exec probes and hooks see it)")
			}
		}
		// Of resources, only an ephemeral-storage limit is enforced (eviction.go).
		limits := len(c.Resources.Limits)
		if _, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; ok {
			limits--
		}
		if len(c.Resources.Requests) > 0 || limits > 0 || len(c.Resources.Claims) > 0 {
			what = append(what, "resources (not enforced)")
		}
		if c.SecurityContext != nil && !reflect.DeepEqual(*c.SecurityContext, corev1.SecurityContext{}) {
			what = append(what, "securityContext")
		}
		if l := c.Lifecycle; l != nil {
			for _, h := range []struct {
				kind string
				h    *corev1.LifecycleHandler
			}{{"postStart", l.PostStart}, {"preStop", l.PreStop}} {
				if h.h != nil && h.h.Exec == nil && h.h.HTTPGet == nil && h.h.Sleep == nil {
					what = append(what, h.kind+" hook not run")
				}
			}
			if l.StopSignal != nil {
				what = append(what, "stopSignal (SIGTERM is sent)")
			}
		}
		for _, p := range c.Ports {
			if p.Protocol == corev1.ProtocolSCTP && r.real.kind == kindEcho {
				what = append(what, fmt.Sprintf("SCTP port %d not served", p.ContainerPort))
			}
			if p.HostPort != 0 {
				what = append(what, fmt.Sprintf("hostPort %d not opened", p.HostPort))
			}
		}
		for _, pr := range []struct {
			kind  string
			probe *corev1.Probe
		}{{"startup", c.StartupProbe}, {"readiness", c.ReadinessProbe}, {"liveness", c.LivenessProbe}} {
			if pr.probe != nil && pr.probe.GRPC != nil {
				what = append(what, pr.kind+" probe grpc not supported")
			}
		}
		if len(what) > 0 {
			out = append(out, fmt.Sprintf("container %s: %s", c.Name, strings.Join(what, ", ")))
		}
	}
	return out
}

// statusMessage is the Pod's status.message: what runs for each container, and what was
// ignored.
func statusMessage(rs []runnable, ignored []string) string {
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		what := r.real.what
		if r.real.kind == kindUnrealisable {
			what = "not realisable: " + r.real.message
		}
		if r.init && r.real.kind != kindProcess && r.real.kind != kindUnrealisable {
			what = "not run"
		}
		parts = append(parts, fmt.Sprintf("%s: %s", r.spec.Name, what))
	}
	msg := "lab kubelet: " + strings.Join(parts, "; ")
	if len(ignored) > 0 {
		msg += "; ignored: " + strings.Join(ignored, "; ")
	}
	return msg
}
