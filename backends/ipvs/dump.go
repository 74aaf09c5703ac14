package ipvs

import (
	"bufio"
	"bytes"
	"strings"
)

// DumpArgs are the arguments of `ipvsadm` that list every virtual and real server, numeric.
func DumpArgs() []string { return []string{"-Ln"} }

// CountListed counts the virtual servers and real servers of an `ipvsadm -Ln` listing.
func CountListed(dump []byte) (int, error) {
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(dump))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "TCP ") || strings.HasPrefix(line, "UDP ") || strings.HasPrefix(line, "SCTP ") ||
			strings.HasPrefix(line, "-> ") && !strings.HasPrefix(line, "-> RemoteAddress") {
			n++
		}
	}
	return n, sc.Err()
}
