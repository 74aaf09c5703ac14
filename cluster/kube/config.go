// Package kube is a Kubernetes cluster that kpbench did not build, reached through a
// kubeconfig, as a cluster under test (cluster.Cluster) for run, conform and check: it
// works in a namespace of its own per run (kpbench-<run>, labelled kpbench.dev/run=<run>),
// applies the manifests there with their containers replaced by agnhost netexec, sends
// the probes from prober pods through the API server's pods/proxy subresource (netexec's
// /dial), and deletes the namespace at the end (Close; `kpbench cluster cleanup` removes
// what a killed run left). It imports nothing of the engine: its objects, hosts and
// probers are the contract's plain types.
package kube

import (
	"errors"
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ErrBadConfig is wrapped by refusals of the user's input (kubeconfig, context, limits):
// the command line exits 2 on them.
var ErrBadConfig = errors.New("bad cluster configuration")

// DefaultProbeQPS bounds the requests kpbench sends to the API server per second (each
// probe is one pods/proxy request); DefaultProbeBurst is the burst above it.
const (
	DefaultProbeQPS   = 50
	DefaultProbeBurst = 100
)

// RESTConfig reads the kubeconfig at path, and only that file: no KUBECONFIG variable, no
// ~/.kube/config, no in-cluster credentials. context selects a context ("" the file's
// current one).
func RESTConfig(path, context string) (*rest.Config, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: --kubeconfig: a path is needed (kpbench never uses a default kubeconfig)", ErrBadConfig)
	}
	raw, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: --kubeconfig %s: %v", ErrBadConfig, path, err)
	}
	if context != "" {
		if _, ok := raw.Contexts[context]; !ok {
			return nil, fmt.Errorf("%w: --context %q: no such context in %s", ErrBadConfig, context, path)
		}
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, context, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: --kubeconfig %s: %v", ErrBadConfig, path, err)
	}
	cfg.QPS, cfg.Burst = DefaultProbeQPS, DefaultProbeBurst
	cfg.UserAgent = "kpbench"
	return cfg, nil
}

// Client returns a clientset for the kubeconfig at path (see RESTConfig).
func Client(path, context string) (kubernetes.Interface, *rest.Config, error) {
	cfg, err := RESTConfig(path, context)
	if err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: --kubeconfig %s: %v", ErrBadConfig, path, err)
	}
	return cs, cfg, nil
}
