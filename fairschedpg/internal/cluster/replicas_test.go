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
		err := Register(ctx, pool, "r", c, "f")
		require.ErrorIs(t, err, ErrCapacity)
	}
	assert.EqualError(t, Register(ctx, pool, "r", 0, "f"), `fairschedpg: a replica's capacity must be at least 1: replica "r" has 0`)
	assert.EqualError(t, Register(ctx, pool, "", 4, "f"), "fairschedpg: a replica needs a name")
	assert.Equal(t, []entry{}, registry(t, pool), "nothing registered")
	require.ErrorIs(t, Heartbeat(ctx, pool, "r"), ErrNotRegistered)
}

func TestRegisterHeartbeatDeregister(t *testing.T) {
	t.Parallel()
	pool := migrated(t, 2)
	ctx := context.Background()
	require.NoError(t, Register(ctx, pool, "c", 1, "f"))
	require.NoError(t, Register(ctx, pool, "a", 4, "f"))
	require.NoError(t, Register(ctx, pool, "b", 2, "f"))
	assert.Equal(t, []entry{{"a", 4, true}, {"b", 2, true}, {"c", 1, true}}, registry(t, pool), "in the names' order")

	stale(t, pool, "b")
	rs, err := Replicas(ctx, pool)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, rs[1].Since, time.Hour)
	require.NoError(t, Heartbeat(ctx, pool, "b"))
	rs, err = Replicas(ctx, pool)
	require.NoError(t, err)
	assert.Less(t, rs[1].Since, time.Hour, "the heartbeat is now")

	require.NoError(t, Register(ctx, pool, "b", 3, "f"), "registered again: its capacity changes")
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
		require.NoError(t, Register(ctx, pool, r.ID, r.Capacity, "f"))
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
	assert.EqualError(t, err, `fairsched: this replica was declared dead: it must stop its runs and register again: "b"`)
	dead, err = Sweep(ctx, leader, pool, 10*time.Second)
	require.NoError(t, err)
	assert.Empty(t, dead, "declared once")

	// A dead replica that comes back registers again.
	require.NoError(t, Register(ctx, pool, "b", 2, "f"))
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
	require.NoError(t, Register(ctx, pool, "a", 1, f1))
	require.NoError(t, Register(ctx, pool, "b", 2, f1), "the same configuration")

	err = Register(ctx, pool, "c", 3, f2)
	require.ErrorIs(t, err, ErrConfigMismatch)
	assert.EqualError(t, err, `fairsched: this replica's configuration differs from the live replicas': `+
		`replica "c" has configuration 22222222; live replica "a" has 11111111, "b" has 11111111`)
	assert.Equal(t, []entry{{"a", 1, true}, {"b", 2, true}}, registry(t, pool), "c is not recorded")
	err = Register(ctx, pool, "a", 1, f2)
	require.ErrorIs(t, err, ErrConfigMismatch, "a registered, with another configuration, while b is live")
	assert.EqualError(t, err, `fairsched: this replica's configuration differs from the live replicas': `+
		`replica "a" has configuration 22222222; live replica "b" has 11111111`)
	require.NoError(t, Register(ctx, pool, "a", 1, f1), "a again as it was")

	// b leaves and a is declared dead: c's configuration may join, and
	// a's is refused from then.
	require.NoError(t, Deregister(ctx, pool, "b"))
	require.ErrorIs(t, Register(ctx, pool, "c", 3, f2), ErrConfigMismatch, "a is live")
	stale(t, pool, "a")
	dead, err := Sweep(ctx, leader, pool, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, dead)
	require.NoError(t, Register(ctx, pool, "c", 3, f2))
	err = Register(ctx, pool, "a", 1, f1)
	require.ErrorIs(t, err, ErrConfigMismatch, "a comes back with the old configuration")
	assert.Equal(t, []entry{{"a", 1, false}, {"c", 3, true}}, registry(t, pool))

	// The only live replica may register again with another.
	require.NoError(t, Register(ctx, pool, "c", 3, f1))
	require.NoError(t, Register(ctx, pool, "a", 1, f1))
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
				errs[i] = Register(ctx, pool, fmt.Sprint("r", i), 1, fps[i])
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
