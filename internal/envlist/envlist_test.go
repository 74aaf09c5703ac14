package envlist

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestList checks that a later definition replaces the earlier one in place.
func TestList(t *testing.T) {
	var l List
	assert.Equal(t, []string{}, l.Environ())
	_, ok := l.Lookup("A")
	assert.False(t, ok)
	l.Set("A", "1")
	l.Set("B", "2")
	l.Set("A", "3")
	v, ok := l.Lookup("A")
	assert.True(t, ok)
	assert.Equal(t, "3", v)
	assert.Equal(t, []string{"A=3", "B=2"}, l.Environ())
}
