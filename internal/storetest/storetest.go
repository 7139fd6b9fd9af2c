// Package storetest is the conformance suite of durable stores: what
// every implementation of internal/store's Store (and TxInserter) must
// do, checked through the interface alone, so that the SQLite store and
// the PostgreSQL one are held to the same behaviour. Each store's tests
// run it on fresh databases of their own (Run, RunTx); what only one
// store can check (its files, its triggers, its SQL) stays in its tests.
package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/fairsched/fairsched/internal/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Opener opens a Store on one database, the same at every call: a Store
// opened after another was closed finds what that one wrote. The suite
// closes the Stores it opens.
type Opener func(t *testing.T) store.Store

// Fresh makes a new, empty database for t and returns its Opener.
type Fresh func(t *testing.T) Opener

// Run runs the suite of Store on databases fresh makes, each subtest on
// one of its own.
func Run(t *testing.T, fresh Fresh) {
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"OpsAndRecover", opsAndRecover},
		{"StartRefused", startRefused},
		{"Ended", ended},
		{"DeadNewestFirst", deadNewestFirst},
		{"AfterAndNeeds", afterAndNeeds},
		{"InsertWithState", insertWithState},
		{"StateReadsItsWrites", stateReadsItsWrites},
		{"Reopen", reopen},
		{"ConcurrentWrites", concurrentWrites},
		{"ManyInOneInsert", manyInOneInsert},
		{"Closed", closed},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, fresh(t)) })
	}
}

// opened opens a Store with open, closed when t ends (if not before).
func opened(t *testing.T, open Opener) store.Store {
	t.Helper()
	st := open(t)
	t.Cleanup(func() { st.Close() })
	return st
}

// Recovered returns what st's Recover gives back, by ID, checking that it
// comes in ID order.
func Recovered(t *testing.T, st store.Store) map[int64]*store.Job {
	t.Helper()
	out := make(map[int64]*store.Job)
	var last int64
	require.NoError(t, st.Recover(context.Background(), func(j *store.Job) error {
		require.Greater(t, j.ID, last, "in ID order")
		last = j.ID
		out[j.ID] = j
		return nil
	}))
	return out
}

// stateOf returns the state Ended reads of job id, 0 if the store no
// longer has it.
func stateOf(t *testing.T, st store.Store, id int64) store.State {
	t.Helper()
	state, _, found, err := st.Ended(context.Background(), id)
	require.NoError(t, err)
	if !found {
		return 0
	}
	return state
}

// mails returns n queued jobs of type "mail" submitted at 100, 101 ...
func mails(n int) []*store.Job {
	jobs := make([]*store.Job, n)
	for i := range jobs {
		jobs[i] = &store.Job{Type: "mail", Key: "k", Ref: "r", Priority: 60, Submitted: 100 + int64(i),
			StartBy: 9000, State: store.Queued, Args: []byte(`{"n":1}`)}
	}
	return jobs
}

