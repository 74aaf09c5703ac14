package kubestack

import (
	"fmt"
	"os"
	"path/filepath"

	"kpbench.dev/kpbench/lab"
)

// DefaultDir is where clusters live: one directory per cluster, <dir>/<name>, holding its
// record (cluster.json, written before anything is created), its kubeconfig and its control
// plane's files; beside it, <dir>/<name>.log, a detached cluster's owner's log.
const DefaultDir = "/run/kpbench/clusters"

// ProcessRecord is one process a cluster started.
type ProcessRecord struct {
	// Component is etcd, kube-apiserver, kube-controller-manager, kube-scheduler or
	// kube-proxy.
	Component string `json:"component"`
	// Node is the node of a kube-proxy.
	Node string `json:"node,omitempty"`
	// PID is its process id.
	PID int `json:"pid"`
	// Binary is the path it was started from (a sweep kills a pid only if it still runs it).
	Binary string `json:"binary"`
}

// Startup is how long `cluster up` took, in seconds: each phase, and the whole.
type Startup struct {
	// Lab: namespaces, links and the fabric of the nodes (and clients).
	Lab float64 `json:"labSeconds"`
	// Etcd, APIServer, Controllers: from the control plane's start until etcd was healthy,
	// the API server ready, the controller manager and scheduler healthy.
	Etcd        float64 `json:"etcdSeconds"`
	APIServer   float64 `json:"apiServerSeconds"`
	Controllers float64 `json:"controllersSeconds"`
	// Kubelets: until every lab kubelet registered its Node and listed its pods.
	Kubelets float64 `json:"kubeletsSeconds"`
	// KubeProxies: until every kube-proxy finished its first sync.
	KubeProxies float64 `json:"kubeProxiesSeconds"`
	// Ready: until every Node was Ready without the not-ready taint and the default
	// service account existed (pods can be created).
	Ready float64 `json:"readySeconds"`
	// Total is the wall time of `cluster up`, from start to ready.
	Total float64 `json:"totalSeconds"`
}

// Memory is the resident memory of one process of the cluster.
type Memory struct {
	// Component names the process; "kpbench" is the cluster's owner, which hosts the lab
	// kubelets, every pod's echo servers and the API forward.
	Component string `json:"component"`
	Node      string `json:"node,omitempty"`
	PID       int    `json:"pid"`
	// RSS is VmRSS in bytes (0 and Error set when it could not be read).
	RSS   uint64 `json:"rssBytes"`
	Error string `json:"error,omitempty"`
}

// Record is what a cluster writes about itself (and `cluster status -o json` shows).
type Record struct {
	// Entry names the cluster and its owner: the process that built it and tears it down.
	lab.Entry
	// Proxy is kube-proxy's mode; Nodes and Clients the host counts.
	Proxy   string `json:"proxy"`
	Nodes   int    `json:"nodes"`
	Clients int    `json:"clients"`
	// Kubeconfig is the admin kubeconfig; Server its URL (the loopback forward).
	Kubeconfig string `json:"kubeconfig"`
	Server     string `json:"server,omitempty"`
	// APIServer is the API server's address inside the lab (what nodes use).
	APIServer string `json:"apiServer,omitempty"`
	// Version is the API server's version.
	Version string `json:"version,omitempty"`
	// Log is the owner's log, for a detached cluster.
	Log string `json:"log,omitempty"`
	// Processes are the processes the cluster started.
	Processes []ProcessRecord `json:"processes,omitempty"`
	// Startup and MemoryAtReady were measured when the cluster became ready, with the
	// machine as it was then (shared with whatever else ran).
	Startup       *Startup `json:"startup,omitempty"`
	MemoryAtReady []Memory `json:"memoryAtReady,omitempty"`
	// HeapAtReady is the owner's Go heap in use at ready (runtime.MemStats.HeapInuse).
	HeapAtReady uint64 `json:"ownerHeapInUseBytesAtReady,omitempty"`
}

// Registry is the directory of clusters, with the registry of their labs.
type Registry struct {
	// Dir holds a directory per cluster, "<Dir>/<name>", with its record (cluster.json).
	Dir string
	// Labs is the registry of the clusters' labs (a cluster's lab has its name).
	Labs lab.Registry
}

// Records is the registry's directory of cluster records.
func (r Registry) Records() lab.Records {
	return lab.Records{Dir: r.Dir, Kind: "cluster", Layout: "%s/cluster.json"}
}

// ClusterDir is the directory of the named cluster.
func (r Registry) ClusterDir(name string) string { return filepath.Join(r.Dir, name) }

// Kubeconfig is the path of the named cluster's admin kubeconfig.
func (r Registry) Kubeconfig(name string) string {
	return filepath.Join(r.ClusterDir(name), "kubeconfig")
}

// Write stores rec atomically.
func (r Registry) Write(rec *Record) error { return r.Records().Write(rec.Name, rec) }

// Read loads the record of the named cluster.
func (r Registry) Read(name string) (*Record, error) {
	return lab.ReadRecord[Record](r.Records(), name)
}

// Remove deletes the named cluster's directory (absent is fine).
func (r Registry) Remove(name string) error {
	if err := os.RemoveAll(r.ClusterDir(name)); err != nil {
		return fmt.Errorf("cluster registry: %w", err)
	}
	return nil
}

// List returns the names of the clusters that have a record, sorted.
func (r Registry) List() ([]string, error) { return r.Records().List() }
