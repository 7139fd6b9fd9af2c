package fairschedpg_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedpg"
	"github.com/fairsched/fairsched/fairschedpg/internal/pgtest"
	"github.com/fairsched/fairsched/fairschedtest"
	"github.com/fairsched/fairsched/internal/store"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The scheduler on the PostgreSQL store: what a service sees of durable
// jobs, and what the database holds of them. A restart is a Store closed
// and another opened on the same schema, with a new Scheduler.

// mail is the arguments of the durable job type of these tests.
type mail struct {
	To string `json:"to"`
	N  int    `json:"n"`
}

type mailRun struct {
	m       mail
	attempt int
}

// mailHandlers returns handlers of type "mail" that send each job's
// arguments and attempt number to got, then return what fn returns (nil
// if fn is nil).
func mailHandlers(got chan<- mailRun, fn func(ctx context.Context, m mail) error) *fairsched.Handlers {
	var h fairsched.Handlers
	fairsched.AddHandler(&h, "mail", func(ctx context.Context, m mail) error {
		got <- mailRun{m, fairsched.Attempt(ctx)}
		if fn != nil {
			return fn(ctx, m)
		}
		return nil
	})
	return &h
}

// openStore opens a Store on pool, closed when the test ends (if not
// before).
func openStore(t *testing.T, pool *pgxpool.Pool) *fairschedpg.Store {
	t.Helper()
	st, err := fairschedpg.OpenPool(context.Background(), pool)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// newScheduler returns a Scheduler of cfg, closed when the test ends (if
// not before).
func newScheduler(t *testing.T, cfg fairsched.Config) *fairsched.Scheduler {
	t.Helper()
	s, err := fairsched.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// row is what the database holds of one job.
type row struct {
	State    store.State
	Attempt  int
	Err      string
	Attempts int // kept in its history
}

func stored(t *testing.T, pool *pgxpool.Pool, id int64) row {
	t.Helper()
	var r row
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT state, attempt, coalesce(error, ''), coalesce(jsonb_array_length(attempts), 0)
		FROM fairsched_jobs WHERE id = $1`, id).Scan(&r.State, &r.Attempt, &r.Err, &r.Attempts))
	return r
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Durable jobs run their handler with their arguments, and the database
// records them: completed, in one attempt.
func TestDurableEnqueueAndRun(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	st := openStore(t, pool)
	got := make(chan mailRun, 4)
	s := newScheduler(t, fairsched.Config{Store: st, Handlers: mailHandlers(got, nil)})
	ctx := context.Background()
	h, err := s.Enqueue(ctx, fairsched.Job{Type: "mail", Key: "tenant-1"}, mail{To: "ann", N: 7})
	require.NoError(t, err)
	assert.Equal(t, mailRun{mail{"ann", 7}, 1}, <-got)
	require.NoError(t, h.Wait(ctx))
	hs, err := s.EnqueueMany(ctx, []fairsched.EnqueueParams{
		{Job: fairsched.Job{Type: "mail"}, Args: mail{N: 1}},
		{Job: fairsched.Job{Type: "mail"}, Args: mail{N: 2}},
		{Job: fairsched.Job{Type: "mail"}, Args: mail{N: 3}},
	})
	require.NoError(t, err)
	for _, h := range hs {
		require.NoError(t, h.Wait(ctx))
	}
	require.NoError(t, s.Shutdown(ctx), "Shutdown flushes the store")
	for _, h := range append(hs, h) {
		assert.Equal(t, row{State: store.Completed, Attempt: 1}, stored(t, pool, h.ID()))
	}
	assert.Len(t, got, 3)
}

// Close leaves durable jobs in the database: the queued ones as they
// were, the running one cut short as an attempt that does not count. The
// next process runs all of them, in their order.
func TestDurableRestart(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	st := openStore(t, pool)
	got := make(chan mailRun, 10)
	block := func(ctx context.Context, m mail) error { <-ctx.Done(); return ctx.Err() }
	s := newScheduler(t, fairsched.Config{MaxConcurrency: 1, Store: st, Handlers: mailHandlers(got, block)})
	ctx := context.Background()
	var hs []fairsched.Handle
	for i := 1; i <= 3; i++ {
		h, err := s.Enqueue(ctx, fairsched.Job{Type: "mail"}, mail{N: i})
		require.NoError(t, err)
		hs = append(hs, h)
	}
	assert.Equal(t, mailRun{mail{N: 1}, 1}, <-got, "the first runs, the others wait")
	require.NoError(t, s.Close())
	require.NoError(t, st.Close())
	assert.Equal(t, row{State: store.Queued}, stored(t, pool, hs[0].ID()), "the cut-short attempt does not count")

	st = openStore(t, pool)
	s = newScheduler(t, fairsched.Config{MaxConcurrency: 1, Store: st, Handlers: mailHandlers(got, nil)})
	for i := 1; i <= 3; i++ {
		assert.Equal(t, mailRun{mail{N: i}, 1}, <-got, "in their order, each on its first attempt")
	}
	require.NoError(t, s.Shutdown(ctx))
	for _, h := range hs {
		assert.Equal(t, row{State: store.Completed, Attempt: 1}, stored(t, pool, h.ID()))
	}
}

// A job whose process died while it ran has lost that attempt: the next
// start counts it as failed, with ErrLost, and retries it after exactly
// its backoff.
func TestDurableLostAttempt(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	st := openStore(t, pool)
	ctx := context.Background()
	j := &store.Job{Type: "mail", Submitted: t0.Add(-time.Minute).UnixMicro(), State: store.Queued, Args: []byte(`{"to":"bo"}`)}
	require.NoError(t, st.Insert(ctx, nil, j))
	_, err := st.Start(ctx, j.ID, t0.Add(-time.Minute).UnixMicro())
	require.NoError(t, err)
	require.NoError(t, st.Close()) // as if the process died: the start is committed, the end never was

	clk := fairschedtest.NewClock(t0)
	got := make(chan mailRun, 1)
	st = openStore(t, pool)
	s := newScheduler(t, fairsched.Config{Clock: clk, Store: st, Handlers: mailHandlers(got, nil), Types: map[string]fairsched.TypeConfig{
		"mail": {Retry: fairsched.RetryPolicy{Attempts: 3, Backoff: 2 * time.Second}},
	}})
	assert.Equal(t, 1, s.Stats().Delayed, "the lost attempt is followed by its backoff")
	clk.Set(t0.Add(2*time.Second - time.Microsecond))
	assert.Empty(t, got)
	clk.Set(t0.Add(2 * time.Second))
	assert.Equal(t, mailRun{mail{To: "bo"}, 2}, <-got, "retried at exactly its backoff, as attempt 2")
	require.NoError(t, s.Shutdown(ctx))
	assert.Equal(t, row{State: store.Completed, Attempt: 2, Attempts: 2}, stored(t, pool, j.ID))
	var lost string
	require.NoError(t, pool.QueryRow(ctx, `SELECT attempts->0->>'err' FROM fairsched_jobs WHERE id = $1`, j.ID).Scan(&lost))
	assert.Equal(t, fairsched.ErrLost.Error(), lost, "the lost attempt is in the job's history")
}

// A job that fails is retried after its backoffs, then dead; it stays
// dead across a restart, and a retry by hand runs it again.
func TestDurableRetryAndDead(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	st := openStore(t, pool)
	clk := fairschedtest.NewClock(t0)
	got := make(chan mailRun, 4)
	var ok atomic.Bool
	boom := errors.New("boom")
	fails := func(context.Context, mail) error {
		if ok.Load() {
			return nil
		}
		return boom
	}
	retrying := make(chan struct{}, 4)
	cfg := fairsched.Config{Clock: clk, Store: st, Handlers: mailHandlers(got, fails),
		Types: map[string]fairsched.TypeConfig{"mail": {Retry: fairsched.RetryPolicy{Attempts: 3, Backoff: time.Second}}},
		OnEvent: func(ev fairsched.Event) {
			if ev.Kind == fairsched.EventRetrying {
				retrying <- struct{}{}
			}
		}}
	s := newScheduler(t, cfg)
	ctx := context.Background()
	h, err := s.Enqueue(ctx, fairsched.Job{Type: "mail"}, mail{N: 1})
	require.NoError(t, err)
	for attempt, backoff := range []time.Duration{time.Second, 2 * time.Second} {
		assert.Equal(t, mailRun{mail{N: 1}, attempt + 1}, <-got)
		<-retrying
		s.Stats() // the retry's timer is set
		clk.Advance(backoff - time.Microsecond)
		assert.Empty(t, got, "not before its backoff")
		clk.Advance(time.Microsecond)
	}
	assert.Equal(t, mailRun{mail{N: 1}, 3}, <-got)
	assert.ErrorIs(t, h.Wait(ctx), boom, "out of attempts")
	require.NoError(t, s.Shutdown(ctx))
	assert.Equal(t, row{State: store.Dead, Attempt: 3, Err: "boom", Attempts: 3}, stored(t, pool, h.ID()))
	require.NoError(t, st.Close())

	cfg.Store = openStore(t, pool)
	s = newScheduler(t, cfg)
	dead := s.DeadJobs()
	require.Len(t, dead, 1, "dead across the restart")
	assert.Equal(t, "mail", dead[0].Job.Type)
	require.Len(t, dead[0].Attempts, 3)
	ok.Store(true)
	h, err = s.RetryDead(dead[0].Seq)
	require.NoError(t, err)
	assert.Equal(t, mailRun{mail{N: 1}, 4}, <-got, "retried by hand: one attempt more")
	require.NoError(t, h.Wait(ctx))
	require.NoError(t, s.Shutdown(ctx))
	assert.Empty(t, s.DeadJobs())
	assert.Equal(t, row{State: store.Completed, Attempt: 4, Attempts: 4}, stored(t, pool, h.ID()), "the history of its attempts, the last included")
}

// A job that runs after another keeps waiting for it across a restart.
func TestDurableDependency(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	st := openStore(t, pool)
	got := make(chan mailRun, 2)
	s := newScheduler(t, fairsched.Config{Store: st, Handlers: mailHandlers(got, nil)})
	ctx := context.Background()
	s.PauseKey("first")
	a, err := s.Enqueue(ctx, fairsched.Job{Type: "mail", Key: "first"}, mail{N: 1})
	require.NoError(t, err)
	b, err := s.Enqueue(ctx, fairsched.Job{Type: "mail", After: []fairsched.Handle{a}}, mail{N: 2})
	require.NoError(t, err)
	require.NoError(t, s.Shutdown(ctx))
	require.NoError(t, st.Close())

	st = openStore(t, pool)
	s = newScheduler(t, fairsched.Config{Store: st, Handlers: mailHandlers(got, nil)})
	assert.Equal(t, map[fairsched.WaitReason]int{fairsched.WaitPaused: 1, fairsched.WaitDependency: 1}, s.Stats().Waiting)
	s.ResumeKey("first")
	assert.Equal(t, mailRun{mail{N: 1}, 1}, <-got)
	assert.Equal(t, mailRun{mail{N: 2}, 1}, <-got, "then the job after it")
	require.NoError(t, s.Shutdown(ctx))
	assert.Equal(t, store.Completed, stored(t, pool, b.ID()).State)
}

// A duplicate of a queued job of a joining type joins it, the one
// restored from the database included: the job runs once.
func TestDurableDuplicate(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	got := make(chan mailRun, 4)
	join := fairsched.Config{Store: openStore(t, pool), Handlers: mailHandlers(got, nil),
		Types: map[string]fairsched.TypeConfig{"mail": {Duplicates: fairsched.JoinQueued}}}
	s := newScheduler(t, join)
	ctx := context.Background()
	s.PauseKey("") // so that they wait
	first, err := s.Enqueue(ctx, fairsched.Job{Type: "mail", ID: "inbox-1"}, mail{N: 1})
	require.NoError(t, err)
	second, err := s.Enqueue(ctx, fairsched.Job{Type: "mail", ID: "inbox-1", Priority: 80}, mail{N: 2})
	require.NoError(t, err)
	assert.Equal(t, first.ID(), second.ID(), "the duplicate joined the queued job")
	require.NoError(t, s.Shutdown(ctx))
	require.NoError(t, join.Store.Close())
	var priority int
	require.NoError(t, pool.QueryRow(ctx, `SELECT priority FROM fairsched_jobs WHERE id = $1`, first.ID()).Scan(&priority))
	assert.Equal(t, 80, priority, "the job rose to its duplicate's priority")

	join.Store = openStore(t, pool)
	s = newScheduler(t, join) // the key is still paused
	third, err := s.Enqueue(ctx, fairsched.Job{Type: "mail", ID: "inbox-1"}, mail{N: 3})
	require.NoError(t, err)
	assert.Equal(t, first.ID(), third.ID(), "a duplicate joins the job restored from the database")
	s.ResumeKey("")
	assert.Equal(t, mailRun{mail{N: 1}, 1}, <-got, "the job runs once, with its own arguments")
	require.NoError(t, third.Wait(ctx))
	require.NoError(t, s.Shutdown(ctx))
	assert.Empty(t, got)
	var states []string
	rows, err := pool.Query(ctx, `SELECT state || ' ' || replace(coalesce(error, ''), $1::text, '1') FROM fairsched_jobs ORDER BY id`,
		fmt.Sprint(first.ID()))
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		states = append(states, s)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []string{"3 ", "4 fairsched: joined job 1", "4 fairsched: joined job 1"}, states,
		"the job completed; each duplicate ended, joined to it")
}

// Pauses are kept in the database: a key and a type paused before a
// restart are paused after it, their jobs waiting, until resumed.
func TestDurablePauseSurvivesRestart(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	st := openStore(t, pool)
	got := make(chan mailRun, 3)
	s := newScheduler(t, fairsched.Config{Store: st, Handlers: mailHandlers(got, nil)})
	ctx := context.Background()
	s.PauseKey("held")
	require.NoError(t, s.PauseType(""))
	_, err := s.Enqueue(ctx, fairsched.Job{Type: "mail", Key: "held"}, mail{N: 1})
	require.NoError(t, err)
	require.NoError(t, s.Shutdown(ctx))
	require.NoError(t, st.Close())

	st = openStore(t, pool)
	s = newScheduler(t, fairsched.Config{Store: st, Handlers: mailHandlers(got, nil)})
	assert.Equal(t, []string{"held"}, s.Stats().PausedKeys)
	assert.Equal(t, map[fairsched.WaitReason]int{fairsched.WaitPaused: 1}, s.Stats().Waiting, "its key is still paused")
	ran := make(chan struct{})
	_, err = s.Submit(ctx, fairsched.Job{}, func(context.Context) error { close(ran); return nil })
	require.NoError(t, err)
	assert.Equal(t, map[fairsched.WaitReason]int{fairsched.WaitPaused: 2}, s.Stats().Waiting, "and so is the default type")
	s.ResumeKey("held")
	assert.Equal(t, mailRun{mail{N: 1}, 1}, <-got)
	require.NoError(t, s.ResumeType(""))
	<-ran
}

// A job enqueued in the service's transaction runs if and only if the
// transaction commits, and sees what the transaction wrote.
func TestDurableEnqueueTx(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	st := openStore(t, pool)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `CREATE TABLE orders (id integer PRIMARY KEY, item text)`)
	require.NoError(t, err)
	got := make(chan mailRun, 3)
	items := make(chan string, 3)
	s := newScheduler(t, fairsched.Config{Store: st, Handlers: mailHandlers(got, func(ctx context.Context, m mail) error {
		var item string
		err := pool.QueryRow(ctx, `SELECT item FROM orders WHERE id = $1`, m.N).Scan(&item)
		items <- item
		return err
	})})

	tx, err := st.Pool().Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO orders VALUES (1, 'book')`)
	require.NoError(t, err)
	id, err := fairsched.EnqueueTx(ctx, s, tx, fairsched.Job{Type: "mail"}, mail{To: "ann", N: 1})
	require.NoError(t, err)
	assert.NotZero(t, id)
	assert.Zero(t, s.Stats().Queued+s.Stats().Running, "not the scheduler's before the commit")
	require.NoError(t, tx.Commit(ctx))
	assert.Equal(t, mailRun{mail{To: "ann", N: 1}, 1}, <-got, "committed: it runs")
	assert.Equal(t, "book", <-items, "and sees the order written with it")

	tx, err = st.Pool().Begin(ctx)
	require.NoError(t, err)
	rolledBack, err := fairsched.EnqueueTx(ctx, s, tx, fairsched.Job{Type: "mail"}, mail{To: "bo", N: 2})
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))
	tx, err = st.Pool().Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO orders VALUES (3, 'pen')`)
	require.NoError(t, err)
	next, err := fairsched.EnqueueTx(ctx, s, tx, fairsched.Job{Type: "mail"}, mail{To: "cy", N: 3})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	assert.Equal(t, mailRun{mail{To: "cy", N: 3}, 1}, <-got)
	assert.Equal(t, "pen", <-items)
	require.NoError(t, s.Shutdown(ctx))
	assert.Empty(t, got, "the rolled-back job never ran, and the next one ran once")
	assert.Equal(t, row{State: store.Completed, Attempt: 1}, stored(t, pool, next))
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM fairsched_jobs WHERE id = $1`, rolledBack).Scan(&n))
	assert.Zero(t, n, "the rolled-back job is not in the database")

	_, err = fairsched.EnqueueTx(ctx, s, "not a transaction", fairsched.Job{Type: "mail"}, mail{})
	assert.ErrorIs(t, err, fairsched.ErrTxNotSupported)
}

