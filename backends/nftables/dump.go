package nftables

import (
	"bufio"
	"bytes"
	"strings"
)

// DumpArgs are the arguments of `nft` that list the backend's table (and upstream
// kube-proxy's, which has the same name): what CountListed counts and diff-rules normalises.
func DumpArgs() []string { return []string{"list", "table", "ip", Table} }

// CountListed counts what an `nft list table` listing holds: every rule, plus every element
// of its maps and sets (a verdict-map element is a rule's worth of work for a packet, and
// kube-proxy's nftables mode moves most of its per-service rules into them).
func CountListed(dump []byte) (int, error) {
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(dump))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, " # handle "); i >= 0 { // listed with -a
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" || strings.HasSuffix(line, "{") || line == "}" || declaration(line) {
			continue
		}
		// a rule, or a line of map/set elements: count the elements it holds
		if strings.HasPrefix(line, "elements = {") || strings.HasSuffix(line, ",") || strings.HasSuffix(line, "}") {
			n += strings.Count(line, ",") + 1
		} else {
			n++
		}
	}
	return n, sc.Err()
}

// declaration reports whether a listing line declares a property of its chain, set or map
// (`type`, `flags`, `comment`, and a set's `size`, `timeout` and `gc-interval`) rather than
// holding rules or elements.
func declaration(line string) bool {
	for _, p := range []string{"type ", "flags ", "comment ", "size ", "timeout ", "gc-interval "} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}
