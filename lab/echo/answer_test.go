package echo

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseAnswer(t *testing.T) {
	valid := "pod=web-1 ip=10.244.1.5 node=node-1 client=10.0.0.1:40312 port=80 proto=tcp"
	tests := []struct {
		name    string
		line    string
		want    Answer
		wantErr string
	}{
		{
			name: "tcp",
			line: valid + "\n",
			want: Answer{Pod: "web-1", PodIP: "10.244.1.5", Node: "node-1", Client: netip.MustParseAddrPort("10.0.0.1:40312"), Port: 80, Protocol: TCP},
		},
		{
			name: "udp without newline",
			line: "pod=dns-0 ip=10.244.0.3 node=n0 client=10.0.0.9:53000 port=53 proto=udp",
			want: Answer{Pod: "dns-0", PodIP: "10.244.0.3", Node: "n0", Client: netip.MustParseAddrPort("10.0.0.9:53000"), Port: 53, Protocol: UDP},
		},
		{
			name: "crlf, ipv6, pod IP made canonical",
			line: "pod=p ip=FD00:0::5 node=n client=[fd00::1]:1 port=65535 proto=tcp\r\n",
			want: Answer{Pod: "p", PodIP: "fd00::5", Node: "n", Client: netip.MustParseAddrPort("[fd00::1]:1"), Port: 65535, Protocol: TCP},
		},
		{name: "empty", line: "", wantErr: "1 fields, want 6"},
		{name: "missing field", line: "pod=web-1 ip=10.244.1.5 node=node-1 client=10.0.0.1:40312 port=80", wantErr: "5 fields"},
		{name: "extra field", line: valid + " x=y", wantErr: "7 fields"},
		{name: "fields out of order", line: "ip=10.244.1.5 pod=web-1 node=node-1 client=10.0.0.1:40312 port=80 proto=tcp", wantErr: "want pod=<value>"},
		{name: "double space", line: strings.Replace(valid, " ", "  ", 1), wantErr: "7 fields"},
		{name: "empty value", line: strings.Replace(valid, "node=node-1", "node=", 1), wantErr: "node is empty"},
		{name: "bad pod IP", line: strings.Replace(valid, "10.244.1.5", "10.244.1", 1), wantErr: "ip:"},
		{name: "client without port", line: strings.Replace(valid, "10.0.0.1:40312", "10.0.0.1", 1), wantErr: "client:"},
		{name: "port zero", line: strings.Replace(valid, "port=80", "port=0", 1), wantErr: "not in 1-65535"},
		{name: "port too big", line: strings.Replace(valid, "port=80", "port=65536", 1), wantErr: "not in 1-65535"},
		{name: "negative port", line: strings.Replace(valid, "port=80", "port=-1", 1), wantErr: "not in 1-65535"},
		{name: "sctp", line: strings.Replace(valid, "proto=tcp", "proto=sctp", 1), wantErr: "not tcp or udp"},
		{name: "upper-case proto", line: strings.Replace(valid, "proto=tcp", "proto=TCP", 1), wantErr: "not tcp or udp"},
		{name: "tab", line: strings.Replace(valid, " ", "\t", 1), wantErr: "not printable ASCII"},
		{name: "non-ASCII pod", line: strings.Replace(valid, "web-1", "wéb", 1), wantErr: "not printable ASCII"},
		{name: "two lines", line: valid + "\n" + valid + "\n", wantErr: "not printable ASCII"},
		{name: "HTTP status line", line: "HTTP/1.1 200 OK\r\n", wantErr: "3 fields"},
		{name: "error line", line: "error: line longer than 4096 bytes\n", wantErr: "want pod=<value>"},
		{name: "too long", line: strings.Replace(valid, "web-1", strings.Repeat("a", MaxLineLength), 1), wantErr: "longer than 4096"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseAnswer(tt.line)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.Zero(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestAnswerString(t *testing.T) {
	tests := []struct {
		name string
		a    Answer
		want string
	}{
		{
			name: "tcp",
			a:    Answer{Pod: "web-1", PodIP: "10.244.1.5", Node: "node-1", Client: netip.MustParseAddrPort("10.0.0.1:40312"), Port: 80, Protocol: TCP},
			want: "pod=web-1 ip=10.244.1.5 node=node-1 client=10.0.0.1:40312 port=80 proto=tcp",
		},
		{
			name: "udp ipv6",
			a:    Answer{Pod: "p", PodIP: "fd00::5", Node: "n", Client: netip.MustParseAddrPort("[fd00::1]:9"), Port: 53, Protocol: UDP},
			want: "pod=p ip=fd00::5 node=n client=[fd00::1]:9 port=53 proto=udp",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.a.String())
			back, err := ParseAnswer(tt.a.String())
			require.NoError(t, err)
			assert.Equal(t, tt.a, back)
		})
	}
}

// FuzzParseAnswer checks that the parser never panics, and that every line it accepts
// describes an answer that renders to a line it parses back to the same answer.
func FuzzParseAnswer(f *testing.F) {
	for _, seed := range []string{
		"pod=web-1 ip=10.244.1.5 node=node-1 client=10.0.0.1:40312 port=80 proto=tcp\n",
		"pod=p ip=fd00::5 node=n client=[fe80::1%eth0]:9 port=53 proto=udp\r\n",
		"pod=p ip=::ffff:10.1.2.3 node=n client=[::ffff:10.0.0.1]:9 port=053 proto=udp",
		"pod== ip=1.2.3.4 node=== client=1.2.3.4:1 port=1 proto=tcp",
		"GET / HTTP/1.1\r\n",
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		a, err := ParseAnswer(line)
		if err != nil {
			return
		}
		s := a.String()
		require.NotContains(t, s, "\n")
		back, err := ParseAnswer(s)
		require.NoError(t, err, "rendered %q from %q", s, line)
		require.Equal(t, a, back)
	})
}
