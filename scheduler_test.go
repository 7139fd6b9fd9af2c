package fairsched

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairsched/fairsched/internal/rt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newTestScheduler returns a scheduler that is closed when the test ends.
func newTestScheduler(t *testing.T, cfg Config) *Scheduler {
	t.Helper()
	s, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// newSignalledScheduler is newTestScheduler with the test signals on.
func newSignalledScheduler(t *testing.T, cfg Config) (*Scheduler, *rt.Signals) {
	t.Helper()
	cfg.signals = rt.NewSignals()
	return newTestScheduler(t, cfg), cfg.signals
}

// awaitAccepted waits until n more jobs have been queued or started.
func awaitAccepted(t *testing.T, sig *rt.Signals, n int) {
	t.Helper()
	timeout := time.NewTimer(10 * time.Second) // turns a hang into a failure
	defer timeout.Stop()
	for i := 0; i < n; i++ {
		select {
		case <-sig.Accepted:
		case <-timeout.C:
			t.Fatalf("only %d of %d jobs were accepted", i, n)
		}
	}
}

// gate is a job function that blocks until opened, counting how many run
// at once.
type gate struct {
	open       chan struct{}
	entered    chan struct{}
	running    atomic.Int64
	maxRunning atomic.Int64
}

func newGate() *gate {
	return &gate{open: make(chan struct{}), entered: make(chan struct{}, 1<<16)}
}

func (g *gate) fn(ctx context.Context) error {
	n := g.running.Add(1)
	for m := g.maxRunning.Load(); n > m && !g.maxRunning.CompareAndSwap(m, n); m = g.maxRunning.Load() {
	}
	g.entered <- struct{}{}
	defer g.running.Add(-1)
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func TestConcurrencyBoundHolds(t *testing.T) {
	const limit, callers = 4, 64
	s, sig := newSignalledScheduler(t, Config{MaxConcurrency: limit})
	g := newGate()
	var wg sync.WaitGroup
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, s.RunSync(context.Background(), Job{Key: "k"}, g.fn))
		}()
	}
	awaitAccepted(t, sig, callers) // every caller is running or queued
	st := s.Stats()
	require.Equal(t, limit, st.Running)
	require.Equal(t, callers-limit, st.Queued)
	for range limit { // the granted jobs are in fn: a slot counts from its grant, a job's count from its goroutine
		<-g.entered
	}
	close(g.open)
	wg.Wait()
	require.EqualValues(t, limit, g.maxRunning.Load(), "most jobs ever running at once")
	st = s.Stats()
	require.EqualValues(t, callers, st.Completed)
	require.Zero(t, st.Running)
	require.Zero(t, st.Queued)
	require.NoError(t, verify(s))
}

// runSerially submits jobs behind a blocker holding the only slot, then
// releases it and returns the names in the order they ran.
func runSerially(t *testing.T, cfg Config, jobs []Job) []string {
	t.Helper()
	cfg.MaxConcurrency = 1
	s := newTestScheduler(t, cfg)
	blocker := newGate()
	_, err := s.Submit(context.Background(), Job{Priority: PriorityCritical}, blocker.fn)
	require.NoError(t, err)
	<-blocker.entered
	var mu sync.Mutex
	var order []string
	var handles []Handle
	for _, j := range jobs {
		name := j.ID
		h, err := s.Submit(context.Background(), j, func(context.Context) error {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			return nil
		})
		require.NoError(t, err)
		handles = append(handles, h)
	}
	require.NoError(t, verify(s))
	close(blocker.open)
	for _, h := range handles {
		require.NoError(t, h.Wait(context.Background()))
	}
	return order
}

func TestPriorityOrderBehindBlocker(t *testing.T) {
	order := runSerially(t, Config{}, []Job{
		{ID: "p10", Priority: 10},
		{ID: "p90a", Priority: 90},
		{ID: "p50", Priority: 50},
		{ID: "p90b", Priority: 90},
		{ID: "p30", Priority: 30},
		{ID: "p0", Priority: PriorityLowest},
		{ID: "p100", Priority: 100},
	})
	require.Equal(t, []string{"p100", "p90a", "p90b", "p50", "p30", "p10", "p0"}, order)
}

