package fairsched

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Submit job that fails for good is dead: kept newest first, with every
// attempt, and reported by an event; a RunSync job, a cancelled one and
// one that succeeds are not.
func TestDeadJobs(t *testing.T) {
	events := make(chan Event, 64)
	tt := newTimeTest(t, Config{Types: map[string]TypeConfig{
		"sync": {Retry: RetryPolicy{Attempts: 2, Backoff: time.Second}},
	}, OnEvent: func(ev Event) {
		if ev.Kind == EventDead {
			events <- ev
		}
	}})
	fail := func(context.Context) error { return errFlaky }

	once, err := tt.s.Submit(context.Background(), Job{ID: "a", Key: "k", Priority: PriorityLowest}, fail)
	require.NoError(t, err)
	require.ErrorIs(t, once.Wait(context.Background()), errFlaky)
	twice, err := tt.s.Submit(context.Background(), Job{Type: "sync", ID: "b"}, fail)
	require.NoError(t, err)
	<-tt.sig.Retried
	tt.set(time.Second)
	require.ErrorIs(t, twice.Wait(context.Background()), errFlaky)
	require.ErrorIs(t, tt.s.RunSync(context.Background(), Job{}, fail), errFlaky)
	ok, err := tt.s.Submit(context.Background(), Job{}, noop)
	require.NoError(t, err)
	require.NoError(t, ok.Wait(context.Background()))

	dead := tt.s.DeadJobs()
	require.Len(t, dead, 2, "the RunSync job and the one that succeeded are not dead")
	assert.Equal(t, twice.Seq(), dead[0].Seq, "newest first")
	assert.Equal(t, Job{Type: "sync", ID: "b", Priority: PriorityNormal}, dead[0].Job)
	assert.Len(t, dead[0].Attempts, 2)
	assert.Equal(t, tt.at(time.Second), dead[0].Died)
	assert.Equal(t, once.Seq(), dead[1].Seq)
	assert.Equal(t, Job{ID: "a", Key: "k", Priority: PriorityLowest}, dead[1].Job, "priority 0 stays 0")
	require.Len(t, dead[1].Attempts, 1)
	assert.ErrorIs(t, dead[1].Err, errFlaky)
	st := tt.s.Stats()
	assert.Equal(t, 2, st.Dead)
	assert.EqualValues(t, 2, st.DeadTotal)
	require.NoError(t, tt.s.Close())
	assert.Equal(t, once.Seq(), (<-events).Seq)
	assert.Equal(t, twice.Seq(), (<-events).Seq)
}

// A dead job retried by hand runs again as if newly submitted, with its
// function and its context's values, for one more attempt whose number
// goes on; if that fails too it is dead again.
func TestRetryDead(t *testing.T) {
	tt := newTimeTest(t, Config{})
	type ctxKey struct{}
	ctx := context.WithValue(context.Background(), ctxKey{}, "trace-1")
	fixed := false
	var seen []int
	h, err := tt.s.Submit(ctx, Job{Type: "", ID: "x"}, func(ctx context.Context) error {
		seen = append(seen, Attempt(ctx))
		if ctx.Value(ctxKey{}) != "trace-1" {
			return errors.New("lost the submitter's values")
		}
		if !fixed {
			return errFlaky
		}
		return nil
	})
	require.NoError(t, err)
	require.ErrorIs(t, h.Wait(context.Background()), errFlaky)

	_, err = tt.s.RetryDead(h.Seq() + 100)
	require.ErrorIs(t, err, ErrNotDead)
	again, err := tt.s.RetryDead(h.Seq())
	require.NoError(t, err)
	require.ErrorIs(t, again.Wait(context.Background()), errFlaky)
	require.Len(t, tt.s.DeadJobs(), 1, "dead again")
	assert.Equal(t, again.Seq(), tt.s.DeadJobs()[0].Seq)
	assert.Len(t, tt.s.DeadJobs()[0].Attempts, 2)

	tt.set(time.Minute)
	fixed = true
	last, err := tt.s.RetryDead(again.Seq())
	require.NoError(t, err)
	require.NoError(t, last.Wait(context.Background()))
	assert.Equal(t, []int{1, 2, 3}, seen, "attempt numbers go on")
	assert.Len(t, last.Attempts(), 3)
	assert.Empty(t, tt.s.DeadJobs())
	assert.Equal(t, tt.at(time.Minute), last.Attempts()[2].Start)
}

