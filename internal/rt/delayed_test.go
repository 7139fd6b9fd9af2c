package rt

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched/fairschedsqlite"
	"github.com/fairsched/fairsched/internal/decide"
	"github.com/fairsched/fairsched/internal/engine"
)

// The run-time layer with decisions whose grants come later and from
// another goroutine, as a leader's in another process would: it must not
// assume that a grant comes back in the call that asked for it, and a job
// whose grant is on its way when it is cancelled, or when the scheduler
// closes, must never run.

// delayed is a Decider that takes the engine's decisions in the call
// (decide.Local) but hands none of its grants over there: it holds them,
// and a goroutine of its own hands them over through the Runtime's
// Deliver when it is told to (release), or as soon as it may (auto).
type delayed struct {
	*decide.Local // every decision but the grants' hand-over
	inner         *decide.Local
	g             decide.Grantee // the Runtime's
	deliver       func(func(now int64))
	held          []*engine.Job // granted, not handed over; guarded by the Runtime's lock
	// holding receives, without blocking, each time a grant is held.
	holding chan struct{}
	release chan struct{} // each receive hands over what is held
	auto    bool          // hand over without waiting for release
	stop    chan struct{}
	done    chan struct{}
}

func newDelayed(e *engine.Engine, g decide.Grantee, deliver func(func(now int64)), auto bool) *delayed {
	d := &delayed{g: g, deliver: deliver, holding: make(chan struct{}, 1<<16), release: make(chan struct{}),
		auto: auto, stop: make(chan struct{}), done: make(chan struct{})}
	d.inner = decide.NewLocal(e, d)
	d.Local = d.inner
	go d.run()
	return d
}

// run hands the held grants over, from its own goroutine.
func (d *delayed) run() {
	defer close(d.done)
	for {
		if d.auto {
			select {
			case <-d.holding:
			case <-d.stop:
				return
			}
		} else {
			select {
			case <-d.release:
			case <-d.stop:
				return
			}
		}
		d.deliver(d.handOver)
	}
}

// handOver hands the held grants to the Runtime and holds none; Deliver
// calls it with the Runtime's lock held.
func (d *delayed) handOver(int64) {
	js := d.held
	d.held = nil
	for _, j := range js {
		d.g.Granted(j)
	}
}

func (d *delayed) hold(j *engine.Job) {
	d.held = append(d.held, j)
	d.holding <- struct{}{}
}

// Granted holds what the engine grants.
func (d *delayed) Granted(j *engine.Job) { d.hold(j) }

// Ended passes on what the engine ends: it hands over none.
func (d *delayed) Ended(j *engine.Job, o engine.Outcome, r *engine.Refusal, now int64) {
	d.g.Ended(j, o, r, now)
}

func (d *delayed) Enqueue(j *engine.Job, desc engine.Desc, tm *engine.Times, now int64) (bool, *engine.Refusal) {
	startsNow, r := d.inner.Enqueue(j, desc, tm, now)
	if startsNow {
		d.hold(j) // granted, but not in this call
	}
	return false, r
}

// Cancel takes j out; a grant of j on its way is taken back, so that j is
// never handed over, and its slot is given back.
func (d *delayed) Cancel(j *engine.Job, now int64) bool {
	for i, h := range d.held {
		if h == j {
			d.held = append(d.held[:i], d.held[i+1:]...)
			d.inner.Finish(j, engine.NotRun, now)
			return true
		}
	}
	return d.inner.Cancel(j, now)
}

// close stops the goroutine that hands grants over.
func (d *delayed) close() {
	close(d.stop)
	<-d.done
}

// awaitHeld waits until n more grants have been held.
func (d *delayed) awaitHeld(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-d.holding:
		case <-time.After(10 * time.Second):
			t.Fatal("no grant was held")
		}
	}
}

