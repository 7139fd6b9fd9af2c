package rt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched/internal/decide"
	"github.com/fairsched/fairsched/internal/engine"
)

// Replicas in one process: a leader's Runtime and others' on one Hub,
// each a scheduler of its own whose decisions are the leader's. The
// cluster's limits hold across them, each replica's capacity bounds what
// runs there, and every job runs once.

// testReplica is one replica of a test cluster.
type testReplica struct {
	name     string
	rt       *Runtime
	out      *decide.Outbox
	stop     chan struct{}
	pumped   chan struct{}
	leader   *decide.Leader // set on the leader
	remote   *decide.Remote // set on the others
	capacity int
	signals  *Signals
}

// newTestReplicas starts a cluster on hub: the leader "l" and the
// replicas named, each of capacity slots, every scheduler configured
// with ecfg, in term 1.
func newTestReplicas(t *testing.T, hub *decide.Hub, ecfg engine.Config, capacity int, names ...string) []*testReplica {
	t.Helper()
	var all []*testReplica
	for i, name := range append([]string{"l"}, names...) {
		tr := &testReplica{name: name, out: &decide.Outbox{}, stop: make(chan struct{}), pumped: make(chan struct{}),
			capacity: capacity, signals: NewSignals()}
		var recv decide.Receiving
		r, err := New(Config{
			Engine:  ecfg,
			Errors:  testErrors,
			Signals: tr.signals,
			Decider: func(e *engine.Engine, g decide.Grantee, deliver func(func(now int64))) decide.Decider {
				if i == 0 {
					tr.leader = decide.NewLeader(name, capacity, e, g, tr.out)
					recv = tr.leader
					return tr.leader
				}
				tr.remote = decide.NewRemote(name, e, g, tr.out, 1)
				recv = tr.remote
				return tr.remote
			},
		})
		require.NoError(t, err)
		tr.rt = r
		link := hub.Join(name, decide.ReceiverOf(recv, r.Deliver))
		go func() {
			defer close(tr.pumped)
			tr.out.Pump(link, tr.stop)
		}()
		all = append(all, tr)
	}
	hub.Lead("l")
	others := map[string]int{}
	for _, name := range names {
		others[name] = capacity
	}
	all[0].rt.Deliver(func(now int64) { all[0].leader.Begin(1, others, now) })
	t.Cleanup(func() {
		for _, tr := range all {
			assert.NoError(t, tr.rt.Close())
		}
		for _, tr := range all {
			close(tr.stop)
			<-tr.pumped
		}
		hub.Close()
	})
	return all
}

func replicaEngineConfig(slots int) engine.Config {
	return engine.Config{MaxConcurrency: slots, CostAlpha: 0.3, DefaultCost: 1, IdleTTL: int64(10 * time.Minute / time.Microsecond)}
}

// concurrency counts the functions running at once, in all and per
// replica, and the most seen.
type concurrency struct {
	running, most atomic.Int32
	per           map[string]*atomic.Int32
	perMost       map[string]*atomic.Int32
	ran           atomic.Int32
}

func newConcurrency(names []string) *concurrency {
	c := &concurrency{per: map[string]*atomic.Int32{}, perMost: map[string]*atomic.Int32{}}
	for _, n := range names {
		c.per[n], c.perMost[n] = &atomic.Int32{}, &atomic.Int32{}
	}
	return c
}

func raise(most *atomic.Int32, n int32) {
	for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
	}
}

// enter counts a function starting on replica name; the returned func
// counts its end.
func (c *concurrency) enter(name string) func() {
	raise(&c.most, c.running.Add(1))
	raise(c.perMost[name], c.per[name].Add(1))
	return func() {
		c.per[name].Add(-1)
		c.running.Add(-1)
		c.ran.Add(1)
	}
}

