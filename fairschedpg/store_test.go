package fairschedpg

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fairsched/fairsched/fairschedpg/internal/pgtest"
	"github.com/fairsched/fairsched/internal/rt"
	"github.com/fairsched/fairsched/internal/store"
	"github.com/fairsched/fairsched/internal/storetest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openTest opens a Store on a fresh schema, closed when the test ends.
// The schema is made first, without the test's statement timeout: a
// test's short one is for its own statements, and migrating on a loaded
// machine may take longer.
func openTest(t *testing.T, opts ...Options) (*Store, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.Pool(t)
	require.NoError(t, Migrate(context.Background(), pool))
	st, err := OpenPool(context.Background(), pool, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st, pool
}

// column returns the one integer column query selects, row by row.
func column(t *testing.T, pool *pgxpool.Pool, query string) []int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), query)
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

// A transaction that fails fails every request in it, and Flush reports a
// failed posted op once.
func TestFailedWrite(t *testing.T) {
	t.Parallel()
	st, pool := openTest(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused %', NEW.type; END $$;
CREATE TRIGGER refuse BEFORE INSERT ON fairsched_jobs FOR EACH ROW WHEN (NEW.type = 'bad') EXECUTE FUNCTION refuse();
CREATE TRIGGER refuse_end BEFORE UPDATE ON fairsched_jobs FOR EACH ROW WHEN (NEW.state = 3 AND NEW.type = 'no') EXECUTE FUNCTION refuse();`)
	require.NoError(t, err)
	withID := &store.StateWrite{Name: "last", Value: func(jobs []*store.Job) []byte { return fmt.Appendf(nil, "%d", jobs[0].ID) }}
	err = st.Insert(ctx, withID, &store.Job{Type: "ok", Args: []byte(`1`)}, &store.Job{Type: "bad", Args: []byte(`1`)})
	assert.ErrorContains(t, err, "refused bad")
	state, err := st.State(ctx, "last")
	require.NoError(t, err)
	assert.Nil(t, state, "nor the state written with it")
	assert.Empty(t, column(t, pool, "SELECT id FROM fairsched_jobs"), "nothing of a failed transaction is stored")

	j := &store.Job{Type: "no", Args: []byte(`1`)}
	require.NoError(t, st.Insert(ctx, withID, j))
	state, err = st.State(ctx, "last")
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprint(j.ID), string(state), "a state written with jobs, their IDs known")
	st.Post(store.Op{Kind: store.OpComplete, ID: j.ID, At: 1})
	assert.ErrorContains(t, st.Flush(ctx), "refused no")
	assert.NoError(t, st.Flush(ctx))
	assert.Equal(t, []int64{1}, column(t, pool, "SELECT state FROM fairsched_jobs"), "queued still")
}

// Every transaction of the Store's is READ COMMITTED with the statement
// timeout, whatever the pool's connections default to.
func TestTransactionSettings(t *testing.T) {
	t.Parallel()
	pool, schemaName := pgtest.PoolSchema(t)
	ctx := context.Background()
	cfg := pgtest.Config(t, schemaName)
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "serializable"
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = "0"
	strict, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer strict.Close()
	st, err := OpenPool(ctx, strict, Options{StatementTimeout: 1234 * time.Millisecond})
	require.NoError(t, err)
	defer st.Close()
	_, err = pool.Exec(ctx, `
CREATE TABLE settings (isolation text, timeout text);
CREATE FUNCTION note() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
	INSERT INTO settings VALUES (current_setting('transaction_isolation'), current_setting('statement_timeout'));
	RETURN NEW;
END $$;
CREATE TRIGGER note BEFORE INSERT OR UPDATE ON fairsched_jobs FOR EACH ROW EXECUTE FUNCTION note();`)
	require.NoError(t, err)
	j := &store.Job{Type: "t", Args: []byte(`1`)}
	require.NoError(t, st.Insert(ctx, nil, j))
	_, err = st.Start(ctx, j.ID, 1)
	require.NoError(t, err)
	var n int
	var isolation, timeout string
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), min(isolation), max(isolation), min(timeout) FROM settings`).Scan(&n, &isolation, new(string), &timeout))
	assert.Equal(t, 2, n)
	assert.Equal(t, "read committed", isolation)
	assert.Equal(t, "1234ms", timeout)
	var serializable string
	require.NoError(t, strict.QueryRow(ctx, `SHOW transaction_isolation`).Scan(&serializable))
	assert.Equal(t, "serializable", serializable, "the pool's connections keep their own")
}

