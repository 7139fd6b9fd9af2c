package fairschedpg

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched/internal/store"
)

// lead makes replica name of st the leader, for a minute, and returns
// its leadership; the lease must be free or lapsed.
func lead(t *testing.T, st *Store, name string) store.Leadership {
	t.Helper()
	l, err := st.Campaign(context.Background(), name, time.Minute)
	require.NoError(t, err)
	require.NotNil(t, l, "%s did not win the lease", name)
	return l
}

// termView returns l's view of the durable jobs, closed when the test
// ends.
func termView(t *testing.T, l store.Leadership) *termJobs {
	t.Helper()
	view := l.Jobs()
	t.Cleanup(func() { view.Close() })
	return view.(*termJobs)
}

// leading returns replica a's Store (polling hourly: it looks when told),
// leading, with its term's view recovered, and replica c's Store on the
// same schema.
func leading(t *testing.T) (a, c *Store, view *termJobs) {
	t.Helper()
	schema := clusterSchema(t)
	a = replicaStore(t, schema, Options{PollInterval: time.Hour})
	c = replicaStore(t, schema)
	view = termView(t, lead(t, a, "a"))
	require.NoError(t, view.Recover(context.Background(), func(*store.Job) error { return nil }))
	return a, c, view
}

// lapseLease makes the lease lapse now, as if its holder had not renewed
// it in time.
func lapseLease(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `UPDATE fairsched_leader SET expires = clock_timestamp() - interval '1 second'`)
	require.NoError(t, err)
}

// jobRow is what the table has of a job: its state, attempts counted,
// start, and whether it is unseen.
type jobRow struct {
	State, Attempt int
	Started        int64
	Unseen         bool
}