func TestFIFOWithinPriority(t *testing.T) {
	var jobs []Job
	var want []string
	for i := 0; i < 20; i++ {
		id := string(rune('a' + i))
		jobs = append(jobs, Job{ID: id})
		want = append(want, id)
	}
	require.Equal(t, want, runSerially(t, Config{}, jobs))
}

func TestPriorityClampingAndDefaults(t *testing.T) {
	s := newTestScheduler(t, Config{
		MaxConcurrency: 1,
		Types: map[string]TypeConfig{
			"low":     {DefaultPriority: PriorityLow},
			"lowest":  {DefaultPriority: PriorityLowest},
			"toohigh": {DefaultPriority: 1000},
		},
	})
	blocker := newGate()
	_, err := s.Submit(context.Background(), Job{}, blocker.fn)
	require.NoError(t, err)
	for _, j := range []Job{
		{ID: "over", Priority: 150},
		{ID: "under", Priority: -5},
		{ID: "unset"},
		{ID: "typed", Type: "low"},
		{ID: "typed-lowest", Type: "lowest"},
		{ID: "typed-high", Type: "toohigh"},
		{ID: "override", Type: "low", Priority: 75},
	} {
		_, err := s.Submit(context.Background(), j, blocker.fn)
		require.NoError(t, err)
	}
	got := map[string]int{}
	for _, ji := range s.Snapshot() {
		if !ji.Running {
			got[ji.ID] = ji.BasePriority
			require.Equal(t, ji.BasePriority, ji.EffectivePriority, "no aging configured")
		}
	}
	require.Equal(t, map[string]int{
		"over": 100, "under": 0, "unset": 50, "typed": 20, "typed-lowest": 0, "typed-high": 100, "override": 75,
	}, got)
	close(blocker.open)
}

func TestQueueFullAndRecovery(t *testing.T) {
	s := newTestScheduler(t, Config{MaxConcurrency: 1, MaxQueue: 3})
	g := newGate()
	var hs []Handle
	for i := 0; i < 4; i++ { // one runs, three queue
		h, err := s.Submit(context.Background(), Job{}, g.fn)
		require.NoError(t, err)
		hs = append(hs, h)
	}
	before := s.Stats()
	_, err := s.Submit(context.Background(), Job{}, g.fn)
	require.ErrorIs(t, err, ErrQueueFull)
	var qf *QueueFullError
	require.ErrorAs(t, err, &qf)
	require.Equal(t, 3, qf.Limit)
	require.Equal(t, 3, qf.Size)
	require.Contains(t, err.Error(), "3 pending jobs (MaxQueue is 3)")
	err = s.RunSync(context.Background(), Job{}, g.fn)
	require.ErrorIs(t, err, ErrQueueFull)

	after := s.Stats()
	require.Equal(t, before.Queued, after.Queued, "a rejected submission changes nothing")
	require.Equal(t, before.Submitted, after.Submitted)
	require.Equal(t, before.Rejected+2, after.Rejected)

	close(g.open)
	for _, h := range hs {
		require.NoError(t, h.Wait(context.Background()))
	}
	// Drained: the queue accepts work again.
	h, err := s.Submit(context.Background(), Job{}, func(context.Context) error { return nil })
	require.NoError(t, err)
	require.NoError(t, h.Wait(context.Background()))
	require.EqualValues(t, 5, s.Stats().Completed)
}

