package fairsched

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched/internal/clock"
	"github.com/fairsched/fairsched/internal/rt"
)

// timeTest is a scheduler on a fake clock at t0, with the test signals.
type timeTest struct {
	t   *testing.T
	clk *clock.Fake
	t0  time.Time
	s   *Scheduler
	sig *rt.Signals
}

func newTimeTest(t *testing.T, cfg Config) *timeTest {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	cfg.Clock = clk
	s, sig := newSignalledScheduler(t, cfg)
	return &timeTest{t: t, clk: clk, t0: t0, s: s, sig: sig}
}

// at returns the time d after t0.
func (tt *timeTest) at(d time.Duration) time.Time { return tt.t0.Add(d) }

// set moves the clock to d after t0, firing the scheduler's timer on the
// way.
func (tt *timeTest) set(d time.Duration) { tt.clk.Set(tt.at(d)) }

// ended reports whether h has ended, without waiting.
func ended(h Handle) bool {
	select {
	case <-h.Done():
		return true
	default:
		return false
	}
}

// A dispatch deadline (docs/design.md, Delays and start deadlines): a job waiting for capacity fails with the
// deadline error at exactly its deadline while nothing frees, through the
// scheduler's timer, and the job holding the slot is untouched.
func TestStartDeadlineWhileWaiting(t *testing.T) {
	tt := newTimeTest(t, Config{MaxConcurrency: 1})
	g := newGate()
	blocker, err := tt.s.Submit(context.Background(), Job{}, g.fn)
	require.NoError(t, err)
	<-g.entered
	h, err := tt.s.Submit(context.Background(), Job{StartBy: tt.at(5 * time.Second)}, g.fn)
	require.NoError(t, err)

	tt.set(5*time.Second - time.Microsecond)
	require.False(t, ended(h), "before its deadline it waits")
	tt.set(5 * time.Second)
	require.True(t, ended(h), "at its deadline it has ended, with no submit or finish to prompt it")
	require.ErrorIs(t, h.Err(), ErrStartDeadline)
	assert.Contains(t, h.Err().Error(), "did not start by 2026-01-01T00:00:05Z")
	st := tt.s.Stats()
	assert.EqualValues(t, 1, st.Expired)
	assert.Equal(t, 0, st.Queued)
	assert.Equal(t, 1, st.Running, "the blocker runs on")
	assert.False(t, ended(blocker))
	close(g.open)
}

// A type's StartTimeout counts from submission; a job's StartBy may set
// an earlier deadline, never a later one. RunSync returns the deadline's
// error without running.
func TestStartTimeoutOfType(t *testing.T) {
	tt := newTimeTest(t, Config{MaxConcurrency: 1, Types: map[string]TypeConfig{"dispatch": {StartTimeout: 10 * time.Second}}})
	g := newGate()
	_, err := tt.s.Submit(context.Background(), Job{}, g.fn)
	require.NoError(t, err)
	<-g.entered

	tt.set(time.Second)
	late, err := tt.s.Submit(context.Background(), Job{Type: "dispatch", StartBy: tt.at(time.Hour)}, g.fn)
	require.NoError(t, err)
	<-tt.sig.Accepted
	<-tt.sig.Accepted
	ran := false
	done := make(chan error)
	go func() {
		done <- tt.s.RunSync(context.Background(), Job{Type: "dispatch", StartBy: tt.at(3 * time.Second)}, func(context.Context) error {
			ran = true
			return nil
		})
	}()
	<-tt.sig.Accepted // the RunSync job is queued

	tt.set(3 * time.Second)
	err = <-done
	require.ErrorIs(t, err, ErrStartDeadline, "its own StartBy, earlier than the type's")
	require.False(t, ran)
	tt.set(11*time.Second - time.Microsecond)
	require.False(t, ended(late))
	tt.set(11 * time.Second)
	require.ErrorIs(t, late.Err(), ErrStartDeadline, "the type's StartTimeout from its submission, earlier than its StartBy")
	assert.EqualValues(t, 2, tt.s.Stats().Expired)
	for _, ts := range tt.s.Stats().Types {
		if ts.Name == "dispatch" {
			assert.EqualValues(t, 2, ts.Expired)
		}
	}
	close(g.open)
}

