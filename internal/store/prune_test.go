package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Pruning runs at a tenth of the shortest retention, between a second
// and a minute.
func TestPruneInterval(t *testing.T) {
	assert.Equal(t, time.Minute, PruneInterval(24*time.Hour, 0))
	assert.Equal(t, time.Second, PruneInterval(-1, 5*time.Second))
	assert.Equal(t, 6*time.Minute/10, PruneInterval(6*time.Minute, 0))
}