// The states of durable schedules are kept in fairsched_schedules, under
// the schedule's name; the others in fairsched_state.
func TestStateTables(t *testing.T) {
	t.Parallel()
	st, pool := openTest(t)
	ctx := context.Background()
	assert.Equal(t, rt.ScheduleStateName("nightly"), schedulePrefix+"nightly", "the run-time layer's names")
	st.PutState(rt.ScheduleStateName("nightly"), []byte(`{"next":1}`))
	st.PutState("fair", []byte(`{}`))
	require.NoError(t, st.Flush(ctx))
	var schedule, fair []byte
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT value FROM fairsched_schedules WHERE name = 'nightly'),
		(SELECT value FROM fairsched_state WHERE name = 'fair')`).Scan(&schedule, &fair))
	assert.Equal(t, `{"next":1}`, string(schedule))
	assert.Equal(t, `{}`, string(fair))
}

// Finished jobs are deleted once past their retention, dead ones past
// theirs (internal/storetest).
func TestPrune(t *testing.T) {
	t.Parallel()
	st, pool := openTest(t, Options{Retention: time.Hour, DeadRetention: 2 * time.Hour})
	storetest.Prune(t, storetest.Pruned{Store: st, Prune: st.pruner.Prune, Commits: st.w.commits.Load,
		IDs: func() []int64 { return column(t, pool, "SELECT id FROM fairsched_jobs ORDER BY id") }})
}

// One Store per schema: a second is refused with ErrInUse while the
// first is open, and opens once it is closed.
func TestInUse(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ctx := context.Background()
	first, err := OpenPool(ctx, pool)
	require.NoError(t, err)
	_, err = OpenPool(ctx, pool, Options{StatementTimeout: 100 * time.Millisecond})
	require.ErrorIs(t, err, ErrInUse)
	other := pgtest.Pool(t) // another schema of the same database
	st, err := OpenPool(ctx, other)
	require.NoError(t, err, "another schema is another store")
	require.NoError(t, st.Close())
	require.NoError(t, first.Close())
	second, err := OpenPool(ctx, pool)
	require.NoError(t, err)
	require.NoError(t, second.Close())
}

// Replicas' Stores share a schema, each on a pool of its own (a process
// of its own); a Store of one process is refused while any is open, and
// refuses them while it is.
func TestInUseShared(t *testing.T) {
	t.Parallel()
	_, name := pgtest.PoolSchema(t)
	ctx := context.Background()
	process := func() *pgxpool.Pool {
		pool, err := pgxpool.NewWithConfig(ctx, pgtest.Config(t, name))
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		return pool
	}
	short := options([]Options{{StatementTimeout: 100 * time.Millisecond}})
	a, err := openPool(ctx, process(), options(nil), true)
	require.NoError(t, err)
	b, err := openPool(ctx, process(), options(nil), true)
	require.NoError(t, err, "two replicas' Stores on one schema")
	_, err = OpenPool(ctx, process(), short)
	require.ErrorIs(t, err, ErrInUse, "one process's Store, while replicas' are open")
	require.NoError(t, a.Close())
	_, err = OpenPool(ctx, process(), short)
	require.ErrorIs(t, err, ErrInUse, "while one replica's is open")
	require.NoError(t, b.Close())

	one, err := OpenPool(ctx, process())
	require.NoError(t, err, "once none is open")
	_, err = openPool(ctx, process(), short, true)
	require.ErrorIs(t, err, ErrInUse, "a replica's Store, while one process's is open")
	require.NoError(t, one.Close())
	c, err := openPool(ctx, process(), options(nil), true)
	require.NoError(t, err)
	require.NoError(t, c.Close())
}

// Open makes a pool of its own from a DSN, and Close closes it; a DSN
// that cannot connect, or does not parse, is an error, not a hang.
func TestOpenDSN(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	_, schemaName := pgtest.PoolSchema(t)
	st, err := Open(ctx, dsn+"&search_path="+schemaName)
	require.NoError(t, err)
	assert.Equal(t, schemaName, st.schema)
	require.NoError(t, st.Close())
	assert.Error(t, st.Pool().Ping(ctx), "its pool is closed")

	_, err = Open(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=5&sslmode=disable")
	assert.ErrorContains(t, err, "fairschedpg: migrating the schema")
	_, err = Open(ctx, "postgres://%zz")
	assert.ErrorContains(t, err, "fairschedpg:")
}

// A schema a newer version wrote is refused, untouched.
func TestOpenSchemaTooNew(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ctx := context.Background()
	require.NoError(t, Migrate(ctx, pool))
	_, err := pool.Exec(ctx, `INSERT INTO fairsched_schema_version (version) VALUES ($1)`, SchemaVersion+1)
	require.NoError(t, err)
	_, err = OpenPool(ctx, pool)
	assert.ErrorIs(t, err, ErrSchemaTooNew)
}

// watched returns st recovered and watched, the jobs that arrive going
// to the channel returned.
func watched(t *testing.T, st *Store) <-chan *store.Job {
	t.Helper()
	require.NoError(t, st.Recover(context.Background(), func(*store.Job) error { return nil }))
	got := make(chan *store.Job, 10)
	require.NoError(t, st.Watch(func(j *store.Job) { got <- j }))
	return got
}

// handedOnce makes st's watcher look once more, as a notification or a
// poll would, and fails t if got then holds a job: a job handed on is
// not handed on again. The look hands on before it returns.
func handedOnce(t *testing.T, st *Store, got <-chan *store.Job) {
	t.Helper()
	st.watch.look()
	select {
	case j := <-got:
		t.Errorf("job %d handed on again", j.ID)
	default:
	}
}

// A job committed without a notification (one missed while the session
// was down, say) arrives all the same, at the next poll.
func TestWatchPolls(t *testing.T) {
	t.Parallel()
	st, pool := openTest(t, Options{PollInterval: 20 * time.Millisecond})
	got := watched(t, st)
	var id int64
	require.NoError(t, pool.QueryRow(context.Background(), `INSERT INTO fairsched_jobs (state, type, key, ref, priority, submitted, args, unseen)
		VALUES (1, 'mail', 'k', '', 0, 5, '{}', true) RETURNING id`).Scan(&id))
	j := <-got
	assert.Equal(t, id, j.ID)
	assert.Equal(t, "mail", j.Type)
	handedOnce(t, st, got)
}

// A session whose connection the server drops is opened again, takes
// its lock again, and jobs keep arriving; a Store that finds its lock
// taken meanwhile writes no more.
func TestWatchReconnects(t *testing.T) {
	t.Parallel()
	st, pool := openTest(t, Options{PollInterval: 50 * time.Millisecond, StatementTimeout: 200 * time.Millisecond})
	gate := make(chan chan struct{}, 1) // a reconnection waits for the channel sent, if one is
	reconnected := make(chan error, 10)
	st.watch.beforeReconnect = func() {
		select {
		case c := <-gate:
			<-c
		default:
		}
	}
	st.watch.afterReconnect = func(err error) { reconnected <- err }
	got := watched(t, st)
	ctx := context.Background()
	for round := range 2 {
		pid := st.watch.session().PgConn().PID()
		var ok bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&ok))
		require.True(t, ok)
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		j := &store.Job{Type: "mail", Args: []byte(`{}`)}
		require.NoError(t, st.InsertTx(ctx, tx, j))
		require.NoError(t, tx.Commit(ctx))
		require.NoError(t, <-reconnected, "round %d", round)
		assert.Equal(t, j.ID, (<-got).ID, "round %d", round)
	}
	require.NoError(t, st.Insert(ctx, nil, &store.Job{Type: "t", Args: []byte(`1`)}), "the lock is this Store's again")

	// The lock held by the Store's own last session, which the server
	// still thinks alive (a zombie stands in for it): the Store ends it.
	opened := make(chan struct{})
	gate <- opened
	pid := st.watch.session().PgConn().PID()
	_, err := pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid)
	require.NoError(t, err)
	zombie, err := pgx.ConnectConfig(ctx, pgtest.Config(t, st.schema).ConnConfig)
	require.NoError(t, err)
	defer zombie.Close(ctx)
	_, err = zombie.Exec(ctx, `SELECT pg_advisory_lock($1, hashtext($2))`, storeLockKey, st.schema) // once the backend has gone
	require.NoError(t, err)
	require.NoError(t, zombie.QueryRow(ctx, `SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()`).
		Scan(&st.watch.last.pid, &st.watch.last.start))
	close(opened)
	require.NoError(t, <-reconnected, "its own last session does not keep the lock from it")
	assert.Error(t, zombie.Ping(ctx), "ended")
	require.NoError(t, st.Insert(ctx, nil, &store.Job{Type: "t", Args: []byte(`1`)}))

	// Another takes the lock while the session is down.
	taken := make(chan struct{})
	gate <- taken
	pid = st.watch.session().PgConn().PID()
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SELECT pg_advisory_lock($1, hashtext($2))`, storeLockKey, st.schema) // once the backend has gone
	require.NoError(t, err)
	close(taken)
	assert.ErrorIs(t, <-reconnected, ErrInUse)
	err = st.Insert(ctx, nil, &store.Job{Type: "t", Args: []byte(`1`)})
	assert.ErrorIs(t, err, ErrInUse, "this Store writes no more")
	_, err = conn.Exec(ctx, `SELECT pg_advisory_unlock_all()`)
	require.NoError(t, err)
}