// A durable schedule goes on across a restart: the occurrence that fell
// due while no process ran is enqueued at once, once, and the cadence
// resumes from there.
func TestDurableScheduleSurvivesRestart(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	clk := fairschedtest.NewClock(t0)
	got := make(chan mailRun, 10)
	var at []time.Duration
	var handlers fairsched.Handlers
	fairsched.AddHandler(&handlers, "mail", func(ctx context.Context, m mail) error {
		at = append(at, clk.Now().Sub(t0))
		got <- mailRun{m, fairsched.Attempt(ctx)}
		return nil
	})
	ctx := context.Background()
	ran := func(p *fairsched.Periodic) {
		<-got
		require.NoError(t, p.Last().Wait(ctx))
	}
	st := openStore(t, pool)
	s := newScheduler(t, fairsched.Config{Clock: clk, Store: st, Handlers: &handlers})
	p, err := s.ScheduleDurable(ctx, "digest", fairsched.Every(10*time.Second), fairsched.Job{Type: "mail"}, mail{To: "all"})
	require.NoError(t, err)
	clk.Advance(10 * time.Second)
	ran(p)
	clk.Advance(5 * time.Second)
	require.NoError(t, s.Shutdown(ctx))
	require.NoError(t, st.Close())

	clk.Advance(20 * time.Second) // down from 15 s to 35 s: the occurrence of 20 s fell due
	st = openStore(t, pool)
	s = newScheduler(t, fairsched.Config{Clock: clk, Store: st, Handlers: &handlers})
	p, err = s.ScheduleDurable(ctx, "digest", fairsched.Every(10*time.Second), fairsched.Job{Type: "mail"}, mail{To: "all"})
	require.NoError(t, err)
	clk.Advance(0)
	ran(p)
	clk.Advance(10 * time.Second)
	ran(p)
	require.NoError(t, s.Shutdown(ctx))
	assert.Equal(t, []time.Duration{10 * time.Second, 35 * time.Second, 45 * time.Second}, at,
		"one occurrence for the time it was down, then every 10 s from then")
	var schedules int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM fairsched_schedules WHERE name = 'digest'`).Scan(&schedules))
	assert.Equal(t, 1, schedules)
}

// restartRun runs 60 jobs over three keys of weights 1, 3 and 2, one at a
// time, each holding its slot for a cost of its own, on a fake clock, and
// returns the order they started in. Durable unless memory; with stopAt >
// 0 the Scheduler and its Store are closed while job number stopAt runs,
// and a new Scheduler on a new Store on the same schema runs the rest.
func restartRun(t *testing.T, memory bool, stopAt int) []int {
	t.Helper()
	const n = 60
	clk := fairschedtest.NewClock(t0)
	cost := func(i int) time.Duration { return time.Duration(1+i*7%5) * time.Second }
	started := make(chan int, n)
	release := make([]chan struct{}, n)
	for i := range release {
		release[i] = make(chan struct{})
	}
	work := func(ctx context.Context, m mail) error {
		started <- m.N
		<-release[m.N]
		return nil
	}
	var hs fairsched.Handlers
	fairsched.AddHandler(&hs, "work", work)
	cfg := fairsched.Config{Clock: clk, MaxConcurrency: 1, Handlers: &hs,
		Keys:  map[string]fairsched.KeyConfig{"a": {Weight: 1}, "b": {Weight: 3}, "c": {Weight: 2}},
		Aging: fairsched.AgingConfig{GracePeriod: 5 * time.Second, Interval: time.Second, Step: 5}}
	var pool *pgxpool.Pool
	if memory {
		cfg.Handlers = nil
	} else {
		pool = pgtest.Pool(t)
		cfg.Store = openStore(t, pool)
	}
	s := newScheduler(t, cfg)
	ctx := context.Background()
	handles := make([]fairsched.Handle, n)
	for i := range n {
		clk.Advance(100 * time.Millisecond)
		job, m := fairsched.Job{Type: "work", Key: string(rune('a' + i%3)), ID: fmt.Sprint("r", i%4), Priority: 10 + i%7*10}, mail{N: i}
		var err error
		if memory {
			job.Type = ""
			handles[i], err = s.Submit(ctx, job, func(ctx context.Context) error { return work(ctx, m) })
		} else {
			handles[i], err = s.Enqueue(ctx, job, m)
		}
		require.NoError(t, err)
	}
	var order []int
	for len(order) < n {
		i := <-started
		order = append(order, i)
		clk.Advance(cost(i))
		if len(order) != stopAt {
			close(release[i])
			continue
		}
		// Shut down while job i runs: the waiting jobs leave memory at
		// once (their Handles end), then job i completes.
		shut := make(chan error)
		go func() { shut <- s.Shutdown(ctx) }()
		for n, h := range handles {
			if !slices.Contains(order, n) {
				<-h.Done()
			}
		}
		close(release[i])
		require.NoError(t, <-shut)
		require.NoError(t, cfg.Store.(*fairschedpg.Store).Close())
		cfg.Store = openStore(t, pool)
		s = newScheduler(t, cfg)
	}
	require.NoError(t, s.Shutdown(ctx))
	return order
}

// A Scheduler on PostgreSQL follows the order an in-memory one does, and
// one restarted part-way through, on a new Store, starts the same next
// jobs as one that never stopped: the queued jobs come back with their
// submission times, and the keys' virtual times and the learned costs
// with them.
func TestDurableRestartKeepsOrderAndFairness(t *testing.T) {
	t.Parallel()
	inMemory := restartRun(t, true, 0)
	durable := restartRun(t, false, 0)
	require.Equal(t, inMemory, durable, "durable jobs take the in-memory order")
	for _, stopAt := range []int{7, 20, 41} {
		assert.Equal(t, durable, restartRun(t, false, stopAt), "restarted after %d jobs", stopAt)
	}
}

// A write the database refuses, or one that waits past the statement
// timeout for a lock another transaction holds, fails Enqueue with the
// server's error, and nothing is accepted: not in memory, not in the
// database. Once the cause is gone, Enqueue works.
func TestDurableEnqueueFails(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	require.NoError(t, fairschedpg.Migrate(context.Background(), pool)) // without the test's short timeout
	st, err := fairschedpg.OpenPool(context.Background(), pool, fairschedpg.Options{StatementTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	got := make(chan mailRun, 2)
	s := newScheduler(t, fairsched.Config{Store: st, Handlers: mailHandlers(got, nil)})
	ctx := context.Background()
	count := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM fairsched_jobs`).Scan(&n))
		return n
	}

	_, err = pool.Exec(ctx, `
CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no room for %', NEW.type; END $$;
CREATE TRIGGER refuse BEFORE INSERT ON fairsched_jobs FOR EACH ROW EXECUTE FUNCTION refuse();`)
	require.NoError(t, err)
	_, err = s.Enqueue(ctx, fairsched.Job{Type: "mail"}, mail{N: 1})
	require.ErrorContains(t, err, "no room for mail")
	assert.Zero(t, s.Stats().Queued+s.Stats().Running, "nothing accepted in memory")
	_, err = pool.Exec(ctx, `DROP TRIGGER refuse ON fairsched_jobs`)
	require.NoError(t, err)
	assert.Zero(t, count(), "nor in the database")

	locker, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer locker.Rollback(ctx) // if the test fails before it does
	_, err = locker.Exec(ctx, `LOCK TABLE fairsched_jobs IN EXCLUSIVE MODE`)
	require.NoError(t, err)
	_, err = s.Enqueue(ctx, fairsched.Job{Type: "mail"}, mail{N: 2})
	// The server's statement timeout, or the client's a second later when
	// the statement is new to the connection (pgx prepares it first,
	// outside the transaction).
	require.ErrorContains(t, err, "timeout")
	assert.Zero(t, s.Stats().Queued+s.Stats().Running, "nothing accepted in memory")
	require.NoError(t, locker.Rollback(ctx))
	assert.Zero(t, count(), "nor in the database")

	h, err := s.Enqueue(ctx, fairsched.Job{Type: "mail"}, mail{N: 3})
	require.NoError(t, err)
	assert.Equal(t, mailRun{mail{N: 3}, 1}, <-got)
	require.NoError(t, h.Wait(ctx))
}
