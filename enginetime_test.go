package fairsched

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fairsched/fairsched/fairschedtest"
	"github.com/fairsched/fairsched/internal/clock"
	"github.com/fairsched/fairsched/internal/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// armedClock is a fake clock that keeps the span of every timer armed on
// it.
type armedClock struct {
	*clock.Fake
	mu    sync.Mutex
	spans []time.Duration
}

func (c *armedClock) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	c.mu.Lock()
	c.spans = append(c.spans, d)
	c.mu.Unlock()
	return c.Fake.AfterFunc(d, f)
}

// armed returns the spans of the timers armed so far.
func (c *armedClock) armed() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.spans...)
}

// nextDue returns the time the scheduler's clock timer is for, and its
// engine time.
func nextDue(t *testing.T, s *Scheduler) (time.Time, int64) {
	t.Helper()
	var due int64
	var ok bool
	s.rt.Locked(func(e *engine.Engine, _ int64) { due, ok = e.NextDue() })
	require.True(t, ok, "a job waits for a time")
	return s.rt.TimeOf(due), due
}

// A NotBefore or StartBy far in the future (the year 9999) is taken as the
// latest time the scheduler keeps, about 292 years on: in memory, and
// read back from the store after a restart alike. The clock timer is
// armed for it, not for a span that overflowed into the past and fires at
// once, again and again (Advance would never return), and the job waits
// for the same time before and after the restart.
func TestFarFutureTimesAcrossRestart(t *testing.T) {
	far := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		job  Job
	}{
		{"NotBefore", Job{Type: "mail", NotBefore: far}},
		{"StartBy", Job{Type: "mail", Key: "held", StartBy: far}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			clk := &armedClock{Fake: clock.NewFake(t0)}
			st := openTestStore(t, filepath.Join(t.TempDir(), "jobs.db"))
			got := make(chan mailRun, 1)
			cfg := Config{Clock: clk, Store: st, Handlers: mailHandlers(got, nil)}
			ctx := context.Background()
			inMemory := newTestScheduler(t, Config{Clock: clk, Types: map[string]TypeConfig{"mail": {}}})
			inMemory.PauseKey("held")
			_, err := inMemory.Submit(ctx, tc.job, func(context.Context) error { return nil })
			require.NoError(t, err)
			want, wantEngine := nextDue(t, inMemory)
			assert.Greater(t, want.Year(), 2300, "about 292 years on")
			check := func(s *Scheduler, what string) {
				t.Helper()
				at, engine := nextDue(t, s)
				assert.Equal(t, want, at, what)
				assert.Equal(t, wantEngine, engine, what)
			}

			s := newTestScheduler(t, cfg)
			s.PauseKey("held") // recorded: the restart finds the key paused
			_, err = s.Enqueue(ctx, tc.job, mail{N: 1})
			require.NoError(t, err)
			check(s, "durable, as in memory")
			require.NoError(t, s.Shutdown(ctx))

			s = newTestScheduler(t, cfg)
			check(s, "after the restart")
			for _, d := range clk.armed() {
				require.Positive(t, d, "every timer armed for the future: none overflowed")
			}
			clk.Advance(time.Hour)
			check(s, "an hour on")
			assert.Equal(t, 1, s.Stats().Queued)
			assert.Empty(t, got)
			require.NoError(t, s.Shutdown(ctx))
		})
	}
}

// The epoch is New's instant taken down to a whole µs, so that a durable
// job's StartBy, a whole µs in the store, is the same engine time in
// memory as read back: with a clock whose reading has a part of a µs, the
// job still waits 1 µs before its deadline (it used to expire then), ends
// at it, and a restart keeps it.
func TestDurableStartBySubMicroEpoch(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 500, time.UTC) // 0.5 µs past a whole µs
	deadline := t0.Add(10 * time.Millisecond)
	for _, restart := range []bool{false, true} {
		clk := clock.NewFake(t0)
		st := openTestStore(t, filepath.Join(t.TempDir(), "jobs.db"))
		got := make(chan mailRun, 1)
		cfg := Config{Clock: clk, Store: st, Handlers: mailHandlers(got, nil)}
		s := newTestScheduler(t, cfg)
		ctx := context.Background()
		s.PauseKey("held")
		h, err := s.Enqueue(ctx, Job{Type: "mail", Key: "held", StartBy: deadline}, mail{N: 1})
		require.NoError(t, err)
		var stored int64
		require.NoError(t, st.DB().QueryRow("SELECT start_by FROM fairsched_jobs WHERE id = ?", h.ID()).Scan(&stored))
		assert.Equal(t, deadline.UnixMicro(), stored)
		if restart {
			require.NoError(t, s.Shutdown(ctx))
			s = newTestScheduler(t, cfg)
		}
		due, _ := nextDue(t, s)
		assert.Equal(t, stored, s.rt.WallOf(s.rt.EngineTime(due)), "restart %v: the deadline in memory is the one stored", restart)
		clk.Set(deadline.Add(-time.Microsecond))
		assert.Equal(t, 1, s.Stats().Queued, "restart %v: 1 µs before its deadline", restart)
		clk.Set(deadline)
		assert.Zero(t, s.Stats().Queued, "restart %v: at its deadline", restart)
		if !restart {
			assert.ErrorIs(t, h.Wait(ctx), ErrStartDeadline)
		}
		require.NoError(t, s.Shutdown(ctx))
	}
}