// A commit the server did not answer is ErrCommitUnknown; one it refused,
// or one never sent, is not.
func TestCommitUnknown(t *testing.T) {
	refused := &pgconn.PgError{Severity: "ERROR", Code: "23505", Message: "duplicate key"}
	assert.Same(t, error(refused), commitUnknown(refused))
	lost := fmt.Errorf("read: %w", io.ErrUnexpectedEOF)
	assert.ErrorIs(t, commitUnknown(lost), ErrCommitUnknown)
	assert.ErrorIs(t, commitUnknown(lost), io.ErrUnexpectedEOF, "and the cause")
	assert.ErrorIs(t, commitUnknown(context.DeadlineExceeded), ErrCommitUnknown)
}

// Recover reads past its page of 10,000 jobs, in ID order, and clears
// the mark of the callers' jobs it read, on every page, so that none
// arrives again.
func TestRecoverPages(t *testing.T) {
	t.Parallel()
	st, pool := openTest(t)
	ctx := context.Background()
	jobs := make([]*store.Job, 25_000)
	for i := range jobs {
		jobs[i] = &store.Job{Type: "t", Submitted: int64(i), Args: []byte(`1`)}
	}
	require.NoError(t, st.Insert(ctx, nil, jobs...))
	// Three as a caller's transaction inserts them, across the pages.
	marked := []int64{jobs[5].ID, jobs[15_000].ID, jobs[24_999].ID}
	_, err := pool.Exec(ctx, `UPDATE fairsched_jobs SET unseen = true WHERE id = ANY($1)`, marked)
	require.NoError(t, err)
	n := 0
	var last int64
	require.NoError(t, st.Recover(ctx, func(j *store.Job) error {
		require.Greater(t, j.ID, last)
		last = j.ID
		n++
		return nil
	}))
	assert.Equal(t, len(jobs), n)
	got := make(chan *store.Job, 3)
	require.NoError(t, st.Watch(func(j *store.Job) { got <- j }))
	handedOnce(t, st, got) // Recover read them: none is handed on
}

