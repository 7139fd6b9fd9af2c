package fairschedpg_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedpg"
	"github.com/fairsched/fairsched/fairschedpg/internal/pgtest"
)

// Two schedulers, each on a replica's Store of its own, as two processes
// would have: one cluster-wide limit of 2, and each a replica of
// capacity 2 that tells its own figures.
func TestReplicasThroughTheAPI(t *testing.T) {
	_, schema := pgtest.PoolSchema(t)
	var ss []*fairsched.Scheduler
	for _, name := range []string{"web-1", "web-2"} {
		st := openReplicaStore(t, schema)
		s, err := fairsched.New(fairsched.Config{MaxConcurrency: 2, Store: st,
			Replica: &fairsched.Replica{Name: name, Capacity: 2, Lease: time.Second}})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, s.Close()) })
		ss = append(ss, s)
	}
	var running, most atomic.Int32
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, ss[i%2].RunSync(context.Background(), fairsched.Job{Key: "k"}, func(context.Context) error {
				n := running.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				running.Add(-1)
				return nil
			}))
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, most.Load(), int32(2), "the cluster's limit")
	leaders := 0
	for i, s := range ss {
		st := s.Stats()
		require.NotNil(t, st.Replica)
		assert.Equal(t, []string{"web-1", "web-2"}[i], st.Replica.Name)
		assert.Equal(t, 2, st.Replica.Capacity)
		assert.EqualValues(t, 10, st.Completed, "a replica's figures are its own jobs'")
		assert.Positive(t, st.Replica.Busy+st.Replica.Idle)
		if st.Replica.Leader {
			leaders++
		}
	}
	assert.Equal(t, 1, leaders)
	assert.ErrorContains(t, ss[0].RegisterType("later", fairsched.TypeConfig{}), "registers its job types in Config.Types",
		"the leader decides by the types every replica has from New")
	assert.NoError(t, ss[0].RegisterType("", fairsched.TypeConfig{}), "a type known already, alike: nothing to do")
}

// openReplicaStore opens a replica's Store on schema, on a pool of its
// own, as a process of its own would; both close when the test ends.
func openReplicaStore(t *testing.T, schema string) *fairschedpg.Store {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), pgtest.Config(t, schema))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st, err := fairschedpg.OpenReplicaPool(context.Background(), pool)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, st.Close()) })
	return st
}

// waitFor waits until cond holds, reading it every few ms: a change made
// on one replica reaches the others through the database within a
// period (Lease/5), and the API signals its arrival nowhere, so the
// tests read Stats. The minute is a deadlock's bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// leaderOf waits for one of ss to lead, and returns it.
func leaderOf(t *testing.T, ss map[string]*fairsched.Scheduler) string {
	t.Helper()
	var leader string
	waitFor(t, "a leader", func() bool {
		for name, s := range ss {
			if s.Stats().Replica.Leader {
				leader = name
				return true
			}
		}
		return false
	})
	return leader
}

// mostAtOnce runs n jobs on each of ss at once, each a few ms long, and
// returns the most that ran at once across them.
func mostAtOnce(t *testing.T, ss map[string]*fairsched.Scheduler, n int) int32 {
	t.Helper()
	var runs []func(func(context.Context) error) error
	for _, s := range ss {
		runs = append(runs, func(fn func(context.Context) error) error {
			return s.RunSync(context.Background(), fairsched.Job{Key: "k"}, fn)
		})
	}
	return fairschedpg.MostAtOnce(t, runs, n)
}