// RunSync callers on three replicas share the cluster's 4 slots: never
// more run at once, in all or on one replica (capacity 2), and all do:
// the slots fill, since the first 4 wait for the test to let them end.
func TestReplicasShareTheLimit(t *testing.T) {
	const slots, perReplica = 4, 30
	hub := decide.NewHub()
	rs := newTestReplicas(t, hub, replicaEngineConfig(slots), 2, "a", "b")
	names := []string{"l", "a", "b"}
	c := newConcurrency(names)
	started := make(chan struct{}, 3*perReplica)
	release := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 3*perReplica)
	for _, tr := range rs {
		for range perReplica {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- tr.rt.RunSync(context.Background(), &Job{Key: "k"}, func(context.Context) error {
					done := c.enter(tr.name)
					defer done()
					started <- struct{}{}
					<-release
					return nil
				})
			}()
		}
	}
	for range slots {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatalf("the cluster's %d slots did not fill: %d running", slots, c.running.Load())
		}
	}
	assert.Equal(t, int32(slots), c.running.Load(), "the slots are full")
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, int32(3*perReplica), c.ran.Load(), "every job ran once")
	assert.Equal(t, int32(slots), c.most.Load(), "never more than the cluster's slots at once")
	for _, n := range names {
		assert.LessOrEqual(t, c.perMost[n].Load(), int32(2), "replica %s over its capacity", n)
	}
}

// Submit jobs on replicas run on the replica that submitted them, within
// the same limits, and their Handles see them end.
func TestReplicasSubmit(t *testing.T) {
	const slots, perReplica = 3, 40
	hub := decide.NewHub()
	rs := newTestReplicas(t, hub, replicaEngineConfig(slots), 2, "a", "b")
	c := newConcurrency([]string{"l", "a", "b"})
	var handles []Handle
	for _, tr := range rs {
		for i := range perReplica {
			h, err := tr.rt.Submit(context.Background(), &Job{Key: fmt.Sprint("k", i%3)}, func(context.Context) error {
				defer c.enter(tr.name)()
				return nil
			})
			require.NoError(t, err)
			handles = append(handles, h)
		}
	}
	for _, h := range handles {
		require.NoError(t, h.Wait(context.Background()))
	}
	assert.Equal(t, int32(3*perReplica), c.ran.Load())
	assert.LessOrEqual(t, c.most.Load(), int32(slots))
}

// The leader's queue bound refuses a replica's job: its RunSync returns
// the queue-full error, as it would in one process. (The leader's own
// jobs fill the queue: its Runtime tells when each is admitted.)
func TestReplicasRefusal(t *testing.T) {
	cfg := replicaEngineConfig(1)
	cfg.MaxQueue = 1
	hub := decide.NewHub()
	rs := newTestReplicas(t, hub, cfg, 1, "a")
	hold, first := holdASlot(rs[0].rt)
	<-rs[0].signals.Accepted
	second := make(chan error, 1)
	go func() {
		second <- rs[0].rt.RunSync(context.Background(), &Job{Key: "k"}, func(context.Context) error { return nil })
	}()
	<-rs[0].signals.Accepted // queued: the queue is full
	refused := rs[1].rt.RunSync(context.Background(), &Job{Key: "k"}, func(context.Context) error { return nil })
	assert.ErrorContains(t, refused, "queue full")
	hold()
	require.NoError(t, <-first)
	require.NoError(t, <-second)
}

// A RunSync whose caller gives up while it waits for the leader leaves
// nothing behind: the leader frees what it held, and the job never runs.
func TestReplicasCallerGivesUp(t *testing.T) {
	hub := decide.NewHub()
	rs := newTestReplicas(t, hub, replicaEngineConfig(1), 1, "a")
	hold, first := holdASlot(rs[0].rt)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var ran atomic.Bool
	err := rs[1].rt.RunSync(ctx, &Job{Key: "k"}, func(context.Context) error { ran.Store(true); return nil })
	assert.True(t, errors.Is(err, context.Canceled))
	hold()
	require.NoError(t, <-first)
	assert.NoError(t, rs[1].rt.RunSync(context.Background(), &Job{Key: "k"}, func(context.Context) error { return nil }))
	assert.False(t, ran.Load())
}

