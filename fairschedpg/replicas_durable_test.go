package fairschedpg_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedpg/internal/pgtest"
)

// Durable jobs across replicas: the leader keeps them, in the database,
// and runs each attempt on a replica that has its type's handler, within
// the cluster's limits and each replica's capacity.

// durableRun is one attempt of a test's durable job, as its handler saw
// it.
type durableRun struct {
	replica string
	n       int // the job's argument
	id      int64
	attempt int
}

// durableReplica starts replica name of capacity on schema, in a
// cluster of slots slots, with a handler of type "mail" (unless fn is
// nil) that sends each attempt to got, then returns what fn returns.
func durableReplica(t *testing.T, schema, name string, capacity, slots int, got chan<- durableRun,
	fn func(ctx context.Context, n int) error, types map[string]fairsched.TypeConfig) *fairsched.Scheduler {
	t.Helper()
	cfg := fairsched.Config{MaxConcurrency: slots, Store: openReplicaStore(t, schema), Types: types,
		Replica: &fairsched.Replica{Name: name, Capacity: capacity, Lease: time.Second}}
	if fn != nil {
		var h fairsched.Handlers
		fairsched.AddHandler(&h, "mail", func(ctx context.Context, m mail) error {
			got <- durableRun{replica: name, n: m.N, id: fairsched.JobID(ctx), attempt: fairsched.Attempt(ctx)}
			return fn(ctx, m.N)
		})
		cfg.Handlers = &h
	}
	s, err := fairsched.New(cfg)
	require.NoError(t, err)
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { assert.NoError(t, s.Close()) }) })
	return s
}

