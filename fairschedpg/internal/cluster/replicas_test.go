package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// long is the lease the tests' replicas register with, unless a test
// is about lapsing: far longer than stale's hour, so a stale replica is
// declared dead by a sweep, not lapsed.
const long = 24 * time.Hour

// stale makes replica id's last heartbeat an hour old.
func stale(t *testing.T, db Querier, id string) {
	t.Helper()
	tag, err := db.Exec(context.Background(), `UPDATE fairsched_replicas SET heartbeat = clock_timestamp() - interval '1 hour' WHERE id = $1`, id)
	require.NoError(t, err)
	require.Equal(t, int64(1), tag.RowsAffected())
}

// entry is a replica in short: name, capacity, live.
type entry struct {
	ID       string
	Capacity int
	Live     bool
}

// registry returns the registry, in short.
func registry(t *testing.T, db Querier) []entry {
	t.Helper()
	rs, err := Replicas(context.Background(), db)
	require.NoError(t, err)
	out := []entry{}
	for _, r := range rs {
		out = append(out, entry{r.ID, r.Capacity, r.Live})
	}
	return out
}

func TestRegisterBadCapacity(t *testing.T) {
	t.Parallel()
	pool := migrated(t, 2)
	ctx := context.Background()
	for _, c := range []int{0, -1, -100} {
		err := Register(ctx, pool, "r", c, "f", long)
		require.ErrorIs(t, err, ErrCapacity)
	}
	assert.EqualError(t, Register(ctx, pool, "r", 0, "f", long), `fairschedpg: a replica's capacity must be at least 1: replica "r" has 0`)
	assert.EqualError(t, Register(ctx, pool, "", 4, "f", long), "fairschedpg: a replica needs a name")
	assert.Equal(t, []entry{}, registry(t, pool), "nothing registered")
	require.ErrorIs(t, Heartbeat(ctx, pool, "r"), ErrNotRegistered)
}

func TestRegisterHeartbeatDeregister(t *testing.T) {
	t.Parallel()
	pool := migrated(t, 2)
	ctx := context.Background()
	require.NoError(t, Register(ctx, pool, "c", 1, "f", long))
	require.NoError(t, Register(ctx, pool, "a", 4, "f", long))
	require.NoError(t, Register(ctx, pool, "b", 2, "f", long))
	assert.Equal(t, []entry{{"a", 4, true}, {"b", 2, true}, {"c", 1, true}}, registry(t, pool), "in the names' order")

	stale(t, pool, "b")
	rs, err := Replicas(ctx, pool)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, rs[1].Since, time.Hour)
	require.NoError(t, Heartbeat(ctx, pool, "b"))
	rs, err = Replicas(ctx, pool)
	require.NoError(t, err)
	assert.Less(t, rs[1].Since, time.Hour, "the heartbeat is now")

	require.NoError(t, Register(ctx, pool, "b", 3, "f", long), "registered again: its capacity changes")
	require.NoError(t, Deregister(ctx, pool, "a"))
	require.NoError(t, Deregister(ctx, pool, "a"), "again: nothing to do")
	assert.Equal(t, []entry{{"b", 3, true}, {"c", 1, true}}, registry(t, pool))
	require.ErrorIs(t, Heartbeat(ctx, pool, "a"), ErrNotRegistered)
}