// A dead job retried by hand is submitted afresh: its aging clock and its
// start deadline (its type's StartTimeout) count from the retry, not from
// its first submission.
func TestRetryDeadFreshClockAndDeadline(t *testing.T) {
	tt := newTimeTest(t, Config{MaxConcurrency: 1, Aging: AgingConfig{Interval: time.Second, Step: 10},
		Types: map[string]TypeConfig{"t": {StartTimeout: 10 * time.Second}}})
	ctx := context.Background()
	h, err := tt.s.Submit(ctx, Job{Type: "t"}, func(context.Context) error { return errFlaky })
	require.NoError(t, err)
	require.ErrorIs(t, h.Wait(ctx), errFlaky)
	g := newGate()
	_, err = tt.s.Submit(ctx, Job{}, g.fn) // holds the one slot
	require.NoError(t, err)
	<-g.entered

	tt.set(100 * time.Second)
	again, err := tt.s.RetryDead(h.Seq())
	require.NoError(t, err, "its first submission's deadline, at 10 s, is long past: not this one's")
	tt.set(103 * time.Second)
	info := infoOf(t, tt.s, again)
	assert.Equal(t, tt.at(100*time.Second), info.Submitted)
	assert.Equal(t, 80, info.EffectivePriority, "3 s of aging, from the retry")
	tt.set(110 * time.Second)
	require.ErrorIs(t, again.Wait(ctx), ErrStartDeadline, "10 s after the retry, still waiting for the slot")
	close(g.open)
}

// A dead job retried by hand needs what it needed: its own units of a
// resource hold it while another job has them.
func TestRetryDeadKeepsItsNeeds(t *testing.T) {
	s, _ := newSignalledScheduler(t, Config{Resources: map[string]int{"gpu": 1}})
	ctx := context.Background()
	h, err := s.Submit(ctx, Job{Needs: map[string]int{"gpu": 1}}, func(context.Context) error { return ErrPermanent })
	require.NoError(t, err)
	require.Error(t, h.Wait(ctx))
	require.Equal(t, map[string]int{"gpu": 1}, s.DeadJobs()[0].Job.Needs)
	g := newGate()
	holder, err := s.Submit(ctx, Job{Needs: map[string]int{"gpu": 1}}, g.fn)
	require.NoError(t, err)
	<-g.entered
	again, err := s.RetryDead(h.Seq())
	require.NoError(t, err)
	assert.Equal(t, map[WaitReason]int{WaitResource: 1}, s.Stats().Waiting, "it waits for the unit the holder has")
	close(g.open)
	require.NoError(t, holder.Wait(ctx))
	require.Error(t, again.Wait(ctx))
}

// The dead list is bounded; a negative size keeps none.
func TestDeadJobsBounded(t *testing.T) {
	for _, tc := range []struct{ size, kept int }{{2, 2}, {-1, 0}} {
		s := newTestScheduler(t, Config{DeadJobs: tc.size})
		var last Handle
		for range 3 {
			h, err := s.Submit(context.Background(), Job{}, func(context.Context) error { return errFlaky })
			require.NoError(t, err)
			require.Error(t, h.Wait(context.Background()))
			last = h
		}
		dead := s.DeadJobs()
		require.Len(t, dead, tc.kept)
		if tc.kept > 0 {
			assert.Equal(t, last.Seq(), dead[0].Seq)
			assert.Equal(t, last.Seq()-1, dead[1].Seq, "the oldest was dropped")
		}
		assert.EqualValues(t, 3, s.Stats().DeadTotal)
	}
}

// A permanent error kills at once; a cancelled job is not dead.
func TestDeadPermanentAndCancelled(t *testing.T) {
	tt := newTimeTest(t, Config{Types: map[string]TypeConfig{
		"sync": {Retry: RetryPolicy{Attempts: 5, Backoff: time.Second}},
	}})
	h, err := tt.s.Submit(context.Background(), Job{Type: "sync"}, func(context.Context) error { return Permanent(errFlaky) })
	require.NoError(t, err)
	require.ErrorIs(t, h.Wait(context.Background()), ErrPermanent)
	started := make(chan struct{})
	c, err := tt.s.Submit(context.Background(), Job{Type: "sync"}, func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})
	require.NoError(t, err)
	<-started
	c.Cancel()
	require.Error(t, c.Wait(context.Background()))
	dead := tt.s.DeadJobs()
	require.Len(t, dead, 1)
	assert.Equal(t, h.Seq(), dead[0].Seq)
}
