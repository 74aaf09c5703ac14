package kpbench_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// layers are the floors of docs/architecture.md, lowest first: a package may import only
// packages of its own floor's lower neighbours or below, never one of a higher floor. A
// package is on the floor of the longest prefix listed (a folder's packages share its floor
// unless a deeper path is listed).
var layers = [][]string{
	{"internal"},
	{"lab", "backends", "apistore", "manifest", "microvm", "reports"},
	{"cluster", "kubestack/controlplane", "kubestack/kubelet"},
	{"cluster/testbed", "cluster/kube", "cluster/fake", "kubestack"},
	{"scenarios", "e2e"},
	{"cmd"},
}

// engineOnly are the packages a cluster under test must not import: the engine and the
// reports. The implementations sit below them and know nothing of them.
var engineOnly = []string{"scenarios", "reports"}

const module = "kpbench.dev/kpbench/"

// floorOf returns the floor of a package path relative to the module (-1: not listed).
func floorOf(rel string) int {
	best, floor := -1, -1
	for i, l := range layers {
		for _, p := range l {
			if (rel == p || strings.HasPrefix(rel, p+"/")) && len(p) > best {
				best, floor = len(p), i
			}
		}
	}
	return floor
}

// goPackage is what `go list -json` says of a package that the test needs.
type goPackage struct {
	ImportPath string
	Imports    []string
}

func listPackages(t *testing.T) []goPackage {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	require.NoError(t, err, "go list")
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []goPackage
	for dec.More() {
		var p goPackage
		require.NoError(t, dec.Decode(&p))
		pkgs = append(pkgs, p)
	}
	require.NotEmpty(t, pkgs)
	return pkgs
}

// TestImportLayers holds the tree to docs/architecture.md: every package sits on a floor,
// no import runs upward, and no cluster under test imports the engine or the reports.
func TestImportLayers(t *testing.T) {
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(p.ImportPath, module)
		if rel == strings.TrimSuffix(module, "/") {
			continue // this test's own package
		}
		from := floorOf(rel)
		if from < 0 {
			t.Errorf("%s is on no floor of docs/architecture.md: add it to the map and to layers", rel)
			continue
		}
		for _, imp := range p.Imports {
			irel, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			if to := floorOf(irel); to > from {
				t.Errorf("%s (floor %d) imports %s (floor %d): an import runs upward", rel, from+1, irel, to+1)
			}
			if strings.HasPrefix(rel, "cluster/") || rel == "cluster" {
				for _, e := range engineOnly {
					if irel == e || strings.HasPrefix(irel, e+"/") {
						t.Errorf("%s imports %s: a cluster under test knows nothing of the engine or the reports", rel, irel)
					}
				}
			}
		}
	}
}

// TestFloorOf makes the rule able to fail: a made-up upward import is found.
func TestFloorOf(t *testing.T) {
	require.Greater(t, floorOf("scenarios/check"), floorOf("cluster/testbed"))
	require.Greater(t, floorOf("cluster/testbed"), floorOf("cluster"))
	require.Equal(t, floorOf("lab/probe"), floorOf("lab"))
	require.Equal(t, -1, floorOf("nowhere"))
}