// Every op moves a job's record as its name says, and Recover gives back
// exactly the unfinished ones, with their attempts and without their
// arguments.
func opsAndRecover(t *testing.T, open Opener) {
	st := opened(t, open)
	ctx := context.Background()
	jobs := mails(6)
	require.NoError(t, st.Insert(ctx, nil, jobs...))
	for i, j := range jobs {
		require.NotZero(t, j.ID)
		if i > 0 {
			require.Greater(t, j.ID, jobs[i-1].ID, "IDs in insert order")
		}
	}
	for _, j := range jobs {
		args, err := st.Start(ctx, j.ID, 200)
		require.NoError(t, err)
		assert.JSONEq(t, `{"n":1}`, string(args), "Start gives the arguments back")
	}
	_, err := st.Start(ctx, jobs[0].ID, 201)
	assert.Error(t, err, "a running job cannot start again")
	id := func(i int) int64 { return jobs[i-1].ID }
	failed := store.Attempt{Start: 200, End: 300, Err: "boom"}
	st.Post(store.Op{Kind: store.OpRetry, ID: id(1), At: 300, NotBefore: 400, Attempt: failed, Stood: 7})
	st.Post(store.Op{Kind: store.OpComplete, ID: id(2), At: 300})
	st.Post(store.Op{Kind: store.OpEnd, ID: id(3), At: 300, Err: "cancelled"})
	st.Post(store.Op{Kind: store.OpDead, ID: id(4), At: 300, Attempt: failed, Err: "boom"})
	st.Post(store.Op{Kind: store.OpInterrupt, ID: id(5), At: 300})
	st.Post(store.Op{Kind: store.OpDead, ID: id(6), At: 300, Attempt: failed, Err: "boom"})
	st.Post(store.Op{Kind: store.OpRequeue, ID: id(6), Allowed: 2})
	st.Post(store.Op{Kind: store.OpClock, ID: id(5), At: 150, Stood: 9})
	st.Post(store.Op{Kind: store.OpPriority, ID: id(5), Allowed: 80})
	require.NoError(t, st.Flush(ctx))

	got := Recovered(t, st)
	require.Len(t, got, 3, "1 waits for its retry, 5 was interrupted, 6 was queued again by hand")
	assert.Equal(t, &store.Job{ID: id(1), Type: "mail", Key: "k", Ref: "r", Priority: 60, Submitted: 100, NotBefore: 400,
		StartBy: 9000, State: store.Queued, Attempt: 1, Attempts: []store.Attempt{failed}, Stood: 7}, got[id(1)])
	assert.Equal(t, &store.Job{ID: id(5), Type: "mail", Key: "k", Ref: "r", Priority: 80, Submitted: 150,
		StartBy: 9000, State: store.Queued, Stood: 9}, got[id(5)],
		"an interrupted attempt does not count; a pause moved its aging clock's start on; a duplicate raised its priority")
	assert.Equal(t, 2, got[id(6)].Allowed)
	assert.Equal(t, store.Queued, got[id(6)].State)
	assert.Zero(t, got[id(6)].Finished, "queued again by hand: no longer finished")
	assert.Equal(t, []store.State{store.Queued, store.Completed, store.Ended, store.Dead, store.Queued, store.Queued},
		[]store.State{stateOf(t, st, id(1)), stateOf(t, st, id(2)), stateOf(t, st, id(3)), stateOf(t, st, id(4)),
			stateOf(t, st, id(5)), stateOf(t, st, id(6))})
	var dead []*store.Job
	require.NoError(t, st.Dead(ctx, 10, func(j *store.Job) error { dead = append(dead, j); return nil }))
	require.Len(t, dead, 1, "6 was queued again")
	assert.Equal(t, &store.Job{ID: id(4), Type: "mail", Key: "k", Ref: "r", Priority: 60, Submitted: 103, StartBy: 9000,
		State: store.Dead, Attempt: 1, Attempts: []store.Attempt{failed}, Finished: 300, Err: "boom"}, dead[0])

	// A running job is recovered as running, with its start.
	_, err = st.Start(ctx, id(5), 500)
	require.NoError(t, err)
	got = Recovered(t, st)
	assert.Equal(t, store.Running, got[id(5)].State)
	assert.EqualValues(t, 500, got[id(5)].Started)
	assert.Equal(t, 1, got[id(5)].Attempt)

	// Two failed attempts are kept in their order.
	again := store.Attempt{Start: 500, End: 600, Err: "again"}
	st.Post(store.Op{Kind: store.OpRetry, ID: id(5), At: 600, NotBefore: 700, Attempt: again})
	require.NoError(t, st.Flush(ctx))
	_, err = st.Start(ctx, id(5), 700)
	require.NoError(t, err)
	st.Post(store.Op{Kind: store.OpDead, ID: id(5), At: 800, Attempt: failed, Err: "boom"})
	require.NoError(t, st.Flush(ctx))
	dead = dead[:0]
	require.NoError(t, st.Dead(ctx, 10, func(j *store.Job) error { dead = append(dead, j); return nil }))
	require.Len(t, dead, 2)
	assert.Equal(t, id(5), dead[0].ID, "the newest dead first")
	assert.Equal(t, []store.Attempt{again, failed}, dead[0].Attempts)
	assert.Equal(t, 2, dead[0].Attempt)
}

