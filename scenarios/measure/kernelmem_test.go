package measure

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseKernelMemory(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     int64
		err      string
	}{
		{"both", "Slab:  300 kB\nSReclaimable: 260 kB\nSUnreclaim:  40 kB\nVmallocUsed:  16 kB\n", 56 * 1024, ""},
		{"no vmalloc", "SUnreclaim:  40 kB\n", 0, "found 1"},
		{"garbage", "SUnreclaim: lots kB\nVmallocUsed: 1 kB\n", 0, "SUnreclaim"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseKernelMemory([]byte(tc.in))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestKernelMemoryReadsThisMachine(t *testing.T) {
	v, err := KernelMemory()
	require.NoError(t, err)
	assert.Positive(t, v)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = SettledKernelMemory(ctx)
	assert.ErrorIs(t, err, context.Canceled, "a cancelled wait returns at once")
}
