package fairsched

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Joining (docs/design.md, Duplicates): 1,000 RunSync callers of one
// (type, ID) run the function once, and every one gets its result.
func TestJoinThousandRunSync(t *testing.T) {
	s, sig := newSignalledScheduler(t, Config{MaxConcurrency: 4, Types: map[string]TypeConfig{"fetch": {Duplicates: JoinQueued}}})
	g := newGate()
	blocker, err := s.Submit(context.Background(), Job{}, g.fn) // holds the slot until all joined
	require.NoError(t, err)
	require.NoError(t, s.SetMaxConcurrency(1))
	<-g.entered
	var calls atomic.Int32
	errResult := errors.New("the result")
	var wg sync.WaitGroup
	errs := make([]error, 1000)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.RunSync(context.Background(), Job{Type: "fetch", ID: "page"}, func(context.Context) error {
				calls.Add(1)
				return errResult
			})
		}()
	}
	awaitAccepted(t, sig, 2) // the blocker and the one job: the others join it
	for s.Stats().Joins < 999 {
		<-sig.Joined
	}
	st := s.Stats()
	assert.EqualValues(t, 999, st.Joins)
	assert.Equal(t, 1, st.Queued)
	close(g.open)
	require.NoError(t, blocker.Wait(context.Background()))
	wg.Wait()
	assert.EqualValues(t, 1, calls.Load(), "the function ran once")
	for _, err := range errs {
		require.ErrorIs(t, err, errResult)
	}
	assert.EqualValues(t, 2, s.Stats().Submitted, "one job, and the blocker")
}

// A Submit duplicate returns a Handle on the job it joins, which runs at
// the highest priority asked for. Cancelling a joiner's Handle detaches it
// alone; when the submission whose function the job would run detaches,
// the job runs the next joiner's; when the last detaches, it is cancelled.
func TestJoinSubmitDetach(t *testing.T) {
	s, _ := newSignalledScheduler(t, Config{MaxConcurrency: 1, Types: map[string]TypeConfig{"fetch": {Duplicates: JoinQueued}}})
	g := newGate()
	_, err := s.Submit(context.Background(), Job{}, g.fn)
	require.NoError(t, err)
	<-g.entered
	ran := make(chan string, 3)
	fn := func(name string) func(context.Context) error {
		return func(context.Context) error { ran <- name; return nil }
	}
	first, err := s.Submit(context.Background(), Job{Type: "fetch", ID: "x", Priority: 20}, fn("first"))
	require.NoError(t, err)
	second, err := s.Submit(context.Background(), Job{Type: "fetch", ID: "x", Priority: 80}, fn("second"))
	require.NoError(t, err)
	third, err := s.Submit(context.Background(), Job{Type: "fetch", ID: "x"}, fn("third"))
	require.NoError(t, err)
	assert.Equal(t, first.Seq(), second.Seq(), "one job")
	assert.NotEqual(t, first, second, "each submission its own Handle")
	for _, ji := range s.Snapshot() {
		if ji.Seq == first.Seq() {
			assert.Equal(t, 80, ji.BasePriority, "the highest priority of those who joined")
		}
	}
	first.Cancel()
	require.ErrorIs(t, first.Wait(context.Background()), context.Canceled, "the first detached")
	assert.False(t, ended(second), "the job waits on for the others")
	close(g.open)
	require.NoError(t, second.Wait(context.Background()))
	require.NoError(t, third.Wait(context.Background()))
	assert.Equal(t, "second", <-ran, "the earliest joiner still attached ran it")
	assert.EqualValues(t, 2, s.Stats().Joins)

	// All detach: the job is cancelled.
	g2 := newGate()
	hold, err := s.Submit(context.Background(), Job{}, g2.fn)
	require.NoError(t, err)
	<-g2.entered
	a, err := s.Submit(context.Background(), Job{Type: "fetch", ID: "y"}, fn("a"))
	require.NoError(t, err)
	b, err := s.Submit(context.Background(), Job{Type: "fetch", ID: "y"}, fn("b"))
	require.NoError(t, err)
	a.Cancel()
	b.Cancel()
	assert.Zero(t, s.Stats().Queued)
	assert.EqualValues(t, 1, s.Stats().Cancelled)
	close(g2.open)
	require.NoError(t, hold.Wait(context.Background()))
	assert.Empty(t, ran)
}

// A RunSync joiner made the runner runs the function on its own
// goroutine; a running job is joined only under JoinRunning.
func TestJoinRunSyncRunnerAndRunning(t *testing.T) {
	s, sig := newSignalledScheduler(t, Config{MaxConcurrency: 1, Types: map[string]TypeConfig{
		"fetch": {Duplicates: JoinQueued}, "build": {Duplicates: JoinRunning},
	}})
	g := newGate()
	hold, err := s.Submit(context.Background(), Job{}, g.fn)
	require.NoError(t, err)
	<-g.entered
	first, err := s.Submit(context.Background(), Job{Type: "fetch"}, func(context.Context) error { return errors.New("not this one") })
	require.NoError(t, err)
	var ranOn atomic.Bool
	done := make(chan error)
	go func() {
		done <- s.RunSync(context.Background(), Job{Type: "fetch"}, func(context.Context) error { ranOn.Store(true); return nil })
	}()
	<-sig.Joined
	first.Cancel() // the RunSync joiner is now the runner
	close(g.open)
	require.NoError(t, hold.Wait(context.Background()))
	require.NoError(t, <-done)
	assert.True(t, ranOn.Load(), "the RunSync caller ran it")

	g2 := newGate()
	build, err := s.Submit(context.Background(), Job{Type: "build"}, g2.fn)
	require.NoError(t, err)
	<-g2.entered
	again, err := s.Submit(context.Background(), Job{Type: "build"}, g2.fn)
	require.NoError(t, err)
	assert.Equal(t, build.Seq(), again.Seq(), "JoinRunning joins a running job")
	close(g2.open)
	require.NoError(t, again.Wait(context.Background()))
	fetch, err := s.Submit(context.Background(), Job{Type: "fetch"}, g2.fn)
	require.NoError(t, err)
	require.NoError(t, fetch.Wait(context.Background()))
	assert.EqualValues(t, 2, s.Stats().Joins)
}
