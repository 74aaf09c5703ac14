package ipvs

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"kpbench.dev/kpbench/backends"
	bt "kpbench.dev/kpbench/backends/backendstest"
	"kpbench.dev/kpbench/backends/conntrack"
)

// model builds a model from "KEY sched [persistent T] dest=weight ..." lines, the format of
// flat, plus bound addresses. Owner is the key's string.
func model(addrs []string, lines ...string) *Model {
	m := NewModel()
	for _, a := range addrs {
		m.Addrs[ip(a)] = true
	}
	for _, l := range lines {
		f := strings.Fields(l)
		proto, addr, _ := strings.Cut(f[0], "/")
		vs := &VirtualServer{Key: key(backends.Protocol(proto), addr), Scheduler: f[1], Dests: map[netip.AddrPort]int{}}
		vs.Owner = backends.ServicePortName{Name: vs.Key.String()}
		rest := f[2:]
		if len(rest) >= 2 && rest[0] == "persistent" {
			vs.Flags = FlagPersistent
			var t int
			for _, c := range rest[1] {
				t = t*10 + int(c-'0')
			}
			vs.Timeout = uint32(t)
			rest = rest[2:]
		}
		for _, d := range rest {
			a, w, _ := strings.Cut(d, "=")
			vs.Dests[ap(a)] = int(w[0] - '0')
		}
		m.Services[vs.Key] = vs
	}
	return m
}

func changeStrings(cs []DestChange) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Service.String()+" "+c.Dest.String()+"="+string(rune('0'+c.Weight)))
	}
	return out
}

func keyStrings[T interface{ String() string }](ks []T) []string {
	var out []string
	for _, k := range ks {
		out = append(out, k.String())
	}
	return out
}

func vsStrings(vss []*VirtualServer) []string {
	var out []string
	for _, vs := range vss {
		out = append(out, vs.Key.String())
	}
	return out
}