var testErrors = Errors{
	Panic:      func(seq uint64, v any, _ []byte) error { return fmt.Errorf("job %d panicked: %v", seq, v) },
	QueueFull:  func(f QueueFull) error { return fmt.Errorf("queue full: %+v", f) },
	Dependency: func(seq, dep uint64, err error) error { return fmt.Errorf("job %d after %d: %w", seq, dep, err) },
	Batch:      func(i int, err error) error { return fmt.Errorf("job %d of the batch: %w", i, err) },
}

// newDelayedRuntime returns a Runtime of slots slots whose decisions are
// a delayed's, and that delayed.
func newDelayedRuntime(t *testing.T, slots int, auto bool) (*Runtime, *delayed) {
	t.Helper()
	var d *delayed
	r, err := New(Config{
		Engine: engine.Config{MaxConcurrency: slots, CostAlpha: 0.3, DefaultCost: 1, IdleTTL: int64(10 * time.Minute / time.Microsecond)},
		Errors: testErrors,
		Decider: func(e *engine.Engine, g decide.Grantee, deliver func(func(now int64))) decide.Decider {
			d = newDelayed(e, g, deliver, auto)
			return d
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, r.Close())
		d.close()
	})
	return r, d
}

// A RunSync job whose grant is held does not run until it is handed over,
// from another goroutine; then it runs on its caller's.
func TestDelayedGrantRunSync(t *testing.T) {
	r, d := newDelayedRuntime(t, 1, false)
	var ran atomic.Int32
	result := make(chan error, 1)
	go func() {
		result <- r.RunSync(context.Background(), &Job{Key: "k"}, func(context.Context) error {
			ran.Add(1)
			return errors.New("done")
		})
	}()
	d.awaitHeld(t, 1)
	select {
	case err := <-result:
		t.Fatalf("RunSync returned %v before its grant was handed over", err)
	default:
	}
	assert.Zero(t, ran.Load(), "ran before its grant was handed over")
	d.release <- struct{}{}
	assert.EqualError(t, <-result, "done")
	assert.Equal(t, int32(1), ran.Load())
}

// Submit jobs whose grants come later run once each, never more at once
// than there are slots, and every slot comes back.
func TestDelayedGrantsKeepTheLimits(t *testing.T) {
	const slots, jobs = 3, 300
	r, _ := newDelayedRuntime(t, slots, true)
	var running, most, ran atomic.Int32
	fn := func(context.Context) error {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		ran.Add(1)
		running.Add(-1)
		return nil
	}
	hs := make([]Handle, jobs)
	for i := range hs {
		h, err := r.Submit(context.Background(), &Job{Key: fmt.Sprint("k", i%7)}, fn)
		require.NoError(t, err)
		hs[i] = h
	}
	for _, h := range hs {
		require.NoError(t, h.Wait(context.Background()))
	}
	assert.Equal(t, int32(jobs), ran.Load(), "every job ran once")
	assert.LessOrEqual(t, most.Load(), int32(slots), "never more at once than the slots")
	require.NoError(t, r.WaitIdle(context.Background()))
	st := r.Stats(0)
	assert.Equal(t, uint64(jobs), st.Engine.Completed)
	assert.Zero(t, st.Engine.Running, "every slot came back")
	require.NoError(t, r.Verify())
}

// A RunSync caller that gives up while its grant is on its way gets its
// context's error; the job never runs, and its slot goes to the next job.
func TestDelayedGrantCallerGivesUp(t *testing.T) {
	r, d := newDelayedRuntime(t, 1, false)
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	go func() {
		result <- r.RunSync(ctx, &Job{}, func(context.Context) error {
			t.Error("a job whose caller gave up ran")
			return nil
		})
	}()
	d.awaitHeld(t, 1)
	cancel()
	assert.ErrorIs(t, <-result, context.Canceled)
	d.release <- struct{}{} // hands over nothing: the grant was taken back

	next := make(chan error, 1)
	go func() { next <- r.RunSync(context.Background(), &Job{}, func(context.Context) error { return nil }) }()
	d.awaitHeld(t, 1)
	d.release <- struct{}{}
	assert.NoError(t, <-next, "the slot came back")
}

