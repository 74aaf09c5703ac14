// Package kubelet is the lab kubelet of `kpbench cluster up`: a kubelet written
// for the lab, in Go with client-go, that turns the Pods the real scheduler binds to a lab
// node into lab pods: network namespaces on the node's bridge with an address from the
// node's pod block, every container realised by kpbench's echo server (lab/echo, which
// also speaks agnhost netexec's HTTP API) listening on the container's declared ports.
// One Kubelet runs per node, all in the one process that owns the cluster: no process per
// pod or per node.
//
// # What it does
//
//   - Registers its Node (as the identity system:node:<node>, which the Node authorizer and
//     NodeRestriction admission limit to this node's objects): InternalIP on the lab fabric,
//     spec.podCIDR the node's lab pod block, the labels a kubelet sets, capacity (the
//     machine's CPUs and memory, pods = the addresses of the pod block), Ready, and
//     heartbeats: a Lease in kube-node-lease renewed every 10 s, and the Node's status.
//   - Watches the Pods bound to its node and runs each in a pod worker (a goroutine):
//     creates the pod's namespace (hostNetwork pods use the node's), starts one echo server
//     per container on its declared TCP and UDP ports, runs the containers' startup,
//     readiness and liveness probes of kinds httpGet and tcpSocket from the node's
//     namespace, with their delays, periods, timeouts and thresholds, restarts a container
//     whose liveness probe fails, and reports it all in the Pod's status: phase,
//     conditions (PodReadyToStartContainers, Initialized, ContainersReady, Ready with the
//     readiness gates), podIP(s), hostIP(s), startTime, container statuses (state, ready,
//     started, restart count, last termination).
//   - Deleting a Pod: its containers get "SIGTERM" (the echo servers' /readyz starts
//     answering 503 "shutting down", as agnhost netexec's does) and keep serving for the
//     Pod's grace period, as a process that ignores SIGTERM does (PID 1 without a handler),
//     while probes go on; the endpoints go through ready=false, terminating=true and
//     serving=<Ready> as in a real cluster. At the end of the grace period the containers
//     are killed (exit code 137), the Pod turns Failed, its namespace is removed, and the
//     kubelet deletes the Pod object. A Pod deleted with grace 0 (force) is torn down at once.
//   - Serves the kubelet API (Options.API) on the node's InternalIP, port 10250 (the Node's
//     status.daemonEndpoints), over TLS with a certificate of the cluster's CA, so that
//     kubectl exec, logs and port-forward work through the API server. Only a verified
//     client certificate gets in (the API server's kubelet-client identity), and only for
//     what a SubjectAccessReview allows, as a kubelet with --authorization-mode=Webhook;
//     /healthz is open to anyone, the rest (stats, metrics, pods, run) is 404. The
//     streams are k8s.io/cri-streaming's, the kubelet's own (SPDY and WebSocket).
//   - exec without a container (exec.go, podexec.go): the command runs as a host process
//     in the pod's network namespace (the node's for hostNetwork pods), in a mount and a
//     UTS namespace of its own: the host's files, with the pod's /etc/resolv.conf (from
//     its dnsPolicy: ClusterFirst names the cluster DNS, the Service range's tenth
//     address), /etc/hosts and /etc/hostname as a kubelet writes them, /agnhost when the
//     agnhost binary is built, and the pod's hostname. The namespaces are entered by a
//     child, `kpbench __podexec` (RunPodExec), never by a thread of this process. Exit
//     codes, stdin, stdout, stderr and terminals are the command's. The command sees the
//     host's programs: nc, curl, wget, ip, nslookup come from `make test-deps`.
//   - Container logs (ContainerLogs, FileLogs): a file per container instance under the
//     state directory, laid out as /var/log/pods; today each holds the line saying what
//     the container runs.
//   - port-forward: connects to the port on the pod's loopback, from a socket made inside
//     the pod's network namespace.
//
// # What it does not do
//
// Every such field is made visible, never silently "Running": a Warning Event with reason
// LabKubeletUnsupported on the Pod, and the Pod's status.message, list what was ignored.
//
//   - Images: no image is pulled or run; every container is an echo server, whatever its
//     image, command and args (imageID "kpbench-echo://", containerID
//     "kpbench://<pod uid>/<container>/<restart>").
//   - Volumes (including the projected service-account token every Pod gets), env,
//     secrets and config maps: nothing is mounted or set.
//   - Resources: requests and limits are left to the scheduler, never enforced, but for
//     ephemeral-storage limits: a pod whose containers' private roots outgrow them is
//     evicted (Failed, reason Evicted) as a kubelet evicts it (eviction.go says what
//     counts).
//   - Init containers (other than restartable sidecars, which run as containers) are not
//     run: they are reported terminated with reason NotRunByLabKubelet.
//   - exec and grpc probes and lifecycle hooks: not run. An exec or grpc startup or
//     readiness probe keeps its container unstarted or unready (its result cannot be
//     known); an exec or grpc liveness probe is ignored. An Event says so.
//   - SCTP ports, hostPort, attach (a container is no process), metrics and stats,
//     eviction for node pressure, static pods, node-pressure conditions (always False),
//     ephemeral containers. An exec'd command gets the container's literal env values
//     only, and runs as root with the host's programs, not the image's.
package kubelet
