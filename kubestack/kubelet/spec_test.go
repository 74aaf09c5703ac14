//go:build linux

package kubelet

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kpbench.dev/kpbench/lab/echo"
)

func TestContainerPorts(t *testing.T) {
	tcp := func(n int32) echo.Port { return echo.Port{Number: n, Protocol: echo.TCP} }
	udp := func(n int32) echo.Port { return echo.Port{Number: n, Protocol: echo.UDP} }
	tests := []struct {
		name string
		c    corev1.Container
		want []echo.Port
	}{
		{name: "declared, protocol defaults to TCP", c: corev1.Container{Ports: []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}}},
			want: []echo.Port{tcp(80), udp(53)}},
		{name: "SCTP is not served", c: corev1.Container{Ports: []corev1.ContainerPort{{ContainerPort: 9, Protocol: corev1.ProtocolSCTP}}}},
		{name: "no ports", c: corev1.Container{Image: "nginx"}},
		{name: "agnhost netexec defaults", c: corev1.Container{Args: []string{"netexec"}}, want: []echo.Port{tcp(8080), udp(8081)}},
		{name: "netexec in command, flags with =", c: corev1.Container{Command: []string{"/agnhost", "netexec", "--http-port=9376", "--udp-port=-1"}},
			want: []echo.Port{tcp(9376)}},
		{name: "netexec flags with a space, declared port not repeated", c: corev1.Container{
			Args: []string{"netexec", "--http-port", "80", "--udp-port", "53"}, Ports: []corev1.ContainerPort{{ContainerPort: 80}}},
			want: []echo.Port{tcp(80), udp(53)}},
		{name: "bad flag value keeps the default", c: corev1.Container{Args: []string{"netexec", "--http-port=x"}}, want: []echo.Port{tcp(8080), udp(8081)}},
		{name: "other agnhost subcommands open nothing by themselves", c: corev1.Container{Args: []string{"pause"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, containerPorts(tt.c))
		})
	}
}

func TestUnsupported(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	const agnhost = "registry.k8s.io/e2e-test-images/agnhost:2.66.1"
	tests := []struct {
		name string
		spec corev1.PodSpec
		want []string
	}{
		{name: "a bare pod", spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}},
		{name: "what every pod of a real API server has: the service-account volume",
			spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "kube-api-access-x"}}, Containers: []corev1.Container{{Name: "c"}}},
			want: []string{"volumes not mounted (kube-api-access-x)"}},
		{name: "an echo container's fields", spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Command: []string{"sh"}, Env: []corev1.EnvVar{{Name: "A"}},
			Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
			Lifecycle:      &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(1)}}, PostStart: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 1}}},
			Ports:          []corev1.ContainerPort{{ContainerPort: 9, Protocol: corev1.ProtocolSCTP}, {ContainerPort: 80, HostPort: 8080}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}},
			LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9}}},
			StartupProbe:   &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}},
		}}},
			want: []string{"container c: command/args, env (only exec probes and hooks see it), resources (not enforced), preStop hook not run, SCTP port 9 not served, hostPort 8080 not opened, liveness probe grpc not supported"}},
		{name: "an ephemeral-storage limit is enforced, other resources are not", spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "only", Image: agnhost, Args: []string{"netexec"}, Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("5Mi")}}},
			{Name: "also", Image: agnhost, Args: []string{"netexec"}, Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("5Mi"), corev1.ResourceMemory: resource.MustParse("1Gi")}}},
		}}, want: []string{"container also: resources (not enforced)"}},
		{name: "an agnhost process honours command, args and env", spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: agnhost, Args: []string{"netexec"}, Env: []corev1.EnvVar{{Name: "A"}}, SecurityContext: &corev1.SecurityContext{},
		}}}},
		{name: "init containers the echo server stands for are not run, sidecars and agnhost ones are", spec: corev1.PodSpec{
			InitContainers: []corev1.Container{
				{Name: "init", Command: []string{"x"}},
				{Name: "side", RestartPolicy: &always, Env: []corev1.EnvVar{{Name: "A"}}},
				{Name: "real", Image: agnhost, Args: []string{"connect", "--timeout=1s", "10.0.0.1:80"}},
			},
			Containers: []corev1.Container{{Name: "c"}},
		}, want: []string{"init container init not run", "container side: env (only exec probes and hooks see it)"}},
		{name: "pod securityContext", spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: new(bool)}, Containers: []corev1.Container{{Name: "c"}}},
			want: []string{"pod securityContext"}},
		{name: "an empty pod securityContext says nothing", spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{}, Containers: []corev1.Container{{Name: "c"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: tt.spec}
			assert.Equal(t, tt.want, unsupported(pod, runnables(pod, "/bin/agnhost")))
		})
	}
}