// Jobs committed while no one watched (Watch(nil)) stay unseen, and
// arrive as soon as someone watches again, not at the next poll.
func TestWatchAgain(t *testing.T) {
	t.Parallel()
	st, pool := openTest(t, Options{PollInterval: time.Hour})
	got := watched(t, st)
	ctx := context.Background()
	insert := func() int64 {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		j := &store.Job{Type: "mail", Args: []byte(`{}`)}
		require.NoError(t, st.InsertTx(ctx, tx, j))
		require.NoError(t, tx.Commit(ctx))
		return j.ID
	}
	first := insert()
	assert.Equal(t, first, (<-got).ID, "notified")
	require.NoError(t, st.Watch(nil))
	second := insert() // its notification comes to no one
	again := make(chan *store.Job, 1)
	require.NoError(t, st.Watch(func(j *store.Job) { again <- j }))
	select {
	case j := <-again:
		assert.Equal(t, second, j.ID)
	case <-time.After(time.Minute):
		t.Fatal("the job did not arrive")
	}
	handedOnce(t, st, again)
}

// Transactions commit in any order, their IDs taken before: a job whose
// transaction commits after a later one's is handed on all the same, and
// once, whether its transaction was open while Recover read or while a
// look did.
func TestWatchCommitOrder(t *testing.T) {
	t.Parallel()
	st, pool := openTest(t, Options{PollInterval: time.Hour})
	ctx := context.Background()
	begin := func() (pgx.Tx, *store.Job) {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { tx.Rollback(ctx) }) // a test that fails leaves none open: the pool's Close would wait
		j := &store.Job{Type: "mail", Args: []byte(`{}`)}
		require.NoError(t, st.InsertTx(ctx, tx, j))
		return tx, j
	}
	openAtRecover, early := begin()
	got := watched(t, st)
	openAtLook, a := begin()
	txB, b := begin()
	require.Less(t, a.ID, b.ID)
	require.NoError(t, txB.Commit(ctx))
	assert.Equal(t, b.ID, nextArrival(t, got).ID)
	require.NoError(t, openAtLook.Commit(ctx))
	assert.Equal(t, a.ID, nextArrival(t, got).ID, "a lower ID, committed after a higher one was handed on")
	require.NoError(t, openAtRecover.Commit(ctx))
	assert.Equal(t, early.ID, nextArrival(t, got).ID, "open while Recover read")
	handedOnce(t, st, got)
}

