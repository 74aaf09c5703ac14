package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/backends/all"
	"kpbench.dev/kpbench/internal/yamlpos"
	"kpbench.dev/kpbench/manifest"
	"kpbench.dev/kpbench/scenarios"
)

func newValidateCmd() *cobra.Command {
	var backend, ifAvailable string
	cmd := &cobra.Command{
		Use:   "validate FILE... [--backend B[,B...]] [--backend-if-available B[,B...]]",
		Short: "Check scenario, manifest and proxy configuration files without running anything",
		Long: `validate reads each file as run, check and conform would, and reports every problem with
its file, line and field: a Scenario (apiVersion kpbench.dev/v1alpha1) with the manifests
and KubeProxyConfiguration it references, its steps and their measurements' parameters
(a measurement that cannot produce a sample where it stands is an error); a
KubeProxyConfiguration file; or a manifest file. Nothing is built and no root is needed.
With --backend, the checks that depend on the backends (IPVS experiments, per-rule
timings) run too; --backend-if-available selects as run does (each backend left out is
named on stderr with the reason), so it shows what a run would run here.

Exit status: 0 every file is valid, 2 a file is not (every error is printed).`,
		Example: `  kpbench validate scenarios/*.yaml scenarios/conformance/*.yaml
  kpbench validate scenarios/ipvs-schedulers.yaml --backend ipvs`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return badInput("validate needs at least one file")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, files []string) error {
			backends, err := selectBackends(cmd.ErrOrStderr(), cmd.CommandPath(), backend, ifAvailable, all.ThisMachine)
			if err != nil {
				return err
			}
			var errs []error
			warn := onceWriter{w: cmd.ErrOrStderr(), seen: map[string]bool{}}
			for _, f := range files {
				if err := validateFile(warn, f, backends); err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: valid\n", f)
			}
			if len(errs) > 0 {
				return usageError{errors.Join(errs...)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&backend, "backend", "", "also check what depends on these backends (comma-separated, all or ours)")
	addIfAvailableFlag(cmd, &ifAvailable)
	return cmd
}

// onceWriter prints each warning line once: a proxy configuration that several scenarios
// name would repeat its warnings for every one of them.
type onceWriter struct {
	w    io.Writer
	seen map[string]bool
}

// warn prints "warning: msg" unless it was printed before.
func (o onceWriter) warn(msg string) {
	if !o.seen[msg] {
		o.seen[msg] = true
		fmt.Fprintln(o.w, "warning:", msg)
	}
}

// validateFile validates one file by its kind: a Scenario, a KubeProxyConfiguration or a
// manifest. Warnings go to w, each once.
func validateFile(w onceWriter, path string, backends []string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	docs, err := yamlpos.Split(path, data)
	if err != nil {
		return err
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if len(docs) == 0 {
		// Nothing to check is not valid: a file emptied by mistake would pass.
		return &yamlpos.Error{File: path, Line: 1, Msg: "empty file (no YAML document, or only comments): expected a Scenario, a KubeProxyConfiguration or Kubernetes manifests"}
	}
	_ = yamlpos.Decoder{OnUnknownField: func(*field.Path, *yaml.Node, *yaml.Node) {}}.Decode(docs[0], &head)
	switch {
	case head.Kind == scenarios.Kind || head.APIVersion == scenarios.APIVersion:
		// The documents its kind was read from: a large file is not parsed twice.
		sc, err := scenarios.ParseScenarioDocs(path, docs, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, warning := range sc.Warnings {
			w.warn(warning)
		}
		if len(backends) > 0 {
			return sc.ValidateFor(scenarios.ValidationOptions{Backends: backends, Facts: scenarios.RegistryFacts{}})
		}
		return nil
	case head.Kind == scenarios.ProxyConfigKind:
		_, warnings, err := scenarios.LoadProxyConfig(path)
		for _, warning := range warnings {
			w.warn(warning)
		}
		return err
	default:
		_, err := manifest.ReadFiles(path)
		return err
	}
}
