package fairsched

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairsched/fairsched/fairschedsqlite"
	"github.com/fairsched/fairsched/internal/clock"
	"github.com/fairsched/fairsched/internal/rt"
	"github.com/fairsched/fairsched/internal/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mail is the arguments of the durable job type of these tests.
type mail struct {
	To string `json:"to"`
	N  int    `json:"n"`
}

// openTestStore opens the SQLite store at path, closed when the test ends.
func openTestStore(t *testing.T, path string) *fairschedsqlite.Store {
	t.Helper()
	st, err := fairschedsqlite.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// mailHandlers returns handlers of type "mail" that send each job's
// arguments and attempt number to got, then return what fn returns (nil
// if fn is nil).
func mailHandlers(got chan<- mailRun, fn func(ctx context.Context, m mail) error) *Handlers {
	var h Handlers
	AddHandler(&h, "mail", func(ctx context.Context, m mail) error {
		got <- mailRun{m, Attempt(ctx)}
		if fn != nil {
			return fn(ctx, m)
		}
		return nil
	})
	return &h
}

type mailRun struct {
	m       mail
	attempt int
}

// fakeClockAndStore returns a fake clock at t0 and a store on a fresh
// file, closed when the test ends.
func fakeClockAndStore(t *testing.T) (*clock.Fake, time.Time, *fairschedsqlite.Store) {
	t.Helper()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return clock.NewFake(t0), t0, openTestStore(t, filepath.Join(t.TempDir(), "jobs.db"))
}

// fakeDurable returns, for a test on the fake clock, the clock at t0, a
// store on a fresh file, and a Scheduler on it whose "mail" jobs send
// their runs to got.
func fakeDurable(t *testing.T) (*clock.Fake, time.Time, *fairschedsqlite.Store, *Scheduler, chan mailRun) {
	t.Helper()
	clk, t0, st := fakeClockAndStore(t)
	got := make(chan mailRun, 4)
	s := newTestScheduler(t, Config{Clock: clk, Store: st, Handlers: mailHandlers(got, nil)})
	return clk, t0, st, s, got
}

// storedError reads why durable job id ended, from the file.
func storedError(t *testing.T, db *sql.DB, id int64) string {
	t.Helper()
	var why string
	require.NoError(t, db.QueryRow("SELECT coalesce(error, '') FROM fairsched_jobs WHERE id = ?", id).Scan(&why))
	return why
}

// storedState reads durable job id's state and attempt count from the file.
func storedState(t *testing.T, db *sql.DB, id int64) (store.State, int) {
	t.Helper()
	var st store.State
	var n int
	require.NoError(t, db.QueryRow("SELECT state, attempt FROM fairsched_jobs WHERE id = ?", id).Scan(&st, &n))
	return st, n
}

// A durable job runs its handler with its arguments, and the store
// records it: queued, then running with attempt 1, then completed.
func TestDurableRunsAndRecords(t *testing.T) {
	st := openTestStore(t, filepath.Join(t.TempDir(), "jobs.db"))
	got := make(chan mailRun, 1)
	s := newTestScheduler(t, Config{Store: st, Handlers: mailHandlers(got, nil)})
	h, err := s.Enqueue(context.Background(), Job{Type: "mail", Key: "tenant-1"}, mail{To: "ann", N: 7})
	require.NoError(t, err)
	assert.EqualValues(t, 1, h.ID())
	assert.Equal(t, mailRun{mail{"ann", 7}, 1}, <-got)
	require.NoError(t, h.Wait(context.Background()))
	require.NoError(t, s.Shutdown(context.Background()), "Shutdown flushes the store")
	state, attempt := storedState(t, st.DB(), h.ID())
	assert.Equal(t, store.Completed, state)
	assert.Equal(t, 1, attempt)
}

// Close leaves durable jobs in the store: the queued ones as they were,
// the running one cut short as an attempt that does not count. The next
// Scheduler on the file runs all of them, in their order.
func TestDurableSurvivesClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	st, err := fairschedsqlite.Open(path)
	require.NoError(t, err)
	got := make(chan mailRun, 10)
	block := func(ctx context.Context, m mail) error { <-ctx.Done(); return ctx.Err() }
	s, err := New(Config{MaxConcurrency: 1, Store: st, Handlers: mailHandlers(got, block)})
	require.NoError(t, err)
	var hs []Handle
	for i := 1; i <= 3; i++ {
		h, err := s.Enqueue(context.Background(), Job{Type: "mail"}, mail{N: i})
		require.NoError(t, err)
		hs = append(hs, h)
	}
	assert.Equal(t, mailRun{mail{N: 1}, 1}, <-got, "the first runs, the others wait")
	require.NoError(t, s.Close())
	assert.ErrorIs(t, hs[0].Wait(context.Background()), context.Canceled, "the running one returned its context's error")
	for _, h := range hs[1:] {
		assert.ErrorIs(t, h.Wait(context.Background()), ErrKept, "the queued ones left memory, not failed")
		assert.NotErrorIs(t, h.Wait(context.Background()), ErrClosed, "Close does not fail them (docs/design.md, Durable jobs)")
	}
	state, attempt := storedState(t, st.DB(), hs[0].ID())
	assert.Equal(t, store.Queued, state, "the cut-short attempt leaves the job queued")
	assert.Equal(t, 0, attempt, "and does not count")
	require.NoError(t, st.Close())

	st = openTestStore(t, path)
	s2 := newTestScheduler(t, Config{MaxConcurrency: 1, Store: st, Handlers: mailHandlers(got, nil)})
	for i := 1; i <= 3; i++ {
		assert.Equal(t, mailRun{mail{N: i}, 1}, <-got, "in their order, each on its first attempt")
	}
	require.NoError(t, s2.Shutdown(context.Background()))
	for _, h := range hs {
		state, attempt := storedState(t, st.DB(), h.ID())
		assert.Equal(t, store.Completed, state)
		assert.Equal(t, 1, attempt)
	}
}

// A running durable job whose context Close cancels is recorded by its
// outcome when its handler returns nil: completed, not run again.
func TestDurableCloseKeepsACompletion(t *testing.T) {
	st := openTestStore(t, filepath.Join(t.TempDir(), "jobs.db"))
	got := make(chan mailRun, 1)
	finishes := func(ctx context.Context, m mail) error { <-ctx.Done(); return nil }
	s, err := New(Config{Store: st, Handlers: mailHandlers(got, finishes)})
	require.NoError(t, err)
	h, err := s.Enqueue(context.Background(), Job{Type: "mail"}, mail{N: 1})
	require.NoError(t, err)
	<-got
	require.NoError(t, s.Close())
	require.NoError(t, h.Wait(context.Background()), "its handler returned nil")
	state, attempt := storedState(t, st.DB(), h.ID())
	assert.Equal(t, store.Completed, state)
	assert.Equal(t, 1, attempt)
}

// crashWhileRunning leaves a job in the store at path as a process that
// died while running its first attempt would: started, never ended. It
// returns the job's ID.
func crashWhileRunning(t *testing.T, path string, at time.Time) int64 {
	t.Helper()
	st, err := fairschedsqlite.Open(path)
	require.NoError(t, err)
	j := &store.Job{Type: "mail", Submitted: at.UnixMicro(), State: store.Queued, Args: []byte(`{"to":"bo"}`)}
	require.NoError(t, st.Insert(context.Background(), nil, j))
	_, err = st.Start(context.Background(), j.ID, at.UnixMicro())
	require.NoError(t, err)
	require.NoError(t, st.Close())
	return j.ID
}

