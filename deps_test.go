package fairsched

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder records the order in which jobs run.
type recorder struct {
	mu  sync.Mutex
	ran []string
}

// job returns a function that records name, then returns err.
func (r *recorder) job(name string, err error) func(context.Context) error {
	return func(context.Context) error {
		r.mu.Lock()
		r.ran = append(r.ran, name)
		r.mu.Unlock()
		return err
	}
}

func (r *recorder) order() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ran...)
}

// A task graph (docs/design.md, Dependencies): a diamond of four jobs runs in order, each after
// the ones it names; when the root fails, the three below it end without
// running, each with an error naming its dependency and wrapping, down the
// chain, the root's error.
func TestDependencyDiamond(t *testing.T) {
	for _, rootFails := range []bool{false, true} {
		s, _ := newSignalledScheduler(t, Config{MaxConcurrency: 4})
		var rec recorder
		errRoot := errors.New("root failed")
		var rootErr error
		if rootFails {
			rootErr = errRoot
		}
		// Submitted while the root cannot start yet, so that nothing is
		// resolved before every job is in.
		hold := newGate()
		blocker, err := s.Submit(context.Background(), Job{Type: "", ID: "x"}, hold.fn)
		require.NoError(t, err)
		<-hold.entered
		require.NoError(t, s.SetMaxConcurrency(1))
		root, err := s.Submit(context.Background(), Job{}, rec.job("root", rootErr))
		require.NoError(t, err)
		left, err := s.Submit(context.Background(), Job{After: []Handle{root}}, rec.job("left", nil))
		require.NoError(t, err)
		right, err := s.Submit(context.Background(), Job{After: []Handle{root}}, rec.job("right", nil))
		require.NoError(t, err)
		bottom, err := s.Submit(context.Background(), Job{After: []Handle{left, right}}, rec.job("bottom", nil))
		require.NoError(t, err)
		assert.Equal(t, 3, s.Stats().Waiting[WaitDependency])
		for _, ji := range s.Snapshot() {
			if ji.Seq == bottom.Seq() {
				assert.Equal(t, WaitDependency, ji.Waiting)
				assert.Equal(t, left.Seq(), ji.WaitingOn, "the first job it waits for")
			}
		}
		close(hold.open)
		require.NoError(t, blocker.Wait(context.Background()))
		require.NoError(t, s.SetMaxConcurrency(4))
		require.NoError(t, s.WaitIdle(context.Background()))

		if !rootFails {
			assert.Equal(t, []string{"root", "left", "right", "bottom"}, rec.order())
			for _, h := range []Handle{root, left, right, bottom} {
				assert.NoError(t, h.Err())
			}
			continue
		}
		assert.Equal(t, []string{"root"}, rec.order(), "nothing below a failed root runs")
		require.ErrorIs(t, root.Err(), errRoot)
		for _, h := range []Handle{left, right, bottom} {
			err := h.Err()
			require.ErrorIs(t, err, ErrDependency)
			require.ErrorIs(t, err, errRoot, "the root's error, down the chain")
			var de *DependencyError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, h.Seq(), de.Seq)
		}
		var de *DependencyError
		require.ErrorAs(t, bottom.Err(), &de)
		assert.Equal(t, left.Seq(), de.Dep, "bottom names the first of its jobs to fail")
		assert.Equal(t, "fairsched: job 5 runs after job 3, which did not complete: fairsched: job 3 runs after job 2, which did not complete: root failed", bottom.Err().Error())
		st := s.Stats()
		assert.EqualValues(t, 3, st.DependencyFailed)
		assert.EqualValues(t, 1, st.Failed)
		assert.Zero(t, st.Queued)
	}
}

// A dependency that ended already is resolved at once: one that completed
// is as good as none, one that failed fails the job at submission. RunSync
// waits for its dependencies as a Submit job does, and returns the
// dependency's error without calling its function if one fails.
func TestDependencyEndedAndRunSync(t *testing.T) {
	s, _ := newSignalledScheduler(t, Config{MaxConcurrency: 2})
	var rec recorder
	ok, err := s.Submit(context.Background(), Job{}, rec.job("ok", nil))
	require.NoError(t, err)
	require.NoError(t, ok.Wait(context.Background()))
	errBad := errors.New("bad")
	bad, err := s.Submit(context.Background(), Job{}, rec.job("bad", errBad))
	require.NoError(t, err)
	require.Error(t, bad.Wait(context.Background()))

	require.NoError(t, s.RunSync(context.Background(), Job{After: []Handle{ok}}, rec.job("after ok", nil)))
	err = s.RunSync(context.Background(), Job{After: []Handle{ok, bad}}, rec.job("after bad", nil))
	require.ErrorIs(t, err, ErrDependency)
	require.ErrorIs(t, err, errBad)
	h, err := s.Submit(context.Background(), Job{After: []Handle{bad}}, rec.job("submitted after bad", nil))
	require.NoError(t, err, "accepted: it ends at once")
	require.ErrorIs(t, h.Wait(context.Background()), errBad)
	require.ErrorIs(t, s.TryRunSync(context.Background(), Job{After: []Handle{bad}}, rec.job("tried after bad", nil)), errBad)
	assert.Equal(t, []string{"ok", "bad", "after ok"}, rec.order())

	// RunSync waits for a dependency that has not ended.
	s, sig := newSignalledScheduler(t, Config{MaxConcurrency: 2})
	g := newGate()
	slow, err := s.Submit(context.Background(), Job{}, g.fn)
	require.NoError(t, err)
	<-g.entered
	require.ErrorIs(t, s.TryRunSync(context.Background(), Job{After: []Handle{slow}}, rec.job("tried", nil)), ErrWouldWait)
	done := make(chan error)
	go func() {
		done <- s.RunSync(context.Background(), Job{After: []Handle{slow}}, rec.job("after slow", nil))
	}()
	awaitAccepted(t, sig, 2)
	assert.Equal(t, 1, s.Stats().Waiting[WaitDependency], "the RunSync job waits, though a slot is free")
	close(g.open)
	require.NoError(t, <-done)
	assert.Equal(t, []string{"ok", "bad", "after ok", "after slow"}, rec.order())
}

