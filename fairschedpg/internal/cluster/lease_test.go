package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fairsched/fairsched/fairschedpg/internal/pgtest"
	"github.com/fairsched/fairsched/fairschedpg/internal/schema"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// migrated returns a pool on a new schema, migrated, with up to conns
// connections.
func migrated(t *testing.T, conns int32) *pgxpool.Pool {
	t.Helper()
	_, name := pgtest.PoolSchema(t)
	cfg := pgtest.Config(t, name)
	cfg.MaxConns = conns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = schema.Migrate(context.Background(), pool)
	require.NoError(t, err)
	return pool
}

func newLease(t *testing.T, db Querier, holder string) *Lease {
	t.Helper()
	l, err := NewLease(db, holder, time.Minute)
	require.NoError(t, err)
	return l
}

// leaseRow is the lease as the database has it.
type leaseRow struct {
	Term   int64
	Holder string
	Live   bool // not lapsed
}

func readLease(t *testing.T, db Querier) leaseRow {
	t.Helper()
	var r leaseRow
	require.NoError(t, db.QueryRow(context.Background(),
		`SELECT term, holder, expires > clock_timestamp() FROM fairsched_leader`).Scan(&r.Term, &r.Holder, &r.Live))
	return r
}

// lapse makes the lease lapse now, as if its holder had not renewed it
// in time.
func lapse(t *testing.T, db Querier) {
	t.Helper()
	_, err := db.Exec(context.Background(), `UPDATE fairsched_leader SET expires = clock_timestamp() - interval '1 second'`)
	require.NoError(t, err)
}

// put is a leader's fenced write: it sets a named state.
func put(ctx context.Context, l *Lease, q Querier, name, value string) (int64, error) {
	return Exec(ctx, l, q, `
INSERT INTO fairsched_state (name, value) SELECT $3, $4 WHERE `+Fenced+`
ON CONFLICT (name) DO UPDATE SET value = excluded.value`, name, []byte(value))
}

func stateOf(t *testing.T, db Querier, name string) (string, bool) {
	t.Helper()
	var v []byte
	err := db.QueryRow(context.Background(), `SELECT value FROM fairsched_state WHERE name = $1`, name).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false
	}
	require.NoError(t, err)
	return string(v), true
}

func TestNewLeaseBadInput(t *testing.T) {
	t.Parallel()
	_, err := NewLease(nil, "", time.Second)
	assert.EqualError(t, err, "fairschedpg: a lease needs a holder's name")
	_, err = NewLease(nil, "a", time.Microsecond)
	assert.EqualError(t, err, "fairschedpg: a lease's time must be at least 1ms, not 1µs")
}

// Of n replicas contending for a free lease at once, one wins, in term 1;
// when it steps down, one of the others wins, in term 2.
func TestAcquireOneOfManyWins(t *testing.T) {
	t.Parallel()
	const n = 12
	pool := migrated(t, n)
	ctx := context.Background()
	leases := make([]*Lease, n)
	for i := range leases {
		leases[i] = newLease(t, pool, fmt.Sprintf("r%02d", i))
	}

	contend := func(who []*Lease) []*Lease {
		start := make(chan struct{})
		won := make([]bool, len(who))
		errs := make([]error, len(who))
		var wg sync.WaitGroup
		for i, l := range who {
			wg.Go(func() {
				<-start
				won[i], errs[i] = l.Acquire(ctx)
			})
		}
		close(start)
		wg.Wait()
		var winners []*Lease
		for i, l := range who {
			require.NoError(t, errs[i])
			if won[i] {
				winners = append(winners, l)
			}
		}
		return winners
	}

	winners := contend(leases)
	require.Len(t, winners, 1)
	first := winners[0]
	term, held := first.Term()
	assert.True(t, held)
	assert.Equal(t, int64(1), term)
	assert.Equal(t, leaseRow{1, first.Holder(), true}, readLease(t, pool))
	for _, l := range leases {
		if l != first {
			_, held := l.Term()
			assert.False(t, held, l.Holder())
		}
	}

	require.NoError(t, first.StepDown(ctx))
	_, held = first.Term()
	assert.False(t, held)
	var rest []*Lease
	for _, l := range leases {
		if l != first {
			rest = append(rest, l)
		}
	}
	winners = contend(rest)
	require.Len(t, winners, 1)
	term, _ = winners[0].Term()
	assert.Equal(t, int64(2), term)
	assert.Equal(t, leaseRow{2, winners[0].Holder(), true}, readLease(t, pool))
}