func TestNoSlotLeakAfterFailuresPanicsAndCancelledWaiters(t *testing.T) {
	const limit = 2
	s, sig := newSignalledScheduler(t, Config{MaxConcurrency: limit})
	boom := errors.New("boom")

	require.ErrorIs(t, s.RunSync(context.Background(), Job{}, func(context.Context) error { return boom }), boom)
	err := s.RunSync(context.Background(), Job{}, func(context.Context) error { panic("kaboom") })
	var pe *PanicError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "kaboom", pe.Value)
	require.Contains(t, string(pe.Stack), "TestNoSlotLeak", "the stack names the panicking caller")
	h, err := s.Submit(context.Background(), Job{}, func(context.Context) error { panic(boom) })
	require.NoError(t, err)
	require.ErrorAs(t, h.Wait(context.Background()), &pe)
	require.Equal(t, boom, pe.Value)

	// Hold both slots, queue 1,000 RunSync callers, then cancel them all.
	g := newGate()
	var holders []Handle
	for i := 0; i < limit; i++ {
		h, err := s.Submit(context.Background(), Job{}, g.fn)
		require.NoError(t, err)
		holders = append(holders, h)
	}
	<-g.entered
	<-g.entered
	awaitAccepted(t, sig, 3+limit) // the jobs so far
	const waiters = 1000
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var cancelled atomic.Int64
	for i := 0; i < waiters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.RunSync(ctx, Job{Key: "waiter"}, func(context.Context) error {
				t.Error("a cancelled waiter ran")
				return nil
			})
			if errors.Is(err, context.Canceled) {
				cancelled.Add(1)
			}
		}()
	}
	awaitAccepted(t, sig, waiters)
	cancel()
	wg.Wait()
	require.EqualValues(t, waiters, cancelled.Load())
	st := s.Stats()
	require.Zero(t, st.Queued)
	require.Equal(t, limit, st.Running)
	require.NoError(t, verify(s))

	close(g.open)
	// 1,000 new jobs all run. (They may all go through one slot while the
	// other holder's goroutine has yet to return: the holders are waited
	// for too.)
	var ran atomic.Int64
	hs := holders
	for i := 0; i < 1000; i++ {
		h, err := s.Submit(context.Background(), Job{Key: "after"}, func(context.Context) error { ran.Add(1); return nil })
		require.NoError(t, err)
		hs = append(hs, h)
	}
	for _, h := range hs {
		require.NoError(t, h.Wait(context.Background()))
	}
	require.EqualValues(t, 1000, ran.Load())
	st = s.Stats()
	require.Zero(t, st.Running)
	require.EqualValues(t, waiters, st.Cancelled)
	require.EqualValues(t, 3, st.Failed)
	require.Equal(t, st.Submitted, st.Completed+st.Failed+st.Cancelled)
	require.NoError(t, verify(s))
}

func TestRunSyncContextAlreadyDone(t *testing.T) {
	s := newTestScheduler(t, Config{MaxConcurrency: 1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.RunSync(ctx, Job{}, func(context.Context) error { t.Error("ran"); return nil })
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, s.Stats().Submitted)
}

func TestRunSyncContextReachesFunction(t *testing.T) {
	s := newTestScheduler(t, Config{})
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "v")
	ctx, cancel := context.WithCancel(ctx)
	err := s.RunSync(ctx, Job{}, func(jctx context.Context) error {
		require.Equal(t, "v", jctx.Value(key{}))
		require.NoError(t, jctx.Err())
		cancel()
		<-jctx.Done() // the caller's cancellation reaches the job
		return jctx.Err()
	})
	require.ErrorIs(t, err, context.Canceled)
}

func TestHandleCancel(t *testing.T) {
	s := newTestScheduler(t, Config{MaxConcurrency: 1})
	g := newGate()
	running, err := s.Submit(context.Background(), Job{}, g.fn)
	require.NoError(t, err)
	<-g.entered
	queued, err := s.Submit(context.Background(), Job{}, func(context.Context) error { t.Error("cancelled job ran"); return nil })
	require.NoError(t, err)

	queued.Cancel()
	require.ErrorIs(t, queued.Wait(context.Background()), context.Canceled)
	require.Zero(t, s.Stats().Queued)

	running.Cancel() // cancels its context; g.fn returns ctx.Err()
	require.ErrorIs(t, running.Wait(context.Background()), context.Canceled)
	running.Cancel() // no-op once ended
	st := s.Stats()
	require.EqualValues(t, 1, st.Cancelled)
	require.EqualValues(t, 1, st.Failed, "the running job returned an error")
	require.Zero(t, st.Running)
}