func TestStatusMessage(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
		Containers: []corev1.Container{
			{Name: "web", Image: "nginx", Ports: []corev1.ContainerPort{{ContainerPort: 80}}},
			{Name: "srv", Image: "registry.k8s.io/e2e-test-images/agnhost:2.66.1", Args: []string{"serve-hostname"}},
		},
	}}
	assert.Equal(t, "lab kubelet: init: not run; web: kpbench echo server on 80/TCP; "+
		"srv: not realisable: /agnhost serve-hostname needs the agnhost binary, absent here: run `make upstream`",
		statusMessage(runnables(pod, ""), nil))
	assert.Equal(t, "lab kubelet: init: not run; web: kpbench echo server on 80/TCP; srv: process /agnhost serve-hostname; ignored: a; b",
		statusMessage(runnables(pod, "/bin/agnhost"), []string{"a", "b"}))
}

func TestPodHostname(t *testing.T) {
	assert.Equal(t, "web-1", podHostname(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}}, "node-0"))
	assert.Equal(t, "db", podHostname(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}, Spec: corev1.PodSpec{Hostname: "db"}}, "node-0"))
	assert.Equal(t, "node-0", podHostname(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "prober"}, Spec: corev1.PodSpec{HostNetwork: true}}, "node-0"))
}

func TestPodCapacity(t *testing.T) {
	assert.Equal(t, int64(253), podCapacity(netip.MustParsePrefix("10.244.1.0/24")))
	assert.Equal(t, int64(509), podCapacity(netip.MustParsePrefix("10.244.2.0/23")))
	assert.Equal(t, int64(0), podCapacity(netip.MustParsePrefix("10.244.2.0/31")))
}

func TestNodeObject(t *testing.T) {
	now := metav1.Now()
	n := nodeObject(nodeSpec{name: "node-1", ip: netip.MustParseAddr("172.18.0.11"), podCIDR: netip.MustParsePrefix("10.244.1.0/24"),
		zone: "z1", bootID: "b", machine: machine{cpus: 2, memory: 4 << 30, kernel: "6.18", storage: 50 << 30}}, now)
	assert.Equal(t, "10.244.1.0/24", n.Spec.PodCIDR)
	assert.Equal(t, []string{"10.244.1.0/24"}, n.Spec.PodCIDRs)
	assert.Equal(t, "node-1", n.Labels[corev1.LabelHostname])
	assert.Equal(t, "z1", n.Labels[corev1.LabelTopologyZone])
	assert.Equal(t, []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.18.0.11"}, {Type: corev1.NodeHostName, Address: "node-1"}}, n.Status.Addresses)
	pods := n.Status.Allocatable[corev1.ResourcePods]
	assert.Equal(t, int64(253), pods.Value())
	cpu := n.Status.Capacity[corev1.ResourceCPU]
	assert.Equal(t, int64(2), cpu.Value())
	// The scheduler admits a pod with an ephemeral-storage request or limit only on a
	// node whose allocatable has some.
	storage := n.Status.Allocatable[corev1.ResourceEphemeralStorage]
	assert.Equal(t, int64(50<<30), storage.Value())
	assert.Equal(t, storage, n.Status.Capacity[corev1.ResourceEphemeralStorage])
	var ready bool
	for _, c := range n.Status.Conditions {
		ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
	}
	assert.True(t, ready)
	assert.Equal(t, Version, n.Status.NodeInfo.KubeletVersion)
}

func TestResolvePort(t *testing.T) {
	c := corev1.Container{Name: "c", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}
	tests := []struct {
		port    intstr.IntOrString
		want    uint16
		wantErr string
	}{
		{port: intstr.FromInt32(80), want: 80},
		{port: intstr.FromString("http"), want: 8080},
		{port: intstr.FromString("8081"), want: 8081},
		{port: intstr.FromString("metrics"), wantErr: `port "metrics" is not a port name of container c`},
		{port: intstr.FromInt32(70000), wantErr: "not in 1-65535"},
	}
	for _, tt := range tests {
		t.Run(tt.port.String(), func(t *testing.T) {
			got, err := resolvePort(tt.port, c)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			assert.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