// A lease that lapsed is taken by another replica in the next term; the
// old holder's fenced write is then refused, writes nothing, and tells it
// to step down.
func TestLapsedLeaseIsTakenOver(t *testing.T) {
	t.Parallel()
	pool := migrated(t, 4)
	ctx := context.Background()
	a, b := newLease(t, pool, "a"), newLease(t, pool, "b")

	won, err := a.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, won)
	n, err := put(ctx, a, pool, "fair", "a1")
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)

	won, err = b.Acquire(ctx)
	require.NoError(t, err)
	assert.False(t, won, "held, not lapsed")

	lapse(t, pool)
	won, err = b.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, won)
	term, _ := b.Term()
	assert.Equal(t, int64(2), term)
	assert.Equal(t, leaseRow{2, "b", true}, readLease(t, pool))

	// a still believes it leads, until its write is refused.
	term, held := a.Term()
	assert.True(t, held)
	assert.Equal(t, int64(1), term)
	n, err = put(ctx, a, pool, "fair", "a2")
	require.ErrorIs(t, err, ErrFenced)
	assert.EqualError(t, err, "fairsched: this replica's term as the leader is over (a's term 1)")
	assert.Zero(t, n)
	_, held = a.Term()
	assert.False(t, held, "a learned it must step down")
	assert.True(t, a.Until().IsZero())
	v, _ := stateOf(t, pool, "fair")
	assert.Equal(t, "a1", v, "the stale write wrote nothing")
	require.ErrorIs(t, a.Renew(ctx), ErrFenced)
	_, err = put(ctx, a, pool, "other", "a3")
	require.ErrorIs(t, err, ErrFenced, "refused before reaching the database too")

	n, err = put(ctx, b, pool, "fair", "b1")
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	v, _ = stateOf(t, pool, "fair")
	assert.Equal(t, "b1", v)
}

// A holder whose lease lapsed can neither write nor renew it, even if no
// one took it; it acquires it again, in a new term.
func TestLapsedLeaseIsNotRenewed(t *testing.T) {
	t.Parallel()
	pool := migrated(t, 2)
	ctx := context.Background()
	a := newLease(t, pool, "a")
	won, err := a.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, won)
	lapse(t, pool)
	_, err = put(ctx, a, pool, "fair", "a")
	require.ErrorIs(t, err, ErrFenced, "a lapsed lease fences its holder's writes, taken over or not")
	_, found := stateOf(t, pool, "fair")
	assert.False(t, found)
	a.term = 1 // as if it had not learned it
	require.ErrorIs(t, a.Renew(ctx), ErrFenced)
	assert.Equal(t, leaseRow{1, "a", false}, readLease(t, pool))
	won, err = a.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, won)
	term, _ := a.Term()
	assert.Equal(t, int64(2), term)
}

func TestRenew(t *testing.T) {
	t.Parallel()
	pool := migrated(t, 2)
	ctx := context.Background()
	a, b := newLease(t, pool, "a"), newLease(t, pool, "b")
	before := time.Now()
	won, err := a.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, won)
	until := a.Until()
	assert.False(t, until.Before(before.Add(time.Minute)))
	assert.False(t, until.After(time.Now().Add(time.Minute)))

	expires := func() time.Time {
		var e time.Time
		require.NoError(t, pool.QueryRow(ctx, `SELECT expires FROM fairsched_leader`).Scan(&e))
		return e
	}
	e1 := expires()
	require.NoError(t, a.Renew(ctx))
	e2 := expires()
	assert.True(t, e2.After(e1), "renewed: %v, then %v", e1, e2)
	assert.False(t, a.Until().Before(until))
	won, err = a.Acquire(ctx)
	require.NoError(t, err)
	assert.True(t, won, "the holder's Acquire renews")
	term, _ := a.Term()
	assert.Equal(t, int64(1), term, "in the same term")

	// b holds nothing: its renewal fails without a statement.
	require.ErrorIs(t, b.Renew(ctx), ErrFenced)
	// b claims a's term: the database refuses it.
	b.term = 1
	err = b.Renew(ctx)
	require.ErrorIs(t, err, ErrFenced)
	_, held := b.Term()
	assert.False(t, held)
	assert.True(t, e2.Before(expires()), "a's renewal by Acquire moved it")
	e3 := expires()
	b.term = 1
	_, err = put(ctx, b, pool, "fair", "b")
	require.ErrorIs(t, err, ErrFenced)
	assert.Equal(t, e3, expires(), "untouched by b")
	assert.Equal(t, leaseRow{1, "a", true}, readLease(t, pool))
	_, found := stateOf(t, pool, "fair")
	assert.False(t, found)
}

