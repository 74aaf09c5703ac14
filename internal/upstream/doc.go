// Package upstream pins the upstream Kubernetes and etcd versions that kpbench builds and runs
// as references (kube-proxy to compare ours with, a control plane for it), and finds their
// binaries.
//
// The binaries are built from their Go modules by `make upstream` (tools/upstream, its own Go
// module, so the main go.mod stays lean) into BinDir, never committed:
//
//	$KPBENCH_UPSTREAM_DIR                                   if set, else
//	/var/cache/kpbench/upstream/<KubernetesVersion>/bin/    kube-apiserver, kube-proxy, etcd,
//	                                                        kube-controller-manager, kube-scheduler, kubectl
//
// Other kube-proxy releases (the backends' NAME@vX.Y.Z variants) live beside it, one
// directory per release: Root()/<version>/bin/kube-proxy, Root() being
// $KPBENCH_UPSTREAM_ROOT or /var/cache/kpbench/upstream. KubeProxyOf(version) finds one,
// Versions() lists those built.
//
// The Kubernetes binaries carry -X k8s.io/component-base/version.gitVersion=
// KubernetesVersion (and gitMajor, gitMinor, gitTreeState), so they report a version that
// kubectl and client-go can parse. etcd is the version k8s.io/kubernetes' own go.mod pins.
//
// # Contract between kubestack/controlplane and backends/kubeproxy
//
// Written down here because two packages are built at the same time against it.
//
//   - upstream.Binary("kube-proxy" | "kube-apiserver" | "etcd") returns the path of a built
//     binary, or an error that says to run `make upstream`. Tests that need the binaries call
//     upstreamtest.Require(t, names...): it skips with "run make upstream", or fails when
//     KPBENCH_REQUIRE_UPSTREAM=1 (and also needs root: see testutil.RequireRoot).
//
//   - controlplane.Start(ctx, l *lab.Lab, opts Options) (*ControlPlane, error) starts etcd
//     and kube-apiserver inside the lab's control-plane namespace kpb-<lab>-cp, which is
//     attached to the lab fabric like a client (it takes a fabric address; it is not a node).
//     The API server listens on that fabric address, port 6443 (HTTPS), and nowhere else;
//     etcd listens on 127.0.0.1 of the control-plane namespace only.
//     (*ControlPlane).Server() is "https://<fabric IP>:6443".
//     (*ControlPlane).KubeconfigFor(node) (path, error) writes (once per node) a kubeconfig
//     file with the lab's CA, a client certificate for user "system:kube-proxy" in group
//     "system:node-proxier" plus "system:masters" (so it can also read everything kpbench
//     needs), and that server URL. Node namespaces reach it over the fabric.
//     (*ControlPlane).Stop(ctx) stops the API server, then etcd (kube-proxy processes, which
//     the kubeproxy backend owns, must be stopped before: the other order makes the API server
//     hang for ~30 s), and removes the namespace and the files.
//     ControlPlane.Startup (time until /readyz answered ok) and RSS (after start; RSSNow()
//     samples it again) are recorded for reports.
//
//   - controlplane.Publish(ctx, cp, s *apistore.Store) (*Publisher, error) mirrors the
//     lab's store (apistore) to the API server with client-go and follows its Watch:
//     Nodes (name = lab node name, InternalIP = fabric IP, podCIDR = the node's pod block),
//     Namespaces, Services (with the lab's ClusterIPs and NodePorts), EndpointSlices
//     (ours, label endpointslice.kubernetes.io/managed-by=kpbench.dev, annotation
//     endpoints.kubernetes.io/last-change-trigger-time set to the time of the store change)
//     and Pods. (*Publisher).WaitPublished(ctx, rv) returns once every store change up to
//     resource version rv (cluster.Cluster's version) is in the API server;
//     (*Publisher).Stop() ends the mirroring.
//
//   - testbed: Options.ControlPlane = true makes the testbed start the control plane
//     and a publisher after the lab is up; tb.ControlPlane (*controlplane.ControlPlane) is
//     then non-nil, and is stopped by tb.Close after the backends have been closed.
package upstream