func jobRowOf(t *testing.T, pool *pgxpool.Pool, id int64) jobRow {
	t.Helper()
	var r jobRow
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT state, attempt, started, unseen FROM fairsched_jobs WHERE id = $1`, id).Scan(&r.State, &r.Attempt, &r.Started, &r.Unseen))
	return r
}

// ids returns the IDs of jobs, in their order.
func ids(jobs []*store.Job) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// arrivals returns a Watch callback and the channel it sends to.
func arrivals() (func(*store.Job), <-chan *store.Job) {
	c := make(chan *store.Job, 16)
	return func(j *store.Job) { c <- j }, c
}

// next returns the next job handed to a callback of arrivals, failing t
// if none comes in a minute (a deadlock's bound, not a synchronisation).
func nextArrival(t *testing.T, c <-chan *store.Job) *store.Job {
	t.Helper()
	select {
	case j := <-c:
		return j
	case <-time.After(time.Minute):
		t.Fatal("no job arrived")
		return nil
	}
}

// A term's view writes while its term holds: an insert (seen: the leader
// has it), a start that returns the arguments, a posted completion read
// back by Ended, a state read back by State without a Flush. One view per
// term.
func TestTermJobsWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := replicaStore(t, clusterSchema(t))
	leader := lead(t, a, "a")
	view := termView(t, leader)
	assert.Same(t, view, leader.Jobs(), "one view per term")
	require.NoError(t, view.Recover(ctx, func(*store.Job) error { return nil }))

	j := &store.Job{Type: "mail", Args: []byte(`{"n":1}`)}
	require.NoError(t, view.Insert(ctx, nil, j))
	assert.Equal(t, jobRow{State: 1}, jobRowOf(t, a.Pool(), j.ID), "the leader's insert is seen")
	args, err := view.Start(ctx, j.ID, 10)
	require.NoError(t, err)
	assert.Equal(t, `{"n":1}`, string(args))
	assert.Equal(t, jobRow{State: 1, Attempt: 1, Started: 10}, jobRowOf(t, a.Pool(), j.ID))
	view.Post(store.Op{Kind: store.OpComplete, ID: j.ID, At: 20})
	require.NoError(t, view.Flush(ctx))
	state, _, found, err := view.Ended(ctx, j.ID)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, store.Completed, state)

	view.PutState("fair", []byte(`{"a":1}`))
	v, err := view.State(ctx, "fair")
	require.NoError(t, err)
	assert.Equal(t, `{"a":1}`, string(v), "State waits for what was posted to the view")
	require.NoError(t, view.Close())
}

// Once the lease lapsed and another replica took it, every write of the
// old term's view fails with ErrFenced and commits nothing, whichever
// comes first (each case is refused by the database, the others then
// by the Lease that knows its term is over): an insert, a start, a posted
// end and state, a Recover that would mark a replica's job seen, a take
// of the watcher's. The new term's view writes. The last case's lease
// lapsed and no one took it: it is over all the same.
func TestTermJobsFenced(t *testing.T) {
	t.Parallel()
	for _, first := range []string{"insert", "start", "post", "state", "recover", "take", "lapsed"} {
		t.Run(first, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			schema := clusterSchema(t)
			a, b, c := replicaStore(t, schema), replicaStore(t, schema), replicaStore(t, schema)
			pool := a.Pool()
			old := lead(t, a, "a")
			view := termView(t, old)
			require.NoError(t, view.Recover(ctx, func(*store.Job) error { return nil }))
			queued := &store.Job{Type: "mail", Args: []byte(`{}`)}
			require.NoError(t, view.Insert(ctx, nil, queued))

			lapseLease(t, pool)
			var next store.Leadership
			if first != "lapsed" {
				next = lead(t, b, "b")
				assert.Equal(t, old.Term()+1, next.Term())
			}
			// A replica's job, inserted once the term is over, which the
			// old term must not take.
			late := &store.Job{Type: "mail", Key: "late"}
			require.NoError(t, c.Insert(ctx, nil, late))

			insert := func() error { return view.Insert(ctx, nil, &store.Job{Type: "mail", Key: "stale"}) }
			start := func() error { _, err := view.Start(ctx, queued.ID, 30); return err }
			post := func() error {
				view.Post(store.Op{Kind: store.OpEnd, ID: queued.ID, At: 40, Err: "stale"})
				return view.Flush(ctx)
			}
			state := func() error {
				view.PutState("fair", []byte(`{"stale":true}`))
				return view.Flush(ctx)
			}
			recoverAll := func() error { return view.Recover(ctx, func(*store.Job) error { return nil }) }
			take := func() error {
				jobs, _, err := a.watch.take(view.lease, takeCursor{})
				assert.Empty(t, jobs, "the stale take took nothing")
				return err
			}
			writes := map[string]func() error{
				"insert": insert, "start": start, "post": post, "state": state, "recover": recoverAll, "take": take, "lapsed": start,
			}
			if first == "take" {
				// A take writes nothing, and the database does not
				// refuse it: a stale leader reads the replica's job, and
				// drops nothing the next leader's Recover would miss.
				jobs, _, err := a.watch.take(view.lease, takeCursor{})
				require.NoError(t, err)
				assert.Equal(t, []int64{late.ID}, ids(jobs), "a read of the replica's job")
				first = "start"
			}
			require.ErrorIs(t, writes[first](), store.ErrFenced, "the first write, refused by the database")
			_, held := view.lease.Term()
			assert.False(t, held, "the Lease knows the term is over")
			for _, name := range []string{"insert", "start", "post", "state", "recover", "take"} {
				require.ErrorIs(t, writes[name](), store.ErrFenced, name)
			}

			// Nothing of it is in the tables.
			var rows int
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM fairsched_jobs`).Scan(&rows))
			assert.Equal(t, 2, rows, "no stale insert")
			assert.Equal(t, jobRow{State: 1}, jobRowOf(t, pool, queued.ID), "no stale start nor end")
			assert.Equal(t, jobRow{State: 1, Unseen: true}, jobRowOf(t, pool, late.ID), "the replica's job is left for the next leader")
			st, err := a.State(ctx, "fair")
			require.NoError(t, err)
			assert.Nil(t, st, "no stale state")
			view.PutState("fair", []byte(`{"closing":true}`))
			require.ErrorIs(t, view.Close(), store.ErrFenced, "Close writes what was posted, refused")

			if next == nil {
				next = lead(t, b, "b")
			}
			nextView := termView(t, next)
			var recovered []int64
			require.NoError(t, nextView.Recover(ctx, func(j *store.Job) error {
				recovered = append(recovered, j.ID)
				return nil
			}))
			assert.Equal(t, []int64{queued.ID, late.ID}, recovered)
			args, err := nextView.Start(ctx, queued.ID, 50)
			require.NoError(t, err, "the new term writes")
			assert.Equal(t, `{}`, string(args))
		})
	}
}