// A look reads in pages, all in the snapshot of the round's first: the
// jobs of a transaction open when the last round ended (in its snapshot's
// in-progress list), then of those that began after, a page ending
// within either; a job committed while a round is under way comes in the
// next round; none comes twice.
func TestTakePages(t *testing.T) {
	t.Parallel()
	st, pool := openTest(t)
	ctx := context.Background()
	jobsOf := func(n int) []*store.Job {
		jobs := make([]*store.Job, n)
		for i := range jobs {
			jobs[i] = &store.Job{Type: "mail", Args: []byte(`{}`)}
		}
		return jobs
	}
	insert := func(n int) []*store.Job {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		jobs := jobsOf(n)
		require.NoError(t, st.InsertTx(ctx, tx, jobs...))
		require.NoError(t, tx.Commit(ctx))
		return jobs
	}
	open, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { open.Rollback(ctx) })
	opened := jobsOf(takeBatch + 5)
	require.NoError(t, st.InsertTx(ctx, open, opened...))
	c, err := st.recoverJobs(ctx, nil, func(*store.Job) error { return nil })
	require.NoError(t, err)
	require.NoError(t, open.Commit(ctx))
	later := insert(takeBatch + 10)

	var pages [][]*store.Job
	var during []*store.Job
	for len(pages) < 5 { // 3 expected: a round that does not end fails below
		page, next, err := st.watch.take(nil, c)
		require.NoError(t, err)
		pages = append(pages, page)
		c = next
		if c.to == "" {
			break
		}
		if during == nil {
			during = insert(1)
		}
	}
	require.Len(t, pages, 3)
	assert.Equal(t, ids(opened[:takeBatch]), ids(pages[0]), "the open transaction's first, a full page")
	assert.Equal(t, ids(append(opened[takeBatch:], later[:takeBatch-5]...)), ids(pages[1]), "the rest of it, then the later one's")
	assert.Equal(t, ids(later[takeBatch-5:]), ids(pages[2]), "a short page ends the round: not the job committed during it")
	next, c, err := st.watch.take(nil, c)
	require.NoError(t, err)
	assert.Equal(t, ids(during), ids(next), "the next round")
	none, _, err := st.watch.take(nil, c)
	require.NoError(t, err)
	assert.Empty(t, none)
}