// jobState returns job id's state and attempts as the database has them.
func jobState(t *testing.T, pool *pgxpool.Pool, id int64) (state, attempts int) {
	t.Helper()
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT state, attempt FROM fairsched_jobs WHERE id = $1`, id).Scan(&state, &attempts))
	return state, attempts
}

// The store's states (internal/store).
const (
	stateCompleted = 3
	stateEnded     = 4
	stateDead      = 5
)

// 40 durable jobs enqueued on two replicas with the handler run once
// each, never on the replica without it, never more than the cluster's
// 3 at once nor more than a replica's capacity of 2 on one; the calling
// replica's Handle has the job's ID, not its end.
func TestReplicasRunDurableJobs(t *testing.T) {
	pool, schema := pgtest.PoolSchema(t)
	const slots, capacity, jobs = 3, 2, 40
	got := make(chan durableRun, jobs)
	var running, most atomic.Int32
	var mu sync.Mutex
	perReplica, mostPer := map[string]int{}, map[string]int{}
	work := func(name string) func(ctx context.Context, n int) error {
		return func(ctx context.Context, n int) error {
			mu.Lock()
			perReplica[name]++
			mostPer[name] = max(mostPer[name], perReplica[name])
			mu.Unlock()
			r := running.Add(1)
			for m := most.Load(); r > m && !most.CompareAndSwap(m, r); m = most.Load() {
			}
			time.Sleep(2 * time.Millisecond) // long enough to overlap, if the limits let it
			running.Add(-1)
			mu.Lock()
			perReplica[name]--
			mu.Unlock()
			return nil
		}
	}
	durableReplica(t, schema, "a-none", capacity, slots, nil, nil, nil) // first by name: packing would pick it, but it has no handler
	b := durableReplica(t, schema, "b", capacity, slots, got, work("b"), nil)
	c := durableReplica(t, schema, "c", capacity, slots, got, work("c"), nil)
	var ids []int64
	var hs []fairsched.Handle
	for i := range jobs {
		s := []*fairsched.Scheduler{b, c}[i%2]
		h, err := s.Enqueue(context.Background(), fairsched.Job{Type: "mail", Key: "k"}, mail{N: i})
		require.NoError(t, err)
		require.Positive(t, h.ID())
		hs = append(hs, h)
		ids = append(ids, h.ID())
	}
	seen := map[int]int{}
	for range jobs {
		select {
		case r := <-got:
			seen[r.n]++
			assert.Equal(t, 1, r.attempt)
			assert.Contains(t, []string{"b", "c"}, r.replica)
		case <-time.After(time.Minute):
			t.Fatalf("%d of %d jobs ran in a minute", len(seen), jobs)
		}
	}
	for i := range jobs {
		assert.Equal(t, 1, seen[i], "job %d ran once", i)
	}
	for i, h := range hs {
		require.NoError(t, waitHandle(t, h))
		state, _ := jobState(t, pool, ids[i])
		assert.Equal(t, stateCompleted, state)
	}
	assert.LessOrEqual(t, most.Load(), int32(slots), "the cluster's limit")
	for name, n := range mostPer {
		assert.LessOrEqual(t, n, capacity, "replica %s's capacity", name)
	}
}

// A durable job's failed attempt is retried by its type's policy, on any
// replica with its handler, and a permanent failure makes it dead in the
// database.
func TestReplicasRetryDurableJobs(t *testing.T) {
	pool, schema := pgtest.PoolSchema(t)
	got := make(chan durableRun, 8)
	types := map[string]fairsched.TypeConfig{"mail": {Retry: fairsched.RetryPolicy{Attempts: 3, Backoff: time.Millisecond}}}
	fail := func(ctx context.Context, n int) error {
		switch {
		case n == 2:
			return fairsched.Permanent(errors.New("no such mailbox"))
		case fairsched.Attempt(ctx) == 1:
			return errors.New("try again")
		}
		return nil
	}
	a := durableReplica(t, schema, "a", 1, 2, got, fail, types)
	durableReplica(t, schema, "b", 1, 2, got, fail, types)
	retried, err := a.Enqueue(context.Background(), fairsched.Job{Type: "mail"}, mail{N: 1})
	require.NoError(t, err)
	for attempt := 1; attempt <= 2; attempt++ {
		r := <-got
		assert.Equal(t, durableRun{replica: r.replica, n: 1, id: retried.ID(), attempt: attempt}, r)
	}
	require.NoError(t, waitHandle(t, retried), "the Handle of Enqueue on a replica has the job's end")
	state, attempts := jobState(t, pool, retried.ID())
	assert.Equal(t, stateCompleted, state)
	assert.Equal(t, 2, attempts)

	dead, err := a.Enqueue(context.Background(), fairsched.Job{Type: "mail"}, mail{N: 2})
	require.NoError(t, err)
	r := <-got
	assert.Equal(t, 1, r.attempt)
	assert.ErrorContains(t, waitHandle(t, dead), "no such mailbox")
	state, _ = jobState(t, pool, dead.ID())
	assert.Equal(t, stateDead, state)
}

// waitHandle waits for h's job to end, and returns its error (the minute
// is a deadlock's bound).
func waitHandle(t *testing.T, h fairsched.Handle) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := h.Wait(ctx)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "job %d has not ended in a minute", h.ID())
	return err
}

// The Handle of a job enqueued on a replica ends, when the replica closes
// before the job ends, with ErrKept, as the Handle of a durable job one
// process takes out of memory does: the job goes on in the cluster, and
// completes. A Handle nobody waited for has no wait to end.
func TestReplicaHandleAtClose(t *testing.T) {
	_, schema := pgtest.PoolSchema(t)
	got := make(chan durableRun, 2)
	release := make(chan struct{})
	hold := func(ctx context.Context, n int) error {
		<-release
		return nil
	}
	a := durableReplica(t, schema, "a", 1, 2, got, hold, nil)
	b := durableReplica(t, schema, "b", 1, 2, got, hold, nil)
	waitFor(t, "a to lead", func() bool { return a.Stats().Replica.Leader })
	h, err := b.Enqueue(context.Background(), fairsched.Job{Type: "mail"}, mail{N: 1})
	require.NoError(t, err)
	require.Equal(t, "a", (<-got).replica, "packed on a")
	done := h.Done()
	select {
	case <-done:
		t.Fatal("the Handle ended before its job")
	default:
	}
	assert.NoError(t, h.Err(), "not ended yet")
	require.NoError(t, b.Close())
	<-done
	assert.ErrorIs(t, h.Err(), fairsched.ErrKept)
	close(release)
	a2, err := a.Enqueue(context.Background(), fairsched.Job{Type: "mail"}, mail{N: 2})
	require.NoError(t, err)
	<-got
	require.NoError(t, waitHandle(t, a2), "the job a enqueued itself, a leader's")
}

// The leader leaves while a durable attempt runs on another replica: the
// next leader finds the attempt running in the database, adopts it where
// the replica says it runs, and records its end: it runs once. A replica
// that closes while it runs an attempt loses it, and the job runs again
// on another replica.
func TestReplicasDurableAcrossFailover(t *testing.T) {
	pool, schema := pgtest.PoolSchema(t)
	got := make(chan durableRun, 4)
	release := make(chan struct{})
	hold := func(ctx context.Context, n int) error {
		switch n {
		case 1:
			<-release
			return nil
		case 3: // a probe: the new term grants
			return nil
		}
		<-ctx.Done() // n == 2: runs until its replica closes
		return ctx.Err()
	}
	types := map[string]fairsched.TypeConfig{"mail": {Retry: fairsched.RetryPolicy{Attempts: 3, Backoff: time.Millisecond}}}
	first := durableReplica(t, schema, "a", 1, 4, nil, nil, types)
	waitFor(t, "a to lead", func() bool { return first.Stats().Replica.Leader })
	b := durableReplica(t, schema, "b", 2, 4, got, hold, types)
	adopted, err := b.Enqueue(context.Background(), fairsched.Job{Type: "mail"}, mail{N: 1})
	require.NoError(t, err)
	r := <-got
	require.Equal(t, "b", r.replica)
	require.NoError(t, first.Close()) // the leader leaves; b leads next
	waitFor(t, "b to lead", func() bool { return b.Stats().Replica.Leader })
	// The attempt ends once b's term grants (a probe ran): an end reported
	// to the term that is over, in the moment between the two, is lost
	// with it, and the job runs again (at least once).
	_, err = b.Enqueue(context.Background(), fairsched.Job{Type: "mail"}, mail{N: 3})
	require.NoError(t, err)
	require.Equal(t, 3, (<-got).n)
	close(release)
	require.NoError(t, waitHandle(t, adopted))
	_, attempts := jobState(t, pool, adopted.ID())
	assert.Equal(t, 1, attempts, "adopted, not run again")

	c := durableReplica(t, schema, "c", 1, 4, got, hold, types)
	lost, err := c.Enqueue(context.Background(), fairsched.Job{Type: "mail"}, mail{N: 2})
	require.NoError(t, err)
	r = <-got // on b or c, whichever the leader placed it on
	closing := map[string]*fairsched.Scheduler{"b": b, "c": c}[r.replica]
	other := map[string]string{"b": "c", "c": "b"}[r.replica]
	require.NoError(t, closing.Close())
	r = <-got
	// The retry is attempt 2, or 3 when the leader closed: the term that
	// started attempt 2 may end before its Run reaches the other
	// replica, and the next leader, finding it running on no replica,
	// counts it lost too.
	assert.Contains(t, []int{2, 3}, r.attempt)
	r.attempt = 0
	assert.Equal(t, durableRun{replica: other, n: 2, id: lost.ID()}, r, "lost, then run again elsewhere")
}

// Grants pack: with 4 replicas of 2 slots each and load for 1.5 of them
// (the cluster's limit, 3), the first two by name run every durable job
// and the other two stay idle, and the overflow hook, which fires only
// when work waits for a replica's capacity, does not fire. Once the limit
// is raised past what the replicas hold, work waits for capacity and the
// hook fires, with every replica busy.
func TestReplicasPackDurableJobs(t *testing.T) {
	_, schema := pgtest.PoolSchema(t)
	const capacity, jobs = 2, 60
	got := make(chan durableRun, 4*jobs)
	spilled := make(chan int, 16)
	release := make(chan struct{})
	hold := func(ctx context.Context, n int) error {
		if n < 0 { // the second phase's: run until released
			<-release
			return nil
		}
		time.Sleep(3 * time.Millisecond)
		return nil
	}
	names := []string{"r1", "r2", "r3", "r4"}
	ss := map[string]*fairsched.Scheduler{}
	for _, name := range names {
		cfg := fairsched.Config{MaxConcurrency: 3, Store: openReplicaStore(t, schema),
			Replica: &fairsched.Replica{Name: name, Capacity: capacity, Lease: time.Second,
				Overflow:      func(_ context.Context, waiting int) error { spilled <- waiting; return nil },
				OverflowAfter: 200 * time.Millisecond, OverflowEvery: time.Hour}}
		var h fairsched.Handlers
		fairsched.AddHandler(&h, "mail", func(ctx context.Context, m mail) error {
			got <- durableRun{replica: name, n: m.N}
			return hold(ctx, m.N)
		})
		cfg.Handlers = &h
		s, err := fairsched.New(cfg)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, s.Close()) })
		ss[name] = s
	}
	// A call on each replica: granted, it shows that the leader has read
	// the replica's Hello, so that the jobs are placed knowing all four.
	busy := map[string]time.Duration{}
	for _, name := range names {
		require.NoError(t, ss[name].RunSync(context.Background(), fairsched.Job{}, func(context.Context) error { return nil }))
		busy[name] = ss[name].Stats().Replica.Busy
	}
	params := make([]fairsched.EnqueueParams, jobs)
	for i := range params {
		params[i] = fairsched.EnqueueParams{Job: fairsched.Job{Type: "mail"}, Args: mail{N: i}}
	}
	_, err := ss["r4"].EnqueueMany(context.Background(), params)
	require.NoError(t, err)
	ran := map[string]int{}
	for range jobs {
		select {
		case r := <-got:
			ran[r.replica]++
		case <-time.After(time.Minute):
			t.Fatalf("the jobs did not all run in a minute: %v", ran)
		}
	}
	assert.Equal(t, jobs, ran["r1"]+ran["r2"], "r1 and r2 ran every job: %v", ran)
	assert.Zero(t, ran["r3"]+ran["r4"], "r3 and r4 stayed idle: %v", ran)
	assert.Positive(t, ran["r2"], "r1's 2 slots are not the limit's 3: r2 took the third")
	for _, name := range []string{"r3", "r4"} {
		assert.Equal(t, busy[name], ss[name].Stats().Replica.Busy, "replica %s's busy time: the call's only", name)
	}
	select {
	case n := <-spilled:
		t.Fatalf("the overflow hook fired (%d waiting) while the cluster's limit, not capacity, held the work", n)
	default:
	}

	// Raised past the replicas' 8 slots, the limit holds nothing: 10
	// jobs that run until released fill every replica, 2 wait for
	// capacity, and the hook fires.
	require.NoError(t, ss["r1"].SetMaxConcurrency(100))
	waitFor(t, "the limit raised on every replica", func() bool {
		for _, s := range ss {
			if s.Stats().MaxConcurrency != 100 {
				return false
			}
		}
		return true
	})
	for i := range 10 {
		_, err := ss["r4"].Enqueue(context.Background(), fairsched.Job{Type: "mail"}, mail{N: -1 - i})
		require.NoError(t, err)
	}
	for range 8 {
		<-got
	}
	select {
	case n := <-spilled:
		assert.Equal(t, 2, n, "two jobs wait for a replica's free slot")
	case <-time.After(time.Minute):
		t.Fatal("the overflow hook did not fire")
	}
	close(release)
	for range 2 {
		<-got
	}
}

// A durable job enqueued on a replica carries its admission: its aging
// clock runs from its Enqueue and its type's StartTimeout from then (it
// used to reach the leader submitted at the Unix epoch: at once past any
// start deadline, expired unrun, and at its aging ceiling).
func TestReplicaEnqueueStampsJobs(t *testing.T) {
	pool, schema := pgtest.PoolSchema(t)
	got := make(chan durableRun, 1)
	types := map[string]fairsched.TypeConfig{"mail": {StartTimeout: time.Hour}}
	a := durableReplica(t, schema, "a", 1, 1, got, func(context.Context, int) error { return nil }, types)
	before := time.Now()
	h, err := a.Enqueue(context.Background(), fairsched.Job{Type: "mail", Key: "k"}, mail{N: 1})
	after := time.Now()
	require.NoError(t, err)
	var submitted, startBy int64
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT submitted, start_by FROM fairsched_jobs WHERE id = $1`, h.ID()).Scan(&submitted, &startBy))
	assert.GreaterOrEqual(t, submitted, before.UnixMicro())
	assert.LessOrEqual(t, submitted, after.UnixMicro())
	assert.Equal(t, time.Hour.Microseconds(), startBy-submitted, "its type's StartTimeout from its Enqueue")
	r := <-got
	assert.Equal(t, h.ID(), r.id, "it runs")
	require.NoError(t, waitHandle(t, h))
}