// blockedBy returns the process ID of the server's backend whose wait
// pid blocks, as the server reports it, or 0 if done is closed first
// (what was to wait did not). It reads the server's report until it
// says so: it waits for no time.
func blockedBy(t *testing.T, pool *pgxpool.Pool, pid int64, done <-chan struct{}) int64 {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a deadlock's bound
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return 0
		default:
		}
		var waiting int64
		err := pool.QueryRow(context.Background(),
			`SELECT pid FROM pg_stat_activity WHERE $1::integer = ANY(pg_blocking_pids(pid)) LIMIT 1`, pid).Scan(&waiting)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		require.NoError(t, err)
		return waiting
	}
	t.Fatalf("nothing waited for backend %d", pid)
	return 0
}

// A transaction of a term's view in flight holds the lease: a successor
// whose campaign finds the lease lapsed waits until that transaction
// ends, and its Recover then sees what it committed.
//
// The transaction is held in flight by a lock on its job's row, taken
// first; the lease then lapses by the database's clock, a margin after it
// was set (a lapse forced by an UPDATE of the lease row would itself wait
// for the transaction, and a campaign finds no lease to take while one
// waits). Who waits for whom is what the server reports
// (pg_blocking_pids), not a guess of time. Should the margin pass before
// the view's transaction was fenced, that transaction is refused, and the
// test tries again in a new term with twice the margin.
func TestTermJobsTakeoverWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := clusterSchema(t)
	a, b := replicaStore(t, schema), replicaStore(t, schema)
	pool := a.Pool()

	old := lead(t, a, "a")
	view := termView(t, old)
	require.NoError(t, view.Recover(ctx, func(*store.Job) error { return nil }))
	j := &store.Job{Type: "mail", Args: []byte(`{"n":1}`)}
	require.NoError(t, view.Insert(ctx, nil, j))

	locker, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer locker.Rollback(ctx)
	_, err = locker.Exec(ctx, `SELECT FROM fairsched_jobs WHERE id = $1 FOR UPDATE`, j.ID)
	require.NoError(t, err)

	// The view's start, in flight: its result is in start once ended is
	// closed.
	var start struct {
		args  []byte
		err   error
		ended chan struct{}
	}
	var writer int64 // the view's transaction's backend
	for margin := 200 * time.Millisecond; ; margin *= 2 {
		_, err = pool.Exec(ctx, `UPDATE fairsched_leader SET expires = clock_timestamp() + $1::interval`, margin)
		require.NoError(t, err)
		ended, v := make(chan struct{}), view
		start.ended = ended
		go func() {
			defer close(ended)
			start.args, start.err = v.Start(ctx, j.ID, 10)
		}()
		if writer = blockedBy(t, pool, int64(locker.Conn().PgConn().PID()), start.ended); writer != 0 {
			break // fenced, and in flight
		}
		require.ErrorIs(t, start.err, store.ErrFenced)
		require.Less(t, margin, 10*time.Second, "the view's transaction never began before its lease lapsed")
		t.Logf("the lease lapsed %v after it was set, before the view's transaction was fenced: again", margin)
		lapseLease(t, pool)
		old = lead(t, a, "a")
		view = termView(t, old)
	}

	var campaign struct {
		l     store.Leadership
		err   error
		ended chan struct{}
	}
	campaign.ended = make(chan struct{})
	go func() {
		defer close(campaign.ended)
		for { // until the lease lapses by the database's clock, then past the transaction
			campaign.l, campaign.err = b.Campaign(ctx, "b", time.Minute)
			if campaign.err != nil || campaign.l != nil {
				return
			}
		}
	}()
	require.NotZero(t, blockedBy(t, pool, writer, campaign.ended), "the successor's campaign did not wait for the transaction in flight")
	select {
	case <-start.ended:
		t.Fatalf("the view's start ended while its job's row was locked: %v", start.err)
	default:
	}

	require.NoError(t, locker.Commit(ctx))
	<-start.ended
	require.NoError(t, start.err, "the transaction in flight commits: it held the lease")
	assert.Equal(t, `{"n":1}`, string(start.args))
	<-campaign.ended
	require.NoError(t, campaign.err)
	require.NotNil(t, campaign.l)
	assert.Equal(t, old.Term()+1, campaign.l.Term())

	nextView := termView(t, campaign.l)
	var recovered []*store.Job
	require.NoError(t, nextView.Recover(ctx, func(j *store.Job) error {
		recovered = append(recovered, j)
		return nil
	}))
	require.Len(t, recovered, 1)
	assert.Equal(t, store.Running, recovered[0].State, "the successor reads the start committed before it took the lease")
	assert.Equal(t, 1, recovered[0].Attempt)
	_, err = view.Start(ctx, j.ID, 20)
	require.ErrorIs(t, err, store.ErrFenced, "the old term writes no more")
}

