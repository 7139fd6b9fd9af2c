package fairschedpg

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched/internal/cluster"
	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/rt"
)

// Replicas of one scheduler, each a run-time layer with a Store of its
// own on one schema (as processes would have), sharing the cluster's
// limits through the leader elected on PostgreSQL.

var replicaErrors = rt.Errors{
	Panic:      func(seq uint64, v any, _ []byte) error { return fmt.Errorf("job %d panicked: %v", seq, v) },
	QueueFull:  func(f rt.QueueFull) error { return fmt.Errorf("queue full: %+v", f) },
	Dependency: func(seq, dep uint64, err error) error { return fmt.Errorf("job %d after %d: %w", seq, dep, err) },
	Batch:      func(i int, err error) error { return fmt.Errorf("job %d of the batch: %w", i, err) },
}

// led receives, for each term a replica of a test begins to lead, the
// replica and the term.
type led struct {
	name string
	term uint64
}

// startReplica starts replica name of capacity slots on schema, in a
// cluster whose every scheduler has slots slots, telling leads when it
// begins to lead; it is closed when the test ends, if the test did not
// close it.
func startReplica(t *testing.T, schema, name string, capacity, slots int, lease time.Duration, leads chan<- led) *rt.Runtime {
	t.Helper()
	return startReplicaWith(t, schema, cluster.Config{Name: name, Capacity: capacity, Lease: lease, Grace: lease / 5,
		OnLead: func(term uint64) { leads <- led{name, term} }}, slots)
}

// startReplicaWith starts the replica c configures, on schema, in a
// cluster whose every scheduler has slots slots.
func startReplicaWith(t *testing.T, schema string, c cluster.Config, slots int) *rt.Runtime {
	t.Helper()
	c.Store = replicaStore(t, schema)
	r, err := rt.New(rt.Config{
		Engine:  engine.Config{MaxConcurrency: slots, CostAlpha: 0.3, DefaultCost: 1, IdleTTL: int64(10 * time.Minute / time.Microsecond)},
		Errors:  replicaErrors,
		Cluster: &c,
	})
	require.NoError(t, err)
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { assert.NoError(t, r.Close()) }) })
	return r
}

// nextLeader returns the next replica to begin leading (the bound is a
// deadlock's, not a synchronisation).
func nextLeader(t *testing.T, leads <-chan led) led {
	t.Helper()
	select {
	case l := <-leads:
		return l
	case <-time.After(time.Minute):
		t.Fatal("no replica began to lead")
		return led{}
	}
}

// RunSync callers on three replicas share the cluster's 4 slots: never
// more run at once, in all or on one replica (capacity 2), and every one
// runs once. The slots fill: the first 4 wait for the test.
func TestReplicasShareLimitsOnPostgres(t *testing.T) {
	const slots, perReplica = 4, 20
	schema := clusterSchema(t)
	rs := map[string]*rt.Runtime{}
	leads := make(chan led, 16)
	for _, name := range []string{"r1", "r2", "r3"} {
		rs[name] = startReplica(t, schema, name, 2, slots, 2*time.Second, leads)
	}
	var running, most, ran atomic.Int32
	per := map[string]*atomic.Int32{"r1": {}, "r2": {}, "r3": {}}
	perMost := map[string]*atomic.Int32{"r1": {}, "r2": {}, "r3": {}}
	raise := func(m *atomic.Int32, n int32) {
		for v := m.Load(); n > v && !m.CompareAndSwap(v, n); v = m.Load() {
		}
	}
	started := make(chan struct{}, 3*perReplica)
	release := make(chan struct{})
	errs := make(chan error, 3*perReplica)
	var wg sync.WaitGroup
	for name, r := range rs {
		for range perReplica {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- r.RunSync(context.Background(), &rt.Job{Key: "k"}, func(context.Context) error {
					raise(&most, running.Add(1))
					raise(perMost[name], per[name].Add(1))
					started <- struct{}{}
					<-release
					per[name].Add(-1)
					running.Add(-1)
					ran.Add(1)
					return nil
				})
			}()
		}
	}
	for range slots {
		select {
		case <-started:
		case <-time.After(time.Minute):
			t.Fatalf("the cluster's %d slots did not fill: %d running", slots, running.Load())
		}
	}
	assert.Equal(t, int32(slots), running.Load(), "the slots are full")
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, int32(3*perReplica), ran.Load(), "every job ran once")
	assert.Equal(t, int32(slots), most.Load(), "never more than the cluster's slots at once")
	for name, m := range perMost {
		assert.LessOrEqual(t, m.Load(), int32(2), "replica %s over its capacity", name)
	}
}

// When the leader leaves, another replica leads in a later term, and the
// callers go on.
func TestReplicasLeaderLeaves(t *testing.T) {
	schema := clusterSchema(t)
	rs := map[string]*rt.Runtime{}
	leads := make(chan led, 16)
	for _, name := range []string{"r1", "r2", "r3"} {
		rs[name] = startReplica(t, schema, name, 2, 4, time.Second, leads)
	}
	for _, r := range rs {
		require.NoError(t, r.RunSync(context.Background(), &rt.Job{Key: "k"}, func(context.Context) error { return nil }))
	}
	first := nextLeader(t, leads)
	require.NoError(t, rs[first.name].Close())
	delete(rs, first.name)
	next := nextLeader(t, leads)
	assert.NotEqual(t, first.name, next.name)
	assert.Greater(t, next.term, first.term)
	for _, r := range rs {
		require.NoError(t, r.RunSync(context.Background(), &rt.Job{Key: "k"}, func(context.Context) error { return nil }))
	}
}

// The leader calls the overflow hook once work waits for a replica's
// free slot, and for nothing else, past OverflowAfter: here one job of
// three, with two replicas of one slot each and room under every limit.
func TestReplicasOverflowHook(t *testing.T) {
	schema := clusterSchema(t)
	spilled := make(chan int, 16)
	hook := func(_ context.Context, waiting int) error { spilled <- waiting; return nil }
	rs := map[string]*rt.Runtime{}
	for _, name := range []string{"r1", "r2"} {
		rs[name] = startReplicaWith(t, schema, cluster.Config{Name: name, Capacity: 1, Lease: time.Second, Grace: 200 * time.Millisecond,
			Overflow: hook, OverflowAfter: 300 * time.Millisecond, OverflowEvery: time.Hour}, 10)
	}
	release := make(chan struct{})
	started := make(chan string, 3)
	var wg sync.WaitGroup
	for _, name := range []string{"r1", "r1", "r2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, rs[name].RunSync(context.Background(), &rt.Job{Key: "k"}, func(context.Context) error {
				started <- name
				<-release
				return nil
			}))
		}()
	}
	<-started
	<-started // r1's slot and r2's are taken; r1's second caller waits for capacity
	select {
	case waiting := <-spilled:
		assert.Equal(t, 1, waiting, "one job waits for a free slot")
	case <-time.After(time.Minute):
		t.Fatal("the overflow hook was not called")
	}
	close(release)
	wg.Wait()
	assert.Empty(t, spilled, "once per OverflowEvery")
}
