package iptables

import (
	"bufio"
	"bytes"
	"strings"
)

// CountSavedRules counts the rules of an iptables-save listing (all tables): its `-A` lines.
//
// Equivalent to: `iptables-save | grep -c '^-A'`.
func CountSavedRules(dump []byte) (int, error) {
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(dump))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if strings.HasPrefix(strings.TrimSpace(sc.Text()), "-A ") {
			n++
		}
	}
	return n, sc.Err()
}
