package fairschedsqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fairsched/fairsched/internal/store"
	"github.com/fairsched/fairsched/internal/storetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) {
		for _, dir := range benchDirs {
			os.RemoveAll(dir)
		}
	}))
}

func openTest(t *testing.T) *Store {
	t.Helper()
	st, err := Open(filepath.Join(t.TempDir(), "jobs.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// Every op moves a job's record as its name says, and Recover gives back
// exactly the unfinished ones, with their attempts and without their
// arguments.
func TestOpsAndRecover(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	jobs := make([]*store.Job, 6)
	for i := range jobs {
		jobs[i] = &store.Job{Type: "mail", Key: "k", Ref: "r", Priority: 60, Submitted: 100 + int64(i),
			StartBy: 9000, State: store.Queued, Args: []byte(`{"n":1}`)}
	}
	require.NoError(t, st.Insert(ctx, nil, jobs...))
	for i, j := range jobs {
		require.EqualValues(t, i+1, j.ID, "IDs in insert order")
	}
	for _, j := range jobs {
		args, err := st.Start(ctx, j.ID, 200)
		require.NoError(t, err)
		assert.JSONEq(t, `{"n":1}`, string(args), "Start gives the arguments back")
	}
	_, err := st.Start(ctx, jobs[0].ID, 201)
	assert.ErrorIs(t, err, errNotQueued, "a running job cannot start again")
	failed := store.Attempt{Start: 200, End: 300, Err: "boom"}
	st.Post(store.Op{Kind: store.OpRetry, ID: 1, At: 300, NotBefore: 400, Attempt: failed})
	st.Post(store.Op{Kind: store.OpComplete, ID: 2, At: 300})
	st.Post(store.Op{Kind: store.OpEnd, ID: 3, At: 300, Err: "cancelled"})
	st.Post(store.Op{Kind: store.OpDead, ID: 4, At: 300, Attempt: failed, Err: "boom"})
	st.Post(store.Op{Kind: store.OpInterrupt, ID: 5, At: 300})
	st.Post(store.Op{Kind: store.OpDead, ID: 6, At: 300, Attempt: failed, Err: "boom"})
	st.Post(store.Op{Kind: store.OpRequeue, ID: 6, Allowed: 2})
	st.Post(store.Op{Kind: store.OpClock, ID: 5, At: 150})
	require.NoError(t, st.Flush(ctx))

	got := storetest.Recovered(t, st)
	require.Len(t, got, 3, "1 waits for its retry, 5 was interrupted, 6 was queued again by hand")
	assert.Equal(t, &store.Job{ID: 1, Type: "mail", Key: "k", Ref: "r", Priority: 60, Submitted: 100, NotBefore: 400,
		StartBy: 9000, State: store.Queued, Attempt: 1, Attempts: []store.Attempt{failed}}, got[1])
	assert.Equal(t, 0, got[5].Attempt, "an interrupted attempt does not count")
	assert.EqualValues(t, 150, got[5].Submitted, "a pause moved its aging clock's start on")
	assert.Equal(t, 2, got[6].Allowed)
	assert.Equal(t, []int64{1, 3, 4, 5, 1, 1}, column(t, st, "SELECT state FROM fairsched_jobs ORDER BY id"))
	var dead []*store.Job
	require.NoError(t, st.Dead(ctx, 10, func(j *store.Job) error { dead = append(dead, j); return nil }))
	require.Len(t, dead, 1, "6 was queued again")
	assert.Equal(t, &store.Job{ID: 4, Type: "mail", Key: "k", Ref: "r", Priority: 60, Submitted: 103, StartBy: 9000,
		State: store.Dead, Attempt: 1, Attempts: []store.Attempt{failed}, Finished: 300, Err: "boom"}, dead[0])

	// A running job is recovered as running, with its start.
	_, err = st.Start(ctx, 5, 500)
	require.NoError(t, err)
	got = storetest.Recovered(t, st)
	assert.Equal(t, store.Running, got[5].State)
	assert.EqualValues(t, 500, got[5].Started)
}

// A transaction that fails fails every request in it, and Flush reports a
// failed posted op once.
func TestFailedWrite(t *testing.T) {
	st := openTest(t)
	ctx := context.Background()
	_, err := st.DB().Exec(`CREATE TRIGGER refuse BEFORE INSERT ON fairsched_jobs WHEN NEW.type = 'bad'
BEGIN SELECT RAISE(ABORT, 'refused'); END`)
	require.NoError(t, err)
	withID := &store.StateWrite{Name: "last", Value: func(jobs []*store.Job) []byte { return fmt.Appendf(nil, "%d", jobs[0].ID) }}
	err = st.Insert(ctx, withID, &store.Job{Type: "ok", Args: []byte(`1`)}, &store.Job{Type: "bad", Args: []byte(`1`)})
	assert.ErrorContains(t, err, "refused")
	state, err := st.State(ctx, "last")
	require.NoError(t, err)
	assert.Nil(t, state, "nor the state written with it")
	var n int
	require.NoError(t, st.DB().QueryRow("SELECT count(*) FROM fairsched_jobs").Scan(&n))
	assert.Zero(t, n, "nothing of a failed transaction is stored")
	_, err = st.DB().Exec(`CREATE TRIGGER refuse_end BEFORE UPDATE ON fairsched_jobs WHEN NEW.state = 3
BEGIN SELECT RAISE(ABORT, 'no'); END`)
	require.NoError(t, err)
	j := &store.Job{Type: "ok", Args: []byte(`1`)}
	require.NoError(t, st.Insert(ctx, withID, j))
	state, err = st.State(ctx, "last")
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprint(j.ID), string(state), "a state written with jobs, their IDs known")
	st.Post(store.Op{Kind: store.OpComplete, ID: j.ID, At: 1})
	assert.ErrorContains(t, st.Flush(ctx), "no")
	assert.NoError(t, st.Flush(ctx))
}

// Finished jobs are deleted once past their retention, dead ones past
// theirs (internal/storetest).
func TestPrune(t *testing.T) {
	st, err := Open(filepath.Join(t.TempDir(), "jobs.db"), Options{Retention: time.Hour, DeadRetention: 2 * time.Hour})
	require.NoError(t, err)
	defer st.Close()
	storetest.Prune(t, storetest.Pruned{Store: st, Prune: st.pruner.Prune, Commits: st.w.commits.Load,
		IDs: func() []int64 { return column(t, st, "SELECT id FROM fairsched_jobs ORDER BY id") }})
}

// column returns the one integer column query selects, row by row.
func column(t *testing.T, st *Store, query string) []int64 {
	t.Helper()
	rows, err := st.DB().Query(query)
	require.NoError(t, err)
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var v int64
		require.NoError(t, rows.Scan(&v))
		out = append(out, v)
	}
	require.NoError(t, rows.Err())
	return out
}

// A file of the first schema is migrated, its jobs kept; an empty file
// gets the whole schema.
func TestMigrateFromVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	_, err = db.Exec(migrations[0])
	require.NoError(t, err)
	_, err = db.Exec(`PRAGMA user_version = 1;
INSERT INTO fairsched_jobs (state, type, key, ref, priority, submitted, args) VALUES (1, 'mail', 'k', '', 0, 5, '{}')`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	st, err := Open(path)
	require.NoError(t, err)
	defer st.Close()
	var v int
	require.NoError(t, st.DB().QueryRow("PRAGMA user_version").Scan(&v))
	assert.Equal(t, schemaVersion, v)
	got := storetest.Recovered(t, st)
	require.Len(t, got, 1, "the job of the old schema is kept")
	assert.Equal(t, "mail", got[1].Type)
	st.PutState("fair", []byte(`{}`))
	require.NoError(t, st.Flush(context.Background()))
	b, err := st.State(context.Background(), "fair")
	require.NoError(t, err)
	assert.Equal(t, `{}`, string(b), "the table of version 2 is there")
}

// Closing a Store twice is harmless: the second call returns the first
// one's result, and the file is free for another Store.
func TestCloseTwice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	st, err := Open(path)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.NoError(t, st.Close())
	again, err := Open(path)
	require.NoError(t, err)
	require.NoError(t, again.Close())
}

// The state writes of one transaction (storetest.StateOrder).
func TestStateOrderInATransaction(t *testing.T) {
	st := openTest(t)
	storetest.StateOrder(t, st, st.w.apply)
}