// A replica's Store inserts its jobs unseen, with the notification: the
// leader's view's Watch takes them at once (its Store polls once an
// hour), a job inserted before it watched as soon as it does. The view's
// own insert is seen: it is not handed on. A Store of one process keeps
// inserting its jobs seen: its Recover reads them once, and its Watch
// hands on only a caller's transaction's.
func TestTermJobsReplicaInserts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, c, view := leading(t)

	before := &store.Job{Type: "mail", Key: "before"}
	require.NoError(t, c.Insert(ctx, nil, before))
	assert.True(t, jobRowOf(t, a.Pool(), before.ID).Unseen, "a replica's insert is the leader's to take")
	arrived, got := arrivals()
	require.NoError(t, view.Watch(arrived))
	assert.Equal(t, before.ID, nextArrival(t, got).ID)

	own := &store.Job{Type: "mail", Key: "own"}
	require.NoError(t, view.Insert(ctx, nil, own))
	assert.False(t, jobRowOf(t, a.Pool(), own.ID).Unseen)
	after := &store.Job{Type: "mail", Key: "after"}
	require.NoError(t, c.Insert(ctx, nil, after))
	// Taken in ID order: had the view's own job been unseen, it would
	// have come first.
	assert.Equal(t, after.ID, nextArrival(t, got).ID, "notified, and the view's own job is not handed on")
	handedOnce(t, a, got)

	// A Store of one process, on a schema of its own.
	alone, pool := openTest(t, Options{PollInterval: time.Hour})
	mine := &store.Job{Type: "mail", Key: "mine"}
	require.NoError(t, alone.Insert(ctx, nil, mine))
	assert.False(t, jobRowOf(t, pool, mine.ID).Unseen, "a Store of one process inserts seen")
	var recovered []int64
	require.NoError(t, alone.Recover(ctx, func(j *store.Job) error {
		recovered = append(recovered, j.ID)
		return nil
	}))
	assert.Equal(t, []int64{mine.ID}, recovered)
	arrivedAlone, gotAlone := arrivals()
	require.NoError(t, alone.Watch(arrivedAlone))
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	theirs := &store.Job{Type: "mail", Key: "theirs"}
	require.NoError(t, alone.InsertTx(ctx, tx, theirs))
	require.NoError(t, tx.Commit(ctx))
	assert.Equal(t, theirs.ID, nextArrival(t, gotAlone).ID, "only the caller's transaction's job is handed on")
	require.NoError(t, alone.Watch(nil))
}

