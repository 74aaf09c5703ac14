package kubeproxy

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return string(b)
}

// rehash renames a chain everywhere, as a different hash function would have named it.
func rehash(s, from, to string) string { return strings.ReplaceAll(s, from, to) }

// swapLines exchanges two whole lines of s.
func swapLines(t *testing.T, s, a, b string) string {
	t.Helper()
	require.Contains(t, s, a+"\n")
	require.Contains(t, s, b+"\n")
	s = strings.Replace(s, a+"\n", "\x00A\n", 1)
	s = strings.Replace(s, b+"\n", a+"\n", 1)
	return strings.Replace(s, "\x00A\n", b+"\n", 1)
}

func TestNormalizeIPTables(t *testing.T) {
	base := readTestdata(t, "iptables-affinity.save")
	two := base + `*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-AAAAAAAAAAAAAAAA - [0:0]
-A KUBE-SERVICES -d 172.30.0.42/32 -p tcp -m comment --comment "ns2/svc2:p80 cluster IP" -m tcp --dport 80 -j KUBE-SVC-AAAAAAAAAAAAAAAA
COMMIT
`
	const (
		svc = "KUBE-SVC-XPGD46QRK7WJZT7O"
		sep = "KUBE-SEP-EZUPVGTEALUHPXMM"
	)
	norm := NormalizeIPTables(base, NormalizeOptions{})
	// The mapping is part of what the tests pin down.
	assert.Contains(t, norm, ":KUBE-SVC-ns1/svc1:p80 -\n")
	assert.Contains(t, norm, ":KUBE-SEP-ns1/svc1:p80@10.1.0.2:8080 -\n")
	assert.Contains(t, norm, "--name KUBE-SEP-ns1/svc1:p80@10.1.0.2:8080 ")
	assert.NotContains(t, norm, svc)
	assert.NotContains(t, norm, "[0:0]")
	assert.NotContains(t, norm, "# Generated")

	tests := []struct {
		name  string
		other string
		opts  NormalizeOptions
		same  bool
	}{
		{name: "identical", other: base, same: true},
		{name: "other hash names", other: rehash(rehash(base, svc, "KUBE-SVC-ZZZZZZZZZZZZZZZZ"), sep, "KUBE-SEP-YYYYYYYYYYYYYYYY"), same: true},
		{name: "counters", other: strings.ReplaceAll(base, "[0:0]", "[12:3456]"), same: true},
		{name: "unquoted comment", other: strings.ReplaceAll(base, `--comment "ns1/svc1:p80"`, `--comment ns1/svc1:p80`), same: true},
		{name: "chain declarations reordered", other: swapLines(t, base, ":KUBE-MARK-DROP - [0:0]", ":KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]"), same: true},
		{name: "ordered chain reordered", other: swapLines(t, base,
			"-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN",
			"-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0")},
		{name: "other DNAT target", other: strings.Replace(base, "--to-destination 10.1.0.2:8080", "--to-destination 10.1.0.2:8081", 1)},
		{name: "other probability", other: strings.Replace(base, "--probability 0.50000000000", "--probability 0.33333333349", 1)},
		{name: "comment text differs", other: strings.ReplaceAll(base, "kubernetes forwarding rules", "forwarding")},
		{name: "comment text differs, comments dropped", other: strings.ReplaceAll(base, "kubernetes forwarding rules", "forwarding"), opts: NormalizeOptions{DropComments: true}, same: true},
		{name: "one more service", other: two},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := NormalizeIPTables(base, tc.opts), NormalizeIPTables(tc.other, tc.opts)
			if tc.same {
				assert.Equal(t, a, b)
			} else {
				assert.NotEqual(t, a, b)
			}
		})
	}
}

func TestNormalizeIPTablesUnorderedChains(t *testing.T) {
	a := `*nat
:KUBE-SERVICES - [0:0]
-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m comment --comment "a/a:p cluster IP" -j KUBE-SVC-AAAAAAAAAAAAAAAA
-A KUBE-SERVICES -d 10.96.0.2/32 -p tcp -m comment --comment "b/b:p cluster IP" -j KUBE-SVC-BBBBBBBBBBBBBBBB
-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
COMMIT
`
	b := `*nat
:KUBE-SERVICES - [0:0]
-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-A KUBE-SERVICES -d 10.96.0.2/32 -p tcp -m comment --comment "b/b:p cluster IP" -j KUBE-SVC-BBBBBBBBBBBBBBBB
-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m comment --comment "a/a:p cluster IP" -j KUBE-SVC-AAAAAAAAAAAAAAAA
COMMIT
`
	na := NormalizeIPTables(a, NormalizeOptions{})
	assert.Equal(t, na, NormalizeIPTables(b, NormalizeOptions{}))
	lines := strings.Split(strings.TrimSpace(na), "\n")
	assert.Contains(t, lines[len(lines)-2], "-j KUBE-NODEPORTS", "the nodeports jump stays last")
	assert.Contains(t, na, "-j KUBE-SVC-a/a:p\n")
}

