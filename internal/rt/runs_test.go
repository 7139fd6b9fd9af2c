package rt

import (
	"context"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched/fairschedsqlite"
	"github.com/fairsched/fairsched/internal/decide"
	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/store"
)

// A replica that begins to shut down or close tells the leader, in a
// Hello, that it runs no durable job type any more; Shutdown returns once
// the leader has Recorded the ends of its attempts. A durable attempt
// sent to it from then on never starts: it ends at once, lost and never
// begun, for the leader to queue again, uncounted. Started, its goroutine
// would begin while Shutdown or Close waits for the replica's goroutines,
// or after they returned.
func TestReplicaRunAfterStop(t *testing.T) {
	for _, stop := range []string{"Close", "Shutdown"} {
		t.Run(stop, func(t *testing.T) {
			st, err := fairschedsqlite.Open(filepath.Join(t.TempDir(), "jobs.db"))
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, st.Close()) })
			var remote *decide.Remote
			out := new(decide.Outbox)
			var runs atomic.Int32
			ran := make(chan struct{}, 2)
			r, err := New(Config{
				Engine: engine.Config{MaxConcurrency: 1, CostAlpha: 0.3, DefaultCost: 1, IdleTTL: int64(10 * time.Minute / time.Microsecond)},
				Errors: testErrors,
				Store:  st,
				Handlers: map[string]*Handler{"mail": {Name: "mail", ArgType: reflect.TypeOf(""), Run: func(context.Context, []byte) error {
					runs.Add(1)
					ran <- struct{}{}
					return nil
				}}},
				Decider: func(e *engine.Engine, g decide.Grantee, _ func(func(now int64))) decide.Decider {
					remote = decide.NewRemote("r1", e, g, out, 1)
					return remote
				},
			})
			require.NoError(t, err)
			receive := func(m decide.Msg) {
				r.Deliver(func(now int64) { remote.Receive([]decide.Msg{m}, now) })
			}
			runMsg := func(id, sync uint64) decide.Msg {
				return decide.Msg{Kind: decide.Run, Term: 1, Replica: "r1", Sync: sync, Seq: id, Attempt: 1,
					Desc: engine.Desc{Type: "mail"}, Args: []byte(`"hi"`)}
			}
			receive(decide.Msg{Kind: decide.Resync, Term: 1, Replica: "r1"}) // term 1, Hello 1
			receive(runMsg(7, 1))
			<-ran // sent before the replica stops: it runs
			if stop == "Close" {
				require.NoError(t, r.Close())
			} else {
				// The end of attempt 7 is not Recorded yet: Shutdown
				// waits for it, as for a job.
				short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
				require.ErrorIs(t, r.Shutdown(short), context.DeadlineExceeded, "Shutdown left an end unrecorded")
				receive(decide.Msg{Kind: decide.Recorded, Term: 1, Replica: "r1", Seq: 7, Attempt: 1})
				require.NoError(t, r.Shutdown(context.Background()))
				require.NoError(t, r.Close())
			}
			receive(runMsg(8, 1)) // sent before the leader heard Hello 2: dropped, the leader counts it lost
			receive(runMsg(9, 2)) // cannot be sent after Hello 2, which has no types: lost at once all the same

			assert.Equal(t, int32(1), runs.Load(), "only the attempt sent before the replica stopped runs")
			var hellos []decide.Msg
			done := map[uint64]decide.Msg{}
			for _, m := range out.Take() {
				switch m.Kind {
				case decide.Hello:
					hellos = append(hellos, m)
				case decide.Done:
					done[m.Seq] = m
				}
			}
			require.Len(t, hellos, 2)
			assert.Equal(t, []string{"mail"}, hellos[0].Types)
			assert.Empty(t, hellos[1].Types, "stopping, it tells the leader it runs no type")
			assert.Equal(t, uint64(2), hellos[1].Sync)
			require.Contains(t, done, uint64(7))
			assert.Equal(t, engine.Completed, done[7].Outcome)
			assert.NotContains(t, done, uint64(8))
			require.Contains(t, done, uint64(9), "an attempt sent after it stopped is answered")
			assert.Equal(t, engine.Failed, done[9].Outcome)
			assert.Equal(t, decide.DoneLost|decide.DoneNotRun, done[9].Flags, "never begun: the leader queues it again, the attempt uncounted")
			assert.Contains(t, done[9].Err, "shutting down")
		})
	}
}

