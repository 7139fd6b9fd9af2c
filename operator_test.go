package fairsched_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedsqlite"
	"github.com/fairsched/fairsched/fairschedtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The calls an operator makes with what the admin page shows, a job's
// number or a (type, ID) pair, where a program would hold a Handle.

// Cancel by number ends a queued job as its Handle's Cancel would, and
// cancels a running one's context; a number of no live job is false.
func TestSchedulerCancelBySeq(t *testing.T) {
	s, err := fairsched.New(fairsched.Config{MaxConcurrency: 1})
	require.NoError(t, err)
	defer s.Close()
	started := make(chan struct{})
	running, err := s.Submit(context.Background(), fairsched.Job{Key: "a"}, func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})
	require.NoError(t, err)
	<-started
	var queued []fairsched.Handle
	for _, key := range []string{"a", "b", "b"} {
		h, err := s.Submit(context.Background(), fairsched.Job{Key: key}, func(context.Context) error { return nil })
		require.NoError(t, err)
		queued = append(queued, h)
	}

	require.True(t, s.Cancel(queued[1].Seq()))
	select {
	case <-queued[1].Done():
	default:
		t.Fatal("a queued job cancelled by its number has not ended at once")
	}
	assert.ErrorIs(t, queued[1].Err(), context.Canceled)
	assert.Equal(t, 3, len(s.Snapshot()), "the running job and two queued")
	assert.False(t, s.Cancel(queued[1].Seq()), "an ended job")
	assert.False(t, s.Cancel(1<<40), "a number never given")

	// Jobs set aside, out of every order: one not before an hour from
	// now, and one that runs after it.
	later, err := s.Submit(context.Background(), fairsched.Job{Key: "c", NotBefore: time.Now().Add(time.Hour)}, func(context.Context) error { return nil })
	require.NoError(t, err)
	after, err := s.Submit(context.Background(), fairsched.Job{Key: "c", After: []fairsched.Handle{later}}, func(context.Context) error { return nil })
	require.NoError(t, err)
	require.True(t, s.Cancel(after.Seq()), "a job waiting for another")
	assert.ErrorIs(t, after.Err(), context.Canceled)
	require.True(t, s.Cancel(later.Seq()), "a delayed job")
	assert.ErrorIs(t, later.Err(), context.Canceled)

	require.True(t, s.Cancel(running.Seq()))
	// Bounded, so that a Cancel that leaves a running job alone fails
	// here instead of hanging the test.
	bounded, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	assert.ErrorIs(t, running.Wait(bounded), context.Canceled, "its function returned its context's error")
	for _, h := range []fairsched.Handle{queued[0], queued[2]} {
		require.NoError(t, h.Wait(bounded), "the others run")
	}
}

// Cancel by number of a RunSync job, queued or running: its caller gets
// context.Canceled.
func TestSchedulerCancelBySeqRunSync(t *testing.T) {
	submitted, started := make(chan uint64, 4), make(chan uint64, 4)
	s, err := fairsched.New(fairsched.Config{MaxConcurrency: 1, OnEvent: func(ev fairsched.Event) {
		switch {
		case ev.Key != "sync":
		case ev.Kind == fairsched.EventSubmitted:
			submitted <- ev.Seq
		case ev.Kind == fairsched.EventStarted:
			started <- ev.Seq
		}
	}})
	require.NoError(t, err)
	defer s.Close()
	bounded, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hold := make(chan struct{})
	holder, err := s.Submit(context.Background(), fairsched.Job{Key: "holder"}, func(context.Context) error { <-hold; return nil })
	require.NoError(t, err)

	queued := make(chan error, 1)
	go func() {
		queued <- s.RunSync(bounded, fairsched.Job{Key: "sync"}, func(context.Context) error { return nil })
	}()
	require.True(t, s.Cancel(<-submitted), "queued behind the holder")
	assert.ErrorIs(t, <-queued, context.Canceled)

	close(hold)
	require.NoError(t, holder.Wait(bounded))
	running := make(chan error, 1)
	go func() {
		running <- s.RunSync(bounded, fairsched.Job{Key: "sync"}, func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		})
	}()
	<-submitted
	require.True(t, s.Cancel(<-started), "running")
	assert.ErrorIs(t, <-running, context.Canceled)
	assert.EqualValues(t, 1, s.Stats().Cancelled, "the queued one")
}