// A Submit job cancelled by its Handle while its grant is on its way ends
// with context.Canceled and never runs.
func TestDelayedGrantCancelled(t *testing.T) {
	r, d := newDelayedRuntime(t, 1, false)
	h, err := r.Submit(context.Background(), &Job{}, func(context.Context) error {
		t.Error("a cancelled job ran")
		return nil
	})
	require.NoError(t, err)
	d.awaitHeld(t, 1)
	h.Cancel()
	assert.ErrorIs(t, h.Err(), context.Canceled)
	d.release <- struct{}{}
	require.NoError(t, r.WaitIdle(context.Background()))
	require.NoError(t, r.Verify())
}

// Close ends the jobs whose grants are on their way with ErrClosed, with
// those queued; none of them runs.
func TestDelayedGrantsClose(t *testing.T) {
	r, d := newDelayedRuntime(t, 2, false)
	var hs []Handle
	for range 4 {
		h, err := r.Submit(context.Background(), &Job{}, func(context.Context) error {
			t.Error("a job ran after Close")
			return nil
		})
		require.NoError(t, err)
		hs = append(hs, h)
	}
	d.awaitHeld(t, 2)
	require.NoError(t, r.Close()) // returns with the grants still held: the jobs they were for ended
	d.release <- struct{}{}       // hands over nothing
	for _, h := range hs {
		assert.ErrorIs(t, h.Err(), ErrClosed)
	}
}

// A change of the configuration goes to the decisions as data, and what
// it lets start is granted through them: raising the slots from 1 to 3
// grants the two jobs that waited, later, as it granted the first.
func TestDelayedGrantsAfterAChange(t *testing.T) {
	r, d := newDelayedRuntime(t, 1, false)
	gate := make(chan struct{})
	var hs []Handle
	for range 3 {
		h, err := r.Submit(context.Background(), &Job{}, func(context.Context) error { <-gate; return nil })
		require.NoError(t, err)
		hs = append(hs, h)
	}
	d.awaitHeld(t, 1)
	require.NoError(t, r.SetMaxConcurrency(3))
	d.awaitHeld(t, 2)
	d.release <- struct{}{}
	close(gate)
	for _, h := range hs {
		require.NoError(t, h.Wait(context.Background()))
	}
	assert.ErrorIs(t, r.SetTypeLimit("nope", 1), ErrUnknownType, "a change the decisions refuse")
}

// TryRunSync needs its grant in the call: with decisions elsewhere none
// comes, so it answers ErrWouldWait, and the job it asked for never runs.
func TestDelayedTryRunSyncWouldWait(t *testing.T) {
	r, d := newDelayedRuntime(t, 1, false)
	err := r.TryRunSync(context.Background(), &Job{}, func(context.Context) error {
		t.Error("TryRunSync ran a job whose grant had not come")
		return nil
	})
	assert.ErrorIs(t, err, ErrWouldWait)
	d.awaitHeld(t, 1)       // the grant was taken...
	d.release <- struct{}{} // ...and taken back: nothing is handed over
	require.NoError(t, r.WaitIdle(context.Background()))
	require.NoError(t, r.Verify())
}

// A batch admitted whole waits for grants that come later; the listings
// show its jobs as the decisions hold them; an operator's cancellation
// of a job whose grant is on its way keeps it from ever running.
func TestDelayedBatchListedAndCancelled(t *testing.T) {
	r, d := newDelayedRuntime(t, 1, false)
	var ran [3]atomic.Int32
	params := make([]SubmitParams, len(ran))
	for i := range params {
		params[i] = SubmitParams{Job: Job{Key: fmt.Sprint("k", i)}, Fn: func(context.Context) error {
			ran[i].Add(1)
			return nil
		}}
	}
	hs, err := r.SubmitMany(context.Background(), params)
	require.NoError(t, err)
	d.awaitHeld(t, 1)

	snap := r.Snapshot()
	require.Len(t, snap, 3, "every job of the batch is listed")
	assert.True(t, snap[0].Running, "the decisions granted the first")
	page := r.Queue(0, 10)
	assert.Equal(t, 1, page.Running)
	assert.Equal(t, 2, page.Waiting)
	require.Len(t, page.Jobs, 3)
	assert.Equal(t, []string{"k0", "k1", "k2"}, []string{page.Jobs[0].Key, page.Jobs[1].Key, page.Jobs[2].Key})

	require.True(t, r.Cancel(snap[0].Seq), "the job whose grant is on its way")
	require.ErrorIs(t, hs[0].Wait(context.Background()), context.Canceled)
	d.awaitHeld(t, 1) // its slot came back, and went to the next job
	d.release <- struct{}{}
	require.NoError(t, hs[1].Wait(context.Background()))
	d.awaitHeld(t, 1)
	d.release <- struct{}{}
	require.NoError(t, hs[2].Wait(context.Background()))
	assert.Zero(t, ran[0].Load(), "cancelled on its way: never ran")
	assert.Equal(t, int32(1), ran[1].Load())
	assert.Equal(t, int32(1), ran[2].Load())
	require.NoError(t, r.Verify())
}