// A dependency that fails an attempt and will be retried has not failed:
// the job after it waits, and runs once it completes.
func TestDependencyRetried(t *testing.T) {
	tt := newTimeTest(t, Config{MaxConcurrency: 2, Types: map[string]TypeConfig{
		"flaky": {Retry: RetryPolicy{Attempts: 2, Backoff: 1e9}},
	}})
	var rec recorder
	attempts := 0
	dep, err := tt.s.Submit(context.Background(), Job{Type: "flaky"}, func(ctx context.Context) error {
		rec.job("dep", nil)(ctx)
		if attempts++; attempts == 1 {
			return errors.New("first attempt")
		}
		return nil
	})
	require.NoError(t, err)
	after, err := tt.s.Submit(context.Background(), Job{After: []Handle{dep}}, rec.job("after", nil))
	require.NoError(t, err)
	<-tt.sig.Retried
	assert.False(t, ended(after), "its dependency will be retried: it has not failed")
	tt.set(1e9)
	require.NoError(t, dep.Wait(context.Background()))
	require.NoError(t, after.Wait(context.Background()))
	assert.Equal(t, []string{"dep", "dep", "after"}, rec.order())
}

// Cancelling a job fails the jobs after it; a job cancelled while it waits
// for its dependencies leaves nothing behind.
func TestDependencyCancelled(t *testing.T) {
	s, _ := newSignalledScheduler(t, Config{MaxConcurrency: 1})
	g := newGate()
	running, err := s.Submit(context.Background(), Job{}, g.fn)
	require.NoError(t, err)
	<-g.entered
	queued, err := s.Submit(context.Background(), Job{}, g.fn)
	require.NoError(t, err)
	first, err := s.Submit(context.Background(), Job{After: []Handle{queued}}, g.fn)
	require.NoError(t, err)
	second, err := s.Submit(context.Background(), Job{After: []Handle{first}}, g.fn)
	require.NoError(t, err)
	waiter, err := s.Submit(context.Background(), Job{After: []Handle{running}}, g.fn)
	require.NoError(t, err)
	waiter.Cancel()
	require.ErrorIs(t, waiter.Wait(context.Background()), context.Canceled)

	queued.Cancel()
	for _, h := range []Handle{first, second} {
		err := h.Wait(context.Background())
		require.ErrorIs(t, err, ErrDependency)
		require.ErrorIs(t, err, context.Canceled)
	}
	close(g.open)
	require.NoError(t, running.Wait(context.Background()))
	st := s.Stats()
	assert.EqualValues(t, 2, st.DependencyFailed)
	assert.EqualValues(t, 2, st.Cancelled)
	assert.Zero(t, st.Queued)
}

// A handle of another scheduler, or the zero Handle, is refused with an
// error that says so, and nothing is queued. A job can only name jobs
// submitted before it, so no cycle can be formed.
func TestDependencyBadHandles(t *testing.T) {
	s, _ := newSignalledScheduler(t, Config{})
	other, _ := newSignalledScheduler(t, Config{})
	h, err := other.Submit(context.Background(), Job{}, func(context.Context) error { return nil })
	require.NoError(t, err)
	noop := func(context.Context) error { return nil }
	_, err = s.Submit(context.Background(), Job{After: []Handle{h}}, noop)
	require.ErrorContains(t, err, "Job.After[0] is job 1 of another Scheduler")
	err = s.RunSync(context.Background(), Job{After: []Handle{{}}}, noop)
	require.ErrorContains(t, err, "Job.After[0] is the zero Handle")
	assert.Zero(t, s.Stats().Submitted)
}

// No cycle can be formed: a job names only jobs submitted before it, by
// their Handles. A dead dependency retried by hand runs again as a new
// job, and what failed after it stays failed: nothing runs twice, and
// nothing waits on itself.
func TestDependencyNoCycle(t *testing.T) {
	s, _ := newSignalledScheduler(t, Config{MaxConcurrency: 2})
	var rec recorder
	fails := true
	a, err := s.Submit(context.Background(), Job{}, func(ctx context.Context) error {
		rec.job("a", nil)(ctx)
		if fails {
			return errors.New("a failed")
		}
		return nil
	})
	require.NoError(t, err)
	require.Error(t, a.Wait(context.Background()))
	b, err := s.Submit(context.Background(), Job{After: []Handle{a}}, rec.job("b", nil))
	require.NoError(t, err)
	require.ErrorIs(t, b.Wait(context.Background()), ErrDependency)

	fails = false
	again, err := s.RetryDead(a.Seq())
	require.NoError(t, err)
	require.NoError(t, again.Wait(context.Background()))
	c, err := s.Submit(context.Background(), Job{After: []Handle{again, b}}, rec.job("c", nil))
	require.NoError(t, err)
	require.ErrorIs(t, c.Wait(context.Background()), ErrDependency, "b failed for good")
	assert.Equal(t, []string{"a", "a"}, rec.order())
}