func TestHandleWaitContext(t *testing.T) {
	s := newTestScheduler(t, Config{})
	g := newGate()
	h, err := s.Submit(context.Background(), Job{}, g.fn)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, h.Wait(ctx), context.Canceled, "Wait gives up with ctx")
	require.NoError(t, h.Err(), "the job has not ended")
	close(g.open)
	require.NoError(t, h.Wait(context.Background()))
}

func TestShutdownDrainsAndRejects(t *testing.T) {
	s := newTestScheduler(t, Config{MaxConcurrency: 2})
	g := newGate()
	var hs []Handle
	for i := 0; i < 10; i++ {
		h, err := s.Submit(context.Background(), Job{}, g.fn)
		require.NoError(t, err)
		hs = append(hs, h)
	}
	// A Shutdown whose context has ended stops new work, reports ctx's
	// error and leaves the queued and running work alone.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, s.Shutdown(ctx), context.Canceled)
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	_, err := s.Submit(context.Background(), Job{}, g.fn)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, s.RunSync(context.Background(), Job{}, g.fn), ErrClosed)
	require.ErrorIs(t, s.RegisterType("late", TypeConfig{}), nil, "types may still be registered while draining")

	require.Equal(t, 10, s.Stats().Running+s.Stats().Queued, "the work is left alone")
	close(g.open)
	require.NoError(t, <-done)
	for _, h := range hs {
		require.NoError(t, h.Wait(context.Background()), "queued work finishes during Shutdown")
	}
	require.NoError(t, s.Shutdown(context.Background()), "idempotent")
	st := s.Stats()
	require.EqualValues(t, 10, st.Completed)
	require.GreaterOrEqual(t, st.Rejected, uint64(2))
}

// Done's channel is closed by the first Shutdown or Close, the moment new
// work is refused, even while a Shutdown still drains; later calls leave
// it closed.
func TestDoneClosedByShutdownOrClose(t *testing.T) {
	isDone := func(s *Scheduler) bool {
		select {
		case <-s.Done():
			return true
		default:
			return false
		}
	}
	s := newTestScheduler(t, Config{MaxConcurrency: 1})
	require.False(t, isDone(s), "a new scheduler")
	g := newGate()
	h, err := s.Submit(context.Background(), Job{}, g.fn)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, s.Shutdown(ctx), context.Canceled, "the job still runs")
	require.True(t, isDone(s), "Shutdown began, draining")
	close(g.open)
	require.NoError(t, h.Wait(context.Background()))
	require.NoError(t, s.Shutdown(context.Background()))
	require.NoError(t, s.Close())
	require.True(t, isDone(s))

	c, err := New(Config{})
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.True(t, isDone(c), "Close")
}

func TestCloseCancelsRunningAndDiscardsQueued(t *testing.T) {
	sig := rt.NewSignals()
	s, err := New(Config{MaxConcurrency: 1, signals: sig})
	require.NoError(t, err)
	g := newGate()
	running, err := s.Submit(context.Background(), Job{}, g.fn)
	require.NoError(t, err)
	<-g.entered
	queued, err := s.Submit(context.Background(), Job{}, g.fn)
	require.NoError(t, err)
	awaitAccepted(t, sig, 2)
	syncErr := make(chan error, 1)
	go func() { syncErr <- s.RunSync(context.Background(), Job{Key: "sync"}, g.fn) }()
	awaitAccepted(t, sig, 1) // the RunSync job is queued

	require.NoError(t, s.Close())
	require.ErrorIs(t, running.Wait(context.Background()), context.Canceled, "running job's context cancelled")
	require.ErrorIs(t, queued.Wait(context.Background()), ErrClosed)
	require.ErrorIs(t, <-syncErr, ErrClosed)
	_, err = s.Submit(context.Background(), Job{}, g.fn)
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, s.Close(), "idempotent")
	require.NoError(t, s.Shutdown(context.Background()), "nothing left to drain")
	st := s.Stats()
	require.Zero(t, st.Running)
	require.Zero(t, st.Queued)
	require.EqualValues(t, 2, st.Cancelled)
}