// The leader declares dead the replicas whose heartbeat lapsed, and only
// them; a dead replica's heartbeat tells it so; a stale leader declares
// nothing.
func TestSweep(t *testing.T) {
	t.Parallel()
	pool := migrated(t, 2)
	ctx := context.Background()
	leader, next := newLease(t, pool, "a"), newLease(t, pool, "b")
	won, err := leader.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, won)
	for _, r := range []entry{{"a", 4, true}, {"b", 2, true}, {"c", 1, true}, {"d", 8, true}} {
		require.NoError(t, Register(ctx, pool, r.ID, r.Capacity, "f", long))
	}

	dead, err := Sweep(ctx, leader, pool, 10*time.Second)
	require.NoError(t, err)
	assert.Empty(t, dead, "every heartbeat is fresh")

	stale(t, pool, "d")
	stale(t, pool, "b")
	dead, err = Sweep(ctx, leader, pool, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "d"}, dead)
	assert.Equal(t, []entry{{"a", 4, true}, {"b", 2, false}, {"c", 1, true}, {"d", 8, false}}, registry(t, pool))
	var live, capacity int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), sum(capacity) FROM fairsched_replicas WHERE state = 'live'`).Scan(&live, &capacity))
	assert.Equal(t, 2, live)
	assert.Equal(t, 5, capacity)

	err = Heartbeat(ctx, pool, "b")
	require.ErrorIs(t, err, ErrReplicaDead)
	assert.EqualError(t, err, `fairsched: this replica is out of the cluster: it must stop its runs and register again: "b" was declared dead`)
	dead, err = Sweep(ctx, leader, pool, 10*time.Second)
	require.NoError(t, err)
	assert.Empty(t, dead, "declared once")

	// A dead replica that comes back registers again.
	require.NoError(t, Register(ctx, pool, "b", 2, "f", long))
	require.NoError(t, Heartbeat(ctx, pool, "b"))
	assert.Equal(t, []entry{{"a", 4, true}, {"b", 2, true}, {"c", 1, true}, {"d", 8, false}}, registry(t, pool))

	// The lease passes to b; a's sweep is fenced and declares nothing.
	lapse(t, pool)
	won, err = next.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, won)
	stale(t, pool, "c")
	dead, err = Sweep(ctx, leader, pool, 10*time.Second)
	require.ErrorIs(t, err, ErrFenced)
	assert.Nil(t, dead)
	assert.Equal(t, []entry{{"a", 4, true}, {"b", 2, true}, {"c", 1, true}, {"d", 8, false}}, registry(t, pool))
	dead, err = Sweep(ctx, next, pool, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, []string{"c"}, dead)

	// The lapse is the leader's to choose: an hour-old heartbeat is not
	// two hours old.
	stale(t, pool, "a")
	dead, err = Sweep(ctx, next, pool, 2*time.Hour)
	require.NoError(t, err)
	assert.Empty(t, dead)
	_, err = Sweep(ctx, next, pool, 0)
	assert.EqualError(t, err, "fairschedpg: a heartbeat's lapse must be positive, not 0s")
}

// A replica is refused while a live replica other than itself has
// another fingerprint, and nothing of it is recorded; once the others
// have left or were declared dead, it registers, and theirs are refused.
func TestRegisterFingerprint(t *testing.T) {
	t.Parallel()
	pool := migrated(t, 2)
	ctx := context.Background()
	const f1, f2 = "1111111111aaaaaaaaaaaaaaaaaaaaaa", "2222222222bbbbbbbbbbbbbbbbbbbbbb"
	leader := newLease(t, pool, "a")
	won, err := leader.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, won)
	require.NoError(t, Register(ctx, pool, "a", 1, f1, long))
	require.NoError(t, Register(ctx, pool, "b", 2, f1, long), "the same configuration")

	err = Register(ctx, pool, "c", 3, f2, long)
	require.ErrorIs(t, err, ErrConfigMismatch)
	assert.EqualError(t, err, `fairsched: this replica's configuration differs from the live replicas': `+
		`replica "c" has configuration 22222222; live replica "a" has 11111111, "b" has 11111111`)
	assert.Equal(t, []entry{{"a", 1, true}, {"b", 2, true}}, registry(t, pool), "c is not recorded")
	err = Register(ctx, pool, "a", 1, f2, long)
	require.ErrorIs(t, err, ErrConfigMismatch, "a registered, with another configuration, while b is live")
	assert.EqualError(t, err, `fairsched: this replica's configuration differs from the live replicas': `+
		`replica "a" has configuration 22222222; live replica "b" has 11111111`)
	require.NoError(t, Register(ctx, pool, "a", 1, f1, long), "a again as it was")

	// b leaves and a is declared dead: c's configuration may join, and
	// a's is refused from then.
	require.NoError(t, Deregister(ctx, pool, "b"))
	require.ErrorIs(t, Register(ctx, pool, "c", 3, f2, long), ErrConfigMismatch, "a is live")
	stale(t, pool, "a")
	dead, err := Sweep(ctx, leader, pool, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, dead)
	require.NoError(t, Register(ctx, pool, "c", 3, f2, long))
	err = Register(ctx, pool, "a", 1, f1, long)
	require.ErrorIs(t, err, ErrConfigMismatch, "a comes back with the old configuration")
	assert.Equal(t, []entry{{"a", 1, false}, {"c", 3, true}}, registry(t, pool))

	// The only live replica may register again with another.
	require.NoError(t, Register(ctx, pool, "c", 3, f1, long))
	require.NoError(t, Register(ctx, pool, "a", 1, f1, long))
	assert.Equal(t, []entry{{"a", 1, true}, {"c", 3, true}}, registry(t, pool))
	assert.Equal(t, "11111111", Short(f1))
	assert.Equal(t, "ab", Short("ab"))
	assert.Equal(t, `""`, Short(""))
}

// Replicas of two configurations registering at once, none live before:
// those of one configuration join, every one of the other is refused.
// Round after round, from an empty registry.
func TestRegisterFingerprintConcurrently(t *testing.T) {
	t.Parallel()
	pool := migrated(t, 16)
	ctx := context.Background()
	const n, rounds = 12, 30
	wins := map[string]int{}
	for round := range rounds {
		errs := make([]error, n)
		fps := make([]string, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			fps[i] = fmt.Sprint("f", i%2)
			wg.Go(func() {
				<-start
				errs[i] = Register(ctx, pool, fmt.Sprint("r", i), 1, fps[i], long)
			})
		}
		close(start)
		wg.Wait()
		var won string
		joined := 0
		for i, err := range errs {
			if err != nil {
				require.ErrorIs(t, err, ErrConfigMismatch, "round %d, replica %d", round, i)
				continue
			}
			joined++
			if won == "" {
				won = fps[i]
			}
			require.Equal(t, won, fps[i], "round %d: replicas of both configurations joined", round)
		}
		require.NotZero(t, joined, "round %d", round)
		var live, fingerprints int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT fingerprint) FROM fairsched_replicas WHERE state = 'live'`).Scan(&live, &fingerprints))
		require.Equal(t, joined, live, "round %d", round)
		require.Equal(t, 1, fingerprints, "round %d", round)
		wins[won]++
		_, err := pool.Exec(ctx, `DELETE FROM fairsched_replicas`)
		require.NoError(t, err)
	}
	t.Logf("configurations that won, of %d rounds: %v", rounds, wins)
}