// A job whose process died while it ran has lost that attempt: the next
// start counts it as failed, with ErrLost, and retries it after its
// backoff; out of attempts, it is dead.
func TestDurableLostAttempt(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "jobs.db")
	id := crashWhileRunning(t, path, t0.Add(-time.Minute))

	clk := clock.NewFake(t0)
	got := make(chan mailRun, 1)
	st := openTestStore(t, path)
	s := newTestScheduler(t, Config{Clock: clk, Store: st, Handlers: mailHandlers(got, nil), Types: map[string]TypeConfig{
		"mail": {Retry: RetryPolicy{Attempts: 3, Backoff: 2 * time.Second}},
	}})
	assert.Equal(t, 1, s.Stats().Delayed, "the lost attempt is followed by its backoff")
	clk.Set(t0.Add(2*time.Second - time.Microsecond))
	assert.Empty(t, got)
	clk.Set(t0.Add(2 * time.Second))
	assert.Equal(t, mailRun{mail{To: "bo"}, 2}, <-got, "retried at exactly its backoff, as attempt 2")
	require.NoError(t, s.Shutdown(context.Background()))
	state, attempt := storedState(t, st.DB(), id)
	assert.Equal(t, store.Completed, state)
	assert.Equal(t, 2, attempt)
	var attempts string
	require.NoError(t, st.DB().QueryRow("SELECT attempts FROM fairsched_jobs WHERE id = ?", id).Scan(&attempts))
	assert.Contains(t, attempts, ErrLost.Error(), "the lost attempt is in the job's history")

	// With one attempt allowed, the lost one was the last: the job is dead.
	path = filepath.Join(t.TempDir(), "jobs.db")
	id = crashWhileRunning(t, path, t0)
	st = openTestStore(t, path)
	s = newTestScheduler(t, Config{Clock: clk, Store: st, Handlers: mailHandlers(got, nil)})
	dead := s.DeadJobs()
	require.Len(t, dead, 1)
	assert.ErrorIs(t, dead[0].Err, ErrLost)
	assert.Equal(t, "mail", dead[0].Job.Type)
	require.NoError(t, s.Shutdown(context.Background()))
	state, _ = storedState(t, st.DB(), id)
	assert.Equal(t, store.Dead, state)

	// The next start lists it among the dead, and it can be retried by
	// hand: one more attempt.
	s = newTestScheduler(t, Config{Clock: clk, Store: st, Handlers: mailHandlers(got, nil)})
	dead = s.DeadJobs()
	require.Len(t, dead, 1)
	assert.ErrorIs(t, dead[0].Err, ErrLost)
	assert.NotZero(t, dead[0].Seq)
	require.Len(t, dead[0].Attempts, 1)
	h, err := s.RetryDead(dead[0].Seq)
	require.NoError(t, err)
	assert.Equal(t, id, h.ID())
	assert.Equal(t, mailRun{mail{To: "bo"}, 2}, <-got, "its second attempt")
	require.NoError(t, h.Wait(context.Background()))
	require.NoError(t, s.Shutdown(context.Background()))
	state, attempt = storedState(t, st.DB(), id)
	assert.Equal(t, store.Completed, state)
	assert.Equal(t, 2, attempt)
}

// Bad input is refused with a clear error, and nothing is stored.
func TestDurableBadInput(t *testing.T) {
	var hs Handlers
	AddHandler(&hs, "mail", func(context.Context, mail) error { return nil })
	AddHandler(&hs, "ratio", func(context.Context, float64) error { return nil })
	_, err := New(Config{Handlers: &hs})
	assert.ErrorContains(t, err, "Handlers are set without a Store")
	assert.Panics(t, func() { AddHandler(&hs, "mail", func(context.Context, mail) error { return nil }) })
	assert.Panics(t, func() { AddHandler[mail](&hs, "other", nil) })

	plain := newTestScheduler(t, Config{})
	_, err = plain.Enqueue(context.Background(), Job{}, mail{})
	assert.ErrorContains(t, err, "needs a Store")

	st := openTestStore(t, filepath.Join(t.TempDir(), "jobs.db"))
	s := newTestScheduler(t, Config{Store: st, Handlers: &hs})
	ctx := context.Background()
	_, err = s.Enqueue(ctx, Job{Type: "post"}, mail{})
	assert.ErrorIs(t, err, ErrNoHandler)
	_, err = s.Enqueue(ctx, Job{Type: "mail"}, "a string")
	assert.ErrorIs(t, err, ErrArgs)
	assert.ErrorContains(t, err, `job type "mail" takes a fairsched.mail, not a string`)
	_, err = s.Enqueue(ctx, Job{Type: "ratio"}, math.NaN())
	assert.ErrorIs(t, err, ErrArgs, "JSON cannot encode NaN")
	_, err = s.Submit(ctx, Job{Type: "mail"}, func(context.Context) error { return nil })
	assert.ErrorContains(t, err, "has a handler")
	err = s.RunSync(ctx, Job{Type: "mail"}, func(context.Context) error { return nil })
	assert.ErrorContains(t, err, "has a handler")
	// A nil context is a programming error, named before anything is
	// admitted or written.
	assert.PanicsWithValue(t, "fairsched: Enqueue with a nil context", func() { _, _ = s.Enqueue(nil, Job{Type: "mail"}, mail{}) })
	assert.PanicsWithValue(t, "fairsched: EnqueueMany with a nil context", func() { _, _ = s.EnqueueMany(nil, nil) })
	assert.PanicsWithValue(t, "fairsched: EnqueueTx with a nil context", func() { _, _ = EnqueueTx(nil, s, (*sql.Tx)(nil), Job{Type: "mail"}, mail{}) })
	assert.PanicsWithValue(t, "fairsched: ScheduleDurable with a nil context", func() { _, _ = s.ScheduleDurable(nil, "n", Every(time.Hour), Job{Type: "mail"}, mail{}) })
	var n int
	require.NoError(t, st.DB().QueryRow("SELECT count(*) FROM fairsched_jobs").Scan(&n))
	assert.Zero(t, n, "nothing refused was stored")
}

// Stored arguments that no longer decode fail the attempt with ErrArgs;
// out of attempts, the job is dead.
func TestDurableArgsNoLongerDecode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	st := openTestStore(t, path)
	j := &store.Job{Type: "mail", Submitted: time.Now().UnixMicro(), State: store.Queued, Args: []byte(`["not", "a", "mail"]`)}
	require.NoError(t, st.Insert(context.Background(), nil, j))
	got := make(chan mailRun, 1)
	s := newTestScheduler(t, Config{Store: st, Handlers: mailHandlers(got, nil)})
	require.NoError(t, s.Shutdown(context.Background()))
	assert.Empty(t, got, "the handler never ran")
	dead := s.DeadJobs()
	require.Len(t, dead, 1)
	assert.ErrorIs(t, dead[0].Err, ErrArgs)
	state, _ := storedState(t, st.DB(), j.ID)
	assert.Equal(t, store.Dead, state)
}

// A file holds one Store at a time, and a schema newer than the code is
// refused.
func TestDurableStoreOwnerAndSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	st, err := fairschedsqlite.Open(path)
	require.NoError(t, err)
	_, err = fairschedsqlite.Open(path)
	assert.ErrorIs(t, err, fairschedsqlite.ErrInUse)
	_, err = st.DB().Exec("PRAGMA user_version = 99")
	require.NoError(t, err)
	require.NoError(t, st.Close())
	_, err = fairschedsqlite.Open(path)
	assert.ErrorIs(t, err, fairschedsqlite.ErrSchemaTooNew)
}

