package fairsched

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every accepted job has a sequence number, unique and in submission
// order, the same on its Handle, in Snapshot and in its Events.
func TestJobIdentity(t *testing.T) {
	var log eventLog
	s := newTestScheduler(t, Config{MaxConcurrency: 1, OnEvent: log.hook})
	g := newGate()
	var hs []Handle
	for i := 0; i < 5; i++ {
		h, err := s.Submit(context.Background(), Job{Key: "k"}, g.fn)
		require.NoError(t, err)
		hs = append(hs, h)
	}
	for i, h := range hs {
		require.Equal(t, uint64(i+1), h.Seq(), "sequence numbers follow submission")
	}
	var snap []uint64
	for _, ji := range s.Snapshot() {
		snap = append(snap, ji.Seq)
	}
	require.Equal(t, []uint64{1, 2, 3, 4, 5}, snap)
	close(g.open)
	require.NoError(t, s.Shutdown(context.Background()))
	for _, e := range log.of(EventFinished) {
		require.Contains(t, []uint64{1, 2, 3, 4, 5}, e.Seq)
	}
	require.Len(t, log.of(EventFinished), 5)
}

// A Handle stays valid after its job ended, however many jobs ran since
// (RunSync records are reused; a Submit job's is not while a Handle holds
// it), and a copy is the same handle.
func TestHandleOutlivesItsJob(t *testing.T) {
	s := newTestScheduler(t, Config{MaxConcurrency: 2})
	boom := errors.New("boom")
	h, err := s.Submit(context.Background(), Job{}, func(context.Context) error { return boom })
	require.NoError(t, err)
	require.ErrorIs(t, h.Wait(context.Background()), boom)
	for i := 0; i < 200; i++ {
		require.NoError(t, s.RunSync(context.Background(), Job{}, noop))
		h2, err := s.Submit(context.Background(), Job{}, noop)
		require.NoError(t, err)
		require.NoError(t, h2.Wait(context.Background()))
	}
	c := h
	require.Equal(t, h, c)
	require.Equal(t, uint64(1), c.Seq())
	require.ErrorIs(t, c.Err(), boom, "the result is still the first job's")
	<-c.Done()
	c.Cancel() // does nothing: the job has ended
	require.ErrorIs(t, c.Wait(context.Background()), boom)
}

// The zero Handle refers to no job and says so, without panicking.
func TestZeroHandle(t *testing.T) {
	var h Handle
	require.Zero(t, h.Seq())
	<-h.Done()
	require.ErrorContains(t, h.Err(), "zero Handle")
	require.ErrorContains(t, h.Wait(context.Background()), "zero Handle")
	h.Cancel()
}

// A panic's error names the job it happened in.
func TestPanicErrorNamesTheJob(t *testing.T) {
	s := newTestScheduler(t, Config{})
	h, err := s.Submit(context.Background(), Job{}, func(context.Context) error { panic("oops") })
	require.NoError(t, err)
	var pe *PanicError
	require.ErrorAs(t, h.Wait(context.Background()), &pe)
	require.Equal(t, h.Seq(), pe.Seq)
	require.Equal(t, "oops", pe.Value)
	require.Contains(t, pe.Error(), "job 1 panicked")
}

// A PanicError's message is one line (the stack is in its field, not in
// what a handler might send to a client), and a panic(err) unwraps to err.
func TestPanicErrorOneLineAndUnwrap(t *testing.T) {
	s := newTestScheduler(t, Config{})
	boom := errors.New("boom")
	err := s.RunSync(context.Background(), Job{}, func(context.Context) error { panic(boom) })
	var pe *PanicError
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, boom, "a panic(err) unwraps to err")
	require.NotContains(t, err.Error(), "\n", "one line")
	require.Equal(t, "fairsched: job 1 panicked: boom", err.Error())
	require.Contains(t, string(pe.Stack), "TestPanicErrorOneLineAndUnwrap", "the stack is kept")
	err = s.RunSync(context.Background(), Job{}, func(context.Context) error { panic("text") })
	require.ErrorAs(t, err, &pe)
	require.Nil(t, pe.Unwrap(), "a panic with a non-error value wraps nothing")
}

// A nil context is a programming error: RunSync and Wait panic with a
// message that names it, not with a bare nil dereference, and the
// scheduler goes on working.
func TestNilContextPanicsNamingIt(t *testing.T) {
	s := newTestScheduler(t, Config{MaxConcurrency: 1})
	h, err := s.Submit(context.Background(), Job{}, noop)
	require.NoError(t, err)
	require.PanicsWithValue(t, "fairsched: RunSync with a nil context", func() { _ = s.RunSync(nil, Job{}, noop) })
	require.PanicsWithValue(t, "fairsched: Handle.Wait with a nil context", func() { _ = h.Wait(nil) })
	require.NoError(t, h.Wait(context.Background()))
	require.NoError(t, s.RunSync(context.Background(), Job{}, noop), "the scheduler still runs jobs")
	require.Zero(t, s.Stats().Running)
}

// A Submit job's context carries the values of the context it was
// submitted with, not its end nor its deadline: the job outlives the call
// that submitted it.
func TestSubmitContextCarriesValuesOnly(t *testing.T) {
	type key struct{}
	s := newTestScheduler(t, Config{MaxConcurrency: 1})
	g := newGate()
	blocker, err := s.Submit(context.Background(), Job{}, g.fn)
	require.NoError(t, err)
	<-g.entered
	parent, cancel := context.WithTimeout(context.WithValue(context.Background(), key{}, "trace-7"), time.Hour)
	type seen struct {
		value    any
		deadline bool
		err      error
	}
	got := make(chan seen, 1)
	h, err := s.Submit(parent, Job{}, func(ctx context.Context) error {
		_, hasDeadline := ctx.Deadline()
		got <- seen{ctx.Value(key{}), hasDeadline, ctx.Err()}
		return nil
	})
	require.NoError(t, err)
	cancel() // while the job is queued: it does not end the job
	close(g.open)
	require.NoError(t, blocker.Wait(context.Background()))
	require.NoError(t, h.Wait(context.Background()), "the job ran although its submitter's context ended")
	require.Equal(t, seen{value: "trace-7"}, <-got, "the value, no deadline, not ended")

	ended, cancelEnded := context.WithCancel(context.Background())
	cancelEnded()
	h, err = s.Submit(ended, Job{}, noop)
	require.NoError(t, err, "an ended context does not matter to Submit")
	require.NoError(t, h.Wait(context.Background()))
	require.PanicsWithValue(t, "fairsched: Submit with a nil context", func() { _, _ = s.Submit(nil, Job{}, noop) })
}