// A replica's Submit returns once the leader admitted its job, so a full
// queue is Submit's error, as in one process; an admitted job's Handle
// sees it run.
func TestReplicasSubmitLearnsOfAFullQueue(t *testing.T) {
	cfg := replicaEngineConfig(1)
	cfg.MaxQueue = 2
	hub := decide.NewHub()
	rs := newTestReplicas(t, hub, cfg, 1, "a")
	hold, first := holdASlot(rs[0].rt)
	ran := make(chan struct{})
	h, err := rs[1].rt.Submit(context.Background(), &Job{Key: "k"}, func(context.Context) error { close(ran); return nil })
	require.NoError(t, err, "room for one: admitted, it waits")
	second := make(chan error, 1)
	go func() {
		second <- rs[0].rt.RunSync(context.Background(), &Job{Key: "k"}, func(context.Context) error { return nil })
	}()
	<-rs[0].signals.Accepted
	<-rs[0].signals.Accepted // the leader's second job fills the queue
	_, err = rs[1].rt.Submit(context.Background(), &Job{Key: "k"}, func(context.Context) error { return nil })
	assert.ErrorContains(t, err, "queue full", "refused by the leader: Submit's error")
	hold()
	require.NoError(t, <-first)
	require.NoError(t, h.Wait(context.Background()))
	<-ran
	require.NoError(t, <-second)
}

// holdASlot runs a RunSync on r that holds its slot until hold is
// called, and returns once it runs; first receives its result.
func holdASlot(r *Runtime) (hold func(), first <-chan error) {
	release := make(chan struct{})
	running := make(chan struct{})
	result := make(chan error, 1)
	go func() {
		result <- r.RunSync(context.Background(), &Job{Key: "k"}, func(context.Context) error {
			close(running)
			<-release
			return nil
		})
	}()
	<-running
	return func() { close(release) }, result
}

// A replica's job that runs after others waits in its replica until
// they end: it runs once they all completed, and ends without running,
// with an error that names the one that did not, once one did not, down
// the chain. A dependency that had ended already is resolved at once; a
// job that waits may be cancelled, and misses its start deadline there.
func TestReplicasDependencies(t *testing.T) {
	rs := newTestReplicas(t, decide.NewHub(), replicaEngineConfig(2), 2, "a")
	a := rs[1].rt
	ctx := context.Background()
	var order []string
	var mu sync.Mutex
	note := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, what)
	}
	release := make(chan struct{})
	first, err := a.Submit(ctx, &Job{Key: "k"}, func(context.Context) error { <-release; note("first"); return nil })
	require.NoError(t, err)
	boom := errors.New("boom")
	failing, err := a.Submit(ctx, &Job{Key: "k"}, func(context.Context) error { <-release; return boom })
	require.NoError(t, err)

	second, err := a.Submit(ctx, &Job{Key: "k", After: []Handle{first}}, func(context.Context) error { note("second"); return nil })
	require.NoError(t, err)
	ranSync := make(chan error, 1)
	go func() {
		ranSync <- a.RunSync(ctx, &Job{Key: "k", After: []Handle{first, second}}, func(context.Context) error { note("sync"); return nil })
	}()
	var unrun atomic.Bool
	never, err := a.Submit(ctx, &Job{Key: "k", After: []Handle{first, failing}}, func(context.Context) error { unrun.Store(true); return nil })
	require.NoError(t, err)
	chained, err := a.Submit(ctx, &Job{Key: "k", After: []Handle{never}}, func(context.Context) error { unrun.Store(true); return nil })
	require.NoError(t, err)
	cancelled, err := a.Submit(ctx, &Job{Key: "k", After: []Handle{first}}, func(context.Context) error { unrun.Store(true); return nil })
	require.NoError(t, err)
	expires, err := a.Submit(ctx, &Job{Key: "k", After: []Handle{first}, StartBy: time.Now().Add(20 * time.Millisecond)},
		func(context.Context) error { unrun.Store(true); return nil })
	require.NoError(t, err)

	cancelled.Cancel()
	assert.ErrorIs(t, cancelled.Wait(ctx), context.Canceled)
	assert.ErrorIs(t, expires.Wait(ctx), ErrStartDeadline, "its deadline passed while it waited here")
	select {
	case <-second.Done():
		t.Fatal("second ended before the job it runs after")
	default:
	}
	close(release)
	require.NoError(t, second.Wait(ctx))
	require.NoError(t, <-ranSync)
	assert.Equal(t, []string{"first", "second", "sync"}, order)

	err = never.Wait(ctx)
	assert.EqualError(t, err, fmt.Sprintf("job %d after %d: boom", never.Seq(), failing.Seq()), "it names the job that failed, and wraps its error")
	assert.ErrorIs(t, err, boom)
	err = chained.Wait(ctx)
	assert.EqualError(t, err, fmt.Sprintf("job %d after %d: job %d after %d: boom", chained.Seq(), never.Seq(), never.Seq(), failing.Seq()), "down the chain")

	// Ended already: completed runs, failed ends at once.
	require.NoError(t, a.RunSync(ctx, &Job{Key: "k", After: []Handle{first, second}}, func(context.Context) error { return nil }))
	late, err := a.Submit(ctx, &Job{Key: "k", After: []Handle{failing}}, func(context.Context) error { unrun.Store(true); return nil })
	require.NoError(t, err)
	assert.EqualError(t, late.Wait(ctx), fmt.Sprintf("job %d after %d: boom", late.Seq(), failing.Seq()))
	assert.False(t, unrun.Load(), "a job whose dependency did not complete ran")
	nothingWaits(t, a)
}