// EnqueueMany stores a batch in one transaction, all or none.
func TestDurableEnqueueMany(t *testing.T) {
	st := openTestStore(t, filepath.Join(t.TempDir(), "jobs.db"))
	got := make(chan mailRun, 3)
	gate := make(chan struct{})
	s := newTestScheduler(t, Config{MaxConcurrency: 1, MaxQueue: 3, Store: st,
		Handlers: mailHandlers(got, func(context.Context, mail) error { <-gate; return nil })})
	ctx := context.Background()
	_, err := s.EnqueueMany(ctx, []EnqueueParams{{Job{Type: "mail"}, mail{N: 1}}, {Job{Type: "mail"}, 2}})
	var be *BatchError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, 1, be.Index)
	assert.ErrorIs(t, err, ErrArgs)
	_, err = s.EnqueueMany(ctx, []EnqueueParams{{Job{Type: "mail"}, mail{N: 1}}, {Job{Type: "mail", Needs: map[string]int{"gpu": 1}}, mail{N: 2}}})
	require.ErrorAs(t, err, &be)
	assert.Equal(t, 1, be.Index)
	assert.ErrorIs(t, err, ErrUnknownResource)
	_, err = s.EnqueueMany(ctx, []EnqueueParams{{Job{Type: "mail", Needs: map[string]int{"gpu": 0}}, mail{N: 1}}})
	require.ErrorAs(t, err, &be)
	assert.ErrorContains(t, err, "a need must be positive")
	batch := []EnqueueParams{{Job{Type: "mail"}, mail{N: 1}}, {Job{Type: "mail"}, mail{N: 2}}, {Job{Type: "mail"}, mail{N: 3}}}
	hs, err := s.EnqueueMany(ctx, batch)
	require.NoError(t, err)
	require.Len(t, hs, 3)
	for i, h := range hs {
		assert.EqualValues(t, i+1, h.ID(), "IDs in batch order: nothing of the refused batch was stored")
	}
	assert.Equal(t, mailRun{mail{N: 1}, 1}, <-got)
	_, err = s.EnqueueMany(ctx, batch[:2])
	var qf *QueueFullError
	require.ErrorAs(t, err, &qf, "2 waiting + 2 > MaxQueue 3")
	assert.Equal(t, 3, qf.Limit)
	assert.Equal(t, 2, qf.Size)
	close(gate)
	for _, h := range hs {
		require.NoError(t, h.Wait(ctx))
	}
	var n int
	require.NoError(t, st.DB().QueryRow("SELECT count(*) FROM fairsched_jobs").Scan(&n))
	assert.Equal(t, 3, n)
}

// A durable job's times work as an in-memory job's: it waits for its
// NotBefore, and one that waits past its start deadline ends at that
// instant, recorded as ended with the deadline's error.
func TestDurableTimes(t *testing.T) {
	clk, t0, st := fakeClockAndStore(t)
	got := make(chan mailRun, 3)
	s := newTestScheduler(t, Config{Clock: clk, MaxConcurrency: 1, Store: st, Handlers: mailHandlers(got, nil)})
	ctx := context.Background()
	holding := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	go s.RunSync(ctx, Job{}, func(context.Context) error { close(holding); <-release; return nil })
	<-holding
	late, err := s.Enqueue(ctx, Job{Type: "mail", NotBefore: t0.Add(20 * time.Second)}, mail{N: 1})
	require.NoError(t, err)
	expiring, err := s.Enqueue(ctx, Job{Type: "mail", StartBy: t0.Add(10 * time.Second)}, mail{N: 2})
	require.NoError(t, err)

	clk.Set(t0.Add(10*time.Second - time.Microsecond))
	assert.False(t, ended(expiring))
	clk.Set(t0.Add(10 * time.Second))
	assert.ErrorIs(t, expiring.Wait(ctx), ErrStartDeadline, "at its deadline, with the slot still held")
	_, err = s.Enqueue(ctx, Job{Type: "mail", StartBy: t0.Add(5 * time.Second)}, mail{N: 3})
	assert.ErrorIs(t, err, ErrStartDeadline, "a deadline that cannot be met is refused")
	once.Do(func() { close(release) })
	clk.Set(t0.Add(20*time.Second - time.Microsecond))
	assert.Empty(t, got, "nothing runs before its NotBefore")
	clk.Set(t0.Add(20 * time.Second))
	assert.Equal(t, mailRun{mail{N: 1}, 1}, <-got)
	require.NoError(t, late.Wait(ctx))
	require.NoError(t, s.Shutdown(ctx))
	state, _ := storedState(t, st.DB(), expiring.ID())
	assert.Equal(t, store.Ended, state)
	assert.Contains(t, storedError(t, st.DB(), expiring.ID()), "start deadline")
}

// Durable jobs take a time at or before the scheduler's creation as past,
// as Submit does: with the clock not moved, a NotBefore an hour before it
// is no delay, and a StartBy as early is refused before anything is written.
func TestDurableTimesBeforeNewArePast(t *testing.T) {
	_, t0, st, s, got := fakeDurable(t)
	ctx := context.Background()
	_, err := s.Enqueue(ctx, Job{Type: "mail", StartBy: t0.Add(-time.Hour)}, mail{N: 1})
	require.ErrorIs(t, err, ErrStartDeadline)
	h, err := s.Enqueue(ctx, Job{Type: "mail", NotBefore: t0.Add(-time.Hour)}, mail{N: 2})
	require.NoError(t, err)
	require.Zero(t, s.Stats().Delayed, "a NotBefore already past is no delay")
	assert.Equal(t, mailRun{mail{N: 2}, 1}, <-got)
	require.NoError(t, h.Wait(ctx))
	var n int
	require.NoError(t, st.DB().QueryRow("SELECT count(*) FROM fairsched_jobs").Scan(&n))
	assert.Equal(t, 1, n, "the refused job was not written")
	require.NoError(t, s.Shutdown(ctx))
}