func TestDiff(t *testing.T) {
	type want struct {
		addSvc, updSvc, delSvc    []string
		addDst, updDst, delDst    []string
		addAddr, delAddr, changed []string
	}
	tests := []struct {
		name             string
		desired, current *Model
		only             []string
		want             want
	}{
		{
			name:    "empty kernel: add everything",
			desired: model([]string{"172.30.0.1"}, "TCP/172.30.0.1:80 rr 10.1.0.1:80=1 10.1.0.2:80=1"),
			current: model(nil),
			want: want{
				addSvc: []string{"TCP/172.30.0.1:80"}, addAddr: []string{"172.30.0.1"},
				addDst:  []string{"TCP/172.30.0.1:80 10.1.0.1:80=1", "TCP/172.30.0.1:80 10.1.0.2:80=1"},
				changed: []string{"TCP/172.30.0.1:80"},
			},
		},
		{
			name:    "in sync: nothing",
			desired: model([]string{"172.30.0.1"}, "TCP/172.30.0.1:80 rr 10.1.0.1:80=1"),
			current: model([]string{"172.30.0.1"}, "TCP/172.30.0.1:80 rr 10.1.0.1:80=1"),
		},
		{
			name:    "stale virtual server, real server and address removed",
			desired: model([]string{"172.30.0.1"}, "TCP/172.30.0.1:80 rr 10.1.0.1:80=1"),
			current: model([]string{"172.30.0.1", "172.30.0.9"}, "TCP/172.30.0.1:80 rr 10.1.0.1:80=1 10.1.0.3:80=1", "UDP/172.30.0.9:53 rr 10.1.0.4:53=1"),
			want: want{
				delSvc: []string{"UDP/172.30.0.9:53"}, delAddr: []string{"172.30.0.9"},
				delDst: []string{"TCP/172.30.0.1:80 10.1.0.3:80=0"}, changed: []string{"TCP/172.30.0.1:80"},
			},
		},
		{
			name:    "scheduler, persistence and weight changes are updates",
			desired: model(nil, "TCP/172.30.0.1:80 rr persistent 9 10.1.0.1:80=0", "TCP/172.30.0.2:80 wrr 10.1.0.2:80=1"),
			current: model(nil, "TCP/172.30.0.1:80 rr 10.1.0.1:80=1", "TCP/172.30.0.2:80 rr 10.1.0.2:80=1"),
			want: want{
				updSvc:  []string{"TCP/172.30.0.1:80", "TCP/172.30.0.2:80"},
				updDst:  []string{"TCP/172.30.0.1:80 10.1.0.1:80=0"},
				changed: []string{"TCP/172.30.0.1:80", "TCP/172.30.0.2:80"},
			},
		},
		{
			name:    "partial: real servers of other virtual servers are not compared",
			desired: model(nil, "TCP/172.30.0.1:80 rr 10.1.0.1:80=1", "TCP/172.30.0.2:80 rr 10.1.0.2:80=1"),
			current: model(nil, "TCP/172.30.0.1:80 rr", "TCP/172.30.0.2:80 rr"),
			only:    []string{"TCP/172.30.0.2:80"},
			want: want{
				addDst: []string{"TCP/172.30.0.2:80 10.1.0.2:80=1"}, changed: []string{"TCP/172.30.0.2:80"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var only map[ServiceKey]bool
			if tt.only != nil {
				only = map[ServiceKey]bool{}
				for _, k := range tt.only {
					for key := range tt.desired.Services {
						if key.String() == k {
							only[key] = true
						}
					}
				}
			}
			p := Diff(tt.desired, tt.current, only)
			var changed []string
			for _, k := range tt.desired.SortedKeys() {
				if p.Changed[tt.desired.Services[k].Owner] {
					changed = append(changed, k.String())
				}
			}
			got := want{
				addSvc: vsStrings(p.AddServices), updSvc: vsStrings(p.UpdateServices), delSvc: keyStrings(p.DelServices),
				addDst: changeStrings(p.AddDests), updDst: changeStrings(p.UpdateDests), delDst: changeStrings(p.DelDests),
				addAddr: keyStrings(p.AddAddrs), delAddr: keyStrings(p.DelAddrs), changed: changed,
			}
			assert.Equal(t, tt.want, got)
			w := tt.want
			wantOps := len(w.addSvc) + len(w.updSvc) + len(w.delSvc) + len(w.addDst) + len(w.updDst) + len(w.delDst) + len(w.addAddr) + len(w.delAddr)
			assert.Equal(t, wantOps, p.Ops())
			assert.Equal(t, wantOps == 0, p.Empty())
		})
	}
}

func TestDiffOfBuiltModelAgainstItselfIsEmpty(t *testing.T) {
	st := state(
		bt.With(bt.Service("ns/a:p", "172.30.0.1:80", bt.EP("10.1.0.1:80", bt.Local), bt.EP("10.1.0.2:80", bt.Terminating)), func(sp *backends.ServicePort) {
			sp.NodePort, sp.AffinityClientIP, sp.AffinityTimeoutSeconds = 30000, true, 10800
		}),
		bt.Service("ns/b:p/udp", "172.30.0.2:53"),
	)
	m := Build(st, "wlc")
	assert.True(t, Diff(m, Build(st, "wlc"), nil).Empty())
	p := Diff(m, Build(st, "rr"), nil)
	assert.Len(t, p.UpdateServices, 4, "a scheduler change updates every virtual server")
	svcs, dests := m.Counts()
	assert.Equal(t, 4, svcs)
	assert.Equal(t, 6, dests)
}

func TestStaleUDPFlows(t *testing.T) {
	tests := []struct {
		name             string
		desired, current *Model
		only             map[ServiceKey]bool
		want             []StaleFlow
	}{
		{
			name:    "removed UDP real server",
			desired: model(nil, "UDP/172.30.0.10:53 rr 10.1.0.1:53=1"),
			current: model(nil, "UDP/172.30.0.10:53 rr 10.1.0.1:53=1 10.1.0.2:53=1"),
			want:    []StaleFlow{{Dst: ap("172.30.0.10:53"), ReplySrc: ap("10.1.0.2:53")}},
		},
		{
			name:    "TCP and terminating (weight 0) real servers keep their entries",
			desired: model(nil, "UDP/172.30.0.10:53 rr 10.1.0.1:53=1 10.1.0.2:53=0", "TCP/172.30.0.11:80 rr"),
			current: model(nil, "UDP/172.30.0.10:53 rr 10.1.0.1:53=1 10.1.0.2:53=1", "TCP/172.30.0.11:80 rr 10.1.0.3:80=1"),
		},
		{
			name:    "removed UDP virtual server",
			desired: model(nil),
			current: model(nil, "UDP/172.30.0.10:53 rr 10.1.0.1:53=1"),
			want:    []StaleFlow{{Dst: ap("172.30.0.10:53")}},
		},
		{
			name:    "UDP virtual server gets its first real server, or is new with one",
			desired: model(nil, "UDP/172.30.0.10:53 rr 10.1.0.1:53=1", "UDP/172.30.0.12:53 rr 10.1.0.1:53=1", "UDP/172.30.0.13:53 rr"),
			current: model(nil, "UDP/172.30.0.10:53 rr"),
			want:    []StaleFlow{{Dst: ap("172.30.0.10:53")}, {Dst: ap("172.30.0.12:53")}},
		},
		{
			name:    "partial: real servers not read are not taken for empty",
			desired: model(nil, "UDP/172.30.0.10:53 rr 10.1.0.1:53=1"),
			current: model(nil, "UDP/172.30.0.10:53 rr"),
			only:    map[ServiceKey]bool{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Diff(tt.desired, tt.current, tt.only)
			assert.Equal(t, tt.want, StaleUDPFlows(p, tt.desired, tt.current, tt.only))
		})
	}
}

func TestMatchFlow(t *testing.T) {
	flows := []StaleFlow{{Dst: ap("172.30.0.10:53"), ReplySrc: ap("10.1.0.2:53")}, {Dst: ap("172.30.0.11:53")}}
	tests := []struct {
		name              string
		proto             uint8
		origDst, replySrc string
		want              bool
	}{
		{"removed endpoint", 17, "172.30.0.10:53", "10.1.0.2:53", true},
		{"other endpoint of the service", 17, "172.30.0.10:53", "10.1.0.1:53", false},
		{"any reply source", 17, "172.30.0.11:53", "10.1.0.9:53", true},
		{"TCP is never cleared", 6, "172.30.0.11:53", "10.1.0.9:53", false},
		{"other service", 17, "172.30.0.12:53", "10.1.0.2:53", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fl := conntrack.Flow{Proto: tt.proto, OrigDst: ap(tt.origDst), ReplySrc: ap(tt.replySrc)}
			match := false
			for _, f := range flows {
				match = match || f.Filter().Match(fl)
			}
			assert.Equal(t, tt.want, match)
		})
	}
}
