package microvm

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestScanKernelLog(t *testing.T) {
	f, err := os.Open("testdata/kernel-log.txt")
	require.NoError(t, err)
	defer f.Close()
	k, err := ScanKernelLog(f)
	require.NoError(t, err)
	assert.True(t, k.Marked)
	var kinds []string
	for _, e := range k.Events {
		kinds = append(kinds, e.Kind)
	}
	// The boot's warning and the one after the end marker do not count.
	assert.Equal(t, []string{EventSoftLockup, EventWarning, EventSoftLockup, EventRCUStall,
		EventHungTask, EventOOM, EventOops}, kinds)
	assert.Equal(t, 2, k.Count(EventSoftLockup))
	assert.Equal(t, 1, k.Count(EventWarning))
	assert.Equal(t, 48*time.Second, k.MaxStuck())
	assert.Equal(t, 40*time.Second+123456*time.Microsecond, k.Events[0].Uptime)
	assert.Equal(t, 23*time.Second, k.Events[0].Stuck)
	assert.Contains(t, k.Events[1].Line, "nf_tables_commit")
	assert.Equal(t, "1 oops, 1 warning, 2 soft lockups (max 48s), 1 rcu stall, 1 hung task, 1 oom", k.Summary())
	assert.Equal(t, 15, k.Lines)
}

func TestScanKernelLogCases(t *testing.T) {
	tests := []struct {
		name       string
		log        string
		wantMarked bool
		wantSum    string
	}{
		{"empty", "", false, "clean"},
		{"clean command", "[ 1.0] kpbench-vm: command start\n[ 2.0] veth: hello\n", true, "clean"},
		{"no marker scans all", "[ 1.0] WARNING: CPU: 0 PID: 1 at a.c:1 f+0x0/0x1\n", false, "1 warning"},
		{"console without timestamps", "Kernel panic - not syncing: Fatal exception in interrupt\n", false, "1 panic"},
		{"raw dmesg priority", "<4>[   12.5] WARNING: CPU: 1 PID: 2 at b.c:2 g+0x0/0x1\n", false, "1 warning"},
		{"restart after a second start marker", "[1.0] kpbench-vm: command start\n[1.1] WARNING: CPU: 0 PID: 1 at a.c:1 f\n[2.0] kpbench-vm: command start\n", true, "clean"},
		{"crlf console", "[ 3.0] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [swapper/0:1]\r\n", false, "1 soft lockup (max 22s)"},
		{"not a warning", "[ 3.0] some driver: WARNING: this is prose\n", false, "clean"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := ScanKernelLog(strings.NewReader(tt.log))
			require.NoError(t, err)
			assert.Equal(t, tt.wantMarked, k.Marked)
			assert.Equal(t, tt.wantSum, k.Summary())
		})
	}
}

func TestReadUptime(t *testing.T) {
	dir := t.TempDir()
	p := dir + "/uptime"
	require.NoError(t, os.WriteFile(p, []byte("3.25\n"), 0o644))
	assert.Equal(t, 3250*time.Millisecond, readUptime(p))
	require.NoError(t, os.WriteFile(p, []byte("junk"), 0o644))
	assert.Zero(t, readUptime(p))
	assert.Zero(t, readUptime(dir+"/absent"))
}