func TestCloseDiscardsParkedJobs(t *testing.T) {
	s, err := New(Config{
		MaxConcurrency: 4,
		Types:          map[string]TypeConfig{"git": {ConflictGroup: "git"}},
	})
	require.NoError(t, err)
	g := newGate()
	_, err = s.Submit(context.Background(), Job{Type: "git", ID: "repo"}, g.fn)
	require.NoError(t, err)
	parked, err := s.Submit(context.Background(), Job{Type: "git", ID: "repo"}, g.fn)
	require.NoError(t, err)
	require.Equal(t, 1, s.Stats().Parked)
	require.NoError(t, s.Close())
	require.ErrorIs(t, parked.Wait(context.Background()), ErrClosed)
}

func TestConfigValidation(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"negative concurrency": {Config{MaxConcurrency: -1}, "MaxConcurrency is -1"},
		"negative queue":       {Config{MaxQueue: -2}, "MaxQueue is -2"},
		"negative tier cap":    {Config{TierLimits: map[Tier]int{Foreground: -1}}, "TierLimits[1] is -1"},
		"negative type cap":    {Config{Types: map[string]TypeConfig{"x": {MaxConcurrency: -3}}}, `job type "x": MaxConcurrency is -3`},
		"negative weight":      {Config{Keys: map[string]KeyConfig{"a": {Weight: -1}}}, `Keys["a"].Weight is -1`},
		"default reservation":  {Config{DefaultKey: KeyConfig{MinSlots: 1}}, "reservations are only for keys named in Keys"},
		"over-reserved": {Config{MaxConcurrency: 4, Keys: map[string]KeyConfig{
			"a": {MinSlots: 3}, "b": {MinSlots: 2}}}, "add up to 5, more than MaxConcurrency 4"},
		"reservation over cap": {Config{Keys: map[string]KeyConfig{"a": {MinSlots: 3, MaxConcurrency: 2}}}, "MinSlots 3 is more than its MaxConcurrency 2"},
		"alpha":                {Config{CostAlpha: 1.5}, "CostAlpha is 1.5"},
		"aging half set":       {Config{Aging: AgingConfig{Step: 10}}, "Step is set but Interval is 0"},
		"type not UTF-8":       {Config{Types: map[string]TypeConfig{"x\xff": {}}}, "not valid UTF-8"},
		"group not UTF-8":      {Config{Types: map[string]TypeConfig{"x": {ConflictGroup: "g\xff"}}}, `ConflictGroup "g\xff" is not valid UTF-8`},
		"group spaced":         {Config{Types: map[string]TypeConfig{"x": {ConflictGroup: "git "}}}, `ConflictGroup "git " has a leading or trailing space`},
		"subnormal weight":     {Config{Keys: map[string]KeyConfig{"a": {Weight: 1e-310}}}, "must be at least 1e-09"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(tc.cfg)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			require.True(t, strings.HasPrefix(err.Error(), "fairsched: "), err.Error())
		})
	}
	// Several problems are all reported.
	_, err := New(Config{MaxConcurrency: -1, MaxQueue: -1})
	require.ErrorContains(t, err, "MaxConcurrency")
	require.ErrorContains(t, err, "MaxQueue")
}

