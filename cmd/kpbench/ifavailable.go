package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"kpbench.dev/kpbench/backends/all"
)

// ifAvailableFlag is the flag that adds backends to --backend's where this machine can run
// them: `make bench` names ipvs there, so that the workshop VM, whose kernel has IPVS,
// compares all three proxy modes, and a kernel without IPVS runs the rest and says why.
const ifAvailableFlag = "backend-if-available"

// addIfAvailableFlag adds --backend-if-available to cmd, read into list.
func addIfAvailableFlag(cmd *cobra.Command, list *string) {
	cmd.Flags().StringVar(list, ifAvailableFlag, "", "also run these backends (comma-separated) where this machine can: ipvs where the kernel has IPVS, kube-proxy-* where make upstream built them; each one left out is named on stderr with the reason")
}

// selectBackends returns the backends of --backend (parseBackends: a list, all or ours),
// then those of --backend-if-available that m can run (all.Machine.CannotRun, which
// decides by the backends' facts) and that are not in the list already, in the order
// given. For each one left out it writes one line to w, "who: NAME left out: REASON".
// machine is called only when --backend-if-available names something: asking the kernel
// is for the runs that need the answer. Bad input (an unknown name, all or ours after
// --backend-if-available, nothing left to run) is a usageError.
func selectBackends(w io.Writer, who, backend, ifAvailable string, machine func() all.Machine) ([]string, error) {
	out, err := parseBackends(backend)
	if err != nil || ifAvailable == "" {
		return out, err
	}
	var refs []string
	for _, ref := range strings.Split(ifAvailable, ",") {
		ref = strings.TrimSpace(ref)
		if err := all.Validate(ref); err != nil {
			return nil, badInput("--%s %q: allowed values are a comma-separated list of backend references (all and ours are --backend's): %v", ifAvailableFlag, ref, err)
		}
		refs = append(refs, ref)
	}
	m := machine()
	for _, ref := range refs {
		if slices.Contains(out, ref) {
			continue
		}
		if why := m.CannotRun(ref); why != nil {
			fmt.Fprintf(w, "%s: %s left out: %v\n", who, ref, why)
			continue
		}
		out = append(out, ref)
	}
	if len(out) == 0 {
		return nil, badInput("--%s %s: none of them can run on this machine, and --backend names no other", ifAvailableFlag, ifAvailable)
	}
	return out, nil
}