// Shutdown keeps the durable jobs still queued in the store, but one
// whose grant is on its way runs, and its end grants the job queued
// behind it: Shutdown waits for both, and returns.
func TestDelayedShutdownRunsAGrantOnItsWay(t *testing.T) {
	st, err := fairschedsqlite.Open(filepath.Join(t.TempDir(), "jobs.db"))
	require.NoError(t, err)
	var mailed, submitted atomic.Int32
	var d *delayed
	r, err := New(Config{
		Engine: engine.Config{MaxConcurrency: 1, CostAlpha: 0.3, DefaultCost: 1, IdleTTL: int64(10 * time.Minute / time.Microsecond)},
		Errors: testErrors,
		Types:  map[string]TypeConfig{"mail": {}},
		Store:  st,
		Handlers: map[string]*Handler{"mail": {Name: "mail", ArgType: reflect.TypeOf(""), Run: func(context.Context, []byte) error {
			mailed.Add(1)
			return nil
		}}},
		Decider: func(e *engine.Engine, g decide.Grantee, deliver func(func(now int64))) decide.Decider {
			d = newDelayed(e, g, deliver, false)
			return d
		},
	})
	require.NoError(t, err)
	defer d.close()
	_, err = r.Enqueue(context.Background(), &Job{Type: "mail", ID: "m1"}, "hello")
	require.NoError(t, err)
	d.awaitHeld(t, 1) // the durable job's grant, on its way
	h, err := r.Submit(context.Background(), &Job{Key: "k"}, func(context.Context) error {
		submitted.Add(1)
		return nil
	})
	require.NoError(t, err)

	stopped := make(chan error, 1)
	go func() { stopped <- r.Shutdown(context.Background()) }()
	<-r.Done() // Shutdown holds the lock until it has readied the durable jobs
	d.release <- struct{}{}
	d.awaitHeld(t, 1) // the Submit job, granted as the durable one ended
	d.release <- struct{}{}
	require.NoError(t, <-stopped)
	require.NoError(t, h.Wait(context.Background()))
	assert.Equal(t, int32(1), mailed.Load(), "the durable job on its way ran")
	assert.Equal(t, int32(1), submitted.Load())
	require.NoError(t, st.Close())
}

// Close takes the queued jobs out before the grants on their way, so
// that taking those back grants nothing more.
func TestDelayedCloseGrantsNothingMore(t *testing.T) {
	r, d := newDelayedRuntime(t, 2, false)
	var ran atomic.Int32
	fn := func(context.Context) error { ran.Add(1); return nil }
	hs := make([]Handle, 50)
	for i := range hs {
		h, err := r.Submit(context.Background(), &Job{Key: fmt.Sprint("k", i%5)}, fn)
		require.NoError(t, err)
		hs[i] = h
	}
	d.awaitHeld(t, 2)
	require.NoError(t, r.Close())
	assert.Zero(t, len(d.holding), "no grant during Close")
	for _, h := range hs {
		require.ErrorIs(t, h.Wait(context.Background()), ErrClosed)
	}
	assert.Zero(t, ran.Load())
}