// A job that starts before its deadline is not touched by it.
func TestStartDeadlineMetIsForgotten(t *testing.T) {
	tt := newTimeTest(t, Config{MaxConcurrency: 1})
	g := newGate()
	first, err := tt.s.Submit(context.Background(), Job{}, g.fn)
	require.NoError(t, err)
	<-g.entered
	h, err := tt.s.Submit(context.Background(), Job{StartBy: tt.at(5 * time.Second)}, func(context.Context) error { return nil })
	require.NoError(t, err)
	tt.set(2 * time.Second)
	first.Cancel() // frees the slot: h starts and ends
	require.NoError(t, h.Wait(context.Background()))
	tt.set(time.Minute)
	assert.Zero(t, tt.s.Stats().Expired)
	close(g.open)
}

// A delayed job is not in the queue before its NotBefore, even with every
// slot free, and starts at that instant through the timer; its wait and
// aging count from then.
func TestNotBeforeDelaysTheStart(t *testing.T) {
	tt := newTimeTest(t, Config{MaxConcurrency: 2,
		Aging: AgingConfig{Interval: time.Second, Step: 10, UrgentThreshold: 100}})
	g := newGate()
	h, err := tt.s.Submit(context.Background(), Job{NotBefore: tt.at(10 * time.Second)}, g.fn)
	require.NoError(t, err)
	st := tt.s.Stats()
	assert.Equal(t, 1, st.Queued)
	assert.Equal(t, 1, st.Delayed)
	assert.Equal(t, 0, st.Running)
	snap := tt.s.Snapshot()
	require.Len(t, snap, 1)
	assert.Equal(t, PriorityNormal, snap[0].EffectivePriority)

	tt.set(10*time.Second - time.Microsecond)
	assert.Equal(t, 0, tt.s.Stats().Running, "not before its time")
	tt.set(10 * time.Second)
	<-g.entered
	st = tt.s.Stats()
	assert.Equal(t, 1, st.Running)
	assert.Equal(t, 0, st.Delayed)
	assert.EqualValues(t, 1, st.QueueWait.Counts[0], "it waited 0 s from its NotBefore")
	snap = tt.s.Snapshot()
	assert.Equal(t, PriorityNormal, snap[0].EffectivePriority, "its aging clock started at NotBefore")
	assert.Equal(t, tt.at(10*time.Second), snap[0].Submitted)
	close(g.open)
	require.NoError(t, h.Wait(context.Background()))
}

// A delayed job counts against its key's MaxPending and the queue's
// MaxQueue, and can be cancelled; Close ends delayed jobs with ErrClosed
// and stops the scheduler's timer.
func TestNotBeforeCountsAndCancel(t *testing.T) {
	tt := newTimeTest(t, Config{MaxQueue: 3, Keys: map[string]KeyConfig{"k": {MaxPending: 2}}})
	noop := func(context.Context) error { return nil }
	later := Job{Key: "k", NotBefore: tt.at(time.Minute)}
	h1, err := tt.s.Submit(context.Background(), later, noop)
	require.NoError(t, err)
	h2, err := tt.s.Submit(context.Background(), later, noop)
	require.NoError(t, err)
	_, err = tt.s.Submit(context.Background(), later, noop)
	var qf *QueueFullError
	require.ErrorAs(t, err, &qf)
	assert.True(t, qf.KeyLimit)
	assert.Equal(t, time.Minute, qf.Wait, "a job delayed by a minute waits at least that")
	h3, err := tt.s.Submit(context.Background(), Job{NotBefore: tt.at(time.Hour)}, noop)
	require.NoError(t, err)
	_, err = tt.s.Submit(context.Background(), Job{}, noop)
	require.ErrorAs(t, err, &qf)
	assert.False(t, qf.KeyLimit, "MaxQueue counts the delayed jobs")

	h1.Cancel()
	require.ErrorIs(t, h1.Err(), context.Canceled)
	assert.Equal(t, 2, tt.s.Stats().Delayed)
	require.NoError(t, tt.s.Close())
	require.ErrorIs(t, h2.Err(), ErrClosed)
	require.ErrorIs(t, h3.Err(), ErrClosed)
	assert.Zero(t, tt.clk.Pending(), "no timer outlives Close")
}