// A leader that steps down gives the lease at once; its writes are
// refused from then.
func TestStepDown(t *testing.T) {
	t.Parallel()
	pool := migrated(t, 2)
	ctx := context.Background()
	a, b := newLease(t, pool, "a"), newLease(t, pool, "b")
	won, err := a.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, won)
	require.NoError(t, a.StepDown(ctx))
	require.NoError(t, a.StepDown(ctx), "again: nothing to give up")
	won, err = b.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, won)
	assert.Equal(t, leaseRow{2, "b", true}, readLease(t, pool))
	_, err = put(ctx, a, pool, "fair", "a")
	require.ErrorIs(t, err, ErrFenced)

	// b stepping down does not touch a lease it no longer holds.
	lapse(t, pool)
	won, err = a.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, won)
	b.term = 2 // as if b had not seen its lease lapse
	require.NoError(t, b.StepDown(ctx))
	assert.Equal(t, leaseRow{3, "a", true}, readLease(t, pool))
}

// A fenced write not yet committed holds the lease: a successor's
// takeover waits for its commit, and then the old leader is fenced.
func TestTakeoverWaitsForFencedTransaction(t *testing.T) {
	t.Parallel()
	pool := migrated(t, 4)
	ctx := context.Background()
	a, b := newLease(t, pool, "a"), newLease(t, pool, "b")
	won, err := a.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, won)

	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	n, err := put(ctx, a, tx, "fair", "a")
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)

	// The holder's renewal does not wait for its fenced transaction (it
	// changes no key: no lock of its conflicts with KEY SHARE), nor does
	// the forced lapse here.
	require.NoError(t, a.Renew(ctx))
	lapse(t, pool)
	// A successor's acquisition, its lapse found, cannot proceed: it
	// locks the row FOR UPDATE first.
	other, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	require.NoError(t, err)
	defer other.Rollback(ctx)
	_, err = other.Exec(ctx, `SET LOCAL lock_timeout = '50ms'`)
	require.NoError(t, err)
	_, err = other.Exec(ctx, qCampaign, "b", "1 minute")
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	assert.Equal(t, "55P03", pgErr.Code, "lock_not_available")
	require.NoError(t, other.Rollback(ctx))

	require.NoError(t, tx.Commit(ctx))
	won, err = b.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, won)
	v, _ := stateOf(t, pool, "fair")
	assert.Equal(t, "a", v, "the successor sees the write")
	_, err = put(ctx, a, pool, "fair", "a2")
	require.ErrorIs(t, err, ErrFenced)
}

// A fenced write that matches no row is not a refusal.
func TestFencedWriteOfNothing(t *testing.T) {
	t.Parallel()
	pool := migrated(t, 2)
	ctx := context.Background()
	a := newLease(t, pool, "a")
	won, err := a.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, won)
	n, err := Exec(ctx, a, pool, `DELETE FROM fairsched_state WHERE name = $3 AND `+Fenced, "none")
	require.NoError(t, err)
	assert.Zero(t, n)
	_, held := a.Term()
	assert.True(t, held)

	_, err = Exec(ctx, a, pool, `DELETE FROM fairsched_state WHERE name = $3`, "none")
	assert.EqualError(t, err, "fairschedpg: a fenced statement must include the fence's condition in its WHERE")
}