// A view's Close stops its writes and its watching, not the Store's nor
// another view's. The old term's view, closed (or told Watch(nil)) once
// the same Store leads again, leaves the new term's view's watching
// alone; the new view's Close stops its own: the Store still writes, its
// term still holds, and a replica's job inserted since waits, unseen.
func TestTermJobsClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := clusterSchema(t)
	a := replicaStore(t, schema, Options{PollInterval: time.Hour})
	c := replicaStore(t, schema)
	old := lead(t, a, "a")
	oldView := termView(t, old)
	require.NoError(t, oldView.Recover(ctx, func(*store.Job) error { return nil }))
	arrivedOld, gotOld := arrivals()
	require.NoError(t, oldView.Watch(arrivedOld))
	first := &store.Job{Type: "mail", Key: "first"}
	require.NoError(t, c.Insert(ctx, nil, first))
	assert.Equal(t, first.ID, nextArrival(t, gotOld).ID)

	// The same Store leads again, in a new term.
	require.NoError(t, old.StepDown(ctx))
	leader := lead(t, a, "a")
	view := termView(t, leader)
	assert.NotSame(t, oldView, view)
	require.NoError(t, view.Recover(ctx, func(*store.Job) error { return nil }))
	arrived, got := arrivals()
	require.NoError(t, view.Watch(arrived))
	require.NoError(t, oldView.Watch(nil), "the old view stops no one's watching but its own")
	require.NoError(t, oldView.Close())
	require.NoError(t, oldView.Close(), "again")
	second := &store.Job{Type: "mail", Key: "second"}
	require.NoError(t, c.Insert(ctx, nil, second))
	assert.Equal(t, second.ID, nextArrival(t, got).ID)
	select {
	case j := <-gotOld:
		t.Fatalf("the old view was handed job %d", j.ID)
	default:
	}

	require.NoError(t, view.Close())
	require.ErrorIs(t, view.Insert(ctx, nil, &store.Job{Type: "mail"}), store.ErrClosed)
	mine := &store.Job{Type: "mail", Key: "mine"}
	require.NoError(t, a.Insert(ctx, nil, mine), "the Store writes")
	a.PutState("fair", []byte(`{}`))
	require.NoError(t, a.Flush(ctx))
	require.NoError(t, leader.Renew(ctx), "the term holds")
	third := &store.Job{Type: "mail", Key: "third"}
	require.NoError(t, c.Insert(ctx, nil, third))
	handedOnce(t, a, got) // no one watches: a look hands on nothing
	// The next term reads them.
	require.NoError(t, leader.StepDown(ctx))
	next := termView(t, lead(t, a, "a"))
	var recovered []int64
	require.NoError(t, next.Recover(ctx, func(j *store.Job) error {
		recovered = append(recovered, j.ID)
		return nil
	}))
	assert.Equal(t, []int64{first.ID, second.ID, mine.ID, third.ID}, recovered)
}

// A take that finds the database server started since its cursor's
// snapshot (restarted, or a standby promoted in its place) hands on
// nothing from it: the transaction ids the server lost with a crash may
// have been given again, to transactions the snapshot would show as
// done. A leader's term ends, so that the next term reads every job
// (Recover); a Store of one process reads again what it has not handed
// on (TestTakeAgainAfterRestart).
func TestTakeAfterRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, c, view := leading(t)
	job := &store.Job{Type: "mail", Key: "after"}
	require.NoError(t, c.Insert(ctx, nil, job))

	from := view.recovered
	require.NotEmpty(t, from.server)
	jobs, _, err := a.watch.take(view.lease, from)
	require.NoError(t, err)
	assert.Equal(t, []int64{job.ID}, ids(jobs), "the same server")

	from.server = "2001-01-01 00:00:00+00" // another start
	jobs, _, err = a.watch.take(view.lease, from)
	require.ErrorIs(t, err, store.ErrFenced)
	require.ErrorIs(t, err, errRestarted)
	assert.Empty(t, jobs)
	_, held := view.lease.Term()
	assert.False(t, held, "the term is over")
}
