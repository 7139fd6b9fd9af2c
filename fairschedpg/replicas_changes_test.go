package fairschedpg

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched/internal/cluster"
	"github.com/fairsched/fairsched/internal/rt"
)

// Run-time changes of the configuration made on one replica reach the
// leader and every replica through the cluster's log on PostgreSQL, and
// survive a failover.

// changeReplica starts replica name, of capacity 2, in a cluster of slots
// slots and a lease of a second, telling leads when it begins to lead
// and applied the number of the last change of the log it applied.
func changeReplica(t *testing.T, schema, name string, slots int, leads chan<- led, applied chan<- int64) *rt.Runtime {
	t.Helper()
	return startReplicaWith(t, schema, cluster.Config{Name: name, Capacity: 2, Lease: time.Second, Grace: 200 * time.Millisecond,
		OnLead:    func(term uint64) { leads <- led{name, term} },
		OnChanges: func(seq int64) { applied <- seq }}, slots)
}

// appliedUpTo waits until a replica reports on applied that it applied the
// changes up to seq (the bound is a deadlock's, not a synchronisation).
func appliedUpTo(t *testing.T, applied <-chan int64, seq int64) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case got := <-applied:
			if got >= seq {
				return
			}
		case <-timeout:
			t.Fatalf("the change %d was not applied", seq)
		}
	}
}

// mostAtOnce runs n jobs of key k on each of rs at once, each a few ms
// long, and returns the most that ran at once across them.
func mostAtOnce(t *testing.T, rs []*rt.Runtime, n int) int32 {
	t.Helper()
	runs := make([]func(func(context.Context) error) error, len(rs))
	for i, r := range rs {
		runs[i] = func(fn func(context.Context) error) error {
			return r.RunSync(context.Background(), &rt.Job{Key: "k"}, fn)
		}
	}
	return MostAtOnce(t, runs, n)
}

// MostAtOnce runs n jobs at once through each of runs (a replica's
// RunSync), each a few ms long, and returns the most that ran at once
// across them. The package's external tests use it too.
func MostAtOnce(t *testing.T, runs []func(func(context.Context) error) error, n int) int32 {
	t.Helper()
	var running, most atomic.Int32
	var wg sync.WaitGroup
	for _, run := range runs {
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				assert.NoError(t, run(func(context.Context) error {
					now := running.Add(1)
					for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
					}
					time.Sleep(5 * time.Millisecond) // the job's work: long enough for others to overlap it
					running.Add(-1)
					return nil
				}))
			}()
		}
	}
	wg.Wait()
	return most.Load()
}

// SetMaxConcurrency(1) on a replica that does not lead: once the leader
// applied it, the cluster runs one job at once, on every replica; the
// next leader, when the first leaves, decides by it too; and a replica
// that starts afterwards has it from its start.
func TestReplicasChangeReachesLeaderOnPostgres(t *testing.T) {
	schema := clusterSchema(t)
	leads := make(chan led, 16)
	applied := map[string]chan int64{}
	rs := map[string]*rt.Runtime{}
	for _, name := range []string{"r1", "r2", "r3"} {
		applied[name] = make(chan int64, 64)
		rs[name] = changeReplica(t, schema, name, 4, leads, applied[name])
	}
	first := nextLeader(t, leads)
	other := "r1"
	if first.name == other {
		other = "r2"
	}
	all := func() []*rt.Runtime {
		var out []*rt.Runtime
		for _, r := range rs {
			out = append(out, r)
		}
		return out
	}
	// Before the change, two jobs run at once, on two replicas: both
	// start before either ends.
	arrived, release := make(chan struct{}, 2), make(chan struct{})
	var wg sync.WaitGroup
	for _, name := range []string{"r1", "r2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, rs[name].RunSync(context.Background(), &rt.Job{Key: "k"}, func(context.Context) error {
				arrived <- struct{}{}
				<-release
				return nil
			}))
		}()
	}
	for range 2 {
		select {
		case <-arrived:
		case <-time.After(time.Minute): // a deadlock's bound
			t.Fatal("two jobs did not run at once")
		}
	}
	close(release)
	wg.Wait()

	require.NoError(t, rs[other].SetMaxConcurrency(1))
	assert.Equal(t, 1, rs[other].Stats(0).MaxConcurrency, "at once on the replica that made it")
	appliedUpTo(t, applied[first.name], 1) // the log's first change, in a schema of its own
	for name, r := range rs {
		if name != other && name != first.name {
			appliedUpTo(t, applied[name], 1)
		}
		assert.Equal(t, 1, r.Stats(0).MaxConcurrency, "replica %s", name)
	}
	assert.Equal(t, int32(1), mostAtOnce(t, all(), 6), "one at once in the cluster")

	require.NoError(t, rs[first.name].Close())
	delete(rs, first.name)
	next := nextLeader(t, leads) // its engine applied the log before its term began
	assert.NotEqual(t, first.name, next.name)
	assert.Equal(t, int32(1), mostAtOnce(t, all(), 6), "one at once under the next leader")

	late := changeReplica(t, schema, "r4", 4, leads, make(chan int64, 64))
	assert.Equal(t, 1, late.Stats(0).MaxConcurrency, "a replica started since has the change from its start")
}

// A key paused on one replica holds its jobs submitted on another; a
// third party's resume lets them run.
func TestReplicasPauseAcrossReplicasOnPostgres(t *testing.T) {
	schema := clusterSchema(t)
	leads := make(chan led, 16)
	applied := map[string]chan int64{}
	rs := map[string]*rt.Runtime{}
	for _, name := range []string{"r1", "r2"} {
		applied[name] = make(chan int64, 64)
		rs[name] = changeReplica(t, schema, name, 4, leads, applied[name])
	}
	leader := nextLeader(t, leads)
	pauser, submitter := "r1", "r2"

	rs[pauser].PauseKey("p")
	appliedUpTo(t, applied[leader.name], 1)
	appliedUpTo(t, applied[submitter], 1)
	assert.Equal(t, []string{"p"}, rs[submitter].Stats(0).PausedKeys)

	ran := make(chan struct{})
	h, err := rs[submitter].Submit(context.Background(), &rt.Job{Key: "p"}, func(context.Context) error { close(ran); return nil })
	require.NoError(t, err)
	// A job of another key, submitted after it on the same replica, runs:
	// had p not been paused at the leader, p's job, asked for first with
	// slots free, would have been granted first.
	require.NoError(t, rs[submitter].RunSync(context.Background(), &rt.Job{Key: "q"}, func(context.Context) error { return nil }))
	select {
	case <-ran:
		t.Fatal("the paused key's job ran")
	default:
	}

	rs[submitter].ResumeKey("p")
	select {
	case <-ran:
	case <-time.After(time.Minute): // a deadlock's bound
		t.Fatal("the resumed key's job did not run")
	}
	require.NoError(t, h.Wait(context.Background()))
}