// Bad times: a deadline not after the submission or NotBefore is refused
// with a clear error; a NotBefore in the past means no delay; a negative
// StartTimeout is a configuration error. TryRunSync does not wait for a
// NotBefore.
func TestTimesBadInput(t *testing.T) {
	tt := newTimeTest(t, Config{})
	tt.set(time.Minute)
	noop := func(context.Context) error { return nil }

	_, err := tt.s.Submit(context.Background(), Job{NotBefore: tt.at(2 * time.Minute), StartBy: tt.at(2 * time.Minute)}, noop)
	require.ErrorIs(t, err, ErrStartDeadline)
	assert.Contains(t, err.Error(), "is not after the job's submission and its NotBefore")
	err = tt.s.RunSync(context.Background(), Job{StartBy: tt.at(time.Second)}, noop)
	require.ErrorIs(t, err, ErrStartDeadline, "a deadline already past")
	assert.Zero(t, tt.s.Stats().Submitted, "refused: nothing changed")

	h, err := tt.s.Submit(context.Background(), Job{NotBefore: tt.at(time.Second)}, noop)
	require.NoError(t, err)
	require.NoError(t, h.Wait(context.Background()), "a NotBefore in the past: it runs at once")

	require.ErrorIs(t, tt.s.TryRunSync(context.Background(), Job{NotBefore: tt.at(time.Hour)}, noop), ErrWouldWait)

	_, err = New(Config{Types: map[string]TypeConfig{"x": {StartTimeout: -time.Second}}})
	require.ErrorContains(t, err, `job type "x": StartTimeout is -1s`)
}

// A time at or before the scheduler's creation is as past as any other,
// with the clock not yet moved: a NotBefore an hour before it (or at it)
// means no delay, and a StartBy as early is refused at submission.
func TestTimesAtOrBeforeNewArePast(t *testing.T) {
	tt := newTimeTest(t, Config{MaxConcurrency: 2})
	g := newGate()
	defer close(g.open)
	for _, nb := range []time.Duration{-time.Hour, 0} {
		_, err := tt.s.Submit(context.Background(), Job{NotBefore: tt.at(nb)}, g.fn)
		require.NoError(t, err)
	}
	st := tt.s.Stats()
	assert.Zero(t, st.Delayed, "a NotBefore already past is no delay")
	assert.Equal(t, 2, st.Running, "both start at once, the clock unmoved")

	for _, by := range []time.Duration{-time.Hour, 0} {
		_, err := tt.s.Submit(context.Background(), Job{StartBy: tt.at(by)}, noop)
		require.ErrorIs(t, err, ErrStartDeadline, "a StartBy %v from the scheduler's creation, submitted then", by)
		assert.Contains(t, err.Error(), "is not after the job's submission")
	}
	assert.EqualValues(t, 2, tt.s.Stats().Submitted, "refused: nothing changed")
}

// Waiting on a delayed job's handle, or cancelling its RunSync context,
// works as for any queued job.
func TestNotBeforeRunSyncCancelled(t *testing.T) {
	tt := newTimeTest(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- tt.s.RunSync(ctx, Job{NotBefore: tt.at(time.Hour)}, func(context.Context) error {
			return errors.New("must not run")
		})
	}()
	<-tt.sig.Accepted
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	st := tt.s.Stats()
	assert.Zero(t, st.Queued)
	assert.EqualValues(t, 1, st.Cancelled)
}

// lateClock is a fake clock whose timers never fire: a timer that is late.
type lateClock struct{ *clock.Fake }

func (lateClock) AfterFunc(time.Duration, func()) (stop func() bool) {
	return func() bool { return true }
}

// When the clock timer is late, the next submission applies what fell due
// first: a delayed job joins the queue ahead of it, its aging clock
// started at its NotBefore, not when it was noticed.
func TestNotBeforeWithALateTimer(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := lateClock{clock.NewFake(t0)}
	s := newTestScheduler(t, Config{MaxConcurrency: 1, Clock: clk,
		Aging: AgingConfig{GracePeriod: time.Second, Interval: time.Second, Step: 10, MaxEffective: 100}})
	g := newGate()
	_, err := s.Submit(context.Background(), Job{}, g.fn)
	require.NoError(t, err)
	<-g.entered
	_, err = s.Submit(context.Background(), Job{ID: "delayed", NotBefore: t0.Add(10 * time.Second)}, noop)
	require.NoError(t, err)
	clk.Set(t0.Add(15 * time.Second)) // no timer fires
	_, err = s.Submit(context.Background(), Job{ID: "later"}, noop)
	require.NoError(t, err)
	snap := s.Snapshot()
	require.Len(t, snap, 3)
	assert.Equal(t, "delayed", snap[1].ID)
	assert.Equal(t, t0.Add(10*time.Second), snap[1].Submitted, "its aging clock started at its NotBefore")
	assert.Equal(t, 90, snap[1].EffectivePriority, "aged 4 s past its grace")
	assert.Zero(t, s.Stats().Delayed)
	require.NoError(t, verify(s))
	close(g.open)
}