// nothingWaits fails t if a replica's job of r waits for others, or is
// waited for.
func nothingWaits(t *testing.T, r *Runtime) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.Nil(t, r.afters.on, "nothing waits, nor is waited for")
}

// A replica's job that waits there for others counts against the
// cluster's queue limits while it waits, as in one process, and gives its
// room back when its caller gives up; its type's start timeout ends it
// there.
func TestReplicasDependenciesCount(t *testing.T) {
	cfg := replicaEngineConfig(1)
	cfg.MaxQueue = 3
	rs := newTestReplicas(t, decide.NewHub(), cfg, 1, "a")
	a := rs[1].rt
	for _, r := range rs {
		require.NoError(t, r.rt.RegisterType("slow", TypeConfig{Engine: engine.Type{StartTimeout: int64(20 * time.Millisecond / time.Microsecond)}}))
	}
	ctx := context.Background()
	hold, first := holdASlot(rs[0].rt)
	var ran atomic.Int32
	fn := func(context.Context) error { ran.Add(1); return nil }
	dep, err := a.Submit(ctx, &Job{Key: "k"}, fn)
	require.NoError(t, err, "queued: one")
	rctx, giveUp := context.WithCancel(ctx)
	synced := make(chan error, 1)
	go func() { synced <- a.RunSync(rctx, &Job{Key: "k", After: []Handle{dep}}, fn) }()
	<-a.cfg.Signals.Accepted // dep's
	<-a.cfg.Signals.Accepted // the RunSync's, asked for before what follows
	waits, err := a.Submit(ctx, &Job{Key: "k", After: []Handle{dep}}, fn)
	require.NoError(t, err, "three: the queue is full")
	_, err = a.Submit(ctx, &Job{Key: "k", After: []Handle{dep}}, fn)
	assert.ErrorContains(t, err, "queue full", "a job that waits counts")
	giveUp()
	assert.ErrorIs(t, <-synced, context.Canceled)
	expires, err := a.Submit(ctx, &Job{Type: "slow", Key: "k", After: []Handle{dep}}, fn)
	require.NoError(t, err, "the RunSync gave its room back")
	assert.ErrorIs(t, expires.Wait(ctx), ErrStartDeadline, "its type's start timeout passed while it waited")
	hold()
	require.NoError(t, <-first)
	require.NoError(t, waits.Wait(ctx))
	assert.Equal(t, int32(2), ran.Load(), "dep, and the job after it")
}

// A replica's job that waits there for others is not started at once by
// TryRunSync, and ends with its scheduler when it closes.
func TestReplicasDependenciesAtClose(t *testing.T) {
	rs := newTestReplicas(t, decide.NewHub(), replicaEngineConfig(1), 1, "a")
	a := rs[1].rt
	ctx := context.Background()
	gate := make(chan struct{})
	dep, err := a.Submit(ctx, &Job{Key: "k"}, func(context.Context) error { <-gate; return nil })
	require.NoError(t, err)
	var ran atomic.Bool
	fn := func(context.Context) error { ran.Store(true); return nil }
	assert.ErrorIs(t, a.TryRunSync(ctx, &Job{Key: "k", After: []Handle{dep}}, fn), ErrWouldWait)
	waits, err := a.Submit(ctx, &Job{Key: "k", After: []Handle{dep}}, fn)
	require.NoError(t, err)
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	assert.ErrorIs(t, waits.Wait(ctx), ErrClosed, "ended with its scheduler")
	close(gate)
	require.NoError(t, <-closed)
	assert.False(t, ran.Load())
	nothingWaits(t, a)
}