// The leader's keeper: an attempt its replica never began is no attempt,
// whether the Run came as the replica shut down (DoneNotRun) or the
// replica's next Hello came while the keeper recorded the attempt's
// start, before it sent the Run (the Hello does not list it: then the Run
// is never sent). The job is queued again at once, with its attempt
// number unchanged, and the store has it undone, so that it can start
// again: with the type's single attempt it still completes, where a lost
// attempt would have made it dead.
func TestKeeperRequeuesAnAttemptNeverBegun(t *testing.T) {
	t.Run("done-not-run", func(t *testing.T) {
		k := newTestKeeper(t)
		close(k.st.release) // its start is recorded at once
		first := k.nextRun()
		assert.Equal(t, decide.Msg{Kind: decide.Run, Seq: uint64(k.job.ID), Attempt: 1}, decide.Msg{Kind: first.Kind, Seq: first.Seq, Attempt: first.Attempt})
		k.deliver(decide.Msg{Kind: decide.Done, Term: 1, Replica: "r1", Seq: first.Seq, Attempt: 1, Outcome: engine.Failed,
			Err: errStoppingRun.Error(), Flags: decide.DoneLost | decide.DoneNotRun})
		k.runsAgainAndCompletes(first.Seq)
	})
	t.Run("hello-before-the-run", func(t *testing.T) {
		k := newTestKeeper(t)
		<-k.st.started // the attempt's start is being recorded: its Run not sent yet
		k.deliver(decide.Msg{Kind: decide.Hello, Term: 1, Replica: "r1", Sync: 2, Types: []string{"mail"}})
		close(k.st.release)
		again := k.runsAgainAndCompletes(uint64(k.job.ID))
		assert.Equal(t, uint64(2), again.Sync, "the first Run was never sent: this one is of the second Hello")
	})
}

// testKeeper is a leader's keeper of one durable job of one attempt, with
// one replica, r1, whose Hello it has had (Sync 1): the job is granted.
type testKeeper struct {
	t   *testing.T
	k   *Runtime
	st  *heldStart
	job *store.Job
	out *decide.Outbox
}

// heldStart is a store whose first Start waits for release, once it has
// said so on started.
type heldStart struct {
	store.Store
	once             sync.Once
	started, release chan struct{}
}

func (h *heldStart) Start(ctx context.Context, id int64, at int64) ([]byte, error) {
	h.once.Do(func() {
		close(h.started)
		<-h.release
	})
	return h.Store.Start(ctx, id, at)
}

func (h *heldStart) Watch(arrived func(*store.Job)) error {
	return h.Store.(store.Watcher).Watch(arrived)
}

func newTestKeeper(t *testing.T) *testKeeper {
	return newKeeperWith(t, nil, decide.Msg{Kind: decide.Hello, Term: 1, Replica: "r1", Sync: 1, Types: []string{"mail"}})
}

// newKeeperWith makes a testKeeper whose replica's first Hello is the
// batch hello; before the keeper reads the store, the job inserted,
// prepare (if not nil) is given the store and the job.
func newKeeperWith(t *testing.T, prepare func(store.Store, *store.Job), hello ...decide.Msg) *testKeeper {
	return newKeeperOn(t, map[string]int{"r1": 1}, prepare, hello...)
}