// Start fails for a job that runs, has ended, or does not exist, and
// changes nothing then.
func startRefused(t *testing.T, open Opener) {
	st := opened(t, open)
	ctx := context.Background()
	jobs := mails(2)
	require.NoError(t, st.Insert(ctx, nil, jobs...))
	_, err := st.Start(ctx, jobs[0].ID, 10)
	require.NoError(t, err)
	_, err = st.Start(ctx, jobs[0].ID, 11)
	assert.Error(t, err, "running")
	st.Post(store.Op{Kind: store.OpComplete, ID: jobs[1].ID, At: 5})
	require.NoError(t, st.Flush(ctx))
	_, err = st.Start(ctx, jobs[1].ID, 12)
	assert.Error(t, err, "completed")
	_, err = st.Start(ctx, jobs[1].ID+1000, 12)
	assert.Error(t, err, "no such job")
	got := Recovered(t, st)
	require.Len(t, got, 1)
	assert.Equal(t, 1, got[jobs[0].ID].Attempt, "the refused start counted no attempt")
	assert.EqualValues(t, 10, got[jobs[0].ID].Started)
	assert.NoError(t, st.Flush(ctx), "a refused start is no failed write")
}

// Ended says how a job ended, and that the store has none under an
// unknown ID.
func ended(t *testing.T, open Opener) {
	st := opened(t, open)
	ctx := context.Background()
	jobs := mails(3)
	require.NoError(t, st.Insert(ctx, nil, jobs...))
	st.Post(store.Op{Kind: store.OpComplete, ID: jobs[0].ID, At: 5})
	st.Post(store.Op{Kind: store.OpEnd, ID: jobs[1].ID, At: 5, Err: "a dependency failed"})
	require.NoError(t, st.Flush(ctx))
	for _, c := range []struct {
		id    int64
		state store.State
		why   string
		found bool
	}{
		{jobs[0].ID, store.Completed, "", true},
		{jobs[1].ID, store.Ended, "a dependency failed", true},
		{jobs[2].ID, store.Queued, "", true},
		{jobs[2].ID + 1000, 0, "", false},
	} {
		state, why, found, err := st.Ended(ctx, c.id)
		require.NoError(t, err)
		assert.Equal(t, c.found, found, "job %d", c.id)
		if found {
			assert.Equal(t, c.state, state, "job %d", c.id)
			assert.Equal(t, c.why, why, "job %d", c.id)
		}
	}
}

// Dead lists the dead jobs newest first, at most limit of them.
func deadNewestFirst(t *testing.T, open Opener) {
	st := opened(t, open)
	ctx := context.Background()
	jobs := mails(5)
	require.NoError(t, st.Insert(ctx, nil, jobs...))
	for i, j := range jobs[:4] {
		st.Post(store.Op{Kind: store.OpDead, ID: j.ID, At: int64(1000 - 10*i), Err: fmt.Sprint("e", i)}) // the first died last
	}
	require.NoError(t, st.Flush(ctx))
	var ids []int64
	require.NoError(t, st.Dead(ctx, 3, func(j *store.Job) error {
		assert.Nil(t, j.Args, "without their arguments")
		ids = append(ids, j.ID)
		return nil
	}))
	assert.Equal(t, []int64{jobs[0].ID, jobs[1].ID, jobs[2].ID}, ids)
	stop := fmt.Errorf("stop")
	n := 0
	err := st.Dead(ctx, 10, func(*store.Job) error { n++; return stop })
	assert.ErrorIs(t, err, stop, "fn's error ends the read")
	assert.Equal(t, 1, n)
}

