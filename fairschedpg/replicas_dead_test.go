package fairschedpg_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedpg/internal/pgtest"
)

// A durable job that dies is the cluster's: every replica lists it
// (DeadJobs, so the admin page of any replica shows it), and RetryDead on
// any replica, not the one that enqueued it, queues it again for one more
// attempt, which the leader runs; once retried it is dead nowhere, and a
// second retry of it is refused.
func TestReplicasDeadJobs(t *testing.T) {
	pool, schema := pgtest.PoolSchema(t)
	got := make(chan durableRun, 4)
	types := map[string]fairsched.TypeConfig{"mail": {StartTimeout: time.Hour}}
	fail := func(ctx context.Context, n int) error {
		if fairsched.Attempt(ctx) == 1 {
			return fairsched.Permanent(errors.New("no such mailbox"))
		}
		return nil
	}
	ss := map[string]*fairsched.Scheduler{
		"a": durableReplica(t, schema, "a", 1, 3, got, fail, types),
		"b": durableReplica(t, schema, "b", 1, 3, got, fail, types),
		"c": durableReplica(t, schema, "c", 1, 3, got, fail, types),
	}
	h, err := ss["a"].Enqueue(context.Background(), fairsched.Job{Type: "mail", Key: "k", ID: "box-7"}, mail{N: 7})
	require.NoError(t, err)
	r := <-got
	assert.Equal(t, 1, r.attempt)
	require.Error(t, waitHandle(t, h))

	seqs := map[string]uint64{}
	for name, s := range ss {
		dead := s.DeadJobs()
		require.Len(t, dead, 1, "replica %s lists the cluster's dead job", name)
		d := dead[0]
		assert.Equal(t, fairsched.Job{Type: "mail", Key: "k", ID: "box-7"}, d.Job, "replica %s", name)
		require.Len(t, d.Attempts, 1)
		assert.ErrorContains(t, d.Err, "no such mailbox")
		assert.ErrorContains(t, d.Attempts[0].Err, "no such mailbox")
		assert.False(t, d.Died.IsZero())
		seqs[name] = d.Seq
		again := s.DeadJobs() // listed again: the same number
		require.Len(t, again, 1)
		assert.Equal(t, d.Seq, again[0].Seq, "replica %s numbers the job once", name)
	}
	leader := leaderOf(t, ss)
	assert.Equal(t, 1, ss[leader].Stats().Cluster.Dead, "the leader counts it dead")

	// Retried on a replica that neither enqueued it nor leads.
	var other string
	for name := range ss {
		if name != "a" && name != leader {
			other = name
			break
		}
	}
	var submitted int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT submitted FROM fairsched_jobs WHERE id = $1`, h.ID()).Scan(&submitted))
	retriedAt := time.Now()
	retried, err := ss[other].RetryDead(seqs[other])
	require.NoError(t, err)
	assert.Equal(t, h.ID(), retried.ID(), "the same job, queued again")
	r = <-got
	assert.Equal(t, durableRun{replica: r.replica, n: 7, id: h.ID(), attempt: 2}, r, "its attempts go on")
	require.NoError(t, waitHandle(t, retried), "RetryDead's Handle has the job's end")
	_, attempts := jobState(t, pool, h.ID())
	assert.Equal(t, 2, attempts)
	var resubmitted, startBy int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT submitted, start_by FROM fairsched_jobs WHERE id = $1`, h.ID()).Scan(&resubmitted, &startBy))
	assert.GreaterOrEqual(t, resubmitted, retriedAt.UnixMicro(), "a fresh aging clock, from the retry (first %d)", submitted)
	assert.Equal(t, time.Hour.Microseconds(), startBy-resubmitted, "its type's StartTimeout from the retry")
	for name, s := range ss {
		assert.Empty(t, s.DeadJobs(), "replica %s", name)
	}
	waitFor(t, "the leader to forget it as dead", func() bool { return ss[leader].Stats().Cluster.Dead == 0 })

	// Listed on a, retried on c meanwhile: a's retry is refused, and
	// queues nothing more.
	_, err = ss["a"].RetryDead(seqs["a"])
	assert.ErrorIs(t, err, fairsched.ErrNotDead)
	select {
	case r := <-got:
		t.Fatalf("a second retry ran: %+v", r)
	default:
	}
	_, attempts = jobState(t, pool, h.ID())
	assert.Equal(t, 2, attempts)
}
