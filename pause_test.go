package fairsched

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A pause (docs/design.md, Pause): while key B is paused, A gets every slot at once, and
// after B is resumed the shares return to the weights within 2%.
func TestPauseKeyGivesItsShareToOthers(t *testing.T) {
	const slots = 6
	const mean = time.Minute
	keys := []string{"a", "b"}
	m := newSim(t, Config{
		MaxConcurrency: slots,
		Types:          map[string]TypeConfig{"sync": {DefaultCost: mean}},
		Keys:           map[string]KeyConfig{"a": {Weight: 1}, "b": {Weight: 3}},
	})
	f := fairFeed(m, fairRepoJobs("sync", mean))
	for _, k := range keys {
		f.start(k, 0, slots)
	}
	weighted := fairExpected(slots, keys, []AllocationDemand{fairBacklogged(1, 0, 0), fairBacklogged(3, 0, 0)})
	m.run(30 * time.Minute)
	fairAssertShares(t, "before the pause", fairShares(m, slots, keys, 5*time.Minute, 30*time.Minute), weighted)

	// Off the minute, so that the pause does not coincide with job ends.
	paused := 30*time.Minute + 7*time.Second
	m.run(paused)
	m.s.PauseKey("b")
	m.collect()
	st := m.s.Stats()
	assert.Equal(t, []string{"b"}, st.PausedKeys)
	assert.Zero(t, st.Running-m.runningAt("a", paused)-m.runningAt("b", paused), "running jobs go on")

	// Every slot b frees goes to a: from one job duration after the pause
	// on, a holds all of them.
	resumed := paused + 30*time.Minute
	m.run(resumed)
	from := paused + fairMaxRepoDuration(mean)
	got := fairShares(m, slots, keys, from, resumed)
	assert.InDelta(t, 1, got["a"], fairTolerance, "a's share while b is paused")
	assert.Zero(t, got["b"], "b's share while it is paused")
	for _, sj := range m.order {
		if sj.Job.Key == "b" {
			require.Less(t, sj.Start, paused, "%s of the paused key started at %v", sj.Name, sj.Start)
		}
	}
	st = m.s.Stats()
	assert.Equal(t, fairDepth(slots), st.Paused, "b's backlog and its running jobs' replacements wait paused")
	assert.Equal(t, st.Paused, keyStats(t, st, "b").Queued)

	m.s.ResumeKey("b")
	m.collect()
	assert.Zero(t, m.s.Stats().Paused)
	m.run(resumed + 40*time.Minute)
	fairAssertShares(t, "after the resume", fairShares(m, slots, keys, resumed+5*time.Minute, resumed+40*time.Minute), weighted)
}

// A paused job's aging clock stands still while it is paused
// (docs/design.md, Aging): its effective priority is where the pause left it,
// and it goes on rising from there after the resume.
func TestPauseStopsTheAgingClock(t *testing.T) {
	tt := newTimeTest(t, Config{MaxConcurrency: 1, Aging: AgingConfig{Interval: time.Second, Step: 10}})
	g := newGate()
	_, err := tt.s.Submit(context.Background(), Job{Key: "a"}, g.fn)
	require.NoError(t, err)
	<-g.entered
	h, err := tt.s.Submit(context.Background(), Job{Key: "b", Priority: 20}, g.fn)
	require.NoError(t, err)
	effective := func() int { return infoOf(t, tt.s, h).EffectivePriority }

	tt.set(2 * time.Second)
	require.Equal(t, 40, effective())
	tt.s.PauseKey("b")
	tt.set(60 * time.Second)
	assert.Equal(t, 40, effective(), "paused for 58 s: the clock stood still")
	tt.s.ResumeKey("b")
	tt.set(63 * time.Second)
	assert.Equal(t, 70, effective(), "3 s after the resume: 5 s of waiting in all")
	close(g.open)
}