// A job's dependencies and resource needs are kept: nil needs (its
// type's) apart from empty ones (none); HasDependencies sees the
// unfinished jobs that run after others.
func afterAndNeeds(t *testing.T, open Opener) {
	st := opened(t, open)
	ctx := context.Background()
	has, err := st.HasDependencies(ctx)
	require.NoError(t, err)
	assert.False(t, has, "an empty store")
	first := mails(1)[0]
	require.NoError(t, st.Insert(ctx, nil, first))
	jobs := mails(3)
	jobs[0].After = []int64{first.ID}
	jobs[0].Needs = map[string]int{"gpu": 2, "db": 1}
	jobs[1].Needs = map[string]int{}
	require.NoError(t, st.Insert(ctx, nil, jobs...))
	has, err = st.HasDependencies(ctx)
	require.NoError(t, err)
	assert.True(t, has)
	got := Recovered(t, st)
	assert.Equal(t, []int64{first.ID}, got[jobs[0].ID].After)
	assert.Equal(t, map[string]int{"gpu": 2, "db": 1}, got[jobs[0].ID].Needs)
	assert.NotNil(t, got[jobs[1].ID].Needs, "no resources, not its type's")
	assert.Empty(t, got[jobs[1].ID].Needs)
	assert.Nil(t, got[jobs[2].ID].Needs, "its type's")
	assert.Nil(t, got[jobs[2].ID].After)

	st.Post(store.Op{Kind: store.OpEnd, ID: jobs[0].ID, At: 1, Err: "x"})
	require.NoError(t, st.Flush(ctx))
	has, err = st.HasDependencies(ctx)
	require.NoError(t, err)
	assert.False(t, has, "the job that ran after another has ended")
}

// A state written with jobs is computed once they have their IDs, and
// committed with them.
func insertWithState(t *testing.T, open Opener) {
	st := opened(t, open)
	ctx := context.Background()
	for _, name := range []string{"last", "schedule:nightly"} {
		withID := &store.StateWrite{Name: name, Value: func(jobs []*store.Job) []byte {
			return fmt.Appendf(nil, "%d,%d", jobs[0].ID, jobs[1].ID)
		}}
		jobs := mails(2)
		require.NoError(t, st.Insert(ctx, withID, jobs...))
		v, err := st.State(ctx, name)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("%d,%d", jobs[0].ID, jobs[1].ID), string(v), name)
	}
	v, err := st.State(ctx, "none")
	require.NoError(t, err)
	assert.Nil(t, v, "a state never put")
}

// State reads what PutState was given before it, posted or not yet
// written: a scheduler started on a Store another one used finds that
// one's last pauses (a ResumeKey after its Shutdown, say).
func stateReadsItsWrites(t *testing.T, open Opener) {
	st := opened(t, open)
	for i := range 50 {
		want := []byte{byte(i)}
		name := "pauses"
		if i%2 == 1 {
			name = "schedule:hourly"
		}
		st.PutState(name, want)
		got, err := st.State(context.Background(), name)
		require.NoError(t, err)
		require.Equal(t, want, got, "write %d", i)
	}
}

// What a Store wrote, a Store opened after it was closed reads: the jobs,
// queued, running and dead, and the states. Close flushes what was
// posted.
func reopen(t *testing.T, open Opener) {
	ctx := context.Background()
	st := open(t)
	jobs := mails(3)
	require.NoError(t, st.Insert(ctx, nil, jobs...))
	_, err := st.Start(ctx, jobs[0].ID, 10)
	require.NoError(t, err)
	st.Post(store.Op{Kind: store.OpDead, ID: jobs[1].ID, At: 20, Err: "boom"})
	st.PutState("fair", []byte(`{"v":1}`))
	st.PutState("schedule:nightly", []byte(`{"next":5}`))
	require.NoError(t, st.Close(), "Close flushes")
	require.NoError(t, st.Close(), "twice: harmless")

	st = opened(t, open)
	got := Recovered(t, st)
	require.Len(t, got, 2)
	assert.Equal(t, store.Running, got[jobs[0].ID].State, "its process stopped while it ran")
	assert.Equal(t, store.Queued, got[jobs[2].ID].State)
	var dead []int64
	require.NoError(t, st.Dead(ctx, 10, func(j *store.Job) error { dead = append(dead, j.ID); return nil }))
	assert.Equal(t, []int64{jobs[1].ID}, dead)
	for name, want := range map[string]string{"fair": `{"v":1}`, "schedule:nightly": `{"next":5}`} {
		v, err := st.State(ctx, name)
		require.NoError(t, err)
		assert.Equal(t, want, string(v), name)
	}
	more := mails(1)
	require.NoError(t, st.Insert(ctx, nil, more...))
	assert.Greater(t, more[0].ID, jobs[2].ID, "IDs are never reused")
}

