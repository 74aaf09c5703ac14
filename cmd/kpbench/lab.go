package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/lab"
)

func newLabCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Build, inspect, enter and remove labs (namespaces as nodes, pods and clients)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newLabUpCmd(), newLabStatusCmd(), newLabExecCmd(), newLabDownCmd(), newLabListCmd())
	return cmd
}

type labUpFlags struct {
	name                      string
	nodes, podsPerNode, clnts int
	nodeCIDR, podCIDR         string
	detach, timing            bool
	registryDir               string
}

func newLabUpCmd() *cobra.Command {
	var f labUpFlags
	cmd := &cobra.Command{
		Use:   "up --name NAME --nodes N --pods-per-node M [--clients C] [--detach]",
		Short: "Build a lab and keep its echo servers running until Ctrl-C (or detach)",
		Example: `  # 3 nodes with 10 pods each and one external client, in the foreground
  kpbench lab up --name demo --nodes 3 --pods-per-node 10 --clients 1

  # the same, in the background; stop it with 'kpbench lab down --name demo'
  kpbench lab up --name demo --nodes 3 --pods-per-node 10 --clients 1 --detach

  # how long 3 x 300 pods take to come up and go down
  kpbench lab up --name big --nodes 3 --pods-per-node 300 --timing`,
		Args:    exactArgs(0),
		PreRunE: requireRoot,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config()
			if err != nil {
				return err
			}
			if f.detach {
				return detachLab(cmd.Context(), cmd, f)
			}
			return runLabUp(cmd.Context(), cmd.OutOrStdout(), cfg, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", "", "lab name: 1-10 characters of a-z, 0-9 (required)")
	fl.IntVar(&f.nodes, "nodes", 2, fmt.Sprintf("number of nodes (1-%d)", lab.MaxNodes))
	fl.IntVar(&f.podsPerNode, "pods-per-node", 2, fmt.Sprintf("pods per node, each with an echo server on 8080/tcp+udp (0-%d)", lab.MaxPodsPerNode))
	fl.IntVar(&f.clnts, "clients", 1, fmt.Sprintf("external client hosts on the fabric (0-%d)", lab.MaxClients))
	fl.StringVar(&f.nodeCIDR, "node-cidr", "172.18.0.0/24", "fabric subnet: nodes at .10+i, clients at .200+j")
	fl.StringVar(&f.podCIDR, "pod-cidr", "10.244.0.0/16", "pod network, one /24 (or larger) block per node")
	fl.BoolVar(&f.detach, "detach", false, "run the lab in the background and return once it is ready")
	fl.BoolVar(&f.timing, "timing", false, "build the lab, print how long up and down took, and remove it")
	labRegistryFlag(fl, &f.registryDir)
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func (f labUpFlags) config() (lab.Config, error) {
	cfg := lab.Config{Name: f.name, Nodes: f.nodes, PodsPerNode: f.podsPerNode, Clients: f.clnts}
	if f.detach && f.timing {
		return cfg, badInput("--timing removes the lab it builds: it does not go with --detach")
	}
	if f.nodes < 1 || f.nodes > lab.MaxNodes { // 0 would mean "default" to lab.Config
		return cfg, badInput("--nodes %d: allowed values are 1-%d", f.nodes, lab.MaxNodes)
	}
	var err error
	if cfg.NodeCIDR, err = netip.ParsePrefix(f.nodeCIDR); err != nil {
		return cfg, badInput("--node-cidr %q: %v", f.nodeCIDR, err)
	}
	if cfg.PodCIDR, err = netip.ParsePrefix(f.podCIDR); err != nil {
		return cfg, badInput("--pod-cidr %q: %v", f.podCIDR, err)
	}
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		return cfg, usageError{err}
	}
	// lab.Up checks again; checking here too refuses a --detach lab before it forks.
	if err := lab.CheckMachine(cfg); err != nil {
		return cfg, usageError{err}
	}
	return cfg, nil
}

func runLabUp(ctx context.Context, out io.Writer, cfg lab.Config, f labUpFlags) error {
	start := time.Now()
	l, err := lab.Up(ctx, cfg, lab.WithRegistryDir(f.registryDir))
	if err != nil {
		return err
	}
	upTime := time.Since(start)
	printWarnings(out, l.Warnings())
	pods := len(l.Hosts(lab.KindPod))
	if f.timing {
		start = time.Now()
		err := l.Down(context.WithoutCancel(ctx))
		fmt.Fprintf(out, "lab %s: %d nodes, %d pods, %d clients: up %.2fs, down %.2fs\n",
			cfg.Name, cfg.Nodes, pods, cfg.Clients, upTime.Seconds(), time.Since(start).Seconds())
		return err
	}
	fmt.Fprintf(out, "lab %s is up in %.2fs: %d nodes, %d pods, %d clients (pid %d)\n", cfg.Name, upTime.Seconds(), cfg.Nodes, pods, cfg.Clients, os.Getpid())
	printEnterHints(out, cfg.Name, l.Hosts(lab.KindNode)[0].Name)
	return holdUntilDone(ctx, out, "lab", cfg.Name, l.Down)
}

func printEnterHints(out io.Writer, name, node string) {
	fmt.Fprintf(out, "  kpbench lab status --name %s            # hosts and addresses\n", name)
	fmt.Fprintf(out, "  kpbench lab exec %s %s -- ip addr     # run a command on a host\n", name, node)
	fmt.Fprintf(out, "  ip netns exec %s-%s-%s bash         # or enter it with iproute2\n", netns.Prefix, name, node)
}

// detachLab runs `kpbench lab up` again in the background, logging beside the lab
// records, and returns when the lab is ready (or the child failed).
func detachLab(ctx context.Context, cmd *cobra.Command, f labUpFlags) error {
	logPath := filepath.Join(f.registryDir, f.name+".log")
	pid, err := startDetached(ctx, cmd, detachSpec{
		Records: lab.Registry{Dir: f.registryDir}.Records(), Name: f.name, Log: logPath, Timeout: 10 * time.Minute,
	})
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "lab %s is up in the background (pid %d, log %s)\n", f.name, pid, logPath)
	printEnterHints(out, f.name, lab.NodeName(0))
	fmt.Fprintf(out, "  kpbench lab down --name %s                # remove it\n", f.name)
	return nil
}

func newLabStatusCmd() *cobra.Command {
	var registry string
	cmd := newStatusCmd("lab", "Show a lab's nodes, pods and clients with their addresses",
		"  kpbench lab status --name demo -o json | jq '.pods[] | select(.ready)'",
		func(name string) (labStatus, error) {
			rec, err := lab.Registry{Dir: registry}.Read(name)
			if err != nil {
				return labStatus{}, err
			}
			return statusFromRecord(rec), nil
		}, printLabStatus)
	labRegistryFlag(cmd.Flags(), &registry)
	return cmd
}

// labStatus is the JSON form of `lab status` (a stable contract: add fields, never rename).
type labStatus struct {
	Name       string           `json:"name"`
	PID        int              `json:"pid"`
	OwnerAlive bool             `json:"ownerAlive"`
	State      string           `json:"state"`
	Created    time.Time        `json:"created"`
	Nodes      []lab.HostRecord `json:"nodes"`
	Pods       []lab.HostRecord `json:"pods"`
	Clients    []lab.HostRecord `json:"clients"`
}

func statusFromRecord(rec *lab.Record) labStatus {
	st := labStatus{Name: rec.Name, PID: rec.PID, OwnerAlive: rec.OwnerAlive(), State: rec.State, Created: rec.Created,
		Nodes: []lab.HostRecord{}, Pods: []lab.HostRecord{}, Clients: []lab.HostRecord{}}
	if !st.OwnerAlive {
		st.State = "stale (owner gone; run 'kpbench lab down --all')"
	}
	for _, h := range rec.Hosts {
		switch h.Kind {
		case lab.KindNode:
			st.Nodes = append(st.Nodes, h)
		case lab.KindPod:
			st.Pods = append(st.Pods, h)
		case lab.KindClient:
			st.Clients = append(st.Clients, h)
		}
	}
	return st
}

func printLabStatus(out io.Writer, st labStatus) error {
	fmt.Fprintf(out, "lab %s: %s, pid %d, %d nodes, %d pods, %d clients\n", st.Name, st.State, st.PID, len(st.Nodes), len(st.Pods), len(st.Clients))
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tIP\tNODE\tREADY\tNETNS")
	for _, group := range [][]lab.HostRecord{st.Nodes, st.Clients, st.Pods} {
		for _, h := range group {
			ready := "-"
			if h.Kind == lab.KindPod {
				ready = fmt.Sprint(h.Ready)
				if h.Terminating {
					ready += ",terminating"
				}
			}
			node := h.Node
			if h.Kind == lab.KindNode {
				node = "podCIDR " + h.PodCIDR
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", h.Kind, h.Name, h.IP, node, ready, h.NetNS)
		}
	}
	return tw.Flush()
}

func newLabExecCmd() *cobra.Command {
	var registry string
	cmd := &cobra.Command{
		Use:   "exec NAME HOST -- CMD [ARGS...]",
		Short: "Run a command inside a lab host's network namespace",
		Long: `Run a command inside the network namespace of a lab host: a node, a client or a pod
(a cluster's pods are named NAMESPACE/NAME), or "cp", the control plane's namespace of a
cluster or of a run against upstream kube-proxy.`,
		Example: `  kpbench lab exec demo node-0 -- iptables-save -t nat
  kpbench lab exec demo client-0 -- curl -s http://172.18.0.10:30791/
  kpbench lab exec demo node-0 -- nft list table ip kube-proxy
  kpbench lab exec demo cp -- ss -tlnp`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 2 || len(args) < 3 {
				return badInput("usage: kpbench lab exec NAME HOST -- CMD [ARGS...]")
			}
			return nil
		},
		PreRunE: requireRoot,
		RunE: func(cmd *cobra.Command, args []string) error {
			rec, err := lab.Registry{Dir: registry}.Read(args[0])
			if err != nil {
				return usageError{err}
			}
			h, ok := rec.Host(args[1])
			if !ok || h.Kind == lab.KindFabric {
				// A cluster's (or bench run's) control plane has a namespace of its own.
				if cp := fmt.Sprintf("%s-%s-cp", netns.Prefix, args[0]); args[1] == "cp" && namespaceExists(cp) {
					return execInHost(cmd, netns.Path(cp), args[2:])
				}
				return badInput("lab %s has no host %q (see 'kpbench lab status --name %s')", args[0], args[1], args[0])
			}
			return execInHost(cmd, netns.Path(h.NetNS), args[2:])
		},
	}
	labRegistryFlag(cmd.Flags(), &registry)
	return cmd
}

// namespaceExists reports whether a named network namespace exists.
func namespaceExists(name string) bool {
	names, err := netns.List(name)
	return err == nil && slices.Contains(names, name)
}

// exitCodeError carries the exit status of a command run by `lab exec`.
type exitCodeError struct{ code int }

func (e exitCodeError) Error() string { return fmt.Sprintf("command exited with status %d", e.code) }

func execInHost(cmd *cobra.Command, nsPath string, argv []string) error {
	return netns.Do(nsPath, func() error {
		c := exec.CommandContext(cmd.Context(), argv[0], argv[1:]...)
		c.Stdin, c.Stdout, c.Stderr = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
		err := c.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return exitCodeError{ee.ExitCode()}
		}
		return err
	})
}