// A job's aging clock stands still while its key is paused whatever
// holds it: one backing off after a failed attempt, and one waiting for a
// job it runs after, age as a queued job does (docs/design.md, Aging).
func TestPauseStopsTheClockOfJobsSetAside(t *testing.T) {
	tt := newTimeTest(t, Config{MaxConcurrency: 2, Aging: AgingConfig{Interval: time.Second, Step: 10},
		Types: map[string]TypeConfig{"flaky": {Retry: RetryPolicy{Attempts: 2, Backoff: 100 * time.Second}}}})
	ctx := context.Background()
	g := newGate()
	blocker, err := tt.s.Submit(ctx, Job{Key: "a"}, g.fn)
	require.NoError(t, err)
	<-g.entered
	backingOff, err := tt.s.Submit(ctx, Job{Type: "flaky", Key: "b", Priority: 20}, func(ctx context.Context) error {
		if Attempt(ctx) == 1 {
			return errFlaky
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, backingOff.Seq(), <-tt.sig.Retried, "its first attempt failed at 0 s")
	blocked, err := tt.s.Submit(ctx, Job{Key: "b", Priority: 20, After: []Handle{blocker}}, noop)
	require.NoError(t, err)
	effective := func(h Handle) int { return infoOf(t, tt.s, h).EffectivePriority }

	tt.set(2 * time.Second)
	require.Equal(t, 40, effective(backingOff))
	require.Equal(t, 40, effective(blocked))
	tt.s.PauseKey("b")
	tt.set(60 * time.Second)
	assert.Equal(t, 40, effective(backingOff), "paused for 58 s while backing off: its clock stood still")
	assert.Equal(t, 40, effective(blocked), "and while waiting for the job it runs after")
	tt.s.ResumeKey("b")
	tt.set(63 * time.Second)
	assert.Equal(t, 70, effective(backingOff), "3 s after the resume: 5 s of waiting in all")
	assert.Equal(t, 70, effective(blocked))
	close(g.open)
	require.NoError(t, blocked.Wait(ctx))
	tt.set(100 * time.Second)
	require.NoError(t, backingOff.Wait(ctx))
}

// A key may be paused before the scheduler has seen it; its jobs wait,
// counted, though slots are free, and start when it is resumed.
func TestPauseKeyNotYetSeen(t *testing.T) {
	s, sig := newSignalledScheduler(t, Config{MaxConcurrency: 2})
	s.PauseKey("new")
	s.PauseKey("new") // again: nothing changes
	g := newGate()
	h, err := s.Submit(context.Background(), Job{Key: "new"}, g.fn)
	require.NoError(t, err)
	<-sig.Accepted
	other, err := s.Submit(context.Background(), Job{Key: "old"}, g.fn)
	require.NoError(t, err)
	<-g.entered // the other key's job starts

	st := s.Stats()
	assert.Equal(t, 1, st.Running)
	assert.Equal(t, 1, st.Queued)
	assert.Equal(t, 1, st.Paused)
	assert.Equal(t, []string{"new"}, st.PausedKeys)
	ks := keyStats(t, st, "new")
	assert.True(t, ks.Paused)
	assert.Equal(t, 1, ks.Queued)
	noop := func(context.Context) error { return nil }
	assert.ErrorIs(t, s.TryRunSync(context.Background(), Job{Key: "new"}, noop), ErrWouldWait, "a paused key's job would wait")
	assert.NoError(t, s.TryRunSync(context.Background(), Job{Key: "old"}, noop))

	s.ResumeKey("new")
	<-g.entered
	st = s.Stats()
	assert.Equal(t, 2, st.Running)
	assert.Zero(t, st.Paused)
	assert.Empty(t, st.PausedKeys)
	close(g.open)
	require.NoError(t, h.Wait(context.Background()))
	require.NoError(t, other.Wait(context.Background()))
}

// A job waits while its key or its type is paused, and starts only when
// both are resumed, in either order. Pausing an unknown type is an error.
func TestPauseTypeAndKey(t *testing.T) {
	s, _ := newSignalledScheduler(t, Config{MaxConcurrency: 4, Types: map[string]TypeConfig{"index": {}}})
	require.ErrorIs(t, s.PauseType("nope"), ErrUnknownType)
	require.ErrorIs(t, s.ResumeType("nope"), ErrUnknownType)

	for _, resumeKeyFirst := range []bool{true, false} {
		require.NoError(t, s.PauseType("index"))
		s.PauseKey("k")
		g := newGate()
		h, err := s.Submit(context.Background(), Job{Type: "index", Key: "k"}, g.fn)
		require.NoError(t, err)
		sameKey, err := s.Submit(context.Background(), Job{Key: "k"}, g.fn)
		require.NoError(t, err)
		sameType, err := s.Submit(context.Background(), Job{Type: "index", Key: "j"}, g.fn)
		require.NoError(t, err)
		free, err := s.Submit(context.Background(), Job{Key: "j"}, g.fn)
		require.NoError(t, err)
		<-g.entered // only the job of neither runs
		assert.Equal(t, 1, s.Stats().Running)
		assert.Equal(t, 3, s.Stats().Paused)
		assert.True(t, typeStats(t, s.Stats(), "index").Paused)

		if resumeKeyFirst {
			s.ResumeKey("k")
			<-g.entered // sameKey
			assert.Equal(t, 2, s.Stats().Paused, "the job of both waits for its type")
			require.NoError(t, s.ResumeType("index"))
		} else {
			require.NoError(t, s.ResumeType("index"))
			<-g.entered // sameType
			assert.Equal(t, 2, s.Stats().Paused, "the job of both waits for its key")
			s.ResumeKey("k")
		}
		<-g.entered
		<-g.entered
		assert.Equal(t, 4, s.Stats().Running)
		assert.Zero(t, s.Stats().Paused)
		close(g.open)
		for _, h := range []Handle{h, sameKey, sameType, free} {
			require.NoError(t, h.Wait(context.Background()))
		}
	}
}

// A paused job's start deadline still runs, and a paused job can be
// cancelled; running jobs of a paused key finish.
func TestPausedJobsEndByDeadlineOrCancel(t *testing.T) {
	tt := newTimeTest(t, Config{MaxConcurrency: 2})
	g := newGate()
	running, err := tt.s.Submit(context.Background(), Job{Key: "k"}, g.fn)
	require.NoError(t, err)
	<-g.entered
	tt.s.PauseKey("k")
	late, err := tt.s.Submit(context.Background(), Job{Key: "k", StartBy: tt.at(5 * time.Second)}, g.fn)
	require.NoError(t, err)
	cancelled, err := tt.s.Submit(context.Background(), Job{Key: "k"}, g.fn)
	require.NoError(t, err)

	tt.set(5 * time.Second)
	require.True(t, ended(late), "the deadline fired while the job was paused")
	require.ErrorIs(t, late.Err(), ErrStartDeadline)
	cancelled.Cancel()
	require.ErrorIs(t, cancelled.Wait(context.Background()), context.Canceled)
	st := tt.s.Stats()
	assert.Zero(t, st.Paused)
	assert.Equal(t, 1, st.Running)
	close(g.open)
	require.NoError(t, running.Wait(context.Background()), "the running job finished while its key was paused")
	tt.s.ResumeKey("k")
	st = tt.s.Stats()
	assert.Zero(t, st.Running+st.Queued)
}

// keyStats and typeStats return the stats of a key or type, which must
// be listed.
func keyStats(t *testing.T, st Stats, key string) KeyStats {
	return listed(t, st.Keys, func(ks KeyStats) bool { return ks.Key == key })
}

func typeStats(t *testing.T, st Stats, name string) TypeStats {
	return listed(t, st.Types, func(ts TypeStats) bool { return ts.Name == name })
}

// listed returns the element of list that is, which must be there.
func listed[T any](t *testing.T, list []T, is func(T) bool) T {
	t.Helper()
	i := slices.IndexFunc(list, is)
	if i < 0 {
		t.Fatalf("not in Stats: %T", *new(T))
	}
	return list[i]
}

// infoOf returns h's job as s's Snapshot describes it; the test fails if
// the job is not in it.
func infoOf(t *testing.T, s *Scheduler, h Handle) JobInfo {
	t.Helper()
	for _, ji := range s.Snapshot() {
		if ji.Seq == h.Seq() {
			return ji
		}
	}
	t.Fatalf("job %d is not in the snapshot", h.Seq())
	return JobInfo{}
}

// A paused key counts as a key with no work for allocation from the
// moment it is paused, though its running jobs go on: 4 slots, a and b
// backlogged with equal weights, b paused at 5 s while two of its jobs
// run until 10 s. Stats reports a 4 and b 0 from 5 s, and the allocation
// events say so at 5 s (docs/design.md, on pausing).
func TestPauseKeyGivesItsAllocationAtOnce(t *testing.T) {
	var log eventLog
	m := newSim(t, Config{MaxConcurrency: 4, OnEvent: log.hook,
		Keys: map[string]KeyConfig{"a": {Weight: 1}, "b": {Weight: 1}}})
	for i := range 8 {
		m.add(fmt.Sprintf("a%d", i), 0, Job{Key: "a"}, 10*time.Second)
		m.add(fmt.Sprintf("b%d", i), 0, Job{Key: "b"}, 10*time.Second)
	}
	allocations := func() map[string]float64 {
		st := m.s.Stats()
		return map[string]float64{"a": keyStats(t, st, "a").Allocation, "b": keyStats(t, st, "b").Allocation}
	}
	m.run(4 * time.Second)
	require.Equal(t, 2, m.runningAt("b", 4*time.Second))
	require.Equal(t, map[string]float64{"a": 2, "b": 2}, allocations())

	m.run(5 * time.Second)
	m.s.PauseKey("b")
	m.collect()
	assert.Equal(t, map[string]float64{"a": 4, "b": 0}, allocations(), "at 5 s, b's running jobs still running")
	assert.Equal(t, 2, keyStats(t, m.s.Stats(), "b").Running)
	m.run(9 * time.Second)
	assert.Equal(t, map[string]float64{"a": 4, "b": 0}, allocations(), "at 9 s")
	m.run(10 * time.Second)
	assert.Equal(t, map[string]float64{"a": 4, "b": 0}, allocations(), "at 10 s, b's jobs ended")
	assert.Equal(t, 4, m.runningAt("a", 10*time.Second))
	assert.Zero(t, m.runningAt("b", 10*time.Second))

	m.s.ResumeKey("b")
	m.collect()
	assert.Equal(t, map[string]float64{"a": 2, "b": 2}, allocations(), "resumed")
	m.run(40 * time.Second)
	require.NoError(t, m.s.Shutdown(context.Background()))

	at := func(d time.Duration) time.Time { return m.t0.Add(d) }
	var changes []Event
	for _, e := range log.of(EventAllocationChanged) {
		changes = append(changes, Event{Kind: e.Kind, Time: e.Time, Key: e.Key, OldSlots: e.OldSlots, NewSlots: e.NewSlots, Reason: e.Reason})
	}
	kind := EventAllocationChanged
	assert.Contains(t, changes, Event{Kind: kind, Time: at(5 * time.Second), Key: "b", OldSlots: 2, NewSlots: 0, Reason: ReasonKeyDrained})
	assert.Contains(t, changes, Event{Kind: kind, Time: at(5 * time.Second), Key: "a", OldSlots: 2, NewSlots: 4, Reason: ReasonRebalance})
	assert.Contains(t, changes, Event{Kind: kind, Time: at(10 * time.Second), Key: "b", OldSlots: 0, NewSlots: 2, Reason: ReasonRebalance})
	for _, c := range changes {
		if c.Time.After(at(5*time.Second)) && c.Time.Before(at(10*time.Second)) {
			t.Errorf("allocation changed between the pause and the resume: %+v", c)
		}
	}
}

// A key whose only work is of a paused type has no work for allocation
// either, whether its jobs of that type wait or run; its running jobs of
// other types still count.
func TestPauseTypeGivesItsKeysAllocationAtOnce(t *testing.T) {
	m := newSim(t, Config{MaxConcurrency: 4,
		Types: map[string]TypeConfig{"index": {}, "build": {}},
		Keys:  map[string]KeyConfig{"a": {Weight: 1}, "b": {Weight: 1}, "c": {Weight: 1}, "d": {Weight: 1}}})
	// At 0 s a's two index jobs, b's build job and c's index job take
	// the 4 slots; at 1 s b and c queue a build job each, d an index job.
	m.add("a0", 0, Job{Type: "index", Key: "a"}, 10*time.Second)
	m.add("a1", 0, Job{Type: "index", Key: "a"}, 10*time.Second)
	m.add("b0", 0, Job{Type: "build", Key: "b"}, 10*time.Second)
	m.add("c0", 0, Job{Type: "index", Key: "c"}, 10*time.Second)
	m.add("b1", time.Second, Job{Type: "build", Key: "b"}, 10*time.Second)
	m.add("c1", time.Second, Job{Type: "build", Key: "c"}, 10*time.Second)
	m.add("d0", time.Second, Job{Type: "index", Key: "d"}, 10*time.Second)
	allocations := func() map[string]float64 {
		st := m.s.Stats()
		out := map[string]float64{}
		for _, k := range []string{"a", "b", "c", "d"} {
			out[k] = keyStats(t, st, k).Allocation
		}
		return out
	}
	m.run(time.Second)
	require.Equal(t, 2, m.runningAt("a", time.Second))
	require.Equal(t, 4, m.s.Stats().Running)
	require.Equal(t, map[string]float64{"a": 1, "b": 1, "c": 1, "d": 1}, allocations())

	require.NoError(t, m.s.PauseType("index"))
	m.collect()
	// a runs index jobs only, d has only an index job queued: no work.
	// b and c have a build job queued: work.
	assert.Equal(t, map[string]float64{"a": 0, "b": 2, "c": 2, "d": 0}, allocations())

	require.NoError(t, m.s.ResumeType("index"))
	m.collect()
	assert.Equal(t, map[string]float64{"a": 1, "b": 1, "c": 1, "d": 1}, allocations())
	m.run(30 * time.Second)
}