// A durable job with a start deadline is taken on a clock that reads
// before 1970: a NotBefore of 0 in the record is none, not the Unix epoch,
// far ahead of that clock.
func TestDurableStartByBefore1970(t *testing.T) {
	t0 := time.Time{} // the year 1
	clk := fairschedtest.NewClock(t0)
	st := openTestStore(t, filepath.Join(t.TempDir(), "jobs.db"))
	got := make(chan mailRun, 2)
	s := newTestScheduler(t, Config{Clock: clk, Store: st, Handlers: mailHandlers(got, nil),
		Types: map[string]TypeConfig{"mail": {StartTimeout: 2 * time.Minute}}})
	ctx := context.Background()
	s.PauseKey("held")
	startBy, err := s.Enqueue(ctx, Job{Type: "mail", Key: "held", StartBy: t0.Add(time.Minute)}, mail{N: 1})
	require.NoError(t, err, "a StartBy")
	timeout, err := s.Enqueue(ctx, Job{Type: "mail", Key: "held"}, mail{N: 2})
	require.NoError(t, err, "a StartTimeout")
	clk.Advance(time.Minute - time.Microsecond)
	assert.False(t, ended(startBy))
	clk.Advance(time.Microsecond)
	assert.ErrorIs(t, startBy.Wait(ctx), ErrStartDeadline)
	clk.Advance(time.Minute - time.Microsecond)
	assert.False(t, ended(timeout))
	clk.Advance(time.Microsecond)
	assert.ErrorIs(t, timeout.Wait(ctx), ErrStartDeadline)
	require.NoError(t, s.Shutdown(ctx))
}

// A restored job that was admitted, by the wall clock, after now (the
// clock was stepped back between the processes) counts as admitted now:
// with no grace period it ages from now on and becomes urgent, as the
// engine's invariants require, rather than waiting for the end of a grace
// period that never comes.
func TestRestoredSubmittedInFuture(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "jobs.db")
	st := openTestStore(t, path)
	ctx := context.Background()
	ahead := clock.NewFake(t0.Add(time.Hour))
	s := newTestScheduler(t, Config{Clock: ahead, Store: st, MaxConcurrency: 1, Handlers: mailHandlers(make(chan mailRun), nil)})
	holding := make(chan struct{})
	go s.RunSync(ctx, Job{}, func(ctx context.Context) error { close(holding); <-ctx.Done(); return ctx.Err() })
	<-holding // the slot, so that they wait
	for n := 1; n <= 2; n++ {
		_, err := s.Enqueue(ctx, Job{Type: "mail"}, mail{N: n})
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())

	clk := clock.NewFake(t0) // an hour behind the first
	got := make(chan mailRun, 2)
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	s = newTestScheduler(t, Config{Clock: clk, Store: st, MaxConcurrency: 1,
		Aging:    AgingConfig{Interval: time.Second, Step: 10, UrgentThreshold: 60},
		Handlers: mailHandlers(got, func(context.Context, mail) error { <-release; return nil })})
	assert.Equal(t, 1, (<-got).m.N, "the first runs, the second waits")
	rvVerify(t, s, "restored")
	clk.Advance(2 * time.Second)
	rvVerify(t, s, "2 s on")
	info := s.Snapshot()
	require.Len(t, info, 2)
	assert.Equal(t, t0, info[1].Submitted, "admitted now")
	assert.True(t, info[1].Urgent, "aged past the threshold")
	once.Do(func() { close(release) })
	assert.Equal(t, 2, (<-got).m.N)
	require.NoError(t, s.Shutdown(ctx))
}

// A time due further off than the longest timer (a rate limit's next
// token, one every 317 years) arms the clock timer for the longest
// one, not for a span that overflowed into the past and fires at once,
// again and again.
func TestTimerBeyondLongestDuration(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := &armedClock{Fake: clock.NewFake(t0)}
	s := newTestScheduler(t, Config{Clock: clk,
		Types: map[string]TypeConfig{"rare": {Rate: RateLimit{PerSecond: 1e-10}}}})
	ctx := context.Background()
	first, err := s.Submit(ctx, Job{Type: "rare"}, func(context.Context) error { return nil })
	require.NoError(t, err)
	require.NoError(t, first.Wait(ctx))
	second, err := s.Submit(ctx, Job{Type: "rare"}, func(context.Context) error { return nil })
	require.NoError(t, err)
	require.NotEmpty(t, clk.armed())
	for _, d := range clk.armed() {
		require.Positive(t, d, "every timer armed for the future: none overflowed")
	}
	clk.Advance(time.Hour)
	assert.False(t, ended(second), "it waits for the next token")
	assert.Equal(t, 1, clk.Pending())
}