// Writes from many goroutines at once are all kept, each job once, with
// IDs distinct; each job's ops apply in the order they were posted.
func concurrentWrites(t *testing.T, open Opener) {
	st := opened(t, open)
	ctx := context.Background()
	const writers, each = 8, 25
	var wg sync.WaitGroup
	ids := make([][]int64, writers)
	errs := make([]error, writers)
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				jobs := mails(2)
				if err := st.Insert(ctx, nil, jobs...); err != nil {
					errs[g] = err
					return
				}
				if _, err := st.Start(ctx, jobs[0].ID, 1); err != nil {
					errs[g] = err
					return
				}
				st.Post(store.Op{Kind: store.OpRetry, ID: jobs[0].ID, At: 2, NotBefore: 3, Attempt: store.Attempt{Start: 1, End: 2, Err: "x"}})
				st.Post(store.Op{Kind: store.OpComplete, ID: jobs[1].ID, At: 2})
				ids[g] = append(ids[g], jobs[0].ID, jobs[1].ID)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, st.Flush(ctx))
	seen := make(map[int64]bool)
	for _, g := range ids {
		for _, id := range g {
			require.False(t, seen[id], "ID %d given twice", id)
			seen[id] = true
		}
	}
	got := Recovered(t, st)
	require.Len(t, got, writers*each, "the retried jobs; the completed ones are finished")
	for _, g := range ids {
		for i := 0; i < len(g); i += 2 {
			j := got[g[i]]
			require.NotNil(t, j, "job %d", g[i])
			assert.Equal(t, store.Queued, j.State)
			assert.EqualValues(t, 3, j.NotBefore)
			assert.Len(t, j.Attempts, 1)
			assert.Equal(t, store.Completed, stateOf(t, st, g[i+1]))
		}
	}
}

// One Insert of many jobs, past any store's rows per statement, keeps
// them all, in order, each with its arguments.
func manyInOneInsert(t *testing.T, open Opener) {
	st := opened(t, open)
	ctx := context.Background()
	jobs := mails(2500)
	for i, j := range jobs {
		j.Args = fmt.Appendf(nil, `{"n":%d}`, i)
	}
	require.NoError(t, st.Insert(ctx, nil, jobs...))
	for i := 1; i < len(jobs); i++ {
		require.Greater(t, jobs[i].ID, jobs[i-1].ID, "IDs in insert order")
	}
	for _, i := range []int{0, 99, 100, 999, 1000, 2499} {
		args, err := st.Start(ctx, jobs[i].ID, 1)
		require.NoError(t, err)
		assert.JSONEq(t, fmt.Sprintf(`{"n":%d}`, i), string(args))
	}
	got := Recovered(t, st)
	assert.Len(t, got, len(jobs))
	assert.EqualValues(t, 100+999, got[jobs[999].ID].Submitted)
}

// A closed Store refuses writes with ErrClosed, and its Close again
// returns what the first returned.
func closed(t *testing.T, open Opener) {
	st := open(t)
	require.NoError(t, st.Close())
	err := st.Insert(context.Background(), nil, mails(1)...)
	assert.ErrorIs(t, err, store.ErrClosed)
	_, err = st.Start(context.Background(), 1, 1)
	assert.ErrorIs(t, err, store.ErrClosed)
	assert.NoError(t, st.Close())
}