// Run-time changes through the API: SetMaxConcurrency on a replica that
// does not lead holds for the whole cluster, and after the leader leaves;
// a key paused on one replica holds its jobs submitted on another.
func TestReplicasChangesThroughTheAPI(t *testing.T) {
	_, schema := pgtest.PoolSchema(t)
	ss := map[string]*fairsched.Scheduler{}
	for _, name := range []string{"web-1", "web-2", "web-3"} {
		st := openReplicaStore(t, schema)
		s, err := fairsched.New(fairsched.Config{MaxConcurrency: 4, Store: st,
			Replica: &fairsched.Replica{Name: name, Capacity: 2, Lease: time.Second}})
		require.NoError(t, err)
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { assert.NoError(t, s.Close()) }) })
		ss[name] = s
	}
	leader := leaderOf(t, ss)
	other := "web-1"
	if other == leader {
		other = "web-2"
	}
	require.NoError(t, ss[other].SetMaxConcurrency(1))
	// The leader's replica shows the change once its decisions have it.
	waitFor(t, "every replica to have the change", func() bool {
		for _, s := range ss {
			if s.Stats().MaxConcurrency != 1 {
				return false
			}
		}
		return true
	})
	assert.Equal(t, int32(1), mostAtOnce(t, ss, 4), "one at once in the cluster")

	// Neither the pauser nor the submitter leads: the leader has the
	// pause only from the log.
	pauser, submitter := other, "web-3"
	if submitter == leader {
		submitter = map[string]string{"web-1": "web-2", "web-2": "web-1"}[other]
	}
	ss[pauser].PauseKey("p")
	waitFor(t, "the leader to pause p", func() bool { return slices.Contains(ss[leader].Stats().PausedKeys, "p") })
	ran := make(chan struct{})
	h, err := ss[submitter].Submit(context.Background(), fairsched.Job{Key: "p"}, func(context.Context) error { close(ran); return nil })
	require.NoError(t, err)
	// A job of another key, submitted after it on the same replica, runs:
	// had p not been paused at the leader, p's job, asked for first with
	// a slot free, would have been granted first.
	require.NoError(t, ss[submitter].RunSync(context.Background(), fairsched.Job{Key: "q"}, func(context.Context) error { return nil }))
	select {
	case <-ran:
		t.Fatal("the paused key's job ran")
	default:
	}
	ss[submitter].ResumeKey("p")
	require.NoError(t, h.Wait(context.Background()))

	require.NoError(t, ss[leader].Close())
	delete(ss, leader)
	next := leaderOf(t, ss)
	assert.NotEqual(t, leader, next)
	assert.Equal(t, int32(1), mostAtOnce(t, ss, 4), "one at once under the next leader")
}

// Run-time changes are kept with the configuration they changed: a
// replica started later with that configuration, even once every other
// left, has them from New; one with another configuration (a deploy
// that changed it) starts from its own.
func TestReplicasChangesKeptWithTheirConfiguration(t *testing.T) {
	_, schema := pgtest.PoolSchema(t)
	start := startAs(t, schema, nil)
	a, err := start("web-1", 4)
	require.NoError(t, err)
	require.NoError(t, a.SetMaxConcurrency(2))
	a.PauseKey("p")
	require.NoError(t, a.Close()) // its changes are appended by then

	b, err := start("web-2", 4)
	require.NoError(t, err)
	assert.Equal(t, 2, b.Stats().MaxConcurrency, "the same configuration: the changes hold")
	assert.Equal(t, []string{"p"}, b.Stats().PausedKeys)
	require.NoError(t, b.Close())

	c, err := start("web-3", 5)
	require.NoError(t, err)
	assert.Equal(t, 5, c.Stats().MaxConcurrency, "another configuration: its own")
	assert.Empty(t, c.Stats().PausedKeys)
	require.NoError(t, c.Close())
}