// newKeeperOn is newKeeperWith on the replicas given, with their
// capacities.
func newKeeperOn(t *testing.T, replicas map[string]int, prepare func(store.Store, *store.Job), hello ...decide.Msg) *testKeeper {
	ctx := context.Background()
	st, err := fairschedsqlite.Open(filepath.Join(t.TempDir(), "jobs.db"))
	require.NoError(t, err)
	job := &store.Job{Type: "mail", Key: "k", State: store.Queued, Submitted: time.Now().UnixMicro(), Args: []byte(`"hi"`)}
	require.NoError(t, st.Insert(ctx, nil, job))
	if prepare != nil {
		prepare(st, job)
	}
	held := &heldStart{Store: st, started: make(chan struct{}), release: make(chan struct{})}
	tk := &testKeeper{t: t, st: held, job: job, out: new(decide.Outbox)}
	tk.k, err = New(Config{
		Engine: engine.Config{MaxConcurrency: 1, CostAlpha: 0.3, DefaultCost: 1, IdleTTL: int64(10 * time.Minute / time.Microsecond)},
		Errors: testErrors,
		Store:  &termStore{Store: held},
		keeper: &keeperConfig{name: "l", capacity: 1, out: tk.out, valid: func() bool { return true }},
	})
	require.NoError(t, err)
	t.Cleanup(tk.k.abandon) // closes st too
	leader := tk.k.keeper.leader
	tk.k.Deliver(func(now int64) { leader.Begin(1, replicas, now) })
	tk.deliver(hello...)
	return tk
}

// deliver hands msgs, one batch, to the keeper's leader.
func (tk *testKeeper) deliver(msgs ...decide.Msg) {
	leader := tk.k.keeper.leader
	tk.k.Deliver(func(now int64) { leader.Receive(msgs, now) })
}

// ended returns how the store has the job ended, once the keeper is idle.
func (tk *testKeeper) ended() store.State {
	t := tk.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, tk.k.WaitIdle(ctx), "the attempt has not ended")
	require.NoError(t, tk.st.Flush(ctx))
	state, why, found, err := tk.st.Ended(ctx, tk.job.ID)
	require.NoError(t, err)
	require.True(t, found, "the job has not ended")
	t.Log(why)
	return state
}

// nextRun returns the next Run the keeper sends, once it is sent.
func (tk *testKeeper) nextRun() decide.Msg {
	t := tk.t
	t.Helper()
	for {
		select {
		case <-tk.out.Pending():
		case <-time.After(time.Minute):
			t.Fatal("no Run in a minute")
		}
		for _, m := range tk.out.Take() {
			if m.Kind == decide.Run {
				return m
			}
		}
	}
}

// runsAgainAndCompletes checks that the next Run is of job seq's first
// attempt, has r1 complete it, and checks that the store has the job
// completed; it returns the Run.
func (tk *testKeeper) runsAgainAndCompletes(seq uint64) decide.Msg {
	t := tk.t
	t.Helper()
	again := tk.nextRun()
	assert.Equal(t, seq, again.Seq, "queued again at once, and started: the store has it undone")
	assert.Equal(t, 1, again.Attempt, "the attempt never begun is not counted")
	tk.deliver(decide.Msg{Kind: decide.Done, Term: 1, Replica: "r1", Seq: again.Seq, Attempt: 1, Outcome: engine.Completed})
	assert.Equal(t, store.Completed, tk.ended())
	return again
}