// A registration whose heartbeat is its lease old lapses: it no longer
// holds another configuration out, though it stays live; its Heartbeat
// fails as a dead replica's, renews nothing, and it must register again,
// checked as any replica is. Each row lapses by its own lease.
func TestRegisterLapsed(t *testing.T) {
	t.Parallel()
	pool := migrated(t, 2)
	ctx := context.Background()
	const f1, f2, lease = "f1", "f2", 200 * time.Millisecond
	require.NoError(t, Register(ctx, pool, "a", 1, f1, lease))
	registered := time.Now()
	require.NoError(t, Register(ctx, pool, "b", 1, f1, long))
	stale(t, pool, "b") // an hour old, of a day's lease: not lapsed
	require.ErrorIs(t, Register(ctx, pool, "c", 1, f2, lease), ErrConfigMismatch, "a and b are live")
	require.NoError(t, Deregister(ctx, pool, "b"))
	err := Register(ctx, pool, "c", 1, f2, lease)
	require.ErrorIs(t, err, ErrConfigMismatch, "a's registration has not lapsed")

	// a's registration, its last heartbeat, is lease old once lease has
	// passed since Register returned (the two clocks' rates agree): time
	// passing, not a synchronisation.
	time.Sleep(time.Until(registered.Add(lease)))
	require.NoError(t, Register(ctx, pool, "c", 1, f2, long), "a lapsed")
	assert.Equal(t, []entry{{"a", 1, true}, {"c", 1, true}}, registry(t, pool), "a is live still: only a sweep declares it dead")

	err = Heartbeat(ctx, pool, "a")
	require.ErrorIs(t, err, ErrReplicaDead)
	assert.Regexp(t, `^fairsched: this replica is out of the cluster: it must stop its runs and register again: `+
		`"a": its registration lapsed \(its last heartbeat is \S+ old, its lease 200ms\)$`, err.Error())
	require.ErrorIs(t, Heartbeat(ctx, pool, "a"), ErrReplicaDead, "the failed heartbeat renewed nothing")
	rs, err := Replicas(ctx, pool)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, rs[0].Since, lease)

	err = Register(ctx, pool, "a", 1, f1, lease)
	require.ErrorIs(t, err, ErrConfigMismatch, "a registers again as it was, and c is live")
	assert.EqualError(t, err, `fairsched: this replica's configuration differs from the live replicas': `+
		`replica "a" has configuration f1; live replica "c" has f2`)
	require.ErrorIs(t, Heartbeat(ctx, pool, "a"), ErrReplicaDead, "refused: nothing recorded")
	require.NoError(t, Register(ctx, pool, "a", 1, f2, long), "a with c's configuration")
	require.NoError(t, Heartbeat(ctx, pool, "a"))

	// The lease is checked, and kept per row.
	err = Register(ctx, pool, "d", 1, f2, 0)
	assert.EqualError(t, err, `fairschedpg: a replica's lease must be positive: replica "d" has 0s`)
	var leases []time.Duration
	rows, err := pool.Query(ctx, `SELECT lease FROM fairsched_replicas ORDER BY id`)
	require.NoError(t, err)
	for rows.Next() {
		var l time.Duration
		require.NoError(t, rows.Scan(&l))
		leases = append(leases, l)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []time.Duration{long, long}, leases)
}