func TestJobTypes(t *testing.T) {
	s := newTestScheduler(t, Config{Types: map[string]TypeConfig{"clone": {Tier: Foreground}}})
	_, err := s.Submit(context.Background(), Job{Type: "nope"}, func(context.Context) error { return nil })
	require.ErrorIs(t, err, ErrUnknownType)
	require.ErrorContains(t, err, `"nope"`)
	require.ErrorIs(t, s.RunSync(context.Background(), Job{Type: "nope"}, noop), ErrUnknownType)

	require.NoError(t, s.RegisterType("clone", TypeConfig{Tier: Foreground}), "same config: no-op")
	require.ErrorContains(t, s.RegisterType("clone", TypeConfig{Tier: Background}), "already registered with a different configuration")
	require.ErrorContains(t, s.RegisterType("bad", TypeConfig{MaxConcurrency: -1}), "MaxConcurrency is -1")
	require.NoError(t, s.RegisterType("", TypeConfig{}), "the default type as it is: no-op")
	require.ErrorContains(t, s.RegisterType("", TypeConfig{Tier: Foreground}), `configured once, in Config.Types[""]`)
	require.NoError(t, s.RegisterType("repack", TypeConfig{MaxConcurrency: 2, ConflictGroup: "git"}))
	require.NoError(t, s.RunSync(context.Background(), Job{Type: "repack", ID: "r"}, func(context.Context) error { return nil }))
	require.EqualValues(t, 2, s.Stats().Rejected)
}

func TestStatsPriorityClasses(t *testing.T) {
	s := newTestScheduler(t, Config{})
	for _, p := range []int{100, 75, 74, 50, 25, 24, PriorityLowest} {
		require.NoError(t, s.RunSync(context.Background(), Job{Priority: p}, func(context.Context) error { return nil }))
	}
	require.EqualError(t, s.RunSync(context.Background(), Job{Priority: 90}, func(context.Context) error { return errors.New("x") }), "x")
	st := s.Stats()
	require.EqualValues(t, 2, st.HighPriorityCompleted, "100 and 75; a failed job is not completed")
	require.EqualValues(t, 2, st.LowPriorityCompleted, "24 and 0")
	require.EqualValues(t, 7, st.Completed)
	require.EqualValues(t, 1, st.Failed)
	require.EqualValues(t, 8, st.Submitted)
}

func TestZeroConfigRunsEverythingAtOnce(t *testing.T) {
	s := newTestScheduler(t, Config{})
	g := newGate()
	for i := 0; i < 100; i++ {
		_, err := s.Submit(context.Background(), Job{ID: "same"}, g.fn)
		require.NoError(t, err)
	}
	require.Equal(t, 100, s.Stats().Running)
	close(g.open)
}

// A nil function is a programming error: refused at once with an error
// that says so, changing nothing, and the scheduler goes on working.
func TestNilFunctionRefused(t *testing.T) {
	s := newTestScheduler(t, Config{MaxConcurrency: 1})
	err := s.RunSync(context.Background(), Job{}, nil)
	require.ErrorContains(t, err, "function is nil")
	h, err := s.Submit(context.Background(), Job{}, nil)
	require.ErrorContains(t, err, "function is nil")
	require.Zero(t, h.Seq(), "a refused Submit returns the zero Handle")
	st := s.Stats()
	require.Zero(t, st.Submitted+st.Rejected, "a refused nil function is no submission")
	require.NoError(t, s.RunSync(context.Background(), Job{}, noop), "the scheduler still runs jobs")
}

func TestTierString(t *testing.T) {
	require.Equal(t, "background", Background.String())
	require.Equal(t, "foreground", Foreground.String())
	require.Equal(t, "7", Tier(7).String())
	require.Equal(t, "-1", Tier(-1).String())
}

// A Stats histogram is the caller's own: changing its bounds or counts
// changes neither the scheduler's nor the next Stats'.
func TestStatsHistogramsAreCopies(t *testing.T) {
	s := newTestScheduler(t, Config{})
	require.NoError(t, s.RunSync(context.Background(), Job{}, noop))
	st := s.Stats()
	want := append([]float64(nil), st.QueueWait.Buckets...)
	require.Len(t, st.QueueWait.Counts, len(want))
	st.QueueWait.Buckets[0] = -1
	st.QueueWait.Buckets = append(st.QueueWait.Buckets, 1e9)
	st.JobDuration.Counts[0] = 99
	next := s.Stats()
	require.Equal(t, want, next.QueueWait.Buckets)
	require.Equal(t, want, next.JobDuration.Buckets)
	require.EqualValues(t, 1, next.QueueWait.Counts[len(want)-1], "cumulative: the one job is in the last bucket")
	require.NotEqualValues(t, 99, next.JobDuration.Counts[0])
}

