package fairschedpg_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedpg/internal/pgtest"
)

// A durable job enqueued on one replica runs after durable jobs enqueued
// on another (Job.After, with their Handles): the leader holds it until
// they complete, and ends it without running it if one fails. A Submit
// or RunSync job runs after its own replica's Submit jobs, on every
// replica, the leader or not; not after a durable job.
func TestReplicasDurableAfter(t *testing.T) {
	pool, schema := pgtest.PoolSchema(t)
	ctx := context.Background()
	const (
		first, second = 1, 2 // second runs after first
		failing, held = 3, 4 // held runs after failing, which fails for good
	)
	release := make(chan struct{})
	var firstEnded atomic.Bool
	got := make(chan durableRun, 10)
	work := func(ctx context.Context, n int) error {
		switch n {
		case first:
			<-release
			firstEnded.Store(true)
		case failing:
			return fairsched.Permanent(errors.New("no such mailbox"))
		}
		return nil
	}
	b := durableReplica(t, schema, "b", 2, 4, got, work, nil)
	c := durableReplica(t, schema, "c", 2, 4, got, work, nil)

	h1, err := b.Enqueue(ctx, fairsched.Job{Type: "mail", Key: "k"}, mail{N: first})
	require.NoError(t, err)
	h2, err := c.Enqueue(ctx, fairsched.Job{Type: "mail", Key: "k", After: []fairsched.Handle{h1}}, mail{N: second})
	require.NoError(t, err, "a job of another replica's, by its Handle")
	r := nextRun(t, got)
	require.Equal(t, first, r.n, "the first job starts; the second waits for it")
	close(release)
	r = nextRun(t, got)
	require.Equal(t, second, r.n)
	assert.True(t, firstEnded.Load(), "the second job started after the first had ended")
	require.NoError(t, waitHandle(t, h2))

	h3, err := b.Enqueue(ctx, fairsched.Job{Type: "mail", Key: "k"}, mail{N: failing})
	require.NoError(t, err)
	h4, err := c.Enqueue(ctx, fairsched.Job{Type: "mail", Key: "k", After: []fairsched.Handle{h3}}, mail{N: held})
	require.NoError(t, err)
	assert.ErrorContains(t, waitHandle(t, h4), "no such mailbox", "ended: a job it runs after failed")
	r = nextRun(t, got)
	assert.Equal(t, failing, r.n)
	select {
	case r := <-got:
		t.Fatalf("job %d ran, after a job that failed", r.n)
	default:
	}
	var why string
	require.NoError(t, pool.QueryRow(ctx, `SELECT error FROM fairsched_jobs WHERE id = $1`, h4.ID()).Scan(&why))
	assert.Contains(t, why, "did not complete")

	for _, s := range []*fairsched.Scheduler{b, c} { // one of them leads
		gate := make(chan struct{})
		var ended atomic.Bool
		before, err := s.Submit(ctx, fairsched.Job{Key: "k"}, func(context.Context) error { <-gate; ended.Store(true); return nil })
		require.NoError(t, err)
		var afterRan atomic.Bool
		after, err := s.Submit(ctx, fairsched.Job{Key: "k", After: []fairsched.Handle{before}}, func(context.Context) error {
			afterRan.Store(ended.Load())
			return nil
		})
		require.NoError(t, err)
		broken, err := s.Submit(ctx, fairsched.Job{Key: "k"}, func(context.Context) error { <-gate; return errors.New("broken pipe") })
		require.NoError(t, err)
		never, err := s.Submit(ctx, fairsched.Job{Key: "k", After: []fairsched.Handle{before, broken}}, func(context.Context) error {
			t.Error("a job ran after one that failed")
			return nil
		})
		require.NoError(t, err)
		close(gate)
		require.NoError(t, s.RunSync(ctx, fairsched.Job{Key: "k", After: []fairsched.Handle{after}}, func(context.Context) error { return nil }))
		assert.True(t, afterRan.Load(), "it ran once the job before it had ended")
		err = never.Wait(ctx)
		assert.ErrorIs(t, err, fairsched.ErrDependency)
		assert.ErrorContains(t, err, "broken pipe")

		_, err = s.Enqueue(ctx, fairsched.Job{Type: "mail", Key: "k", After: []fairsched.Handle{before}}, mail{N: 5})
		assert.ErrorContains(t, err, "not durable", "a durable job after a Submit job")
	}
	// A Submit job after a durable job, even one its own replica enqueued:
	// refused, on the leader too.
	for _, sh := range []struct {
		s *fairsched.Scheduler
		h fairsched.Handle
	}{{b, h1}, {c, h2}} {
		_, err := sh.s.Submit(ctx, fairsched.Job{Key: "k", After: []fairsched.Handle{sh.h}}, func(context.Context) error { return nil })
		assert.ErrorContains(t, err, "run after its Submit jobs only")
	}
}

// nextRun returns the next run got tells of (the minute is a deadlock's
// bound).
func nextRun(t *testing.T, got <-chan durableRun) durableRun {
	t.Helper()
	select {
	case r := <-got:
		return r
	case <-time.After(time.Minute):
		t.Fatal("waited a minute for a job to run")
		return durableRun{}
	}
}
