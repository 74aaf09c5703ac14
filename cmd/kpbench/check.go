package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"kpbench.dev/kpbench/backends/all"
	"kpbench.dev/kpbench/cluster/testbed"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/manifest"
	"kpbench.dev/kpbench/scenarios/check"
)

func newCheckCmd() *cobra.Command {
	var backend, output string
	var nodes, clients int
	var bf benchFlags
	cmd := &cobra.Command{
		Use:   "check FILE... [--backend B] [-o json]",
		Short: "Check with real traffic that every path of every Service in the manifests works",
		Long: `check builds a small lab (2 nodes, 1 external client, the pods the manifests declare),
applies the manifests, lets the chosen backend program every node, and checks with real
traffic every path each Service's type implies: its ClusterIP from a pod on each node, its
NodePort from the client on every node IP, load-balancer and external IPs from the client.
Every endpoint must answer, selection must fit the expected shares (chi-square), session
affinity must hold when set. Headless and ExternalName Services get no proxy rules.

A path that cannot be checked here (SCTP: the lab's echo servers speak TCP and UDP) is
a skip, and manifests without a Service check nothing: both exit 1 unless --allow-skip.

Exit status: 0 all paths pass, 1 a path failed or was skipped, 2 bad input, 3 the bench
failed.`,
		Example: `  kpbench check scenarios/examples/nginx-nodeport.yaml
  kpbench check scenarios/examples/inference.yaml --backend nftables -o json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return badInput("check needs at least one manifest file")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, files []string) error {
			if bf.kf.enabled() {
				bf.kf.allowNotChecked = bf.kf.allowNotChecked || bf.allowSkip
				return bf.kf.check(cmd, files, output)
			}
			if err := all.Validate(backend); err != nil {
				return badInput("--backend: %v", err)
			}
			if err := bf.tools.check([]string{backend}); err != nil {
				return err
			}
			if output != "table" && output != "json" {
				return badInput("-o %q: allowed values are table, json", output)
			}
			if nodes < 1 || nodes > lab.MaxNodes {
				return badInput("--nodes %d: allowed values are 1-%d", nodes, lab.MaxNodes)
			}
			if clients < 1 || clients > lab.MaxClients {
				return badInput("--clients %d: allowed values are 1-%d (check probes from an external client)", clients, lab.MaxClients)
			}
			objs, err := manifest.ReadFiles(files...)
			if err != nil {
				return usageError{err}
			}
			ros := manifest.RuntimeObjects(objs)
			if err := requireRoot(cmd, nil); err != nil { // after the input's checks: bad input says so first
				return err
			}
			ctx := cmd.Context()
			start := time.Now()
			tb, err := testbed.Start(ctx, testbed.Options{
				Lab:       lab.Config{Name: "chk" + randomID(4), Nodes: nodes, Clients: clients},
				Backend:   backend,
				ProbePods: true,
				Settings:  all.Settings{ToolRoot: bf.tools.Dir()},
			})
			if err != nil {
				return err
			}
			defer tb.Stop(context.WithoutCancel(ctx))
			if err := tb.Apply(ctx, ros...); err != nil {
				return usageError{fmt.Errorf("apply %s: %w", strings.Join(files, ", "), err)}
			}
			outs, err := check.Run(ctx, tb, check.Options{})
			if err != nil {
				return err
			}
			if err := printAs(cmd.OutOrStdout(), output, struct {
				Backend  string          `json:"backend"`
				Passed   bool            `json:"passed"`
				Outcomes []check.Outcome `json:"outcomes"`
			}{backend, !check.Failed(outs), outs}, func() error {
				printOutcomes(cmd.OutOrStdout(), backend, outs, time.Since(start))
				return nil
			}); err != nil {
				return err
			}
			return checkVerdict(outs, bf.allowSkip)
		},
	}
	cmd.Flags().StringVar(&backend, "backend", "iptables", "proxy backend: "+strings.Join(all.Names(), ", "))
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	cmd.Flags().IntVar(&nodes, "nodes", 2, "nodes in the lab")
	cmd.Flags().IntVar(&clients, "clients", 1, "external clients in the lab (at least 1)")
	bf.add(cmd, "exit 0 when paths could not be checked here or nothing was checked (still printed)")
	return cmd
}

// checkVerdict is check's gate: a failed path fails it; a skipped or not checked path, or
// no Service at all to check, fails it too unless allowSkip (a check that checked nothing
// has not passed).
func checkVerdict(outs []check.Outcome, allowSkip bool) error {
	if check.Failed(outs) {
		return failedError{"check failed: some paths do not work (see the table)"}
	}
	if allowSkip {
		return nil
	}
	if len(outs) == 0 {
		return failedError{"check: the manifests hold no Service: nothing was checked (--allow-skip accepts it)"}
	}
	var skipped []string
	for _, o := range outs {
		if o.Verdict == check.Skip || o.Verdict == check.NotChecked {
			skipped = append(skipped, o.Service+" "+o.Port+" "+o.Path)
		}
	}
	if len(skipped) > 0 {
		return failedError{fmt.Sprintf("check: %d paths not checked (%s; --allow-skip accepts them)", len(skipped), strings.Join(skipped, ", "))}
	}
	return nil
}

func printOutcomes(w io.Writer, backend string, outs []check.Outcome, took time.Duration) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tPORT\tPATH\tFROM\tTARGET\tRESULT\tEVIDENCE")
	failed := 0
	for _, o := range outs {
		if o.Verdict == check.Fail {
			failed++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", o.Service, o.Port, o.Path, o.From, o.Destination, o.Verdict, o.Detail)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "backend %s: %d paths, %d failed (%.1fs)\n", backend, len(outs), failed, took.Seconds())
}

// randomID returns n random lowercase hex characters (lab names of one-shot commands).
func randomID(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}
