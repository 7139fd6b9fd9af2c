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
	assert.ErrorIs(t, running.Wait(context.Background()), context.Canceled, "its function returned its context's error")
	for _, h := range []fairsched.Handle{queued[0], queued[2]} {
		require.NoError(t, h.Wait(context.Background()), "the others run")
	}
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