// After the server restarts (a crash), a Store of one process reads
// again every unseen job it has not handed on, and those with an ID past
// the largest it handed on: a new transaction may have the id of one the
// crash lost, which the cursor's snapshot shows as done. The restart is
// shown to the take by the start time its cursor knows, and the reuse of
// ids by a snapshot that shows every id yet to come as done.
func TestTakeAgainAfterRestart(t *testing.T) {
	t.Parallel()
	st, pool := openTest(t)
	ctx := context.Background()
	insert := func(tx pgx.Tx) *store.Job {
		j := &store.Job{Type: "mail", Args: []byte(`{}`)}
		require.NoError(t, st.InsertTx(ctx, tx, j))
		return j
	}
	committed := func() *store.Job {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		j := insert(tx)
		require.NoError(t, tx.Commit(ctx))
		return j
	}
	open, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { open.Rollback(ctx) }) // a test that fails leaves none open: the pool's Close would wait
	early := insert(open)                    // open across Recover and the next look
	first := committed()
	c, err := st.recoverJobs(ctx, nil, func(*store.Job) error { return nil })
	require.NoError(t, err)
	assert.Equal(t, first.ID, c.maxID)
	mid := committed()
	jobs, c, err := st.watch.take(nil, c)
	require.NoError(t, err)
	require.Equal(t, []int64{mid.ID}, ids(jobs))
	require.Equal(t, mid.ID, c.maxID)
	require.NoError(t, open.Commit(ctx))
	var earlyXid string
	require.NoError(t, pool.QueryRow(ctx, `SELECT xid::text FROM fairsched_jobs WHERE id = $1`, early.ID).Scan(&earlyXid))

	// allDone returns snapshot s showing every id from its xmin on as
	// done, but those of xip: ids given again after a crash.
	allDone := func(s string, xip string) string {
		snap, err := parseSnapshot(s)
		require.NoError(t, err)
		xmin, _, _ := strings.Cut(s, ":")
		return fmt.Sprintf("%s:%d:%s", xmin, snap.xmax+1_000_000, xip)
	}
	known, err := parseSnapshot(c.known)
	require.NoError(t, err)
	require.Contains(t, known.xip, mustUint(t, earlyXid), "early's transaction was open at the look")
	server := c.server
	crashed := c
	crashed.known = allDone(c.known, earlyXid)
	crashed.server = "2001-01-01 00:00:00+00"
	late := committed()

	jobs, _, err = st.watch.take(nil, crashed)
	require.NoError(t, err)
	assert.Equal(t, []int64{early.ID, late.ID}, ids(jobs),
		"early: committed since the snapshot, below the largest ID; late: an id the snapshot shows as done, a new ID")

	crashedInRound := crashed
	crashedInRound.to = allDone(c.known, "")
	crashedInRound.after.xid, crashedInRound.after.id = mustUint(t, earlyXid), early.ID
	jobs, next, err := st.watch.take(nil, crashedInRound)
	require.NoError(t, err)
	assert.Equal(t, []int64{late.ID}, ids(jobs), "early was handed on by the round under way")
	assert.Equal(t, server, next.server)
	assert.Nil(t, next.again, "the round read again has ended")
	assert.Equal(t, late.ID, next.maxID)
	none, next, err := st.watch.take(nil, next)
	require.NoError(t, err)
	assert.Empty(t, none, "the next round goes on from the one read again")
	after := committed()
	jobs, _, err = st.watch.take(nil, next)
	require.NoError(t, err)
	assert.Equal(t, []int64{after.ID}, ids(jobs))

	noRecover := crashed
	noRecover.known, noRecover.to, noRecover.after.id = "", allDone(c.known, ""), early.ID
	jobs, _, err = st.watch.take(nil, noRecover)
	require.NoError(t, err)
	assert.Equal(t, []int64{first.ID, mid.ID, late.ID, after.ID}, ids(jobs),
		"with no Recover before, a round in ID order had handed on up to early")

	again := crashed.restarted("2002-01-01 00:00:00+00") // the server restarts again while the round reads again
	again.handed = map[int64]bool{early.ID: true}
	jobs, _, err = st.watch.take(nil, again)
	require.NoError(t, err)
	assert.Equal(t, []int64{late.ID, after.ID}, ids(jobs), "a job the round had handed on before is not again")

	// A round read again covers the IDs a window at a time, a page each.
	_, err = pool.Exec(ctx, `ALTER TABLE fairsched_jobs ALTER COLUMN id RESTART WITH 300005`)
	require.NoError(t, err)
	far := committed()
	var pages [][]int64
	for c := crashed; len(pages) < 10; {
		jobs, c, err = st.watch.take(nil, c)
		require.NoError(t, err)
		pages = append(pages, ids(jobs))
		if c.to == "" {
			break
		}
	}
	assert.Equal(t, [][]int64{{early.ID, late.ID, after.ID}, {}, {}, {far.ID}}, pages)
}

