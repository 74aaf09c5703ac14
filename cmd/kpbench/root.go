package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"kpbench.dev/kpbench/lab"
)

// Exit codes: 0 success, 1 a check or expectation failed, 2 bad input (flags, files),
// 3 the bench itself failed (kernel, tools).
const (
	exitOK       = 0
	exitFailed   = 1
	exitBadInput = 2
	exitError    = 3
)

// usageError marks bad input: a flag, an argument or a file the user gave.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// badInput wraps err as bad input (exit 2).
func badInput(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// failedError marks a run whose checks failed (exit 1); the details were printed already.
type failedError struct{ msg string }

func (e failedError) Error() string { return e.msg }

// run builds the command tree, runs it with a context cancelled by SIGINT/SIGTERM, and
// maps the error to an exit code.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w\nsee '%s --help'", err, c.CommandPath())}
	})
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ue usageError
	var fe failedError
	var ce exitCodeError
	if errors.As(err, &ce) { // `lab exec`: the command spoke for itself
		return ce.code
	}
	fmt.Fprintln(stderr, "kpbench:", err)
	switch {
	case errors.As(err, &ue), errors.Is(err, lab.ErrMachineLimit), isRequiredFlagError(err):
		return exitBadInput
	case errors.As(err, &fe):
		return exitFailed
	default:
		return exitError
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "kpbench",
		Short: "A test bench for Kubernetes Service proxying (iptables, nftables, IPVS)",
		Long: `kpbench builds a fake cluster out of Linux network namespaces (nodes, pods with echo
servers, external clients), programs real kernel rules the way kube-proxy does, and checks
and measures them with real traffic.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
	}
	root.AddCommand(newLabCmd(), newClusterCmd(), newCheckCmd(), newRunCmd(), newConformCmd(), newReportCmd(), newCompareCmd(), newGateCmd(), newVMCmd(), newToolsCmd(), newVersionCmd(), newDiffRulesCmd(), newValidateCmd(), newPodExecCmd(), newE2ECmd())
	root.SetHelpCommand(newHelpCmd())
	addVersionFlag(root)
	refuseUnknownSubcommands(root)
	return root
}

// newHelpCmd is cobra's help command, except that a topic naming no command is bad
// input (exit 2 with the closest names) instead of the root's help and exit 0: a typo in
// a script must fail.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "help prints the help of any command: kpbench help lab up.",
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			cmd, _, err := c.Root().Find(args)
			if err != nil || cmd == nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []string
			for _, sub := range cmd.Commands() {
				if sub.IsAvailableCommand() && strings.HasPrefix(sub.Name(), toComplete) {
					names = append(names, sub.Name())
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err == nil && cmd != nil && len(rest) == 0 {
				return cmd.Help()
			}
			parent := c.Root()
			if cmd != nil {
				parent = cmd
			}
			msg := fmt.Sprintf("unknown help topic %q", strings.Join(args, " "))
			if len(rest) > 0 {
				if s := parent.SuggestionsFor(rest[0]); len(s) > 0 {
					msg += fmt.Sprintf("; did you mean %s?", strings.Join(s, ", "))
				}
			}
			return badInput("%s\nsee '%s --help'", msg, parent.CommandPath())
		},
	}
}

// refuseUnknownSubcommands makes every command that only groups others (root, lab, vm...)
// refuse an argument that names no subcommand, with exit 2 and the closest names, instead
// of cobra's default of printing the help and exiting 0: a typo in a CI script must fail.
// Without arguments such a command does what it did (most print their help).
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !c.HasSubCommands() {
		return
	}
	c.SuggestionsMinimumDistance = 2
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf("; did you mean %s?", strings.Join(s, ", "))
		}
		return badInput("%s\nsee '%s --help'", msg, cmd.CommandPath())
	}
	if !c.Runnable() {
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
}

// isRequiredFlagError reports cobra's error for a required flag left out, which cobra
// returns before any hook of ours runs (so it cannot be wrapped as a usageError).
func isRequiredFlagError(err error) bool {
	return strings.HasPrefix(err.Error(), "required flag(s) ")
}

// requireRoot is the PreRunE of commands that touch namespaces.
func requireRoot(*cobra.Command, []string) error {
	if os.Geteuid() != 0 {
		return errors.New("this command needs root (it creates network namespaces and kernel rules)")
	}
	return nil
}

// exactArgs is cobra.ExactArgs with exit code 2.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// minimumArgs is cobra.MinimumNArgs with exit code 2.
func minimumArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.MinimumNArgs(n)(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}
