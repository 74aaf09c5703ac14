package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"kpbench.dev/kpbench/backends/kubeproxy"
	"kpbench.dev/kpbench/internal/upstream"
	"kpbench.dev/kpbench/kubestack"
	"kpbench.dev/kpbench/lab"
)

func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "A real Kubernetes cluster in a lab: control plane, kube-proxy and lab kubelets, no containers",
		Long: `kpbench cluster builds a lab whose control-plane namespace runs etcd, kube-apiserver,
kube-controller-manager and kube-scheduler (v` + strings.TrimPrefix(upstream.KubernetesVersion, "v") + `, built by 'make upstream'), and whose
every node runs the unmodified kube-proxy and a lab kubelet that realises Pods as network
namespaces served by kpbench's echo server (which speaks agnhost netexec's HTTP API).
kubectl reaches it through a loopback port: see docs/cluster.md.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newClusterUpCmd(), newClusterStatusCmd(), newClusterDownCmd(), newClusterListCmd(), newClusterCleanupCmd())
	return cmd
}

type clusterUpFlags struct {
	name, proxy  string
	nodes, clnts int
	port         int
	minSync      time.Duration
	detach       bool
	dir, labDir  string
}

func newClusterUpCmd() *cobra.Command {
	var f clusterUpFlags
	cmd := &cobra.Command{
		Use:   "up --name NAME --nodes N --proxy iptables|nftables|ipvs [--detach]",
		Short: "Build a cluster and keep it running until Ctrl-C (or detach)",
		Example: `  # two nodes, kube-proxy in nftables mode, in the background
  kpbench cluster up --name demo --nodes 2 --proxy nftables --detach
  export KUBECONFIG=/run/kpbench/clusters/demo/kubeconfig
  kubectl get nodes -o wide
  kpbench cluster down --name demo`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config()
			if err != nil {
				return err
			}
			if err := requireRoot(cmd, nil); err != nil { // after the input's checks: bad input says so first
				return err
			}
			if f.detach {
				return detachCluster(cmd.Context(), cmd, f)
			}
			return runClusterUp(cmd.Context(), cmd.OutOrStdout(), cfg)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", "", "cluster (and lab) name: 1-10 characters of a-z, 0-9 (required)")
	fl.IntVar(&f.nodes, "nodes", 2, fmt.Sprintf("number of nodes (1-%d)", kubestack.MaxNodes))
	fl.StringVar(&f.proxy, "proxy", "", "kube-proxy mode: iptables, nftables or ipvs (ipvs only where the kernel has IPVS) (required)")
	fl.IntVar(&f.clnts, "clients", 1, fmt.Sprintf("external client hosts on the fabric (0-%d)", lab.MaxClients))
	fl.IntVar(&f.port, "port", 0, "loopback port of the API server forward on 127.0.0.1 (0: a free one)")
	fl.DurationVar(&f.minSync, "kube-proxy-min-sync-period", time.Second, "kube-proxy's minSyncPeriod (its default is 1s)")
	fl.BoolVar(&f.detach, "detach", false, "run the cluster in the background and return once it is ready")
	fl.StringVar(&f.dir, "dir", kubestack.DefaultDir, "directory of cluster records and kubeconfigs")
	labRegistryFlag(fl, &f.labDir)
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.MarkFlagRequired("proxy")
	return cmd
}

func (f clusterUpFlags) config() (kubestack.Config, error) {
	if f.nodes < 1 || f.nodes > kubestack.MaxNodes { // 0 would mean "default"
		return kubestack.Config{}, badInput("--nodes %d: allowed values are 1-%d", f.nodes, kubestack.MaxNodes)
	}
	if f.minSync <= 0 {
		return kubestack.Config{}, badInput("--kube-proxy-min-sync-period %s: must be positive", f.minSync)
	}
	cfg := kubestack.Config{
		Name: f.name, Nodes: f.nodes, Clients: f.clnts, Proxy: kubeproxy.Mode(f.proxy), Port: f.port,
		MinSyncPeriod: f.minSync, Dir: f.dir, LabRegistryDir: f.labDir,
	}
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		return cfg, usageError{err}
	}
	// Checked again by Up; checking here refuses a --detach cluster before it forks.
	if err := kubestack.CheckProxy(cfg.Proxy); err != nil {
		return cfg, usageError{err}
	}
	for _, n := range kubestack.Binaries() {
		if _, err := upstream.Binary(n); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

func runClusterUp(ctx context.Context, out io.Writer, cfg kubestack.Config) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	start := time.Now()
	c, err := kubestack.Up(ctx, cfg, kubestack.WithLogger(logger), kubestack.WithLogPath(os.Getenv(clusterLogEnv)))
	if err != nil {
		if errors.Is(err, kubestack.ErrBadConfig) {
			return usageError{err}
		}
		return err
	}
	printWarnings(out, c.Lab().Warnings())
	rec := c.Record()
	fmt.Fprintf(out, "cluster %s is up in %.1fs: %d nodes, kube-proxy %s, Kubernetes %s (pid %d)\n", cfg.Name, time.Since(start).Seconds(), cfg.Nodes, cfg.Proxy, rec.Version, os.Getpid())
	printClusterHints(out, rec)
	return holdUntilDone(ctx, out, "cluster", cfg.Name, c.Down)
}

func printClusterHints(out io.Writer, rec kubestack.Record) {
	rules := map[string]string{
		string(kubeproxy.ModeIPTables): "iptables-save -t nat",
		string(kubeproxy.ModeNFTables): "nft list table ip kube-proxy",
		string(kubeproxy.ModeIPVS):     "ipvsadm -Ln",
	}[rec.Proxy]
	fmt.Fprintf(out, "kubeconfig: %s (server %s)\n", rec.Kubeconfig, rec.Server)
	fmt.Fprintf(out, "  export KUBECONFIG=%s\n", rec.Kubeconfig)
	fmt.Fprintf(out, "  %s get nodes -o wide\n", filepath.Join(upstream.BinDir(), upstream.Kubectl))
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  kpbench cluster status --name %s\t# components, memory, start-up times\n", rec.Name)
	fmt.Fprintf(tw, "  kpbench lab exec %s node-0 -- %s\t# kube-proxy's rules on node-0\n", rec.Name, rules)
	fmt.Fprintf(tw, "  kpbench cluster down --name %s\t# remove it\n", rec.Name)
	_ = tw.Flush()
}

// clusterLogEnv passes a detached cluster's log path to its owner, for the record.
const clusterLogEnv = "KPBENCH_CLUSTER_LOG"

// detachCluster runs `kpbench cluster up` again in the background, logging beside the
// cluster's directory (so that a failed start leaves its log to read), and returns when
// the cluster is ready (or the child failed).
func detachCluster(ctx context.Context, cmd *cobra.Command, f clusterUpFlags) error {
	reg := kubestack.Registry{Dir: f.dir}
	logPath := filepath.Join(f.dir, f.name+".log")
	pid, err := startDetached(ctx, cmd, detachSpec{
		Records: reg.Records(), Name: f.name, Log: logPath, Timeout: 15 * time.Minute,
		Env: []string{clusterLogEnv + "=" + logPath},
	})
	if err != nil {
		return err
	}
	rec, err := reg.Read(f.name)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "cluster %s is up in the background in %.1fs: %d nodes, kube-proxy %s, Kubernetes %s (pid %d, log %s)\n",
		f.name, rec.Startup.Total, rec.Nodes, rec.Proxy, rec.Version, pid, logPath)
	printClusterHints(out, *rec)
	return nil
}

// clusterStatus is the JSON form of `cluster status` (a contract: add fields, never rename).
type clusterStatus struct {
	kubestack.Record
	OwnerAlive bool `json:"ownerAlive"`
	// Memory is sampled now; MemoryAtReady (in the record) when the cluster became ready.
	Memory []kubestack.Memory `json:"memory"`
	// Pods is the number of pods the lab kubelets run now.
	Pods int `json:"pods"`
	// Hosts are the lab's nodes, clients and pods, as `lab status` shows them.
	Hosts []lab.HostRecord `json:"hosts"`
}

func newClusterStatusCmd() *cobra.Command {
	var dir, labDir string
	cmd := newStatusCmd("cluster", "Show a cluster's components, memory, start-up times and hosts",
		"  kpbench cluster status --name demo -o json | jq '.startup, .memory'",
		func(name string) (clusterStatus, error) {
			rec, err := kubestack.Registry{Dir: dir}.Read(name)
			if err != nil {
				return clusterStatus{}, err
			}
			st := clusterStatus{Record: *rec, OwnerAlive: rec.OwnerAlive(), Hosts: []lab.HostRecord{}}
			if st.OwnerAlive {
				st.Memory = kubestack.SampleMemory(*rec)
			} else {
				st.State = "stale (owner gone; run 'kpbench cluster down --all')"
			}
			if lrec, err := (lab.Registry{Dir: labDir}).Read(name); err == nil {
				st.Hosts = lrec.Hosts
				for _, h := range lrec.Hosts {
					if h.Kind == lab.KindPod {
						st.Pods++
					}
				}
			}
			return st, nil
		}, printClusterStatus)
	cmd.Flags().StringVar(&dir, "dir", kubestack.DefaultDir, "directory of cluster records")
	labRegistryFlag(cmd.Flags(), &labDir)
	return cmd
}

func printClusterStatus(out io.Writer, st clusterStatus) error {
	fmt.Fprintf(out, "cluster %s: %s, pid %d, %d nodes, kube-proxy %s, %s, %d pods\n", st.Name, st.State, st.PID, st.Nodes, st.Proxy, st.Version, st.Pods)
	fmt.Fprintf(out, "kubeconfig %s (server %s; in the lab %s)\n", st.Kubeconfig, st.Server, st.APIServer)
	if s := st.Startup; s != nil {
		fmt.Fprintf(out, "up in %.1fs: lab %.1fs, etcd %.1fs, API server %.1fs, controllers %.1fs (from the control plane's start), kubelets %.1fs, kube-proxies %.1fs, ready %.1fs\n",
			s.Total, s.Lab, s.Etcd, s.APIServer, s.Controllers, s.Kubelets, s.KubeProxies, s.Ready)
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMPONENT\tNODE\tPID\tRSS NOW\tRSS AT READY")
	atReady := map[int]uint64{}
	for _, m := range st.MemoryAtReady {
		atReady[m.PID] = m.RSS
	}
	rows := st.Memory
	if rows == nil {
		rows = st.MemoryAtReady
	}
	for _, m := range rows {
		now := mib(m.RSS)
		if m.Error != "" {
			now = m.Error
		}
		if st.Memory == nil {
			now = "-"
		}
		component := m.Component
		if component == "kpbench" {
			component = "kpbench (lab kubelets, echo servers, forward)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", component, m.Node, m.PID, now, mib(atReady[m.PID]))
	}
	return tw.Flush()
}

func mib(b uint64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}

func newClusterDownCmd() *cobra.Command {
	var dir, labDir string
	var grace time.Duration
	reg := func() kubestack.Registry { return kubestack.Registry{Dir: dir, Labs: lab.Registry{Dir: labDir}} }
	cmd := newDownCmd("cluster", "Remove a cluster, or every cluster whose owner died",
		`  kpbench cluster down --name demo
  kpbench cluster down --all           # clusters whose owner process is gone
  kpbench cluster down --all --force   # every cluster, live ones included`,
		"remove every cluster whose owner is gone",
		func(name string) error { return kubestack.DownByName(reg(), name, grace) },
		func(force bool) ([]string, []string, string, error) {
			res, err := kubestack.DownAll(reg(), force, grace)
			return res.Removed, res.Refused, "", err
		})
	cmd.Flags().DurationVar(&grace, "grace", kubestack.DefaultGrace, "how long a live owner has to tear its cluster down after SIGTERM")
	cmd.Flags().StringVar(&dir, "dir", kubestack.DefaultDir, "directory of cluster records")
	labRegistryFlag(cmd.Flags(), &labDir)
	return cmd
}

func newClusterListCmd() *cobra.Command {
	var dir string
	cmd := newListCmd("List clusters", "NAME\tSTATE\tPID\tNODES\tPROXY\tSERVER\tCREATED",
		func() lab.Records { return kubestack.Registry{Dir: dir}.Records() },
		func(rec *kubestack.Record) string {
			state := rec.State
			if !rec.OwnerAlive() {
				state = "stale"
			}
			return fmt.Sprintf("%s\t%s\t%d\t%d\t%s\t%s\t%s", rec.Name, state, rec.PID, rec.Nodes, rec.Proxy, rec.Server, rec.Created.Format(time.RFC3339))
		})
	cmd.Flags().StringVar(&dir, "dir", kubestack.DefaultDir, "directory of cluster records")
	return cmd
}