// A job enqueued in the caller's transaction exists if and only if the
// transaction commits: committed, it runs, and sees the change made with
// it; rolled back, it never runs, even when its ID is given to the next
// job.
func TestDurableEnqueueTx(t *testing.T) {
	st := openTestStore(t, filepath.Join(t.TempDir(), "jobs.db"))
	db := st.DB()
	_, err := db.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)`)
	require.NoError(t, err)
	got := make(chan mailRun, 3)
	items := make(chan string, 3)
	s := newTestScheduler(t, Config{Store: st, Handlers: mailHandlers(got, func(ctx context.Context, m mail) error {
		var item string
		err := db.QueryRowContext(ctx, `SELECT item FROM orders WHERE id = ?`, m.N).Scan(&item)
		items <- item
		return err
	})})
	ctx := context.Background()

	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.Exec(`INSERT INTO orders VALUES (1, 'book')`)
	require.NoError(t, err)
	id, err := EnqueueTx(ctx, s, tx, Job{Type: "mail"}, mail{To: "ann", N: 1})
	require.NoError(t, err)
	assert.EqualValues(t, 1, id)
	assert.Zero(t, s.Stats().Queued+s.Stats().Running, "not the scheduler's before the commit")
	require.NoError(t, tx.Commit())
	assert.Equal(t, mailRun{mail{To: "ann", N: 1}, 1}, <-got, "committed: it runs")
	assert.Equal(t, "book", <-items, "and sees the order written with it")

	tx, err = db.BeginTx(ctx, nil)
	require.NoError(t, err)
	rolledBack, err := EnqueueTx(ctx, s, tx, Job{Type: "mail"}, mail{To: "bo", N: 2})
	require.NoError(t, err)
	require.NoError(t, tx.Rollback())
	_, err = db.Exec(`INSERT INTO orders VALUES (3, 'pen')`)
	require.NoError(t, err)
	h, err := s.Enqueue(ctx, Job{Type: "mail"}, mail{To: "cy", N: 3})
	require.NoError(t, err)
	assert.Equal(t, rolledBack, h.ID(), "the rolled-back job's ID went to the next job")
	assert.Equal(t, mailRun{mail{To: "cy", N: 3}, 1}, <-got)
	assert.Equal(t, "pen", <-items)
	require.NoError(t, h.Wait(ctx))
	require.NoError(t, s.Shutdown(ctx))
	assert.Empty(t, got, "the rolled-back job never ran, and the next one ran once")

	_, err = EnqueueTx(ctx, s, "not a transaction", Job{Type: "mail"}, mail{})
	assert.ErrorIs(t, err, ErrTxNotSupported)
}

// restartRun runs 60 jobs over three keys of weights 1, 3 and 2, one at a
// time, each holding its slot for a cost of its own, on a fake clock, and
// returns the order they started in. Durable unless memory; with stopAt >
// 0 the Scheduler is shut down while job number stopAt runs, and a new one
// on the same file runs the rest.
func restartRun(t *testing.T, memory bool, stopAt int) []int {
	t.Helper()
	const n = 60
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
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
	var hs Handlers
	AddHandler(&hs, "work", work)
	cfg := Config{Clock: clk, MaxConcurrency: 1, Handlers: &hs,
		Keys:  map[string]KeyConfig{"a": {Weight: 1}, "b": {Weight: 3}, "c": {Weight: 2}},
		Aging: AgingConfig{GracePeriod: 5 * time.Second, Interval: time.Second, Step: 5}}
	var st *fairschedsqlite.Store
	if memory {
		cfg.Handlers = nil
	} else {
		st = openTestStore(t, filepath.Join(t.TempDir(), "jobs.db"))
		cfg.Store = st
	}
	s, err := New(cfg)
	require.NoError(t, err)
	ctx := context.Background()
	handles := make([]Handle, n)
	for i := range n {
		clk.Advance(100 * time.Millisecond)
		job, m := Job{Type: "work", Key: string(rune('a' + i%3)), ID: fmt.Sprint("r", i%4), Priority: 10 + i%7*10}, mail{N: i}
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
		for _, h := range handles {
			if h.Seq() != 0 && !slicesContains(order, int(h.ID()-1)) {
				<-h.Done()
			}
		}
		close(release[i])
		require.NoError(t, <-shut)
		s, err = New(cfg)
		require.NoError(t, err)
	}
	require.NoError(t, s.Shutdown(ctx))
	return order
}

func slicesContains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// A durable Scheduler follows the order an in-memory one does, and one
// shut down and started again on its file part-way through starts the
// same next jobs as one that never stopped: the queued jobs come back with
// their submission times, and the keys' virtual times and the learned
// costs with them.
func TestDurableRestartKeepsOrderAndFairness(t *testing.T) {
	inMemory := restartRun(t, true, 0)
	durable := restartRun(t, false, 0)
	require.Equal(t, inMemory, durable, "durable jobs take the in-memory order")
	for _, stopAt := range []int{7, 20, 41} {
		assert.Equal(t, durable, restartRun(t, false, stopAt), "restarted after %d jobs", stopAt)
	}
}

// The fair state is saved every two seconds while it changes, so that a
// crash loses at most that much of it.
func TestDurableFairStateSavedWhileRunning(t *testing.T) {
	clk, _, st, s, got := fakeDurable(t)
	ctx := context.Background()
	h, err := s.Enqueue(ctx, Job{Type: "mail", Key: "tenant-7", ID: "inbox"}, mail{})
	require.NoError(t, err)
	<-got
	require.NoError(t, h.Wait(ctx))
	saved := func() string {
		require.NoError(t, st.Flush(ctx))
		b, err := st.State(ctx, "fair")
		require.NoError(t, err)
		return string(b)
	}
	assert.Empty(t, saved(), "nothing saved before the first two seconds")
	clk.Advance(2 * time.Second)
	state := saved()
	assert.Contains(t, state, `"key":"tenant-7"`)
	assert.Contains(t, state, `"id":"inbox"`, "the learned cost of (mail, inbox)")
}

// A durable job found in the store whose type has no handler here waits,
// visible in Snapshot and Stats as waiting for one, with a warning in the
// log; a later Scheduler with the handler runs it.
func TestDurableNoHandler(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	st := openTestStore(t, path)
	for range 2 {
		j := &store.Job{Type: "report", Key: "k", Submitted: time.Now().UnixMicro(), State: store.Queued, Args: []byte(`{"n":4}`)}
		require.NoError(t, st.Insert(context.Background(), nil, j))
	}
	var logged bytes.Buffer
	got := make(chan mailRun, 2)
	s, err := New(Config{Store: st, Handlers: mailHandlers(got, nil), Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	require.NoError(t, err)
	snap := s.Snapshot()
	require.Len(t, snap, 2)
	for _, ji := range snap {
		assert.Equal(t, WaitNoHandler, ji.Waiting)
		assert.Equal(t, "report", ji.Type)
	}
	assert.Equal(t, map[WaitReason]int{WaitNoHandler: 2}, s.Stats().Waiting)
	assert.Contains(t, logged.String(), "type=report jobs=2")
	assert.ErrorContains(t, s.ResumeType("report"), "has no handler")
	_, err = s.Submit(context.Background(), Job{Type: "report"}, func(context.Context) error { return nil })
	assert.ErrorContains(t, err, "has a handler", "its jobs are durable ones")
	require.NoError(t, s.Shutdown(context.Background()))

	var hs Handlers
	AddHandler(&hs, "report", func(ctx context.Context, m mail) error { got <- mailRun{m, Attempt(ctx)}; return nil })
	s2 := newTestScheduler(t, Config{Store: st, Handlers: &hs})
	assert.Equal(t, mailRun{mail{N: 4}, 1}, <-got)
	assert.Equal(t, mailRun{mail{N: 4}, 1}, <-got)
	require.NoError(t, s2.Shutdown(context.Background()))
}

// Pauses are kept in the store: a key and a type paused before a restart
// are paused after it, their jobs waiting, until resumed.
func TestDurablePausesSurviveRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	st := openTestStore(t, path)
	got := make(chan mailRun, 3)
	s := newTestScheduler(t, Config{Store: st, Handlers: mailHandlers(got, nil)})
	ctx := context.Background()
	s.PauseKey("held")
	require.NoError(t, s.PauseType("mail"))
	require.NoError(t, s.ResumeType("mail"))
	require.NoError(t, s.PauseType(""))
	_, err := s.Enqueue(ctx, Job{Type: "mail", Key: "held"}, mail{N: 1})
	require.NoError(t, err)
	require.NoError(t, s.Shutdown(ctx))

	s2 := newTestScheduler(t, Config{Store: st, Handlers: mailHandlers(got, nil)})
	assert.Equal(t, []string{"held"}, s2.Stats().PausedKeys)
	assert.Equal(t, map[WaitReason]int{WaitPaused: 1}, s2.Stats().Waiting, "its key is still paused")
	ran := make(chan struct{})
	_, err = s2.Submit(ctx, Job{}, func(context.Context) error { close(ran); return nil })
	require.NoError(t, err)
	assert.Equal(t, map[WaitReason]int{WaitPaused: 2}, s2.Stats().Waiting, "and so is the default type")
	s2.ResumeKey("held")
	assert.Equal(t, mailRun{mail{N: 1}, 1}, <-got)
	require.NoError(t, s2.ResumeType(""))
	<-ran
}

// A durable schedule goes on across a restart: the occurrence that fell
// due while no Scheduler ran is enqueued at once, once, and the cadence
// resumes from there; an occurrence is skipped while the previous one,
// restored from the store, has not ended.
func TestDurableScheduleSurvivesRestart(t *testing.T) {
	clk, t0, st := fakeClockAndStore(t)
	got := make(chan mailRun, 10)
	var at []time.Duration
	// Each run reads the clock before it says it ran: the test moves the
	// clock once it has.
	var handlers Handlers
	AddHandler(&handlers, "mail", func(ctx context.Context, m mail) error {
		at = append(at, clk.Now().Sub(t0))
		got <- mailRun{m, Attempt(ctx)}
		return nil
	})
	ctx := context.Background()
	// ran waits for p's latest occurrence to run and end: the next one
	// is skipped if this one has not ended when it falls due.
	ran := func(p *Periodic) {
		<-got
		require.NoError(t, p.Last().Wait(ctx))
	}
	s := newTestScheduler(t, Config{Clock: clk, Store: st, Handlers: &handlers})
	p, err := s.ScheduleDurable(ctx, "digest", Every(10*time.Second), Job{Type: "mail"}, mail{To: "all"})
	require.NoError(t, err)
	clk.Advance(10 * time.Second)
	ran(p)
	clk.Advance(10 * time.Second)
	ran(p)
	clk.Advance(5 * time.Second)
	require.NoError(t, s.Shutdown(ctx))

	clk.Advance(20 * time.Second) // down from 25 s to 45 s: the occurrence of 30 s fell due
	s = newTestScheduler(t, Config{Clock: clk, Store: st, Handlers: &handlers})
	p, err = s.ScheduleDurable(ctx, "digest", Every(10*time.Second), Job{Type: "mail"}, mail{To: "all"})
	require.NoError(t, err)
	clk.Advance(0)
	ran(p)
	clk.Advance(10 * time.Second)
	ran(p)
	require.NoError(t, s.Shutdown(ctx))
	assert.Equal(t, []time.Duration{10 * time.Second, 20 * time.Second, 45 * time.Second, 55 * time.Second}, at,
		"one occurrence for the time it was down, then every 10 s from then")
	assert.Zero(t, p.Skipped())

	// The last occurrence is still queued at the next start (its key
	// paused): the next occurrence is skipped.
	s, sig := newSignalledScheduler(t, Config{Clock: clk, Store: st, Handlers: &handlers})
	s.PauseKey("")
	_, err = s.ScheduleDurable(ctx, "digest", Every(10*time.Second), Job{Type: "mail"}, mail{To: "all"})
	require.NoError(t, err)
	clk.Advance(10 * time.Second) // 65 s
	<-sig.Accepted                // enqueued on a goroutine of the scheduler's
	require.NoError(t, s.Shutdown(ctx))
	s = newTestScheduler(t, Config{Clock: clk, Store: st, Handlers: &handlers})
	p, err = s.ScheduleDurable(ctx, "digest", Every(10*time.Second), Job{Type: "mail"}, mail{To: "all"})
	require.NoError(t, err)
	assert.Equal(t, 1, s.Stats().Paused, "the occurrence of 65 s waits, its key paused")
	clk.Advance(10 * time.Second) // 75 s
	assert.EqualValues(t, 1, p.Skipped(), "the occurrence of 75 s waits for the one of 65 s")
	s.ResumeKey("")
	<-got
	require.NoError(t, s.Shutdown(ctx))
}

// A job whose start deadline passed while no Scheduler ran ends, expired,
// at the next start, without running.
func TestDurableDeadlinePassedWhileDown(t *testing.T) {
	clk, t0, st, s, got := fakeDurable(t)
	ctx := context.Background()
	s.PauseKey("late")
	h, err := s.Enqueue(ctx, Job{Type: "mail", Key: "late", StartBy: t0.Add(10 * time.Second)}, mail{})
	require.NoError(t, err)
	require.NoError(t, s.Shutdown(ctx))
	s.ResumeKey("late") // recorded: the next start finds the key running

	clk.Advance(time.Minute)
	s = newTestScheduler(t, Config{Clock: clk, Store: st, Handlers: mailHandlers(got, nil)})
	require.NoError(t, s.Shutdown(ctx))
	assert.Empty(t, got, "it never ran")
	state, _ := storedState(t, st.DB(), h.ID())
	assert.Equal(t, store.Ended, state)
	assert.Contains(t, storedError(t, st.DB(), h.ID()), "start deadline")
}

// Duplicate policies work on durable jobs, across a restart too: a
// duplicate of a queued job of a joining type joins it (the job runs
// once), the one restored from the store included; under Supersede the
// newer replaces the older.
func TestDurableDuplicates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	st := openTestStore(t, path)
	got := make(chan mailRun, 4)
	join := Config{Store: st, Handlers: mailHandlers(got, nil), Types: map[string]TypeConfig{"mail": {Duplicates: JoinQueued}}}
	s := newTestScheduler(t, join)
	ctx := context.Background()
	s.PauseKey("") // so that they wait
	first, err := s.Enqueue(ctx, Job{Type: "mail", ID: "inbox-1"}, mail{N: 1})
	require.NoError(t, err)
	second, err := s.Enqueue(ctx, Job{Type: "mail", ID: "inbox-1"}, mail{N: 2})
	require.NoError(t, err)
	assert.Equal(t, first.ID(), second.ID(), "the duplicate joined the queued job")
	require.NoError(t, s.Shutdown(ctx))

	s = newTestScheduler(t, join) // the key is still paused
	third, err := s.Enqueue(ctx, Job{Type: "mail", ID: "inbox-1"}, mail{N: 3})
	require.NoError(t, err)
	assert.Equal(t, first.ID(), third.ID(), "a duplicate joins the job restored from the store")
	s.ResumeKey("")
	assert.Equal(t, mailRun{mail{N: 1}, 1}, <-got, "the job runs once, with its own arguments")
	require.NoError(t, third.Wait(ctx))
	require.NoError(t, s.Shutdown(ctx))
	assert.Empty(t, got)

	supersede := join
	supersede.Types = map[string]TypeConfig{"mail": {Duplicates: Supersede}}
	s = newTestScheduler(t, supersede)
	s.PauseKey("")
	old, err := s.Enqueue(ctx, Job{Type: "mail", ID: "inbox-2"}, mail{N: 4})
	require.NoError(t, err)
	require.NoError(t, s.Shutdown(ctx))
	s = newTestScheduler(t, supersede)
	newer, err := s.Enqueue(ctx, Job{Type: "mail", ID: "inbox-2"}, mail{N: 5})
	require.NoError(t, err)
	s.ResumeKey("")
	assert.Equal(t, mailRun{mail{N: 5}, 1}, <-got, "the newer replaced the one restored")
	require.NoError(t, newer.Wait(ctx))
	require.NoError(t, s.Shutdown(ctx))
	state, _ := storedState(t, st.DB(), old.ID())
	assert.Equal(t, store.Ended, state)
	assert.Empty(t, got)
}

// A durable job that runs after another keeps waiting for it across a
// restart, and one whose dependency failed while no Scheduler ran fails
// at start with ErrDependency, without running.
func TestDurableDependencies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	st := openTestStore(t, path)
	got := make(chan mailRun, 2)
	s := newTestScheduler(t, Config{Store: st, Handlers: mailHandlers(got, nil)})
	ctx := context.Background()
	s.PauseKey("first")
	a, err := s.Enqueue(ctx, Job{Type: "mail", Key: "first"}, mail{N: 1})
	require.NoError(t, err)
	b, err := s.Enqueue(ctx, Job{Type: "mail", After: []Handle{a}}, mail{N: 2})
	require.NoError(t, err)
	_, err = s.Enqueue(ctx, Job{Type: "mail", After: []Handle{{}}}, mail{})
	assert.ErrorContains(t, err, "zero Handle")
	require.NoError(t, s.Shutdown(ctx))

	s = newTestScheduler(t, Config{Store: st, Handlers: mailHandlers(got, nil)})
	assert.Equal(t, map[WaitReason]int{WaitPaused: 1, WaitDependency: 1}, s.Stats().Waiting)
	s.ResumeKey("first")
	assert.Equal(t, mailRun{mail{N: 1}, 1}, <-got)
	assert.Equal(t, mailRun{mail{N: 2}, 1}, <-got, "then the job after it")
	require.NoError(t, s.Shutdown(ctx))
	state, _ := storedState(t, st.DB(), b.ID())
	assert.Equal(t, store.Completed, state)

	// A dependency lost for good while no one ran: its dependant fails.
	path = filepath.Join(t.TempDir(), "jobs.db")
	dep := crashWhileRunning(t, path, time.Now())
	st = openTestStore(t, path)
	after := &store.Job{Type: "mail", Submitted: time.Now().UnixMicro(), State: store.Queued, Args: []byte(`{}`), After: []int64{dep}}
	require.NoError(t, st.Insert(ctx, nil, after))
	s = newTestScheduler(t, Config{Store: st, Handlers: mailHandlers(got, nil)})
	require.NoError(t, s.Shutdown(ctx))
	assert.Empty(t, got, "neither ran")
	state, _ = storedState(t, st.DB(), after.ID)
	assert.Equal(t, store.Ended, state)
	assert.Contains(t, storedError(t, st.DB(), after.ID), "did not complete")
}

// heldStore is a store whose Insert signals entered and then waits for
// release, so that a test can have Enqueues caught between admission and
// commit.
type heldStore struct {
	*fairschedsqlite.Store
	entered chan struct{}
	release chan struct{}
}

func (h *heldStore) Insert(ctx context.Context, state *store.StateWrite, jobs ...*store.Job) error {
	h.entered <- struct{}{}
	<-h.release
	return h.Store.Insert(ctx, state, jobs...)
}

// Enqueues running at once never pass a queue limit together: a job
// counts against MaxQueue and its key's MaxPending from its admission,
// while it is written, and the ones that do not fit fail at once.
func TestDurableEnqueuesAtOnceKeepLimits(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		keyFull bool
	}{
		{"MaxQueue", Config{MaxQueue: 3}, false},
		{"MaxPending", Config{Keys: map[string]KeyConfig{"k": {MaxPending: 3}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held := &heldStore{
				Store:   openTestStore(t, filepath.Join(t.TempDir(), "jobs.db")),
				entered: make(chan struct{}, 5),
				release: make(chan struct{}),
			}
			cfg := tc.cfg
			cfg.Store, cfg.Handlers = held, mailHandlers(make(chan mailRun, 5), nil)
			s := newTestScheduler(t, cfg)
			var releaseOnce sync.Once
			release := func() { releaseOnce.Do(func() { close(held.release) }) }
			t.Cleanup(release)  // before Close, which waits for the Enqueues, if the test fails
			s.PauseType("mail") // nothing starts: every job stays queued
			ctx := context.Background()
			type result struct {
				h   Handle
				err error
			}
			results := make(chan result, 5)
			for i := range 5 {
				go func() {
					h, err := s.Enqueue(ctx, Job{Type: "mail", Key: "k"}, mail{N: i})
					results <- result{h, err}
				}()
			}
			// Three are admitted and wait in Insert; the other two are
			// refused without reaching it.
			entered, refused := 0, 0
			for entered < 3 || refused < 2 {
				select {
				case <-held.entered:
					entered++
					require.LessOrEqual(t, entered, 3, "a fourth Enqueue was admitted while three were being written")
				case r := <-results:
					var qf *QueueFullError
					require.ErrorAs(t, r.err, &qf)
					assert.Equal(t, tc.keyFull, qf.KeyLimit)
					assert.Equal(t, 3, qf.Limit)
					assert.Equal(t, 3, qf.Size, "the jobs being written count as queued")
					refused++
				}
			}
			_, err := s.Submit(ctx, Job{Key: "k"}, noop)
			assert.ErrorIs(t, err, ErrQueueFull, "nor does a Submit pass the limit while they are written")
			release()
			for range 3 {
				r := <-results
				require.NoError(t, r.err)
				assert.NotZero(t, r.h.ID())
			}
			assert.Equal(t, 3, s.Stats().Queued)
			_, err = s.Enqueue(ctx, Job{Type: "mail", Key: "k"}, mail{N: 6})
			assert.ErrorIs(t, err, ErrQueueFull, "queued now, the three still count")
		})
	}
}

// A durable job's own resource needs are stored with it and hold after a
// restart: one that needs both units of "gpu" waits while another job
// holds one, one that needs a unit waits behind it, and one that needs
// none runs.
func TestDurableNeedsSurviveRestart(t *testing.T) {
	st := openTestStore(t, filepath.Join(t.TempDir(), "jobs.db"))
	got := make(chan mailRun, 3)
	cfg := Config{Resources: map[string]int{"gpu": 2}, Store: st, Handlers: mailHandlers(got, nil)}
	s := newTestScheduler(t, cfg)
	ctx := context.Background()
	require.NoError(t, s.PauseType("mail")) // kept in the store: nothing runs before the restart
	for i, needs := range []map[string]int{{"gpu": 2}, {"gpu": 1}, {}} {
		_, err := s.Enqueue(ctx, Job{Type: "mail", Needs: needs}, mail{N: i + 1})
		require.NoError(t, err)
	}
	require.NoError(t, s.Shutdown(ctx))

	s2 := newTestScheduler(t, cfg)
	release := make(chan struct{})
	holding, err := s2.Submit(ctx, Job{Needs: map[string]int{"gpu": 1}}, func(context.Context) error { <-release; return nil })
	require.NoError(t, err)
	require.NoError(t, s2.ResumeType("mail"))
	// The first in order needs both units: it claims the resource, so the
	// one that needs one unit waits behind it, and the one that needs none
	// runs.
	assert.Equal(t, map[WaitReason]int{WaitResource: 2}, s2.Stats().Waiting)
	assert.Equal(t, mailRun{mail{N: 3}, 1}, <-got)
	close(release)
	require.NoError(t, holding.Wait(ctx))
	assert.Equal(t, mailRun{mail{N: 1}, 1}, <-got)
	assert.Equal(t, mailRun{mail{N: 2}, 1}, <-got)
}

// A durable job enqueued from a running job's context is its child: it
// waits at the parent's priority, ahead of older jobs below it, and the
// raised priority is stored for a restart.
func TestDurableChildJob(t *testing.T) {
	st := openTestStore(t, filepath.Join(t.TempDir(), "jobs.db"))
	got := make(chan mailRun, 3)
	var s *Scheduler
	child := make(chan int64, 1)
	s = newTestScheduler(t, Config{MaxConcurrency: 1, Store: st, Handlers: mailHandlers(got, func(ctx context.Context, m mail) error {
		if m.N == 1 {
			h, err := s.Enqueue(ctx, Job{Type: "mail"}, mail{N: 3})
			if err != nil {
				return err
			}
			child <- h.ID()
		}
		return nil
	})})
	ctx := context.Background()
	s.PauseKey("")
	parent, err := s.Enqueue(ctx, Job{Type: "mail", Priority: 80}, mail{N: 1})
	require.NoError(t, err)
	older, err := s.Enqueue(ctx, Job{Type: "mail"}, mail{N: 2})
	require.NoError(t, err)
	s.ResumeKey("")
	require.NoError(t, parent.Wait(ctx))
	require.NoError(t, older.Wait(ctx))
	for _, n := range []int{1, 3, 2} {
		assert.Equal(t, n, (<-got).m.N)
	}
	require.NoError(t, s.Shutdown(ctx))
	var priority int
	require.NoError(t, st.DB().QueryRow("SELECT priority FROM fairsched_jobs WHERE id = ?", <-child).Scan(&priority))
	assert.Equal(t, 80, priority)
}

// A failed attempt of a durable job is stored with its own start and end,
// the times it ran, whatever the engine keeps of the job meanwhile.
func TestDurableRetryStoresTheAttemptsTimes(t *testing.T) {
	clk, t0, st := fakeClockAndStore(t)
	got := make(chan mailRun, 2)
	fails := func(ctx context.Context, m mail) error {
		if Attempt(ctx) == 1 {
			return errFlaky
		}
		return nil
	}
	s, sig := newSignalledScheduler(t, Config{Clock: clk, Store: st, Handlers: mailHandlers(got, fails),
		Types: map[string]TypeConfig{"mail": {Retry: RetryPolicy{Attempts: 2, Backoff: time.Minute}}}})
	ctx := context.Background()
	h, err := s.Enqueue(ctx, Job{Type: "mail", NotBefore: t0.Add(10 * time.Second)}, mail{N: 1})
	require.NoError(t, err)
	clk.Set(t0.Add(10 * time.Second))
	<-got
	require.Equal(t, h.Seq(), <-sig.Retried)
	clk.Set(t0.Add(70 * time.Second)) // its backoff ends
	<-got
	require.NoError(t, h.Wait(ctx))
	require.NoError(t, s.Shutdown(ctx))
	var raw []byte
	require.NoError(t, st.DB().QueryRow("SELECT attempts FROM fairsched_jobs WHERE id = ?", h.ID()).Scan(&raw))
	var attempts []store.Attempt
	require.NoError(t, json.Unmarshal(raw, &attempts))
	require.NotEmpty(t, attempts)
	assert.Equal(t, t0.Add(10*time.Second).UnixMicro(), attempts[0].Start, "the first attempt started at 10 s")
}

// A delayed durable job's aging clock starts at its NotBefore, as a
// Submit job's does: a pause of its key before then moves it on by
// nothing.
func TestDurableDelayedClockStartsAtNotBefore(t *testing.T) {
	clk, t0, st := fakeClockAndStore(t)
	s := newTestScheduler(t, Config{MaxConcurrency: 1, Clock: clk, Store: st, Handlers: mailHandlers(make(chan mailRun, 3), nil),
		Aging: AgingConfig{Interval: time.Second, Step: 1}})
	ctx := context.Background()
	g := newGate()
	_, err := s.Submit(ctx, Job{}, g.fn) // holds the slot
	require.NoError(t, err)
	<-g.entered
	clk.Set(t0.Add(time.Second)) // not at the epoch: a submission time of its own
	notBefore := t0.Add(10 * time.Second)
	inMemory, err := s.Submit(ctx, Job{Key: "k", NotBefore: notBefore}, noop)
	require.NoError(t, err)
	durable, err := s.Enqueue(ctx, Job{Type: "mail", Key: "k", NotBefore: notBefore}, mail{N: 1})
	require.NoError(t, err)
	clk.Set(t0.Add(3 * time.Second))
	s.PauseKey("k")
	clk.Set(t0.Add(9 * time.Second))
	s.ResumeKey("k")
	clk.Set(t0.Add(21 * time.Second))
	assert.Equal(t, 61, infoOf(t, s, inMemory).EffectivePriority, "11 s since its NotBefore")
	assert.Equal(t, 61, infoOf(t, s, durable).EffectivePriority, "the same for the durable one")
	close(g.open)
}

// onceHeldStore holds the inserts made while held is set: each signals
// entered, then waits for release.
type onceHeldStore struct {
	*fairschedsqlite.Store
	held    atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (h *onceHeldStore) Insert(ctx context.Context, state *store.StateWrite, jobs ...*store.Job) error {
	if h.held.Load() {
		h.entered <- struct{}{}
		<-h.release
	}
	return h.Store.Insert(ctx, state, jobs...)
}

// A durable job admitted before its (type, ID) pair is disabled, and
// written after, is queued and runs: it was submitted before, as a job of
// the pair already queued is.
func TestDurableAdmittedBeforeDisabled(t *testing.T) {
	held := &onceHeldStore{Store: openTestStore(t, filepath.Join(t.TempDir(), "jobs.db")),
		entered: make(chan struct{}, 1), release: make(chan struct{})}
	got := make(chan mailRun, 2)
	fail := make(chan struct{})
	s := newTestScheduler(t, Config{Store: held,
		Handlers: mailHandlers(got, func(ctx context.Context, m mail) error {
			if m.N == 1 {
				<-fail
				return ErrPermanent
			}
			return nil
		}),
		Types: map[string]TypeConfig{"mail": {Disable: DisablePolicy{Failures: 1, Window: time.Hour}}}})
	ctx := context.Background()
	first, err := s.Enqueue(ctx, Job{Type: "mail", ID: "x"}, mail{N: 1})
	require.NoError(t, err)
	<-got
	held.held.Store(true)
	type result struct {
		h   Handle
		err error
	}
	second := make(chan result, 1)
	go func() {
		h, err := s.Enqueue(ctx, Job{Type: "mail", ID: "x"}, mail{N: 2})
		second <- result{h, err}
	}()
	<-held.entered // admitted, being written
	close(fail)
	require.Error(t, first.Wait(ctx))
	require.Len(t, s.Disabled(), 1, "the pair is disabled now")
	close(held.release)
	r := <-second
	require.NoError(t, r.err)
	require.NoError(t, r.h.Wait(ctx))
	assert.Equal(t, 2, (<-got).m.N)
}

// A durable schedule arms its next occurrence when one falls due, not
// once that one is written: a clock that moved past the next time during
// the write fires it then, and it is skipped, since the one being written
// is the latest. (Armed after the write, on a test clock already past
// its time, it would wait for the clock to move again.)
func TestDurableScheduleArmsBeforeTheWrite(t *testing.T) {
	clk, t0, plain := fakeClockAndStore(t)
	held := &onceHeldStore{Store: plain, entered: make(chan struct{}, 1), release: make(chan struct{})}
	got := make(chan mailRun, 2)
	s := newTestScheduler(t, Config{Clock: clk, Store: held, Handlers: mailHandlers(got, nil)})
	ctx := context.Background()
	p, err := s.ScheduleDurable(ctx, "digest", Every(10*time.Second), Job{Type: "mail"}, mail{N: 1})
	require.NoError(t, err)
	held.held.Store(true)
	clk.Advance(10 * time.Second)
	<-held.entered // the occurrence of 10 s is being written
	held.held.Store(false)
	clk.Advance(10 * time.Second)
	assert.EqualValues(t, 1, p.Skipped(), "the occurrence of 20 s fell due during the write")
	close(held.release)
	<-got
	require.NoError(t, p.Last().Wait(ctx), "the occurrence of 10 s ends before the next falls due")
	clk.Advance(10 * time.Second) // 30 s
	<-got
	require.NoError(t, s.Shutdown(ctx))
	assert.Equal(t, t0.Add(40*time.Second), nextStored(t, plain.DB(), "digest"), "the schedule's next time, stored")
}

// nextStored reads the next time of durable schedule name from the file.
func nextStored(t *testing.T, db *sql.DB, name string) time.Time {
	t.Helper()
	var b []byte
	require.NoError(t, db.QueryRow("SELECT value FROM fairsched_state WHERE name = ?", rt.ScheduleStateName(name)).Scan(&b))
	var st rt.ScheduleState
	require.NoError(t, json.Unmarshal(b, &st))
	return time.UnixMicro(st.Next).UTC()
}

// A durable job's aging clock stands still while it is paused, across a
// restart too: the submission time a resume moved on is stored, and a
// pause that lasts through a restart stops the clock from when it began,
// not from the restart (docs/design.md, on aging and durable mode).
func TestDurablePausedClockSurvivesRestart(t *testing.T) {
	for _, by := range []string{"key", "type"} {
		t.Run(by, func(t *testing.T) {
			clk, t0, st := fakeClockAndStore(t)
			at := func(s int) { clk.Set(t0.Add(time.Duration(s) * time.Second)) }
			cfg := Config{MaxConcurrency: 1, Clock: clk, Store: st, Aging: AgingConfig{Interval: time.Second, Step: 1}}
			pause := func(s *Scheduler) {
				if by == "key" {
					s.PauseKey("k")
				} else {
					require.NoError(t, s.PauseType("mail"))
				}
			}
			resume := func(s *Scheduler) {
				if by == "key" {
					s.ResumeKey("k")
				} else {
					require.NoError(t, s.ResumeType("mail"))
				}
			}
			ctx := context.Background()
			got := make(chan mailRun, 1)
			cfg.Handlers = mailHandlers(got, nil)
			s := newTestScheduler(t, cfg)
			g := newGate()
			_, err := s.Submit(ctx, Job{}, g.fn) // holds the slot
			require.NoError(t, err)
			<-g.entered
			at(1)
			_, err = s.Enqueue(ctx, Job{Type: "mail", Key: "k", Priority: 1}, mail{N: 1})
			require.NoError(t, err)
			at(3)
			pause(s) // after 2 s of waiting
			at(9)
			resume(s)
			at(12)
			require.Equal(t, 6, mailEffective(t, s), "5 s of waiting")
			at(14)
			pause(s) // after 7 s of waiting
			at(20)
			require.Equal(t, 8, mailEffective(t, s), "paused for 6 s")
			close(g.open)
			require.NoError(t, s.Shutdown(ctx))

			at(100)
			s2 := newTestScheduler(t, cfg)
			assert.Equal(t, 8, mailEffective(t, s2), "restarted 80 s later, still paused: 7 s of waiting in all")
			at(110)
			g2 := newGate()
			_, err = s2.Submit(ctx, Job{}, g2.fn) // holds the slot
			require.NoError(t, err)
			<-g2.entered
			resume(s2)
			at(113)
			assert.Equal(t, 11, mailEffective(t, s2), "3 s after the resume: 10 s of waiting in all")
			close(g2.open)
			assert.Equal(t, mailRun{mail{N: 1}, 1}, <-got)
		})
	}
}

// A durable job whose attempt fails while its key is paused has its aging
// clock stand still from the attempt's end, across a restart too: it ran
// until then.
func TestDurableRetriedUnderPauseClockSurvivesRestart(t *testing.T) {
	clk, t0, st := fakeClockAndStore(t)
	at := func(s int) { clk.Set(t0.Add(time.Duration(s) * time.Second)) }
	release := make(chan struct{})
	fails := func(ctx context.Context, m mail) error {
		if Attempt(ctx) == 1 {
			<-release
			return errFlaky
		}
		return nil
	}
	got := make(chan mailRun, 2)
	cfg := Config{MaxConcurrency: 1, Clock: clk, Store: st, Handlers: mailHandlers(got, fails),
		Aging: AgingConfig{Interval: time.Second, Step: 1},
		Types: map[string]TypeConfig{"mail": {Retry: RetryPolicy{Attempts: 2, Backoff: 30 * time.Second}}}}
	ctx := context.Background()
	s, sig := newSignalledScheduler(t, cfg)
	at(1)
	h, err := s.Enqueue(ctx, Job{Type: "mail", Key: "k", Priority: 1}, mail{N: 1})
	require.NoError(t, err)
	<-got // its first attempt runs
	at(3)
	s.PauseKey("k")
	at(10)
	close(release)
	require.Equal(t, h.Seq(), <-sig.Retried, "its attempt failed at 10 s, 9 s after its submission")
	at(20)
	require.Equal(t, 10, mailEffective(t, s), "backing off, paused: 9 s of waiting")
	require.NoError(t, s.Shutdown(ctx))

	at(100)
	s2 := newTestScheduler(t, cfg)
	assert.Equal(t, 10, mailEffective(t, s2), "restarted, still paused: 9 s of waiting")
	s2.ResumeKey("k")
	assert.Equal(t, mailRun{mail{N: 1}, 2}, <-got)
}

// A durable job set aside with its aging clock running, backing off or
// waiting for the jobs it runs after, keeps across a restart the time its
// key stood paused meanwhile, though it never returned to the queue
// before the restart.
func TestDurableSetAsideClockKeepsPauseAcrossRestart(t *testing.T) {
	for _, blocked := range []bool{false, true} {
		t.Run(map[bool]string{false: "backing off", true: "waiting for a dependency"}[blocked], func(t *testing.T) {
			clk, t0, st := fakeClockAndStore(t)
			at := func(s int) { clk.Set(t0.Add(time.Duration(s) * time.Second)) }
			fails := func(ctx context.Context, m mail) error {
				if Attempt(ctx) == 1 {
					return errFlaky
				}
				return nil
			}
			got := make(chan mailRun, 4)
			cfg := Config{MaxConcurrency: 1, Clock: clk, Store: st, Handlers: mailHandlers(got, fails),
				Aging: AgingConfig{Interval: time.Second, Step: 1},
				Types: map[string]TypeConfig{"mail": {Retry: RetryPolicy{Attempts: 2, Backoff: time.Hour}}}}
			ctx := context.Background()
			s, sig := newSignalledScheduler(t, cfg)
			at(1)
			if blocked { // it waits for a job of another key, backing off
				a, err := s.Enqueue(ctx, Job{Type: "mail", Key: "a", Priority: 1}, mail{N: 1})
				require.NoError(t, err)
				require.Equal(t, mailRun{mail{N: 1}, 1}, <-got)
				require.Equal(t, a.Seq(), <-sig.Retried)
				_, err = s.Enqueue(ctx, Job{Type: "mail", Key: "k", Priority: 1, After: []Handle{a}}, mail{N: 2})
				require.NoError(t, err)
			} else {
				h, err := s.Enqueue(ctx, Job{Type: "mail", Key: "k", Priority: 1}, mail{N: 2})
				require.NoError(t, err)
				require.Equal(t, mailRun{mail{N: 2}, 1}, <-got)
				require.Equal(t, h.Seq(), <-sig.Retried, "its first attempt failed at 1 s")
			}
			at(10)
			s.PauseKey("k")
			at(30)
			s.ResumeKey("k")
			at(40)
			require.Equal(t, 20, mailEffective(t, s), "39 s since its submission, 20 of them paused")
			require.NoError(t, s.Shutdown(ctx))

			at(50)
			s2 := newTestScheduler(t, cfg)
			require.Equal(t, 30, mailEffective(t, s2), "restarted: 49 s since its submission, 20 of them paused")
			at(60)
			s2.PauseKey("k")
			at(70)
			s2.ResumeKey("k")
			require.NoError(t, s2.Shutdown(ctx))

			at(90)
			s3 := newTestScheduler(t, cfg)
			require.Equal(t, 60, mailEffective(t, s3), "restarted again: 89 s, 30 of them paused")
			at(100)
			s3.PauseKey("k")
			at(110)
			require.NoError(t, s3.Shutdown(ctx))

			at(130)
			s4 := newTestScheduler(t, cfg)
			require.Equal(t, 70, mailEffective(t, s4), "restarted paused: 129 s, 60 of them paused")
			at(140)
			s4.ResumeKey("k")
			at(150)
			assert.Equal(t, 80, mailEffective(t, s4), "149 s, 70 of them paused")
		})
	}
}

// mailEffective returns the effective priority of the mail job of key k
// in s, whatever its Seq there (it changes across a restart).
func mailEffective(t *testing.T, s *Scheduler) int {
	t.Helper()
	for _, ji := range s.Snapshot() {
		if ji.Type == "mail" && ji.Key == "k" {
			return ji.EffectivePriority
		}
	}
	t.Fatal("the mail job of key k is not in the snapshot")
	return 0
}
