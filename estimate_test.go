package fairsched

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// estimate returns EstimateWait's answer for job, failing the test on an
// error.
func (m *sim) estimate(job Job) time.Duration {
	m.t.Helper()
	d, err := m.s.EstimateWait(job)
	require.NoError(m.t, err)
	return d
}

// With one key, the estimate is the running jobs' remaining half and the
// queue ahead, through the slots; in a steady queue it is the wait the job
// then has. It grows with the queue, job by job.
func TestEstimateWaitOneKey(t *testing.T) {
	m := newSim(t, Config{MaxConcurrency: 2, Types: map[string]TypeConfig{"x": {DefaultCost: 4 * time.Second}}})
	job := Job{Type: "x"}
	require.Zero(t, m.estimate(job), "a free slot: no wait")

	for i := range 8 {
		m.add(fmt.Sprintf("j%d", i), 0, job, 4*time.Second)
	}
	m.run(2 * time.Second) // two run, half done; six wait
	// (2 × 2 s left + 6 × 4 s queued) / 2 slots
	require.Equal(t, 14*time.Second, m.estimate(job))
	last := m.add("last", 2*time.Second, job, 4*time.Second)
	m.run(2 * time.Second)
	require.Equal(t, 16*time.Second, m.estimate(job), "one more queued: its 4 s over 2 slots")
	m.run(time.Minute)
	require.NoError(t, last.Err)
	assert.Equal(t, 14*time.Second, last.Wait(), "the estimate was the wait")
}

// The typical duration of a type is learned from its jobs, whatever their
// ID: after jobs of 10 s, the estimate counts queued jobs at about 10 s.
func TestEstimateWaitLearnsTypicalDuration(t *testing.T) {
	m := newSim(t, Config{MaxConcurrency: 1, CostAlpha: 1}) // alpha 1: the last observation
	for i := range 3 {
		m.add(fmt.Sprintf("warm%d", i), 0, Job{ID: fmt.Sprint(i)}, 10*time.Second)
	}
	m.run(30 * time.Second)
	m.add("running", 30*time.Second, Job{ID: "a"}, 10*time.Second)
	m.add("queued", 30*time.Second, Job{ID: "b"}, 10*time.Second)
	m.run(30 * time.Second)
	// 5 s left of the running job, 10 s queued; new IDs count at 10 s too.
	assert.Equal(t, 15*time.Second, m.estimate(Job{ID: "new"}))
}

// Within a tier, a key's own queue is served at its weighted share: a key
// with nothing queued waits for a slot only, a backlogged key for its
// queue at its share, and the heavier key less than the lighter one.
// Higher tiers' queues are ahead of everyone; lower tiers' of no one.
func TestEstimateWaitFairShareAndTiers(t *testing.T) {
	m := newSim(t, Config{
		MaxConcurrency: 1,
		Types:          map[string]TypeConfig{"fg": {Tier: Foreground}},
		Keys:           map[string]KeyConfig{"heavy": {Weight: 3}},
	})
	for i := range 9 {
		m.add(fmt.Sprintf("h%d", i), 0, Job{Key: "heavy"}, time.Second)
		m.add(fmt.Sprintf("l%d", i), 0, Job{Key: "light"}, time.Second)
	}
	m.run(0)
	// One job runs (0.5 s left); 17 queued seconds, the heavy key's and
	// the light key's.
	heavy := float64(fairKeyStats(t, m.s, "heavy").Queued)
	require.Equal(t, 17, m.s.Stats().Queued)
	secs := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	assert.Equal(t, 500*time.Millisecond, m.estimate(Job{Key: "newcomer"}), "nothing of its own queued: the next slot")
	// The heavy key's queue drains at 3/4 of the slot; the light key's
	// would at 1/4, but it is served last: after the whole tier's queue.
	assert.InDelta(t, secs(0.5+heavy*4/3), m.estimate(Job{Key: "heavy"}), float64(time.Microsecond))
	assert.Less(t, m.estimate(Job{Key: "heavy"}), m.estimate(Job{Key: "light"}))
	assert.Equal(t, secs(17.5), m.estimate(Job{Key: "light"}))
	assert.Equal(t, 500*time.Millisecond, m.estimate(Job{Type: "fg", Key: "light"}), "a higher tier passes the queue")

	m.add("urgent-ish", 0, Job{Type: "fg"}, time.Second)
	m.add("urgent-ish2", 0, Job{Type: "fg"}, time.Second)
	m.run(0)
	assert.Equal(t, secs(2.5), m.estimate(Job{Key: "newcomer"}), "the foreground queue is ahead of background")
	m.run(time.Minute)
}

// A type's cap, a key's cap and a held conflict lock serve the work ahead
// at their own rate, whatever slots are free.
func TestEstimateWaitCapsAndConflicts(t *testing.T) {
	m := newSim(t, Config{
		MaxConcurrency: 8,
		Types: map[string]TypeConfig{
			"capped": {MaxConcurrency: 1},
			"repo":   {ConflictGroup: "git"},
		},
		Keys: map[string]KeyConfig{"narrow": {MaxConcurrency: 2}},
	})
	for i := range 4 {
		m.add(fmt.Sprintf("c%d", i), 0, Job{Type: "capped"}, time.Second)
		m.add(fmt.Sprintf("n%d", i), 0, Job{Key: "narrow"}, time.Second)
	}
	for i := range 3 {
		m.add(fmt.Sprintf("r%d", i), 0, Job{Type: "repo", ID: "linux"}, time.Second)
	}
	m.run(0)
	require.Equal(t, 4, m.s.Stats().Running, "one capped, two narrow, one on the lock")
	assert.Equal(t, 3500*time.Millisecond, m.estimate(Job{Type: "capped"}), "0.5 s left, 3 queued, one at a time")
	assert.Equal(t, 1500*time.Millisecond, m.estimate(Job{Key: "narrow"}), "2 × 0.5 s left and 2 queued, two at a time")
	assert.Equal(t, 2500*time.Millisecond, m.estimate(Job{Type: "repo", ID: "linux"}), "0.5 s left and 2 waiting on the lock")
	assert.Zero(t, m.estimate(Job{Type: "repo", ID: "git"}), "another ID is free")
	m.run(time.Minute)
}

func TestEstimateWaitUnknownType(t *testing.T) {
	s := newTestScheduler(t, Config{})
	_, err := s.EstimateWait(Job{Type: "nope"})
	require.ErrorIs(t, err, ErrUnknownType)
}
