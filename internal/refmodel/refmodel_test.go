package refmodel

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// These tests pin the model to the contract's own examples, so that the
// oracle of the differential test is checked against docs/design.md, not only
// against the scheduler it judges.

const sec = int64(time.Second / time.Microsecond)

// starts returns the submission numbers started since the last call.
func starts(m *Model) []uint64 {
	var out []uint64
	for _, s := range m.TakeStarts() {
		out = append(out, s.Seq)
	}
	return out
}

// With one slot, one key and one tier the order is plain priority, FIFO
// within a priority (docs/design.md, The order).
func TestPriorityThenFIFO(t *testing.T) {
	m := New(Config{MaxConcurrency: 1})
	blocker, _ := m.Submit(0, Job{})
	require.Equal(t, []uint64{blocker}, starts(m))
	low, _ := m.Submit(0, Job{Priority: 20})
	a, _ := m.Submit(0, Job{})
	high, _ := m.Submit(0, Job{Priority: 80})
	b, _ := m.Submit(0, Job{})
	var got []uint64
	running := blocker
	for range 4 {
		m.Finish(sec, running)
		s := starts(m)
		require.Len(t, s, 1)
		running = s[0]
		got = append(got, running)
	}
	require.Equal(t, []uint64{high, a, b, low}, got)
}

// A job that reaches the urgent threshold goes before a higher tier.
func TestUrgentBeatsTier(t *testing.T) {
	m := New(Config{
		MaxConcurrency: 1,
		Types:          map[string]Type{"fg": {Tier: 1}},
		Aging:          Aging{Interval: time.Second, Step: 10, UrgentThreshold: 60},
	})
	blocker, _ := m.Submit(0, Job{})
	old, _ := m.Submit(0, Job{})              // background, 50: urgent after 1 s
	fg, _ := m.Submit(2*sec, Job{Type: "fg"}) // foreground, fresh
	starts(m)
	m.Finish(2*sec, blocker)
	require.Equal(t, []Start{{Seq: old, At: 2 * sec, Kind: Urgent}}, m.TakeStarts())
	m.Finish(2*sec+sec/2, old) // fg has aged to 55 only
	require.Equal(t, []Start{{Seq: fg, At: 2*sec + sec/2, Kind: Fair}}, m.TakeStarts())
}

// A key below its MinSlots goes first and is not charged for it.
func TestReservationFirstAndFree(t *testing.T) {
	m := New(Config{
		MaxConcurrency: 2,
		Keys:           map[string]Key{"b": {MinSlots: 1}},
	})
	a1, _ := m.Submit(0, Job{Key: "a"})
	a2, _ := m.Submit(0, Job{Key: "a"})
	require.Equal(t, []uint64{a1, a2}, starts(m))
	b1, _ := m.Submit(0, Job{Key: "b"})
	a3, _ := m.Submit(0, Job{Key: "a"})
	m.Finish(sec, a1)
	require.Equal(t, []Start{{Seq: b1, At: sec, Kind: Reserved}}, m.TakeStarts())
	require.Equal(t, 0.0, m.VirtualTimes()[FlowID{"b", 0}])
	m.Finish(sec, a2)
	require.Equal(t, []uint64{a3}, starts(m))
}

// With everyone backlogged, slot time splits by weight (docs/design.md, Fair share and cost):
// over 40 one-second starts through one slot, weights 3:1 give 30:10.
func TestWeightedShare(t *testing.T) {
	m := New(Config{
		MaxConcurrency: 1,
		Keys:           map[string]Key{"a": {Weight: 3}, "b": {Weight: 1}},
	})
	key := map[uint64]string{}
	for range 40 {
		for _, k := range []string{"a", "b"} {
			seq, ok := m.Submit(0, Job{Key: k})
			require.True(t, ok)
			key[seq] = k
		}
	}
	count := map[string]int{}
	running := starts(m)[0]
	for i := range int64(40) {
		count[key[running]]++
		m.Finish((i+1)*sec, running)
		running = starts(m)[0]
	}
	require.Equal(t, map[string]int{"a": 30, "b": 10}, count)
}

// Two jobs of one conflict group and ID never run together, whatever the
// free slots; other IDs pass them by.
func TestConflictNoHeadOfLineBlocking(t *testing.T) {
	m := New(Config{
		MaxConcurrency: 4,
		Types:          map[string]Type{"sync": {ConflictGroup: "repo"}, "gc": {ConflictGroup: "repo"}},
	})
	s1, _ := m.Submit(0, Job{Type: "sync", ID: "x"})
	g1, _ := m.Submit(0, Job{Type: "gc", ID: "x"})
	s2, _ := m.Submit(0, Job{Type: "sync", ID: "y"})
	require.Equal(t, []uint64{s1, s2}, starts(m))
	m.Finish(sec, s1)
	require.Equal(t, []uint64{g1}, starts(m))
}
