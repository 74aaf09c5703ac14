//go:build linux

package perrule

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/internal/netns"
)

// applyBulk applies the difference between what is installed and want with one
// iptables-restore --noflush: every chain on a full sync, else only the chains whose
// rules changed (each rewritten whole, as kube-proxy's partial sync does), and the
// chains no longer wanted flushed and deleted.
func (b *Backend) applyBulk(ctx context.Context, order []chainKey, want map[chainKey][][]string, full bool, res *backends.SyncResult) error {
	if full || b.installed == nil {
		b.installed = map[chainKey][][]string{}
	}
	input, changed := bulkInput(order, b.installed, want)
	if len(input) == 0 {
		return nil
	}
	_, restore, _ := b.opts.Flavor.Binaries()
	if _, err := b.tools().Exec(ctx, netns.Command{Path: restore, Args: []string{"--noflush"}, Stdin: input}); err != nil {
		return fmt.Errorf("bulk restore: %w", err)
	}
	res.Rules += changed
	for k := range b.installed {
		if _, ok := want[k]; !ok {
			delete(b.installed, k)
		}
	}
	for _, k := range order {
		b.installed[k] = want[k]
	}
	return nil
}

// bulkInput writes the restore input that turns installed into want, table by table,
// and counts the rules it writes. Empty when nothing changed.
func bulkInput(order []chainKey, installed, want map[chainKey][][]string) ([]byte, int) {
	tables := map[string][]chainKey{}
	var names []string
	for _, k := range order {
		old, ok := installed[k]
		if ok && slices.EqualFunc(old, want[k], slices.Equal) {
			continue
		}
		if _, seen := tables[k.table]; !seen {
			names = append(names, k.table)
		}
		tables[k.table] = append(tables[k.table], k)
	}
	stale := map[string][]string{}
	for k := range installed {
		if _, ok := want[k]; !ok {
			if _, seen := tables[k.table]; !seen {
				names = append(names, k.table)
				tables[k.table] = nil
			}
			stale[k.table] = append(stale[k.table], k.chain)
		}
	}
	if len(names) == 0 {
		return nil, 0
	}
	var buf bytes.Buffer
	n := 0
	for _, t := range names {
		slices.Sort(stale[t])
		fmt.Fprintf(&buf, "*%s\n", t)
		for _, k := range tables[t] {
			fmt.Fprintf(&buf, ":%s - [0:0]\n", k.chain)
		}
		for _, c := range stale[t] {
			fmt.Fprintf(&buf, ":%s - [0:0]\n", c) // flushed before it is deleted
		}
		for _, k := range tables[t] {
			for _, r := range want[k] {
				buf.WriteString("-A " + k.chain)
				for _, a := range r {
					buf.WriteString(" " + quoteArg(a))
				}
				buf.WriteByte('\n')
				n++
			}
		}
		for _, c := range stale[t] {
			fmt.Fprintf(&buf, "-X %s\n", c)
		}
		buf.WriteString("COMMIT\n")
	}
	return buf.Bytes(), n
}

// quoteArg quotes an argument for restore input when it holds a space or is empty.
func quoteArg(a string) string {
	if a == "" || strings.ContainsAny(a, " \t") {
		return `"` + a + `"`
	}
	return a
}
