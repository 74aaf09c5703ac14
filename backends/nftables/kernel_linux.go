//go:build linux

package nftables

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	gnft "github.com/google/nftables"
	"sigs.k8s.io/knftables"

	"kpbench.dev/kpbench/backends/conntrack"
	"kpbench.dev/kpbench/internal/netns"
)

// nsKernel runs nft inside a node's network namespace, from the host's tools or a tool
// root (netns.Tools). knftables v0.0.22 execs `nft` itself, found with exec.LookPath in
// the process's PATH through an unexported exec hook: it can take neither an executor nor
// a path, so it could not run another root's nft. knftables still builds every
// transaction (the backend's nft Interface is a knftables.Fake used only as the factory of
// transactions, whose text is the same), and nsKernel runs `nft -f -` on that text itself,
// as knftables' Run does.
type nsKernel struct {
	tools netns.Tools
}

// nftError is a failed nft run: its message is nft's first error line and what netns.Exec
// says (the command and stderr), and it is errNotFound when nft says "No such file or
// directory" there (what knftables checks).
type nftError struct {
	err      error
	notFound bool
}

func (e *nftError) Error() string { return e.err.Error() }
func (e *nftError) Unwrap() []error {
	if e.notFound {
		return []error{e.err, errNotFound}
	}
	return []error{e.err}
}

// run runs the transaction with `nft -f -`.
//
// Equivalent to: `nft -f - <<< "$tx"` inside the node's namespace.
func (k nsKernel) run(ctx context.Context, tx *knftables.Transaction) error {
	return k.nft(ctx, []byte(tx.String()), "-f", "-")
}

// nft runs nft with args and stdin.
func (k nsKernel) nft(ctx context.Context, stdin []byte, args ...string) error {
	res, err := k.tools.Exec(ctx, netns.Command{Path: "nft", Args: args, Stdin: stdin})
	if err != nil {
		first, _, _ := strings.Cut(string(res.Stderr), "\n")
		return &nftError{err: err, notFound: strings.Contains(first, "No such file or directory")}
	}
	return nil
}

// list returns the names of the table's chains or (named) sets from one netlink dump of
// names, and asks knftables for other types. `nft list chains` and `nft list sets` build
// nft's whole cache first, rules and anonymous sets included: 0.37 s of a 0.77 s resync
// at 1k Services went there. A missing table lists nothing.
//
// Equivalent to: `nft list chains ip` / `nft list sets ip kube-proxy`, names only.
func (k nsKernel) list(ctx context.Context, objectType string) ([]string, error) {
	if objectType != "chains" && objectType != "sets" {
		return nil, fmt.Errorf("list nftables %s: only chains and sets are listed", objectType)
	}
	var out []string
	err := k.withTable(ctx, func(conn *gnft.Conn, t *gnft.Table) error {
		if t == nil {
			return nil
		}
		if objectType == "chains" {
			chains, err := conn.ListChainsOfTableFamily(gnft.TableFamilyIPv4)
			if err != nil {
				return err
			}
			for _, c := range chains {
				if c.Table != nil && c.Table.Name == Table {
					out = append(out, c.Name)
				}
			}
			return nil
		}
		sets, err := conn.GetSets(t)
		if err != nil {
			return err
		}
		for _, s := range sets {
			if !s.Anonymous {
				out = append(out, s.Name)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list nftables %s: %w", objectType, err)
	}
	return out, nil
}

// tableExists reports whether `table ip kube-proxy` is present, from a netlink dump of
// the ip tables (a single small dump, unlike `nft list`, whose cost grows with the table).
//
// Equivalent to: `nft list tables ip`.
func (k nsKernel) tableExists(ctx context.Context) (bool, error) {
	found := false
	err := k.withTable(ctx, func(_ *gnft.Conn, t *gnft.Table) error {
		found = t != nil
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("list nftables tables: %w", err)
	}
	return found, nil
}

// withTable opens a netlink connection inside the node's namespace and calls fn with it
// and `table ip kube-proxy` (nil when the table does not exist).
func (k nsKernel) withTable(ctx context.Context, fn func(*gnft.Conn, *gnft.Table) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return netns.Do(k.tools.NSPath, func() error {
		conn, err := gnft.New()
		if err != nil {
			return err
		}
		tables, err := conn.ListTablesOfFamily(gnft.TableFamilyIPv4)
		if err != nil {
			return err
		}
		for _, t := range tables {
			if t.Name == Table {
				return fn(conn, t)
			}
		}
		return fn(conn, nil)
	})
}

// minNFT is the oldest nft the backend runs (knftables' own requirement).
var minNFT = [3]int{1, 0, 1}

// nftVersion finds "vMAJOR.MINOR.PATCH" in `nft --version`'s output.
var nftVersion = regexp.MustCompile(`v(\d+)\.(\d+)\.(\d+)`)

// New returns a Backend for the node whose namespace is opts.NetNSPath. It checks, inside
// that namespace and with the tools of opts.ToolRoot, that nft is usable, as knftables.New
// does: `nft --version` must be 1.0.1 or later, and `nft --check` must accept a table with
// a comment (the kernel and nft support object comments). nft 1.0.6 has no `destroy`
// command; the backend never uses Destroy (it deletes with add+delete, or delete after
// listing).
//
// Equivalent to: `nft --version; nft --check -f - <<< 'add table ip kube-proxy { comment "test" ; }'`.
func New(opts Options) (*Backend, error) {
	if opts.NetNSPath == "" {
		return nil, errors.New("nftables backend: NetNSPath is required (nft never runs in the host's namespace)")
	}
	k := nsKernel{tools: netns.Tools{NSPath: opts.NetNSPath, Root: opts.ToolRoot}}
	fail := func(err error) (*Backend, error) { return nil, fmt.Errorf("new %s %s: %w", opts.NodeName, Name, err) }
	ctx := context.Background()
	res, err := k.tools.Exec(ctx, netns.Command{Path: "nft", Args: []string{"--version"}})
	if err != nil {
		return fail(fmt.Errorf("could not run nftables command: %w", err))
	}
	if err := checkVersion(string(res.Stdout)); err != nil {
		return fail(err)
	}
	txs := knftables.NewFake(knftables.IPv4Family, Table)
	tx := txs.NewTransaction()
	tx.Add(&knftables.Table{Comment: knftables.PtrTo("test")})
	if err := k.nft(ctx, []byte(tx.String()), "--check", "-f", "-"); err != nil {
		return fail(fmt.Errorf("nft cannot write a table with a comment here: %w", err))
	}
	return newBackend(opts, txs, k, conntrack.Namespace{Path: opts.NetNSPath}), nil
}

// checkVersion checks `nft --version`'s output against minNFT.
func checkVersion(out string) error {
	m := nftVersion.FindStringSubmatch(out)
	if m == nil {
		return fmt.Errorf("nft --version: no version in %q", strings.TrimSpace(out))
	}
	var v [3]int
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	if slices.Compare(v[:], minNFT[:]) < 0 {
		return fmt.Errorf("nft version must be v1.0.1 or later (got %s)", strings.TrimSpace(out))
	}
	return nil
}
