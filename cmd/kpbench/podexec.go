package main

import (
	"github.com/spf13/cobra"

	"kpbench.dev/kpbench/kubestack/kubelet"
)

// newPodExecCmd is the hidden exec helper of the lab kubelet (kubelet.RunPodExec): the
// kubelet starts it in new mount and UTS namespaces to run a command of `kubectl exec`
// inside a pod, and it becomes that command. Nobody types it.
func newPodExecCmd() *cobra.Command {
	return &cobra.Command{
		Use:    kubelet.PodExecCommand + " --netns=PATH --hostname=NAME --root=DIR [--bind=SRC:DST]... -- CMD [ARGS...]",
		Short:  "Run a command inside a lab pod (the lab kubelet's exec helper)",
		Hidden: true,
		// Its flags are the helper's own, and the command's flags come after "--".
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			// RunPodExec returns only when the command could not start: its exit code is
			// the container's, as a runtime reports it.
			return exitCodeError{kubelet.RunPodExec(args, cmd.ErrOrStderr())}
		},
	}
}
