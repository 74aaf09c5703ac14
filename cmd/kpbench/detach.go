package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"kpbench.dev/kpbench/lab"
)

// detachSpec says how to run a `up` command again in the background.
type detachSpec struct {
	// Records and Name are where the child records what it builds: it has started when
	// that record names the child as its owner and is ready.
	Records lab.Records
	Name    string
	// Env is added to the child's environment.
	Env []string
	// Log receives the child's output; its directory is created.
	Log string
	// Timeout bounds the wait for the child to be ready.
	Timeout time.Duration
}

// startDetached runs cmd again, with the flags it was given but --detach, in a session of
// its own, and waits until the child is ready (its record says so; polled every 200 ms),
// exits, times out (then it is sent SIGTERM) or ctx ends (likewise). It returns the
// child's pid, released so that it outlives this process. A child that exits with status
// 2 refused its input: that is a usage error here too, with the log's content.
func startDetached(ctx context.Context, cmd *cobra.Command, spec detachSpec) (int, error) {
	what := spec.Records.Kind
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Dir(spec.Log), 0o755); err != nil {
		return 0, err
	}
	logFile, err := os.Create(spec.Log)
	if err != nil {
		return 0, err
	}
	defer logFile.Close()
	child := exec.Command(self, relaunchArgs(cmd)...)
	child.Stdout, child.Stderr = logFile, logFile
	child.Env = append(os.Environ(), spec.Env...)
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		return 0, fmt.Errorf("start detached %s: %w", what, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(spec.Timeout)
	for {
		select {
		case err := <-exited:
			tail, _ := os.ReadFile(spec.Log)
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && ee.ExitCode() == exitBadInput {
				return 0, usageError{fmt.Errorf("detached %s refused its configuration:\n%s", what, tail)}
			}
			return 0, fmt.Errorf("detached %s exited before it was ready (%v):\n%s", what, err, tail)
		case <-timeout:
			_ = child.Process.Signal(syscall.SIGTERM)
			return 0, fmt.Errorf("detached %s not ready after %s; sent it SIGTERM (log %s)", what, spec.Timeout, spec.Log)
		case <-ctx.Done():
			_ = child.Process.Signal(syscall.SIGTERM)
			return 0, ctx.Err()
		case <-tick.C:
			var e lab.Entry
			if spec.Records.Read(spec.Name, &e) == nil && e.PID == child.Process.Pid && e.State == lab.StateReady {
				pid := child.Process.Pid
				_ = child.Process.Release()
				return pid, nil
			}
		}
	}
}

// relaunchArgs are kpbench's arguments for running cmd again as it was given, without
// --detach: its path below the root command and every flag the user set.
func relaunchArgs(cmd *cobra.Command) []string {
	args := strings.Fields(cmd.CommandPath())[1:]
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Name != "detach" {
			args = append(args, "--"+f.Name+"="+f.Value.String())
		}
	})
	return args
}