// WaitIdle returns once nothing is queued or running, and the scheduler
// goes on accepting work; a context that ends first bounds it.
func TestWaitIdle(t *testing.T) {
	s := newTestScheduler(t, Config{MaxConcurrency: 1})
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, s.WaitIdle(ended), "idle already: nil, whatever ctx says")
	g := newGate()
	for i := 0; i < 3; i++ {
		_, err := s.Submit(context.Background(), Job{}, g.fn)
		require.NoError(t, err)
	}
	require.ErrorIs(t, s.WaitIdle(ended), context.Canceled, "busy: ctx bounds the wait")
	done := make(chan error, 1)
	go func() { done <- s.WaitIdle(context.Background()) }()
	<-g.entered
	select {
	case err := <-done:
		t.Fatalf("WaitIdle returned %v while jobs run and wait", err)
	default:
	}
	close(g.open)
	require.NoError(t, <-done)
	st := s.Stats()
	require.Zero(t, st.Running+st.Queued)
	require.EqualValues(t, 3, st.Completed)
	require.NoError(t, s.RunSync(context.Background(), Job{}, noop), "not closed")
}

// TryRunSync runs a job that can start at once, and refuses one that
// would wait, queueing nothing and counting nothing.
func TestTryRunSync(t *testing.T) {
	s := newTestScheduler(t, Config{MaxConcurrency: 2, Types: map[string]TypeConfig{"git": {ConflictGroup: "git"}}})
	ran := false
	require.NoError(t, s.TryRunSync(context.Background(), Job{}, func(context.Context) error { ran = true; return nil }))
	require.True(t, ran)
	g := newGate()
	_, err := s.Submit(context.Background(), Job{Type: "git", ID: "repo"}, g.fn)
	require.NoError(t, err)
	<-g.entered
	before := s.Stats()
	require.ErrorIs(t, s.TryRunSync(context.Background(), Job{Type: "git", ID: "repo"}, noop), ErrWouldWait, "its conflict runs")
	require.NoError(t, s.TryRunSync(context.Background(), Job{Type: "git", ID: "other"}, noop), "a slot is free")
	_, err = s.Submit(context.Background(), Job{}, g.fn) // takes the second slot
	require.NoError(t, err)
	<-g.entered
	require.ErrorIs(t, s.TryRunSync(context.Background(), Job{}, noop), ErrWouldWait, "every slot is taken")
	after := s.Stats()
	require.Equal(t, before.Submitted+2, after.Submitted, "the refusals counted no submission")
	require.Equal(t, before.Rejected, after.Rejected, "nor a rejection")
	require.ErrorIs(t, s.TryRunSync(context.Background(), Job{Type: "nope"}, noop), ErrUnknownType)
	close(g.open)
}

// A QueueFullError says which limit was hit, the empty key's own
// MaxPending included, which must not read like the queue's.
func TestQueueFullErrorSaysWhichLimit(t *testing.T) {
	s := newTestScheduler(t, Config{MaxConcurrency: 1, MaxQueue: 10, Keys: map[string]KeyConfig{"": {MaxPending: 1}}})
	g := newGate()
	_, err := s.Submit(context.Background(), Job{}, g.fn) // runs
	require.NoError(t, err)
	<-g.entered
	_, err = s.Submit(context.Background(), Job{}, g.fn) // waits
	require.NoError(t, err)
	_, err = s.Submit(context.Background(), Job{}, g.fn)
	var qf *QueueFullError
	require.ErrorAs(t, err, &qf)
	// Its wait: half of the running job's second left, then the queued job's.
	require.Equal(t, QueueFullError{KeyLimit: true, Key: "", Limit: 1, Size: 1, Wait: 1500 * time.Millisecond}, *qf)
	require.Equal(t, `fairsched: queue full: key "" has 1 pending jobs (its MaxPending is 1)`, err.Error())
	close(g.open)
}