// A replica's batch may not hold a job that would wait for others (the
// leader admits a batch all or none, and such a job could end before its
// answer); one whose dependency failed already ends at once, and the
// rest of its batch runs, with nothing counted for it.
func TestReplicasBatchAfter(t *testing.T) {
	cfg := replicaEngineConfig(1)
	cfg.MaxQueue = 2
	rs := newTestReplicas(t, decide.NewHub(), cfg, 1, "a")
	a := rs[1].rt
	ctx := context.Background()
	hold, first := holdASlot(rs[0].rt)
	var ran atomic.Int32
	fn := func(context.Context) error { ran.Add(1); return nil }
	dep, err := a.Submit(ctx, &Job{Key: "k"}, fn)
	require.NoError(t, err)
	_, err = a.SubmitMany(ctx, []SubmitParams{{Job: Job{Key: "k"}, Fn: fn}, {Job: Job{Key: "k", After: []Handle{dep}}, Fn: fn}})
	assert.ErrorIs(t, err, errBatchWaitsOnReplica)
	assert.ErrorContains(t, err, "job 1 of the batch")

	failed, err := a.Submit(ctx, &Job{Key: "k"}, func(context.Context) error { return errors.New("boom") })
	require.NoError(t, err)
	hold()
	require.NoError(t, <-first)
	require.NoError(t, dep.Wait(ctx))
	require.Error(t, failed.Wait(ctx))
	hold, first = holdASlot(rs[0].rt)
	hs, err := a.SubmitMany(ctx, []SubmitParams{{Job: Job{Key: "k", After: []Handle{failed}}, Fn: fn}, {Job: Job{Key: "k"}, Fn: fn}})
	require.NoError(t, err)
	assert.ErrorContains(t, hs[0].Wait(ctx), "boom", "ended at once: it runs after a job that failed")
	second, err := a.Submit(ctx, &Job{Key: "k"}, fn)
	require.NoError(t, err, "the queue of two holds the batch's other job and this one: nothing counted for the job that ended")
	hold()
	require.NoError(t, <-first)
	require.NoError(t, hs[1].Wait(ctx))
	require.NoError(t, second.Wait(ctx))
	assert.Equal(t, int32(3), ran.Load(), "dep, the batch's other job, second")
}

// fakeLapse is a replica's registration whose lapse the test sets: once
// lapsed, it stops the replica's runs, as the fence does.
type fakeLapse struct {
	r      *Runtime
	lapsed atomic.Bool
	asked  atomic.Int32
}

func (f *fakeLapse) Lapsed() bool {
	f.asked.Add(1)
	if !f.lapsed.Load() {
		return false
	}
	f.r.Lose()
	return true
}

// A job granted to a replica whose registration could have lapsed by the
// time it begins (the process was paused between the grant and the
// call) does not begin: its attempt is lost, its function never called,
// and the leader has its slot back. Once renewed, the replica's jobs run.
func TestReplicaJobDoesNotBeginPastALapse(t *testing.T) {
	hub := decide.NewHub()
	rs := newTestReplicas(t, hub, replicaEngineConfig(1), 1, "a")
	a := rs[1].rt
	reg := &fakeLapse{r: a}
	var l lapser = reg
	a.lapse.Store(&l)
	reg.lapsed.Store(true)

	var ran atomic.Int32
	fn := func(context.Context) error { ran.Add(1); return nil }
	err := a.RunSync(context.Background(), &Job{Key: "k"}, fn)
	assert.ErrorIs(t, err, ErrLost, "RunSync")
	h, err := a.Submit(context.Background(), &Job{Key: "k"}, fn)
	require.NoError(t, err)
	assert.ErrorIs(t, h.Wait(context.Background()), ErrLost, "Submit")
	assert.Zero(t, ran.Load(), "a job began past the lapse")
	assert.Equal(t, int32(2), reg.asked.Load(), "each job asked before it began")

	// The cluster's one slot is free again: the leader runs its own job.
	require.NoError(t, rs[0].rt.RunSync(context.Background(), &Job{Key: "k"}, fn))
	reg.lapsed.Store(false) // renewed
	require.NoError(t, a.RunSync(context.Background(), &Job{Key: "k"}, fn))
	assert.Equal(t, int32(2), ran.Load())
}
