//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"

	"kpbench.dev/kpbench/internal/upstream"
)

// buildScript builds the upstream binaries, relative to a kpbench checkout.
const buildScript = "hack/build-upstream.sh"

// EnsureE2ETest returns the paths of upstream's e2e.test and of the ginkgo CLI. When they
// have not been built, and the working directory is inside a kpbench checkout, it builds
// them as `make e2e-build` does (about 17 minutes cold here; the build output goes to
// progress); outside a checkout the error says to run `make e2e-build`.
func EnsureE2ETest(ctx context.Context, progress io.Writer) (e2eTest, ginkgo string, err error) {
	e2eTest, err = upstream.Binary(upstream.E2ETest)
	if err == nil {
		ginkgo, err = upstream.Binary(upstream.Ginkgo)
	}
	if err == nil {
		return e2eTest, ginkgo, nil
	}
	root, rerr := checkoutRoot()
	if rerr != nil {
		return e2eTest, ginkgo, fmt.Errorf("%w (and no kpbench checkout here to build it from: %v)", err, rerr)
	}
	fmt.Fprintf(progress, "e2e.test or ginkgo is not built: building them (%s %s %s in %s; ~17 min cold)\n",
		buildScript, upstream.Ginkgo, upstream.E2ETest, root)
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, buildScript), upstream.Ginkgo, upstream.E2ETest)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = progress, progress
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("build e2e.test: %s: %w", buildScript, err)
	}
	if e2eTest, err = upstream.Binary(upstream.E2ETest); err != nil {
		return "", "", err
	}
	ginkgo, err = upstream.Binary(upstream.Ginkgo)
	return e2eTest, ginkgo, err
}

// checkoutRoot finds the kpbench checkout that holds the working directory: the nearest
// directory upward with hack/build-upstream.sh and tools/upstream/go.mod.
func checkoutRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		_, e1 := os.Stat(filepath.Join(dir, buildScript))
		_, e2 := os.Stat(filepath.Join(dir, "tools", "upstream", "go.mod"))
		if e1 == nil && e2 == nil {
			return dir, nil
		}
		if !errors.Is(e1, fs.ErrNotExist) && e1 != nil {
			return "", e1
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no " + buildScript + " in the working directory or above")
		}
		dir = parent
	}
}
