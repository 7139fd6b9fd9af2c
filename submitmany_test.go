package fairsched_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedtest"
)

// SubmitMany (docs/design.md, Calling it): a batch is admitted all or
// none, and its jobs are placed exactly as the same Submits, one after the
// other at one instant, would place them.

// held is a job function that reports its start as its name on started,
// then waits for its release or its context's end.
type held struct {
	started chan string
	mu      sync.Mutex
	release map[string]chan struct{}
}

func newHeld() *held {
	return &held{started: make(chan string, 1024), release: map[string]chan struct{}{}}
}

func (h *held) ch(name string) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.release[name]
	if c == nil {
		c = make(chan struct{})
		h.release[name] = c
	}
	return c
}

func (h *held) fn(name string) func(context.Context) error {
	return func(ctx context.Context) error {
		h.started <- name
		select {
		case <-h.ch(name):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (h *held) let(name string) { close(h.ch(name)) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// snapshotOf returns what Snapshot says of each job, in Seq order, as
// strings: its place in the order and whether it runs.
func snapshotOf(s *fairsched.Scheduler) []string {
	var out []string
	for _, j := range s.Snapshot() {
		out = append(out, fmt.Sprintf("seq %d key %q type %q base %d running %v", j.Seq, j.Key, j.Type, j.BasePriority, j.Running))
	}
	return out
}

// TestSubmitManyOrderAsSubmits: the jobs of a batch get the sequence
// numbers, the places and the start order that the same jobs submitted
// one by one at the same instant get: tiers, fair share, priorities,
// aging, duplicates that join or supersede, in one workload; with the
// slots taken, and with slots free, where some start at once.
func TestSubmitManyOrderAsSubmits(t *testing.T) {
	var jobs []fairsched.Job
	for i := range 24 {
		j := fairsched.Job{Key: []string{"a", "b", "c"}[i%3], Priority: []int{0, 80, 20, 50}[i%4]}
		switch i % 6 {
		case 1:
			j.Type = "fg"
		case 2:
			j.Type, j.ID = "join", fmt.Sprint(i%4)
		case 5:
			j.Type, j.ID = "sup", fmt.Sprint(i%4)
		}
		jobs = append(jobs, j)
	}
	oneByOne := func(s *fairsched.Scheduler, ps []fairsched.SubmitParams) []fairsched.Handle {
		var hs []fairsched.Handle
		for _, p := range ps {
			hd, err := s.Submit(context.Background(), p.Job, p.Fn)
			require.NoError(t, err)
			hs = append(hs, hd)
		}
		return hs
	}
	batch := func(s *fairsched.Scheduler, ps []fairsched.SubmitParams) []fairsched.Handle {
		hs, err := s.SubmitMany(context.Background(), ps)
		require.NoError(t, err)
		return hs
	}
	type result struct {
		seqs     []uint64
		snapshot []string
		order    []string
	}
	// run takes the slots with blockers, submits the jobs with submit,
	// and, with one slot, lets each job that starts end a second later.
	run := func(slots, blockers int, submit func(*fairsched.Scheduler, []fairsched.SubmitParams) []fairsched.Handle) result {
		clk := fairschedtest.NewClock(t0)
		s, err := fairsched.New(fairsched.Config{
			Clock:          clk,
			MaxConcurrency: slots,
			Aging:          fairsched.AgingConfig{Interval: time.Second, Step: 5},
			Keys:           map[string]fairsched.KeyConfig{"a": {Weight: 3}, "b": {Weight: 1}, "c": {MaxConcurrency: 1}},
			Types: map[string]fairsched.TypeConfig{
				"fg":   {Tier: fairsched.Foreground},
				"join": {Duplicates: fairsched.JoinQueued},
				"sup":  {Duplicates: fairsched.Supersede},
			},
		})
		require.NoError(t, err)
		defer s.Close()
		h := newHeld()
		var current string
		for i := range blockers {
			current = fmt.Sprint("blocker", i)
			_, err := s.Submit(context.Background(), fairsched.Job{Key: "a"}, h.fn(current))
			require.NoError(t, err)
			<-h.started
		}
		ps := make([]fairsched.SubmitParams, len(jobs))
		for i, j := range jobs {
			ps[i] = fairsched.SubmitParams{Job: j, Fn: h.fn(fmt.Sprint(i))}
		}
		var r result
		for _, hd := range submit(s, ps) {
			r.seqs = append(r.seqs, hd.Seq())
		}
		r.snapshot = snapshotOf(s)
		if slots != 1 {
			return r
		}
		idle := make(chan struct{})
		go func() {
			defer close(idle)
			assert.NoError(t, s.WaitIdle(context.Background()))
		}()
		for {
			clk.Advance(time.Second)
			h.let(current)
			select {
			case current = <-h.started:
				r.order = append(r.order, current)
				continue
			case <-idle:
			}
			break
		}
		return r
	}
	for _, c := range []struct {
		name            string
		slots, blockers int
	}{{"slots taken", 1, 1}, {"slots free", 8, 0}} {
		t.Run(c.name, func(t *testing.T) {
			want := run(c.slots, c.blockers, oneByOne)
			got := run(c.slots, c.blockers, batch)
			assert.Equal(t, want.seqs, got.seqs, "sequence numbers")
			assert.Equal(t, want.snapshot, got.snapshot, "the jobs' places")
			assert.Equal(t, want.order, got.order, "start order")
			if c.slots == 1 {
				assert.Len(t, got.order, 24-2-2, "every job but the 2 that joined and the 2 superseded ran")
			}
		})
	}
}

// newBatchScheduler returns a Scheduler on a fake clock, closed at the
// end of the test.
func newBatchScheduler(t *testing.T, cfg fairsched.Config) *fairsched.Scheduler {
	t.Helper()
	if cfg.Clock == nil {
		cfg.Clock = fairschedtest.NewClock(t0)
	}
	s, err := fairsched.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// batchOf returns the SubmitParams of jobs, each running fn.
func batchOf(fn func(context.Context) error, jobs ...fairsched.Job) []fairsched.SubmitParams {
	ps := make([]fairsched.SubmitParams, len(jobs))
	for i, j := range jobs {
		ps[i] = fairsched.SubmitParams{Job: j, Fn: fn}
	}
	return ps
}

func noop(context.Context) error { return nil }

// TestSubmitManyAllOrNoneMaxQueue: a batch that does not fit MaxQueue as
// a whole is refused with a *QueueFullError and queues nothing; one that
// fits is queued whole.
func TestSubmitManyAllOrNoneMaxQueue(t *testing.T) {
	s := newBatchScheduler(t, fairsched.Config{MaxConcurrency: 1, MaxQueue: 3})
	h := newHeld()
	_, err := s.Submit(context.Background(), fairsched.Job{}, h.fn("blocker"))
	require.NoError(t, err)
	<-h.started

	_, err = s.SubmitMany(context.Background(), batchOf(noop, fairsched.Job{}, fairsched.Job{}, fairsched.Job{}, fairsched.Job{}))
	var qf *fairsched.QueueFullError
	require.ErrorAs(t, err, &qf)
	assert.ErrorIs(t, err, fairsched.ErrQueueFull)
	assert.False(t, qf.KeyLimit)
	assert.Equal(t, 3, qf.Limit)
	assert.Equal(t, 0, qf.Size)
	st := s.Stats()
	assert.Equal(t, 0, st.Queued, "nothing queued")
	assert.EqualValues(t, 1, st.Submitted, "the blocker only")
	assert.EqualValues(t, 4, st.Rejected, "each job of the batch refused")

	hs, err := s.SubmitMany(context.Background(), batchOf(noop, fairsched.Job{}, fairsched.Job{}, fairsched.Job{}))
	require.NoError(t, err)
	assert.Len(t, hs, 3)
	assert.Equal(t, 3, s.Stats().Queued)
	_, err = s.SubmitMany(context.Background(), batchOf(noop, fairsched.Job{}))
	require.ErrorAs(t, err, &qf)
	assert.Equal(t, 3, qf.Size)
	h.let("blocker")
	for _, hd := range hs {
		require.NoError(t, hd.Wait(context.Background()))
	}
}

// TestSubmitManyAllOrNoneMaxPending: a key's MaxPending counts the
// batch's jobs of that key together: past it, the whole batch is refused,
// the jobs of other keys too.
func TestSubmitManyAllOrNoneMaxPending(t *testing.T) {
	s := newBatchScheduler(t, fairsched.Config{MaxConcurrency: 1,
		Keys: map[string]fairsched.KeyConfig{"a": {MaxPending: 2}}})
	h := newHeld()
	_, err := s.Submit(context.Background(), fairsched.Job{Key: "b"}, h.fn("blocker"))
	require.NoError(t, err)
	<-h.started
	_, err = s.SubmitMany(context.Background(), batchOf(noop,
		fairsched.Job{Key: "a"}, fairsched.Job{Key: "b"}, fairsched.Job{Key: "a"}, fairsched.Job{Key: "a"}))
	var qf *fairsched.QueueFullError
	require.ErrorAs(t, err, &qf)
	assert.True(t, qf.KeyLimit)
	assert.Equal(t, "a", qf.Key)
	assert.Equal(t, 2, qf.Limit)
	assert.Equal(t, 0, s.Stats().Queued, "nothing queued, b's job neither")

	hs, err := s.SubmitMany(context.Background(), batchOf(noop,
		fairsched.Job{Key: "a"}, fairsched.Job{Key: "b"}, fairsched.Job{Key: "a"}))
	require.NoError(t, err)
	assert.Equal(t, 3, s.Stats().Queued)
	h.let("blocker")
	for _, hd := range hs {
		require.NoError(t, hd.Wait(context.Background()))
	}
}

// TestSubmitManyDisabledPair: a job of a disabled (type, ID) pair refuses
// the whole batch, with a *BatchError that names it.
func TestSubmitManyDisabledPair(t *testing.T) {
	s := newBatchScheduler(t, fairsched.Config{MaxConcurrency: 1, Types: map[string]fairsched.TypeConfig{
		"sync": {Disable: fairsched.DisablePolicy{Failures: 1, Window: time.Minute}}}})
	failing := errors.New("fails")
	hd, err := s.Submit(context.Background(), fairsched.Job{Type: "sync", ID: "x"}, func(context.Context) error { return failing })
	require.NoError(t, err)
	require.ErrorIs(t, hd.Wait(context.Background()), failing)

	_, err = s.SubmitMany(context.Background(), batchOf(noop,
		fairsched.Job{Type: "sync", ID: "y"}, fairsched.Job{}, fairsched.Job{Type: "sync", ID: "x"}))
	var be *fairsched.BatchError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, 2, be.Index)
	assert.ErrorIs(t, err, fairsched.ErrDisabled)
	st := s.Stats()
	assert.EqualValues(t, 1, st.Submitted, "the failed job only")
	assert.Equal(t, 0, st.Queued+st.Running)
}

// TestSubmitManyRefusesBadJobs: a nil function, an unknown type or a bad
// Job.After refuse the batch, naming the job; a nil context panics,
// naming the call; a batch past MaxBatch is refused.
func TestSubmitManyRefusesBadJobs(t *testing.T) {
	s := newBatchScheduler(t, fairsched.Config{MaxConcurrency: 1})
	ctx := context.Background()
	var be *fairsched.BatchError

	_, err := s.SubmitMany(ctx, []fairsched.SubmitParams{{Fn: noop}, {}})
	require.ErrorAs(t, err, &be)
	assert.Equal(t, 1, be.Index)
	assert.ErrorContains(t, err, "nil")

	_, err = s.SubmitMany(ctx, batchOf(noop, fairsched.Job{}, fairsched.Job{}, fairsched.Job{Type: "nope"}))
	require.ErrorAs(t, err, &be)
	assert.Equal(t, 2, be.Index)
	assert.ErrorIs(t, err, fairsched.ErrUnknownType)

	_, err = s.SubmitMany(ctx, batchOf(noop, fairsched.Job{After: []fairsched.Handle{{}}}))
	require.ErrorAs(t, err, &be)
	assert.Equal(t, 0, be.Index)

	_, err = s.SubmitMany(ctx, make([]fairsched.SubmitParams, fairsched.MaxBatch+1))
	assert.ErrorIs(t, err, fairsched.ErrBatchTooLarge)

	assert.PanicsWithValue(t, "fairsched: SubmitMany with a nil context", func() {
		s.SubmitMany(nil, batchOf(noop, fairsched.Job{})) //nolint:staticcheck // the nil context is the point
	})
	hs, err := s.SubmitMany(ctx, nil)
	assert.NoError(t, err)
	assert.Empty(t, hs)
	assert.EqualValues(t, 0, s.Stats().Submitted)
}

// TestSubmitManyDuplicates: within one batch, and against a job queued
// before it, a duplicate joins or supersedes as the same Submits in a row
// would.
func TestSubmitManyDuplicates(t *testing.T) {
	s := newBatchScheduler(t, fairsched.Config{MaxConcurrency: 1, Types: map[string]fairsched.TypeConfig{
		"join": {Duplicates: fairsched.JoinQueued}, "sup": {Duplicates: fairsched.Supersede}}})
	ctx := context.Background()
	h := newHeld()
	_, err := s.Submit(ctx, fairsched.Job{}, h.fn("blocker"))
	require.NoError(t, err)
	<-h.started
	queued, err := s.Submit(ctx, fairsched.Job{Type: "join", ID: "q"}, h.fn("queued"))
	require.NoError(t, err)

	hs, err := s.SubmitMany(ctx, []fairsched.SubmitParams{
		{Job: fairsched.Job{Type: "join", ID: "x"}, Fn: h.fn("join1")},
		{Job: fairsched.Job{Type: "join", ID: "x", Priority: 90}, Fn: h.fn("join2")},
		{Job: fairsched.Job{Type: "join", ID: "q"}, Fn: h.fn("join3")},
		{Job: fairsched.Job{Type: "sup", ID: "x"}, Fn: h.fn("sup1")},
		{Job: fairsched.Job{Type: "sup", ID: "x"}, Fn: h.fn("sup2")},
	})
	require.NoError(t, err)
	assert.Equal(t, hs[0].Seq(), hs[1].Seq(), "the second joins the first")
	assert.Equal(t, queued.Seq(), hs[2].Seq(), "a duplicate of a queued job joins it")
	assert.NotEqual(t, hs[3].Seq(), hs[4].Seq())
	require.ErrorIs(t, hs[3].Wait(ctx), fairsched.ErrSuperseded, "the second replaces the first")
	assert.Equal(t, 3, s.Stats().Queued, "q, x joined, sup x")

	// The joined job runs once, at its joiner's priority 90: first.
	h.let("blocker")
	assert.Equal(t, "join1", <-h.started)
	h.let("join1")
	require.NoError(t, hs[0].Wait(ctx))
	require.NoError(t, hs[1].Wait(ctx))
	for _, next := range []string{"queued", "sup2"} {
		assert.Equal(t, next, <-h.started)
		h.let(next)
	}
	require.NoError(t, hs[2].Wait(ctx))
	require.NoError(t, hs[4].Wait(ctx))
}

// TestSubmitManyChildren: a batch submitted from a running job's context
// is that job's children: each waiting job is raised to the parent's
// priority.
func TestSubmitManyChildren(t *testing.T) {
	s := newBatchScheduler(t, fairsched.Config{MaxConcurrency: 1})
	ctx := context.Background()
	got := make(chan []fairsched.Handle, 1)
	parent, err := s.Submit(ctx, fairsched.Job{Priority: 90}, func(jctx context.Context) error {
		hs, err := s.SubmitMany(jctx, batchOf(noop, fairsched.Job{Priority: 10}, fairsched.Job{Priority: 95}))
		got <- hs
		return err
	})
	require.NoError(t, err)
	require.NoError(t, parent.Wait(ctx))
	hs := <-got
	require.Len(t, hs, 2)
	for _, hd := range hs {
		require.NoError(t, hd.Wait(ctx))
	}
	// A second look, while they wait: the snapshot shows the raised base.
	h := newHeld()
	blocker, err := s.Submit(ctx, fairsched.Job{Priority: 70}, func(jctx context.Context) error {
		hs, err := s.SubmitMany(jctx, batchOf(h.fn("child"), fairsched.Job{Priority: 10}, fairsched.Job{Priority: 95}))
		got <- hs
		return err
	})
	require.NoError(t, err)
	hs = <-got
	require.Len(t, hs, 2)
	bases := map[uint64]int{}
	for _, j := range s.Snapshot() {
		bases[j.Seq] = j.BasePriority
	}
	assert.Equal(t, 70, bases[hs[0].Seq()], "raised to its parent's")
	assert.Equal(t, 95, bases[hs[1].Seq()], "above its parent's: kept")
	require.NoError(t, blocker.Wait(ctx))
	<-h.started
	h.let("child") // both return at once
	<-h.started
	for _, hd := range hs {
		require.NoError(t, hd.Wait(ctx))
	}
}

// TestSubmitManyCloseRace: a Close racing a SubmitMany either refuses the
// whole batch with ErrClosed or finds it queued and ends every job of it;
// nothing is left behind (TestMain checks the goroutines).
func TestSubmitManyCloseRace(t *testing.T) {
	for range 20 {
		s, err := fairsched.New(fairsched.Config{MaxConcurrency: 4})
		require.NoError(t, err)
		block := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
		ps := batchOf(block, make([]fairsched.Job, 200)...)
		var wg sync.WaitGroup
		wg.Add(1)
		var hs []fairsched.Handle
		var serr error
		go func() {
			defer wg.Done()
			hs, serr = s.SubmitMany(context.Background(), ps)
		}()
		require.NoError(t, s.Close())
		wg.Wait()
		if serr != nil {
			require.ErrorIs(t, serr, fairsched.ErrClosed)
			assert.Nil(t, hs)
			assert.EqualValues(t, 0, s.Stats().Submitted)
			continue
		}
		require.Len(t, hs, 200)
		for _, hd := range hs {
			select {
			case <-hd.Done():
			default:
				t.Fatalf("job %d has not ended after Close", hd.Seq())
			}
			err := hd.Err()
			assert.True(t, errors.Is(err, fairsched.ErrClosed) || errors.Is(err, context.Canceled), "job %d: %v", hd.Seq(), err)
		}
	}
}