func newLabDownCmd() *cobra.Command {
	var registry string
	reg := func() lab.Registry { return lab.Registry{Dir: registry} }
	cmd := newDownCmd("lab", "Remove a lab, or sweep every lab left by crashed runs",
		`  kpbench lab down --name demo
  kpbench lab down --all           # labs whose owner process is gone, and orphan kpb namespaces
  kpbench lab down --all --force   # every lab, live ones included`,
		"remove every lab whose owner is gone, and orphan kpb namespaces",
		func(name string) error { return lab.DownByName(reg(), name, lab.DownOptions{Force: true}) },
		func(force bool) ([]string, []string, string, error) {
			res, err := lab.DownAll(reg(), lab.DownOptions{Force: force})
			return res.Removed, res.Refused, fmt.Sprintf(", %d orphan namespaces", len(res.Orphans)), err
		})
	labRegistryFlag(cmd.Flags(), &registry)
	return cmd
}

func newLabListCmd() *cobra.Command {
	var registry string
	cmd := newListCmd("List registered labs", "NAME\tSTATE\tPID\tHOSTS\tCREATED",
		func() lab.Records { return lab.Registry{Dir: registry}.Records() },
		func(rec *lab.Record) string {
			return fmt.Sprintf("%s\t%s\t%d\t%d\t%s", rec.Name, statusFromRecord(rec).State, rec.PID, len(rec.Hosts), rec.Created.Format(time.RFC3339))
		})
	labRegistryFlag(cmd.Flags(), &registry)
	return cmd
}