// RetryAfter rounds the wait up to a whole second, never below one: a
// Retry-After of 0 would send the client straight back into the full queue.
func TestQueueFullErrorRetryAfter(t *testing.T) {
	for _, tc := range []struct{ wait, want time.Duration }{
		{0, time.Second},
		{time.Nanosecond, time.Second},
		{time.Second, time.Second},
		{time.Second + time.Nanosecond, 2 * time.Second},
		{1500 * time.Millisecond, 2 * time.Second},
		{13 * time.Second, 13 * time.Second},
		{-time.Second, time.Second},
	} {
		if got := (&QueueFullError{Wait: tc.wait}).RetryAfter(); got != tc.want {
			t.Errorf("RetryAfter of a %v wait = %v, want %v", tc.wait, got, tc.want)
		}
	}
}

// Limits change at run time: a lowered one stops new starts until the
// running jobs drop below it, cancelling nothing; a raised one lets queued
// jobs start at once. Bad values are refused, changing nothing.
func TestLimitsAtRunTime(t *testing.T) {
	s, sig := newSignalledScheduler(t, Config{MaxConcurrency: 2, Types: map[string]TypeConfig{"t": {}},
		Keys: map[string]KeyConfig{"r": {MinSlots: 1}}})
	g := newGate()
	for i := 0; i < 4; i++ {
		_, err := s.Submit(context.Background(), Job{Type: "t"}, g.fn)
		require.NoError(t, err)
	}
	awaitAccepted(t, sig, 4)
	<-g.entered
	<-g.entered
	require.NoError(t, s.SetMaxConcurrency(1), "lowered below the 2 running")
	require.Equal(t, 2, s.Stats().Running, "nothing running is cancelled")
	require.NoError(t, s.SetMaxConcurrency(3))
	<-g.entered // a queued job starts at once
	require.Equal(t, 3, s.Stats().Running)
	require.NoError(t, s.SetTypeLimit("t", 3))
	require.NoError(t, s.SetTierLimit(Background, 3))

	require.ErrorContains(t, s.SetMaxConcurrency(-1), "MaxConcurrency -1")
	require.NoError(t, s.SetMaxConcurrency(0), "no limit")
	require.NoError(t, s.SetMaxConcurrency(3))
	require.ErrorContains(t, s.SetTierLimit(Foreground, -2), "limit -2")
	require.ErrorIs(t, s.SetTypeLimit("nope", 1), ErrUnknownType)
	require.ErrorContains(t, s.SetTypeLimit("t", -1), "limit -1")
	require.NoError(t, s.SetKey("r", KeyConfig{MinSlots: 3}))
	require.ErrorContains(t, s.SetMaxConcurrency(2), "reservations, 3")
	st := s.Stats()
	require.Equal(t, 3, st.Types[1].MaxConcurrency)
	require.Equal(t, 3, st.Tiers[0].Limit)
	close(g.open)
	require.NoError(t, s.WaitIdle(context.Background()))
	require.EqualValues(t, 4, s.Stats().Completed)
}

// Config.Types[""] configures the default type: RunSync calls that name
// no type can be foreground requests, which a background cap does not
// hold back.
func TestDefaultTypeConfigurable(t *testing.T) {
	s := newTestScheduler(t, Config{
		MaxConcurrency: 4,
		TierLimits:     map[Tier]int{Background: 1},
		Types:          map[string]TypeConfig{"": {Tier: Foreground}, "batch": {Tier: Background}},
	})
	g := newGate()
	_, err := s.Submit(context.Background(), Job{Type: "batch"}, g.fn) // holds the background cap
	require.NoError(t, err)
	<-g.entered
	require.NoError(t, s.TryRunSync(context.Background(), Job{Key: "10.0.0.1"}, noop), "a default-type job is foreground here")
	for _, ts := range s.Stats().Types {
		if ts.Name == "" {
			require.Equal(t, Foreground, ts.Tier)
		}
	}
	require.NoError(t, s.RegisterType("", TypeConfig{Tier: Foreground}), "the same configuration again: no-op")
	close(g.open)
}
