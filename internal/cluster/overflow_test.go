package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The hook is due once jobs have waited for capacity at every sample for
// After, then at most once every Every while they do; a sample without
// them starts the count again.
func TestOverflowDue(t *testing.T) {
	o := overflow{after: 10 * time.Second, every: 30 * time.Second}
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, step := range []struct {
		s       int
		waiting int
		due     bool
	}{
		{0, 0, false},
		{1, 3, false}, // waiting since 1
		{10, 3, false},
		{11, 2, true}, // 10 s of it
		{12, 2, false},
		{40, 1, false}, // 29 s after the call
		{41, 1, true},  // 30 s after
		{42, 0, false}, // none: the count starts again
		{43, 5, false},
		{52, 5, false},
		{53, 5, false}, // 10 s of it, but 12 s after the last call
		{71, 5, true},
	} {
		assert.Equal(t, step.due, o.observe(at(step.s), step.waiting), "at %d s, %d waiting", step.s, step.waiting)
	}
}