func mustUint(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	require.NoError(t, err)
	return v
}

// Ends says how each job asked for is, however many are asked for at
// once (more than one statement's worth): completed, ended with its
// error, still queued, or not found.
func TestEnds(t *testing.T) {
	t.Parallel()
	st, _ := openTest(t)
	ctx := context.Background()
	jobs := make([]*store.Job, 2*maxRows+10)
	for i := range jobs {
		jobs[i] = &store.Job{Type: "t", Args: []byte(`1`)}
	}
	require.NoError(t, st.Insert(ctx, nil, jobs...))
	completed, ended := jobs[3], jobs[maxRows+5]
	for _, j := range []*store.Job{completed, ended} {
		_, err := st.Start(ctx, j.ID, 1)
		require.NoError(t, err)
	}
	st.Post(store.Op{Kind: store.OpComplete, ID: completed.ID, At: 2})
	st.Post(store.Op{Kind: store.OpEnd, ID: ended.ID, At: 2, Err: "boom"})
	require.NoError(t, st.Flush(ctx))

	ids := []int64{}
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	missing := jobs[len(jobs)-1].ID + 1
	ids = append(ids, missing)
	type end struct {
		state store.State
		why   string
		found bool
	}
	got := map[int64]end{}
	require.NoError(t, st.Ends(ctx, ids, func(id int64, state store.State, why string, found bool) {
		_, again := got[id]
		assert.False(t, again, "job %d said twice", id)
		got[id] = end{state, why, found}
	}))
	assert.Len(t, got, len(ids))
	assert.Equal(t, end{store.Completed, "", true}, got[completed.ID])
	assert.Equal(t, end{store.Ended, "boom", true}, got[ended.ID])
	assert.Equal(t, end{store.Queued, "", true}, got[jobs[2*maxRows+1].ID], "in the third statement")
	assert.Equal(t, end{0, "", false}, got[missing])
}

// The state writes of one transaction (storetest.StateOrder).
func TestStateOrderInATransaction(t *testing.T) {
	t.Parallel()
	st, _ := openTest(t)
	storetest.StateOrder(t, st, st.w.apply)
}
