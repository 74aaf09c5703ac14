package kubelet

import (
	"net/netip"
	"runtime"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kpbench.dev/kpbench/internal/upstream"
	"kpbench.dev/kpbench/internal/version"
)

// Version is the kubelet version the lab kubelet reports: the Kubernetes release its
// control plane runs, marked as kpbench's.
var Version = upstream.KubernetesVersion + "-kpbench"

// AnnotationLabKubelet marks the Nodes the lab kubelet runs (value: kpbench's commit).
const AnnotationLabKubelet = "kpbench.dev/lab-kubelet"

// machine is what a Node reports of the machine: the lab's nodes share it.
type machine struct {
	cpus   int
	memory int64 // bytes
	kernel string
	// storage is the size in bytes of the filesystem holding the kubelet's state directory
	// (nodeFSBytes), which a kubelet reports as ephemeral-storage (its nodefs); 0: unknown,
	// not reported.
	storage int64
}

// podCapacity is how many pods a pod block holds: its addresses but the network, the
// node's bridge (gateway) and the broadcast address.
func podCapacity(block netip.Prefix) int64 {
	return max(int64(1)<<(32-block.Bits())-3, 0)
}

// nodeSpec describes the Node a lab kubelet registers.
type nodeSpec struct {
	name    string
	ip      netip.Addr
	podCIDR netip.Prefix
	zone    string
	bootID  string
	machine machine
	apiPort int // the kubelet API's port (0: none)
}

// nodeObject is the Node as the lab kubelet creates it: the labels a kubelet sets, the
// lab's pod block as podCIDR, capacity, addresses, node info and Ready.
func nodeObject(s nodeSpec, now metav1.Time) *corev1.Node {
	labels := map[string]string{
		corev1.LabelHostname: s.name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: runtime.GOARCH,
	}
	if s.zone != "" {
		labels[corev1.LabelTopologyZone] = s.zone
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(s.machine.cpus), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(s.machine.memory, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(podCapacity(s.podCIDR), resource.DecimalSI),
	}
	if s.machine.storage > 0 {
		// Allocatable is the whole filesystem: a kubelet subtracts its reservations and
		// its hard nodefs eviction threshold, and the lab kubelet has neither.
		capacity[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(s.machine.storage, resource.BinarySI)
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: s.name, Labels: labels,
			Annotations: map[string]string{AnnotationLabKubelet: version.Commit},
		},
		Spec: corev1.NodeSpec{PodCIDR: s.podCIDR.String(), PodCIDRs: []string{s.podCIDR.String()}},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: capacity.DeepCopy(),
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: s.ip.String()},
				{Type: corev1.NodeHostName, Address: s.name},
			},
			Conditions: nodeConditions(now, now),
			NodeInfo: corev1.NodeSystemInfo{
				MachineID: s.bootID, SystemUUID: s.bootID, BootID: s.bootID,
				KernelVersion: s.machine.kernel, OSImage: "kpbench lab node (network namespace)",
				ContainerRuntimeVersion: ImageID + version.Commit,
				KubeletVersion:          Version,
				OperatingSystem:         "linux", Architecture: runtime.GOARCH,
			},
		},
	}
	// Where the API server reaches the kubelet API (exec, logs, port-forward).
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(s.apiPort)
	return node
}

// nodeConditions are the conditions the lab kubelet reports: Ready, and no pressure of
// any kind (it measures none), heartbeat at heartbeat, unchanged since since.
func nodeConditions(heartbeat, since metav1.Time) []corev1.NodeCondition {
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: heartbeat, LastTransitionTime: since}
	}
	return []corev1.NodeCondition{
		cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "the lab kubelet does not measure memory pressure"),
		cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "the lab kubelet does not measure disk pressure"),
		cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "the lab kubelet does not measure PID pressure"),
		cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kpbench lab kubelet is posting ready status"),
	}
}