// TryRunSync on a replica asks the leader to start the job at once: it
// runs if a slot is free on the replica and in the cluster, and answers
// ErrWouldWait, without running it, if the cluster's limit or the
// replica's capacity would hold it; neither counts as a rejection.
func TestReplicasTryRunSync(t *testing.T) {
	_, schema := pgtest.PoolSchema(t)
	ss := map[string]*fairsched.Scheduler{}
	for name, capacity := range map[string]int{"a": 2, "b": 1} {
		s, err := fairsched.New(fairsched.Config{MaxConcurrency: 3, Store: openReplicaStore(t, schema),
			Replica: &fairsched.Replica{Name: name, Capacity: capacity, Lease: time.Second}})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, s.Close()) })
		ss[name] = s
	}
	for _, s := range ss { // once each has had a grant, the leader's term is ready: until then it would wait
		require.NoError(t, s.RunSync(context.Background(), fairsched.Job{Key: "k"}, func(context.Context) error { return nil }))
	}
	try := func(name string) (ran bool, err error) {
		err = ss[name].TryRunSync(context.Background(), fairsched.Job{Key: "k"}, func(context.Context) error {
			ran = true
			return nil
		})
		return ran, err
	}
	ran, err := try("b")
	require.NoError(t, err)
	assert.True(t, ran, "free: it runs")

	// hold runs a job on name until release is closed, once it runs.
	release := make(chan struct{})
	var held sync.WaitGroup
	hold := func(name string) {
		entered := make(chan struct{})
		held.Add(1)
		go func() {
			defer held.Done()
			assert.NoError(t, ss[name].RunSync(context.Background(), fairsched.Job{Key: "k"}, func(context.Context) error {
				close(entered)
				<-release
				return nil
			}))
		}()
		<-entered
	}
	hold("b")
	ran, err = try("b")
	assert.ErrorIs(t, err, fairsched.ErrWouldWait, "b's capacity is in use")
	assert.False(t, ran)
	ran, err = try("a")
	require.NoError(t, err)
	assert.True(t, ran, "a has room, and so has the cluster")

	hold("a")
	hold("a")
	ran, err = try("a")
	assert.ErrorIs(t, err, fairsched.ErrWouldWait, "the cluster's limit of 3 is reached")
	assert.False(t, ran)
	close(release)
	held.Wait()
	ran, err = try("b")
	require.NoError(t, err)
	assert.True(t, ran, "free again")
	for name, s := range ss {
		st := s.Stats()
		assert.Zero(t, st.Rejected, "replica %s", name)
		assert.Zero(t, st.Cancelled, "replica %s", name)
	}
}

// SubmitMany on a replica is all or none across the cluster: the leader
// admits the whole batch or refuses it whole when the cluster's queue
// has no room for all of it, wherever the jobs queued already were
// submitted.
func TestReplicasSubmitManyAllOrNone(t *testing.T) {
	_, schema := pgtest.PoolSchema(t)
	ss := map[string]*fairsched.Scheduler{}
	for _, name := range []string{"a", "b"} {
		s, err := fairsched.New(fairsched.Config{MaxConcurrency: 1, MaxQueue: 4, Store: openReplicaStore(t, schema),
			Replica: &fairsched.Replica{Name: name, Capacity: 1, Lease: time.Second}})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, s.Close()) })
		ss[name] = s
	}
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // before the Closes, on a failure
	entered := make(chan struct{})
	var ran atomic.Int32
	run := func(context.Context) error { ran.Add(1); return nil }
	held, err := ss["a"].Submit(context.Background(), fairsched.Job{Key: "k"}, func(context.Context) error {
		close(entered)
		<-release
		return nil
	})
	require.NoError(t, err)
	<-entered // the cluster's one slot: what follows waits
	batch := func(n int) []fairsched.SubmitParams {
		jobs := make([]fairsched.SubmitParams, n)
		for i := range jobs {
			jobs[i] = fairsched.SubmitParams{Job: fairsched.Job{Key: "k"}, Fn: run}
		}
		return jobs
	}
	first, err := ss["a"].SubmitMany(context.Background(), batch(3))
	require.NoError(t, err, "room for three of four")
	_, err = ss["b"].SubmitMany(context.Background(), batch(2))
	assert.ErrorIs(t, err, fairsched.ErrQueueFull, "room for one, not two: refused whole")
	last, err := ss["b"].SubmitMany(context.Background(), batch(1))
	require.NoError(t, err, "room for one")
	releaseOnce.Do(func() { close(release) })
	require.NoError(t, held.Wait(context.Background()))
	for _, h := range append(first, last...) {
		require.NoError(t, h.Wait(context.Background()))
	}
	assert.EqualValues(t, 4, ran.Load(), "the refused batch ran none of its jobs")
	assert.EqualValues(t, 2, ss["b"].Stats().Rejected, "each job of it counted refused")
}