// Cancel by number of a job that duplicates joined cancels it for every
// submission attached to it.
func TestSchedulerCancelBySeqJoined(t *testing.T) {
	s, err := fairsched.New(fairsched.Config{MaxConcurrency: 1, Types: map[string]fairsched.TypeConfig{
		"fetch": {Duplicates: fairsched.JoinQueued}}})
	require.NoError(t, err)
	defer s.Close()
	bounded, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hold := make(chan struct{})
	holder, err := s.Submit(context.Background(), fairsched.Job{}, func(context.Context) error { <-hold; return nil })
	require.NoError(t, err)
	ran := make(chan struct{}, 2)
	var joined []fairsched.Handle
	for range 2 {
		h, err := s.Submit(context.Background(), fairsched.Job{Type: "fetch", ID: "x"}, func(context.Context) error { ran <- struct{}{}; return nil })
		require.NoError(t, err)
		joined = append(joined, h)
	}
	require.Equal(t, joined[0].Seq(), joined[1].Seq(), "one job")
	require.EqualValues(t, 1, s.Stats().Joins)

	require.True(t, s.Cancel(joined[1].Seq()))
	for i, h := range joined {
		assert.ErrorIs(t, h.Wait(bounded), context.Canceled, "submission %d", i)
	}
	st := s.Stats()
	assert.EqualValues(t, 1, st.Cancelled, "one job cancelled")
	assert.Equal(t, 1, st.Running+st.Queued, "the holder alone")
	close(hold)
	require.NoError(t, holder.Wait(bounded))
	assert.Empty(t, ran, "the joined job never ran")
}

// A durable job cancelled by its number is recorded in the Store as one
// cancelled by its Handle.
func TestSchedulerCancelBySeqDurable(t *testing.T) {
	st, err := fairschedsqlite.Open(filepath.Join(t.TempDir(), "jobs.db"))
	require.NoError(t, err)
	defer st.Close()
	var handlers fairsched.Handlers
	hold := make(chan struct{})
	fairsched.AddHandler(&handlers, "mail", func(ctx context.Context, to string) error {
		if to == "first" {
			<-hold
		}
		return nil
	})
	s, err := fairsched.New(fairsched.Config{MaxConcurrency: 1, Store: st, Handlers: &handlers})
	require.NoError(t, err)
	var hs []fairsched.Handle
	for _, to := range []string{"first", "by-handle", "by-seq"} {
		h, err := s.Enqueue(context.Background(), fairsched.Job{Type: "mail"}, to)
		require.NoError(t, err)
		hs = append(hs, h)
	}
	hs[1].Cancel()
	require.True(t, s.Cancel(hs[2].Seq()))
	close(hold)
	require.NoError(t, hs[0].Wait(context.Background()))
	assert.ErrorIs(t, hs[2].Err(), context.Canceled)
	require.NoError(t, s.Shutdown(context.Background()), "Shutdown flushes the store")

	stored := func(id int64) (state int, why string) {
		t.Helper()
		var e sql.NullString
		require.NoError(t, st.DB().QueryRow("SELECT state, error FROM fairsched_jobs WHERE id = ?", id).Scan(&state, &e))
		return state, e.String
	}
	byHandle, whyHandle := stored(hs[1].ID())
	bySeq, whySeq := stored(hs[2].ID())
	assert.Equal(t, byHandle, bySeq, "the same state in the store")
	assert.Equal(t, whyHandle, whySeq, "the same error in the store")
	assert.NotEmpty(t, whySeq)
}

// Disable by hand turns a pair's submissions away for a time, or until
// Enable; other pairs and the pair's queued jobs are not touched.
func TestSchedulerDisableByHand(t *testing.T) {
	clk := fairschedtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := fairsched.New(fairsched.Config{MaxConcurrency: 1, Clock: clk, Types: map[string]fairsched.TypeConfig{"sync": {}}})
	require.NoError(t, err)
	defer s.Close()
	repo := fairsched.Job{Type: "sync", ID: "repo"}
	s.PauseType("sync")
	queued, err := s.Submit(context.Background(), repo, func(context.Context) error { return nil })
	require.NoError(t, err)

	require.NoError(t, s.Disable("sync", "repo", time.Minute))
	_, err = s.Submit(context.Background(), repo, func(context.Context) error { return nil })
	require.ErrorIs(t, err, fairsched.ErrDisabled)
	require.NoError(t, s.RunSync(context.Background(), fairsched.Job{ID: "repo"}, func(context.Context) error { return nil }), "another type's pair")
	assert.Equal(t, []fairsched.DisabledPair{{Type: "sync", ID: "repo", Since: clk.Now(), Until: clk.Now().Add(time.Minute)}}, s.Disabled())
	assert.EqualValues(t, 1, s.Stats().DisabledTotal)
	require.NoError(t, s.ResumeType("sync"))
	require.NoError(t, queued.Wait(context.Background()), "the job queued before runs")

	clk.Advance(time.Minute)
	assert.Empty(t, s.Disabled(), "its minute is up")
	require.NoError(t, s.RunSync(context.Background(), repo, func(context.Context) error { return nil }))

	require.NoError(t, s.Disable("sync", "repo", 0))
	clk.Advance(24 * time.Hour)
	assert.ErrorIs(t, s.RunSync(context.Background(), repo, func(context.Context) error { return nil }), fairsched.ErrDisabled, "until Enable")
	s.Enable("sync", "repo")
	require.NoError(t, s.RunSync(context.Background(), repo, func(context.Context) error { return nil }))

	assert.ErrorIs(t, s.Disable("nope", "repo", 0), fairsched.ErrUnknownType)
	assert.Empty(t, s.Disabled())
}
