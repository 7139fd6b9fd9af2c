package fairsched

import (
	"context"
	"testing"
	"time"

	"github.com/fairsched/fairsched/internal/rt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A periodic job under a slow handler never piles up: an occurrence whose
// predecessor still runs is skipped and counted; each occurrence is a new
// job with a fresh aging clock; Stop ends the schedule.
func TestPeriodicNeverPilesUp(t *testing.T) {
	tt := newTimeTest(t, Config{})
	g := newGate()
	p, err := tt.s.Schedule(context.Background(), Every(time.Minute), Job{ID: "sync"}, g.fn)
	require.NoError(t, err)
	assert.Zero(t, p.Last().Seq(), "nothing before the first occurrence")

	tt.set(time.Minute)
	<-g.entered
	first := p.Last()
	require.NotZero(t, first.Seq())
	tt.set(2 * time.Minute) // the first still runs: skipped
	tt.set(3 * time.Minute) // and again
	assert.EqualValues(t, 2, p.Skipped())
	assert.Equal(t, first, p.Last())
	g.open <- struct{}{}
	require.NoError(t, first.Wait(context.Background()))

	tt.set(4 * time.Minute)
	<-g.entered
	second := p.Last()
	assert.Equal(t, first.Seq()+1, second.Seq(), "a new job")
	snap := tt.s.Snapshot()
	require.Len(t, snap, 1)
	assert.Equal(t, tt.at(4*time.Minute), snap[0].Submitted, "with a fresh aging clock")
	assert.EqualValues(t, 2, tt.s.Stats().SkippedOccurrences)

	p.Stop()
	p.Stop()
	g.open <- struct{}{}
	require.NoError(t, second.Wait(context.Background()))
	tt.set(10 * time.Minute)
	assert.Equal(t, second, p.Last(), "no occurrence after Stop")
	assert.Zero(t, tt.clk.Pending(), "and no timer left")
}

// A schedule whose Next gives the zero time ends; Close ends them all;
// bad arguments are refused.
func TestPeriodicEndsAndBadInput(t *testing.T) {
	tt := newTimeTest(t, Config{})
	once := scheduleFunc(func(t time.Time) time.Time {
		if t.Before(tt.at(time.Hour)) {
			return tt.at(time.Hour)
		}
		return time.Time{}
	})
	ran := make(chan struct{}, 4)
	p, err := tt.s.Schedule(context.Background(), once, Job{}, func(context.Context) error { ran <- struct{}{}; return nil })
	require.NoError(t, err)
	tt.set(time.Hour)
	<-ran
	require.NoError(t, p.Last().Wait(context.Background()))
	tt.set(3 * time.Hour)
	assert.Len(t, ran, 0, "one occurrence only")

	_, err = tt.s.Schedule(context.Background(), nil, Job{}, noop)
	require.Error(t, err)
	_, err = tt.s.Schedule(context.Background(), Every(time.Second), Job{}, nil)
	require.ErrorIs(t, err, rt.ErrNilFunc)
	_, err = tt.s.Schedule(context.Background(), Every(time.Second), Job{Type: "nope"}, noop)
	require.ErrorIs(t, err, ErrUnknownType)
	assert.Panics(t, func() { Every(0) })

	_, err = tt.s.Schedule(context.Background(), Every(time.Second), Job{}, noop)
	require.NoError(t, err)
	require.NoError(t, tt.s.Close())
	assert.Zero(t, tt.clk.Pending(), "Close stops every schedule")
	_, err = tt.s.Schedule(context.Background(), Every(time.Second), Job{}, noop)
	require.ErrorIs(t, err, ErrClosed)
}

type scheduleFunc func(time.Time) time.Time

func (f scheduleFunc) Next(t time.Time) time.Time { return f(t) }

// The user's Schedule.Next runs without the Scheduler's lock, so it may
// call the Scheduler, and a panic in it cannot leave the lock held.
func TestScheduleNextOutsideTheLock(t *testing.T) {
	tt := newTimeTest(t, Config{})
	calls := 0
	spec := scheduleFunc(func(after time.Time) time.Time {
		calls++
		// Nothing else takes the lock meanwhile: the one job runs, held
		// at its gate, and the test's clock calls Next.
		if !tt.s.rt.TryLock() {
			t.Error("Schedule.Next called with the Scheduler's lock held")
			return after.Add(time.Minute)
		}
		_ = tt.s.Stats()
		return after.Add(time.Minute)
	})
	g := newGate()
	p, err := tt.s.Schedule(context.Background(), spec, Job{}, g.fn)
	require.NoError(t, err)
	tt.set(time.Minute)
	<-g.entered
	tt.set(2 * time.Minute) // skipped: the first still runs
	assert.Equal(t, 3, calls, "the first time, then at each occurrence")
	assert.EqualValues(t, 1, p.Skipped())
	p.Stop()
	g.open <- struct{}{}
	require.NoError(t, p.Last().Wait(context.Background()))
}
