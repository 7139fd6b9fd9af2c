package fairschedpg_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedpg"
	"github.com/fairsched/fairsched/fairschedpg/internal/pgtest"
	"github.com/fairsched/fairsched/internal/store"
)

// A durable schedule that several replicas keep: the store's state of
// the schedule decides which replica enqueues each occurrence (a swap
// that writes only if the state is still what its replica read).

// Of the swaps from one value, one writes: the others insert nothing.
func TestSwapInsert(t *testing.T) {
	pool, schema := pgtest.PoolSchema(t)
	a, b := openReplicaStore(t, schema), openReplicaStore(t, schema)
	ctx := context.Background()
	job := func() *store.Job {
		return &store.Job{Type: "tick", Key: "k", State: store.Queued, Args: []byte(`{}`)}
	}
	state := func(v string) *store.StateWrite {
		return &store.StateWrite{Name: "schedule:s", Value: func([]*store.Job) []byte { return []byte(v) }}
	}
	jobs := func() (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM fairsched_jobs WHERE type = 'tick'`).Scan(&n))
		return n
	}

	j1 := job()
	won, err := a.SwapInsert(ctx, state("v1"), nil, j1)
	require.NoError(t, err)
	assert.True(t, won, "the first swap from no value")
	assert.Positive(t, j1.ID)
	j2 := job()
	won, err = b.SwapInsert(ctx, state("v1'"), nil, j2)
	require.NoError(t, err)
	assert.False(t, won, "a second swap from no value")
	assert.Zero(t, j2.ID, "its job was not inserted")
	assert.Equal(t, 1, jobs())
	got, err := b.State(ctx, "schedule:s")
	require.NoError(t, err)
	assert.Equal(t, "v1", string(got))

	// From the value both read, at once: one writes.
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := []*fairschedpg.Store{a, b}[i%2]
			won, err := st.SwapInsert(ctx, state("v2"), []byte("v1"), job())
			assert.NoError(t, err)
			if won {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(1), wins.Load(), "swaps from one value that wrote")
	assert.Equal(t, 2, jobs())

	// No job: the state alone, on the same terms.
	won, err = a.SwapInsert(ctx, state("v3"), []byte("v1"))
	require.NoError(t, err)
	assert.False(t, won, "a swap from a value no longer there")
	won, err = a.SwapInsert(ctx, state("v3"), []byte("v2"))
	require.NoError(t, err)
	assert.True(t, won)
	got, err = a.State(ctx, "schedule:s")
	require.NoError(t, err)
	assert.Equal(t, "v3", string(got))
	assert.Equal(t, 2, jobs())
}

// countingSchedule is Every(every) that counts the times it is asked for
// the next occurrence, and closes asked at the nth. Once gate() was
// called, asked after time t, it returns once replicas have asked after
// t, or one asked after a later time (a replica moved on), or open() was
// called; asked after a time earlier than one replicas wait for, it
// returns at once. The replicas that fire one occurrence then read the
// schedule's state together, and each tries to enqueue it, which the swap
// must settle. None waits for ever: every replica's timer fires again,
// each time later, until it reaches the time the others wait for or
// passes it. (ScheduleDurable asks for the first time in its caller.)
type countingSchedule struct {
	every    time.Duration
	n        int
	replicas int
	asked    chan struct{}

	mu      sync.Mutex
	calls   int
	waiting map[int64]*gate
	gated   bool
	opened  bool
}

type gate struct {
	n    int
	open chan struct{}
}

func newCountingSchedule(every time.Duration, n, replicas int) *countingSchedule {
	return &countingSchedule{every: every, n: n, replicas: replicas, asked: make(chan struct{}), waiting: map[int64]*gate{}}
}

func (c *countingSchedule) Next(t time.Time) time.Time {
	c.mu.Lock()
	c.calls++
	if c.calls == c.n {
		close(c.asked)
	}
	if !c.gated || c.opened {
		c.mu.Unlock()
		return t.Add(c.every)
	}
	at := t.UnixMicro()
	stale := false // replicas wait for a later time: this one is behind, and goes on
	for other, g := range c.waiting {
		switch {
		case other < at: // they are behind: they go on
			close(g.open)
			delete(c.waiting, other)
		case other > at:
			stale = true
		}
	}
	if stale {
		c.mu.Unlock()
		return t.Add(c.every)
	}
	g := c.waiting[at]
	if g == nil {
		g = &gate{open: make(chan struct{})}
		c.waiting[at] = g
	}
	if g.n++; g.n == c.replicas {
		close(g.open)
		delete(c.waiting, at)
	}
	c.mu.Unlock()
	<-g.open
	return t.Add(c.every)
}

// firings returns how many times it was asked.
func (c *countingSchedule) firings() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// gate makes Next wait for the replicas, from now on.
func (c *countingSchedule) gate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gated = true
}

// open lets every Next return at once, from now on.
func (c *countingSchedule) open() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opened = true
	for at, g := range c.waiting {
		close(g.open)
		delete(c.waiting, at)
	}
}

// Three replicas keep one durable schedule. While its first occurrence
// runs, every later one is skipped on every replica (the store knows it
// has not ended), so the database holds one job. Once it ends, the
// occurrences are enqueued, each once, though every replica fires each
// and tries to enqueue it (countingSchedule holds them until all have
// fired it).
func TestReplicasShareDurableSchedule(t *testing.T) {
	pool, schema := pgtest.PoolSchema(t)
	ctx := context.Background()
	const every = 20 * time.Millisecond
	spec := newCountingSchedule(every, 30, 3)
	// Every run waits for release: the first occurrence runs until then,
	// and if a loaded machine cost its replica its lease, its next attempt
	// (Retry) runs until then too.
	started, release := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	ran := make(chan struct{}, 100)
	work := func(ctx context.Context, n int) error {
		if runs.Add(1) == 1 {
			close(started)
		}
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		ran <- struct{}{}
		return nil
	}
	types := map[string]fairsched.TypeConfig{"mail": {Retry: fairsched.RetryPolicy{Attempts: 5, Backoff: time.Millisecond}}}
	got := make(chan durableRun, 100)
	go func() {
		for range got { // the runs' details: not needed here
		}
	}()
	t.Cleanup(func() { close(got) })
	var ps []*fairsched.Periodic
	var ss []*fairsched.Scheduler
	for i, name := range []string{"a", "b", "c"} {
		s := durableReplica(t, schema, name, 2, 6, got, work, types)
		if i == 0 {
			logScheduleWrites(t, pool)
		}
		p, err := s.ScheduleDurable(ctx, "tick", spec, fairsched.Job{Type: "mail", Key: "k"}, mail{N: 1})
		require.NoError(t, err, "replica %s", name)
		ps, ss = append(ps, p), append(ss, s)
	}
	spec.gate()
	jobs := func() (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM fairsched_jobs WHERE type = 'mail'`).Scan(&n))
		return n
	}

	<-started
	<-spec.asked // 30 firings across the replicas, about ten occurrences, while the first runs
	assert.Equal(t, 1, jobs(), "jobs enqueued while the first occurrence runs")
	var skipped uint64
	for _, p := range ps {
		skipped += p.Skipped()
	}
	assert.Positive(t, skipped, "occurrences skipped while the first ran")

	close(release)
	for range 8 { // eight runs: seven occurrences after the first
		<-ran
	}
	spec.open()
	for _, p := range ps {
		p.Stop()
	}
	for _, s := range ss {
		require.NoError(t, s.Close()) // waits for an occurrence being written
	}
	n := jobs()
	assert.GreaterOrEqual(t, n, 8)
	// Each job was the latest of one write of the state, and no two of
	// those writes moved the schedule on to one next time: two enqueues of
	// one occurrence would have.
	rows, err := pool.Query(ctx, `SELECT value FROM schedule_writes ORDER BY seq`)
	require.NoError(t, err)
	values, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	require.NoError(t, err)
	byLast, byNext := map[int64]bool{}, map[int64]int64{}
	for _, v := range values {
		var st struct{ Next, Last int64 }
		require.NoError(t, json.Unmarshal(v, &st))
		if st.Last == 0 || byLast[st.Last] {
			continue // a skip: the latest unchanged
		}
		byLast[st.Last] = true
		if other, ok := byNext[st.Next]; ok {
			t.Errorf("jobs %d and %d both enqueued for the occurrence before %d", other, st.Last, st.Next)
		}
		byNext[st.Next] = st.Last
	}
	assert.Len(t, byLast, n, "jobs enqueued by a write of the schedule's state")
	t.Logf("%d jobs, %d writes of the state, %d firings", n, len(values), spec.firings())
}

// logScheduleWrites makes the schema log every value written to its
// schedules' states, in schedule_writes, in the order written.
func logScheduleWrites(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
CREATE TABLE schedule_writes (seq bigserial PRIMARY KEY, value bytea NOT NULL);
CREATE FUNCTION log_schedule_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO schedule_writes (value) VALUES (NEW.value);
	RETURN NEW;
END $$;
CREATE TRIGGER log_schedule_write AFTER INSERT OR UPDATE ON fairsched_schedules
	FOR EACH ROW EXECUTE FUNCTION log_schedule_write();`)
	require.NoError(t, err)
}
