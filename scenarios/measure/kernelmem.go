//go:build linux

package measure

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// KernelMemory returns the kernel memory that rules can occupy, in bytes (host-wide, from
// /proc/meminfo): unreclaimable slab (nft objects, conntrack, x_tables' small blobs) plus
// vmalloc (x_tables' large per-table blobs, which iptables-legacy rewrites whole).
// Reclaimable slab (dentries, inodes) is left out: it moves with file activity, not rules.
// Rule memory is read as its growth across a ladder from a settled baseline
// (SettledKernelMemory): still noisy on a shared machine, so compare within a run.
func KernelMemory() (int64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	return parseKernelMemory(data)
}

// parseKernelMemory adds SUnreclaim and VmallocUsed of a /proc/meminfo text.
func parseKernelMemory(meminfo []byte) (int64, error) {
	var total int64
	found := 0
	for _, line := range strings.Split(string(meminfo), "\n") {
		for _, key := range []string{"SUnreclaim:", "VmallocUsed:"} {
			if rest, ok := strings.CutPrefix(line, key); ok {
				kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
				if err != nil {
					return 0, fmt.Errorf("/proc/meminfo %s %w", key, err)
				}
				total += kb * 1024
				found++
			}
		}
	}
	if found != 2 {
		return 0, fmt.Errorf("/proc/meminfo: want SUnreclaim and VmallocUsed lines, found %d", found)
	}
	return total, nil
}

// SettledKernelMemory waits until KernelMemory holds still (two readings a second apart
// within 1 MiB) and returns it: a lab removed just before frees its namespaces'
// memory in a kernel worker for a while, which would otherwise read as negative rule
// memory. It gives up after 20 s and returns the last reading.
func SettledKernelMemory(ctx context.Context) (int64, error) {
	const tolerance = 1 << 20
	last, err := KernelMemory()
	if err != nil {
		return 0, err
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-deadline:
			return last, nil
		case <-tick.C:
		}
		cur, err := KernelMemory()
		if err != nil {
			return 0, err
		}
		if d := cur - last; d < tolerance && d > -tolerance {
			return cur, nil
		}
		last = cur
	}
}
