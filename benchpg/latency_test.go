package benchpg

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedpg"
)

const (
	latencyJobs     = 2000 // jobs or calls per latency run
	latencyJobsSlow = 300  // river with its default cooldown: about 100 ms each
	warmUp          = 20   // unmeasured jobs or calls before each latency run
)

// BenchmarkLatency measures, per b.N, one run of jobs or calls made one
// at a time while the system is otherwise idle, each from the call that
// submits it to the start of its handler or closure: see the package
// documentation.
func BenchmarkLatency(b *testing.B) {
	b.Run("river/cooldown-100ms", func(b *testing.B) { riverLatency(b, false, latencyJobsSlow) })
	b.Run("river/cooldown-1ms", func(b *testing.B) { riverLatency(b, true, latencyJobs) })
	b.Run("runsync/replicas-1/leader", func(b *testing.B) { runSyncLatency(b, 1, true, latencyJobs) })
	b.Run("runsync/replicas-4/follower", func(b *testing.B) { runSyncLatency(b, 4, false, latencyJobs) })
	b.Run("runsync/replicas-4/leader", func(b *testing.B) { runSyncLatency(b, 4, true, latencyJobs) })
}

// riverLatency inserts n jobs one at a time into one river client's
// queue (client.Insert), each once the one before has started, and
// reports the time from the insert's call to the start of the job's
// Work.
func riverLatency(b *testing.B, cooldown1ms bool, n int) {
	ctx := context.Background()
	if testing.Short() {
		n = min(n, 50)
	}
	schema := newSchema(b)
	migrateRiver(b, schema)
	started := make(chan time.Time, 1)
	client, _ := startRiver(b, schema, cooldown1ms, func() { started <- time.Now() })
	insert := func(i int) time.Duration {
		t0 := time.Now()
		if _, err := client.Insert(ctx, noopArgs{N: i}, nil); err != nil {
			b.Fatal(err)
		}
		return waitFor(b, started, "river's job to start").Sub(t0)
	}
	for i := range warmUp {
		insert(i)
	}
	lats := make([]time.Duration, 0, b.N*n)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for i := range n {
			lats = append(lats, insert(i))
		}
	}
	b.StopTimer()
	reportLatency(b, lats)
}

const (
	replicaCapacity = 16
	replicaLease    = 5 * time.Second
)

// runSyncLatency starts replicas replicas of one scheduler on one schema
// (Config.Replica), each on a Store of its own (OpenReplicaPool, on a
// pool of its own: a process of its own), of capacity 16 each and
// MaxConcurrency 16 per replica; then makes n RunSync calls of a no-op
// closure one at a time on the leader (onLeader) or on the first replica
// by name that does not lead, and reports the time from the call to the
// start of the closure. Every slot is free at each call.
func runSyncLatency(b *testing.B, replicas int, onLeader bool, n int) {
	ctx := context.Background()
	if testing.Short() {
		n = min(n, 50)
	}
	schema := newSchema(b)
	if err := fairschedpg.Migrate(ctx, newPool(b, schema)); err != nil {
		b.Fatal(err)
	}
	rs := map[string]*fairsched.Scheduler{}
	var names []string
	for i := range replicas {
		name := fmt.Sprintf("r%d", i+1)
		names = append(names, name)
		st, err := fairschedpg.OpenReplicaPool(ctx, newPool(b, schema))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			if err := st.Close(); err != nil {
				b.Errorf("closing %s's store: %v", name, err)
			}
		})
		s, err := fairsched.New(fairsched.Config{
			MaxConcurrency: replicaCapacity * replicas,
			Store:          st,
			Replica:        &fairsched.Replica{Name: name, Capacity: replicaCapacity, Lease: replicaLease},
			Logger:         warnLogger(),
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			if err := s.Close(); err != nil {
				b.Errorf("closing %s: %v", name, err)
			}
		})
		rs[name] = s
	}
	// A first call on each: once each has been granted, one leads.
	noop := func(context.Context) error { return nil }
	for _, name := range names {
		if err := rs[name].RunSync(ctx, fairsched.Job{Key: "k"}, noop); err != nil {
			b.Fatalf("%s's first RunSync: %v", name, err)
		}
	}
	leader, term := leading(b, rs)
	target := leader
	if !onLeader {
		for _, name := range names {
			if name != leader {
				target = name
				break
			}
		}
		if target == leader {
			b.Fatal("every replica leads")
		}
	}
	r := rs[target]
	var t1 time.Time
	mark := func(context.Context) error {
		t1 = time.Now()
		return nil
	}
	call := func() time.Duration {
		t0 := time.Now()
		if err := r.RunSync(ctx, fairsched.Job{Key: "k"}, mark); err != nil {
			b.Fatal(err)
		}
		return t1.Sub(t0)
	}
	for range warmUp {
		call()
	}
	lats := make([]time.Duration, 0, b.N*n)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for range n {
			lats = append(lats, call())
		}
	}
	b.StopTimer()
	if l, t := leading(b, rs); l != leader || t != term {
		b.Fatalf("leadership changed during the run: %s in term %d, then %s in term %d", leader, term, l, t)
	}
	reportLatency(b, lats)
}

// leading returns the replica that leads, by its Stats, and its term;
// it fails b unless exactly one does.
func leading(b *testing.B, rs map[string]*fairsched.Scheduler) (string, uint64) {
	b.Helper()
	var leaders []string
	var term uint64
	for name, s := range rs {
		if r := s.Stats().Replica; r != nil && r.Leader {
			leaders = append(leaders, name)
			term = r.Term
		}
	}
	if len(leaders) != 1 {
		b.Fatalf("replicas that lead: %v; want one", leaders)
	}
	return leaders[0], term
}
