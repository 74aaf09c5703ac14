//go:build linux

package nftables

import (
	"context"
	"errors"
	"fmt"

	gnft "github.com/google/nftables"
	"sigs.k8s.io/knftables"

	"kpbench.dev/kpbench/lab/netns"
)

// nsKernel runs knftables inside a node's network namespace. knftables execs `nft` and
// its exec hook is unexported, so every call runs inside netns.Do: the exec'd nft
// inherits the namespace of the locked thread that forks it.
type nsKernel struct {
	nsPath string
	nft    knftables.Interface
}

func (k nsKernel) run(ctx context.Context, tx *knftables.Transaction) error {
	return netns.Do(k.nsPath, func() error { return k.nft.Run(ctx, tx) })
}

func (k nsKernel) list(ctx context.Context, objectType string) ([]string, error) {
	var out []string
	err := netns.Do(k.nsPath, func() error {
		var err error
		out, err = k.nft.List(ctx, objectType)
		return err
	})
	return out, err
}

// tableExists asks the kernel over netlink for the ip tables (a single small dump,
// unlike `nft list`, whose cost grows with the table). The netlink socket is created
// inside the namespace.
//
// Equivalent to: `nft list tables ip`.
func (k nsKernel) tableExists(ctx context.Context) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	found := false
	err := netns.Do(k.nsPath, func() error {
		conn, err := gnft.New()
		if err != nil {
			return err
		}
		tables, err := conn.ListTablesOfFamily(gnft.TableFamilyIPv4)
		if err != nil {
			return err
		}
		for _, t := range tables {
			found = found || t.Name == Table
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("list nftables tables: %w", err)
	}
	return found, nil
}

// New returns a Backend for the node whose namespace is opts.NetNSPath. It checks, inside
// that namespace, that nft is usable (knftables.New runs `nft --version` and `nft
// --check`). The nft here (1.0.6) has no `destroy` command; the backend never uses
// Destroy (it deletes with add+delete, or delete after listing), so no EmulateDestroy.
func New(opts Options) (*Backend, error) {
	if opts.NetNSPath == "" {
		return nil, errors.New("nftables backend: NetNSPath is required (nft never runs in the host's namespace)")
	}
	var nft knftables.Interface
	err := netns.Do(opts.NetNSPath, func() error {
		if err := netns.Guard(); err != nil {
			return err
		}
		var err error
		nft, err = knftables.New(knftables.IPv4Family, Table)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("new %s %s: %w", opts.NodeName, Name, err)
	}
	return newBackend(opts, nft, nsKernel{nsPath: opts.NetNSPath, nft: nft}), nil
}