func TestNormalizeNFT(t *testing.T) {
	base := readTestdata(t, "nft-affinity.txt")
	norm := NormalizeNFT(base, NormalizeOptions{})
	assert.NotContains(t, norm, "# handle")
	assert.Contains(t, norm, "chain service-ns1/svc1/tcp/p80\n")
	assert.Contains(t, norm, "element 172.30.0.41 . tcp . 80 : goto service-ns1/svc1/tcp/p80\n")

	twoElems := strings.Replace(base, "elements = { 172.30.0.41 }", "elements = { 172.30.0.41, 172.30.0.40 }", 1)
	tests := []struct {
		name string
		a, b string
		opts NormalizeOptions
		same bool
	}{
		{name: "identical", a: base, b: base, same: true},
		{name: "other hashes", a: base, b: strings.ReplaceAll(base, "ULMVA6XW", "AAAAAAAA"), same: true},
		{name: "other handles", a: base, b: strings.ReplaceAll(base, "# handle 2", "# handle 9"), same: true},
		{name: "counters", a: strings.Replace(base, "reject comment", "counter packets 0 bytes 0 reject comment", 1), b: strings.Replace(base, "reject comment", "counter packets 7 bytes 420 reject comment", 1), same: true},
		{name: "element order", a: twoElems, b: strings.Replace(base, "elements = { 172.30.0.41 }", "elements = { 172.30.0.40,\n\t\t\t     172.30.0.41 }", 1), same: true},
		{name: "blocks reordered", a: base, b: swapBlocks(t, base, "\tmap firewall-ips {", "\tmap service-nodeports {"), same: true},
		{name: "an element more", a: base, b: twoElems},
		{name: "a rule differs", a: base, b: strings.Replace(base, "ip saddr 10.1.0.3 jump mark-for-masquerade", "ip saddr 10.1.0.4 jump mark-for-masquerade", 1)},
		{name: "comments differ", a: base, b: strings.Replace(base, `"Active ClusterIPs"`, `"cluster IPs"`, 1)},
		{name: "comments differ, dropped", a: base, b: strings.Replace(base, `"Active ClusterIPs"`, `"cluster IPs"`, 1), opts: NormalizeOptions{DropComments: true}, same: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := NormalizeNFT(tc.a, tc.opts), NormalizeNFT(tc.b, tc.opts)
			if tc.same {
				assert.Equal(t, a, b)
			} else {
				assert.NotEqual(t, a, b)
			}
		})
	}
}

// swapBlocks moves the table block starting at line a behind the one starting at line b.
func swapBlocks(t *testing.T, s, a, b string) string {
	t.Helper()
	block := func(start string) string {
		i := strings.Index(s, start)
		require.GreaterOrEqual(t, i, 0, start)
		j := strings.Index(s[i:], "\n\t}\n")
		require.Greater(t, j, 0)
		return s[i : i+j+4]
	}
	ba, bb := block(a), block(b)
	s = strings.Replace(s, ba, "\x00", 1)
	s = strings.Replace(s, bb, ba, 1)
	return strings.Replace(s, "\x00", bb, 1)
}

// TestNormalizeIPTablesUnnamedPort: the older kube-proxy's "ns/name:" for an unnamed port
// (and the hashes made from it) and v1.37's "ns/name" normalise alike.
func TestNormalizeIPTablesUnnamedPort(t *testing.T) {
	old := `*nat
:KUBE-SVC-AAAAAAAAAAAAAAAA - [0:0]
-A KUBE-SERVICES -d 10.96.0.2/32 -p tcp -m comment --comment "default/web: cluster IP" -m tcp --dport 80 -j KUBE-SVC-AAAAAAAAAAAAAAAA
-A KUBE-SVC-AAAAAAAAAAAAAAAA -m comment --comment "default/web: -> 10.244.0.3:80" -j KUBE-MARK-MASQ
COMMIT
`
	v137 := `*nat
:KUBE-SVC-BBBBBBBBBBBBBBBB - [0:0]
-A KUBE-SERVICES -d 10.96.0.2/32 -p tcp -m comment --comment "default/web cluster IP" -m tcp --dport 80 -j KUBE-SVC-BBBBBBBBBBBBBBBB
-A KUBE-SVC-BBBBBBBBBBBBBBBB -m comment --comment "default/web -> 10.244.0.3:80" -j KUBE-MARK-MASQ
COMMIT
`
	n := NormalizeIPTables(old, NormalizeOptions{})
	assert.Equal(t, n, NormalizeIPTables(v137, NormalizeOptions{}))
	assert.Contains(t, n, `-A KUBE-SVC-default/web -m comment --comment "default/web -> 10.244.0.3:80"`)
	assert.NotContains(t, NormalizeIPTables(`*nat
-A X -m comment --comment "default/kubernetes:https" -j Y
COMMIT
`, NormalizeOptions{}), `"default/kubernetes"`, "a named port keeps its name")
}
