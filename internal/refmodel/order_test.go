package refmodel

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Order ranks the waiting jobs once, every limit ignored: an urgent job
// first, then a key below its reservation (its jobs by tier, then
// priority), then by tier, virtual time and priority; each job once, the
// running and the delayed left out.
func TestOrder(t *testing.T) {
	m := New(Config{
		MaxConcurrency: 2,
		Types:          map[string]Type{"fg": {Tier: 1}},
		Keys:           map[string]Key{"vip": {MinSlots: 1}, "capped": {MaxConcurrency: 1}},
		Aging:          Aging{Interval: time.Second, Step: 10, UrgentThreshold: 60},
	})
	a1, _ := m.Submit(0, Job{Key: "a"})
	a2, _ := m.Submit(0, Job{Key: "a"})
	require.Equal(t, []uint64{a1, a2}, starts(m)) // a's virtual time is 2, the others' 0
	old, _ := m.Submit(0, Job{Key: "b"})          // 50: urgent after 1 s
	now := 3 * sec / 2
	vipLow, _ := m.Submit(now, Job{Key: "vip", Priority: 20})
	vipFg, _ := m.Submit(now, Job{Key: "vip", Type: "fg", Priority: 10})
	a3, _ := m.Submit(now, Job{Key: "a", Priority: 55}) // not urgent yet
	fg, _ := m.Submit(now, Job{Key: "capped", Type: "fg"})
	b2, _ := m.Submit(now, Job{Key: "b", Priority: 55})
	m.Submit(now, Job{Key: "b", NotBefore: 10 * sec})
	require.Empty(t, starts(m))
	require.Equal(t, []uint64{old, vipFg, vipLow, fg, b2, a3}, m.Order(now))
}
