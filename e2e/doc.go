// Package e2e runs the upstream Kubernetes end-to-end tests (e2e.test, built by `make
// e2e-build` from k8s.io/kubernetes/test/e2e) against `kpbench cluster up` clusters, one per
// kube-proxy mode, and reports each test's outcome, duration and, for a failure or a skip, its
// reason (`kpbench e2e`, docs/e2e.md).
//
// e2e.test runs as an external client of the cluster: inside the lab's client-0 namespace,
// with a kubeconfig naming the API server's lab address, so that whatever it or the kubectl
// it runs connects to stays inside the lab.
package e2e
