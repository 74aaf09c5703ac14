package chans

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEach(t *testing.T) {
	ch := make(chan int, 3)
	ch <- 1
	ch <- 2
	close(ch)
	assert.Equal(t, []int{1, 2}, slices.Collect(Each(context.Background(), ch)), "until ch is closed")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.Empty(t, slices.Collect(Each(ctx, make(chan int))), "until ctx ends")

	ch = make(chan int, 3)
	ch <- 1
	ch <- 2
	for v := range Each(context.Background(), ch) {
		assert.Equal(t, 1, v)
		break // the consumer may stop early
	}
	assert.Equal(t, 2, <-ch)
}