// A replica's Hello carries again the Dones no leader has Recorded: a
// Done sent as a connection broke is lost with it. The keeper takes a
// Hello's Done as the attempt's end, whether the attempt was granted in
// its term (after the Run, it is not lost: the replica does not list it
// as running) or the store has it started by an earlier term's leader
// (adopted, and ended at once). The job, of one attempt, completes where
// a lost attempt would have made it dead; the leader answers Recorded.
func TestKeeperTakesADoneSentAgain(t *testing.T) {
	recorded := func(tk *testKeeper, id int64) {
		t.Helper()
		var got []decide.Msg
		for _, m := range tk.out.Take() {
			if m.Kind == decide.Recorded {
				got = append(got, decide.Msg{Kind: m.Kind, Replica: m.Replica, Seq: m.Seq, Attempt: m.Attempt})
			}
		}
		assert.Equal(t, []decide.Msg{{Kind: decide.Recorded, Replica: "r1", Seq: uint64(id), Attempt: 1}}, got)
	}
	t.Run("in-its-term", func(t *testing.T) {
		tk := newTestKeeper(t)
		close(tk.st.release)
		run := tk.nextRun()
		tk.deliver(decide.Msg{Kind: decide.Hello, Term: 1, Replica: "r1", Sync: 2, N: 1, Types: []string{"mail"}},
			decide.Msg{Kind: decide.Done, Term: 1, Replica: "r1", Seq: run.Seq, Attempt: 1, Outcome: engine.Completed})
		assert.Equal(t, store.Completed, tk.ended())
		recorded(tk, tk.job.ID)
	})
	for _, sent := range []bool{true, false} {
		name := map[bool]string{true: "after-a-failover", false: "after-a-failover-not-sent"}[sent]
		t.Run(name, func(t *testing.T) {
			started := func(st store.Store, job *store.Job) { // by the last term's leader
				_, err := st.Start(context.Background(), job.ID, time.Now().UnixMicro())
				require.NoError(t, err)
			}
			hello := []decide.Msg{{Kind: decide.Hello, Term: 1, Replica: "r1", Sync: 1, Types: []string{"mail"}}}
			if sent {
				hello[0].N = 1
				hello = append(hello, decide.Msg{Kind: decide.Done, Term: 1, Replica: "r1", Seq: 1, Attempt: 1, Outcome: engine.Completed})
			}
			tk := newKeeperWith(t, started, hello...)
			close(tk.st.release)
			if !sent {
				assert.Equal(t, store.Dead, tk.ended(), "no replica lists the attempt: lost, and the job had one")
				return
			}
			require.Equal(t, int64(1), tk.job.ID)
			assert.Equal(t, store.Completed, tk.ended())
			recorded(tk, tk.job.ID)
		})
	}
}

// After a failover, the ends the new leader hears before its grants
// begin are taken only for the attempt the store has running, on the
// replica that ran it. Here the store has the job's first attempt
// started; r1's Hello lists it running, and r2's carries an end of the
// same job's attempt (a stale one, from a run r2 no longer has), failed
// for good. The attempt is adopted on r1 and goes on: r2's end does not
// end it, nor does it count it lost; r1's end, when it comes, does. And
// an end that came alone, before its replica's Hello (which no longer
// lists it, the end being sent), is kept for the attempt, not dropped.
func TestKeeperTakesEndsOfTheAttemptRunning(t *testing.T) {
	started := func(st store.Store, job *store.Job) { // by the last term's leader
		_, err := st.Start(context.Background(), job.ID, time.Now().UnixMicro())
		require.NoError(t, err)
	}
	t.Run("another-replicas-end", func(t *testing.T) {
		tk := newKeeperOn(t, map[string]int{"r1": 1, "r2": 1}, started,
			decide.Msg{Kind: decide.Hello, Term: 1, Replica: "r2", Sync: 1, N: 1, Types: []string{"mail"}},
			decide.Msg{Kind: decide.Done, Term: 1, Replica: "r2", Seq: 1, Attempt: 1, Outcome: engine.Failed, Flags: decide.DonePermanent, Err: "stale"},
			decide.Msg{Kind: decide.Hello, Term: 1, Replica: "r1", Sync: 1, N: 1, Types: []string{"mail"}},
			decide.Msg{Kind: decide.Runs, Term: 1, Replica: "r1", Seq: 1, Attempt: 1, Ran: 1000})
		require.Equal(t, int64(1), tk.job.ID)
		close(tk.st.release)
		tk.deliver(decide.Msg{Kind: decide.Done, Term: 1, Replica: "r1", Seq: 1, Attempt: 1, Outcome: engine.Completed})
		assert.Equal(t, store.Completed, tk.ended(), "ended by the replica that ran it")
	})
	t.Run("an-end-before-its-hello", func(t *testing.T) {
		tk := newKeeperOn(t, map[string]int{"r1": 1}, started,
			decide.Msg{Kind: decide.Done, Term: 1, Replica: "r1", Seq: 1, Attempt: 1, Outcome: engine.Completed},
			decide.Msg{Kind: decide.Hello, Term: 1, Replica: "r1", Sync: 1, Types: []string{"mail"}})
		close(tk.st.release)
		assert.Equal(t, store.Completed, tk.ended(), "not lost: its end came")
	})
}