// A heartbeat and a Register that counts its replica as lapsed, at once:
// either the heartbeat came first, renewed, and the Register refuses, or
// the Register let the other configuration in and the heartbeat finds
// the registration lapsed. Never both a renewal and the other
// configuration within one lease. Round after round, the registration
// lapsing as both run.
func TestRegisterLapsedHeartbeatCrosses(t *testing.T) {
	t.Parallel()
	pool := migrated(t, 4)
	ctx := context.Background()
	const lease = 20 * time.Millisecond
	outcomes := map[string]int{}
	for round := range 40 {
		_, err := pool.Exec(ctx, `DELETE FROM fairsched_replicas`)
		require.NoError(t, err)
		require.NoError(t, Register(ctx, pool, "a", 1, "f1", lease))
		registered := time.Now()
		// Both run about when a's registration lapses: some rounds
		// before, some after, some across (time passing, not a
		// synchronisation; what the test checks holds in every case).
		time.Sleep(time.Until(registered.Add(lease - time.Duration(round%5)*time.Millisecond)))
		var hb, reg error
		var wg sync.WaitGroup
		wg.Go(func() { hb = Heartbeat(ctx, pool, "a") })
		wg.Go(func() { reg = Register(ctx, pool, "b", 1, "f2", long) })
		wg.Wait()
		if hb != nil {
			require.ErrorIs(t, hb, ErrReplicaDead, "round %d", round)
		}
		if reg != nil {
			require.ErrorIs(t, reg, ErrConfigMismatch, "round %d", round)
		}
		if hb == nil && reg == nil {
			// Both may succeed only one after the other, a's renewal
			// lapsed again by the time b was let in (a machine slow
			// enough to put a lease between them).
			var gap time.Duration
			require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT registered FROM fairsched_replicas WHERE id = 'b') -
				(SELECT heartbeat FROM fairsched_replicas WHERE id = 'a')`).Scan(&gap))
			require.GreaterOrEqual(t, gap, lease, "round %d: a renewed while b's configuration was let in", round)
		}
		outcomes[fmt.Sprintf("heartbeat %v, register %v", hb == nil, reg == nil)]++
	}
	t.Logf("outcomes of %d rounds: %v", 40, outcomes)
}
