package cluster

import (
	"context"
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
		err := Register(ctx, pool, "r", c)
		require.ErrorIs(t, err, ErrCapacity)
	}
	assert.EqualError(t, Register(ctx, pool, "r", 0), `fairschedpg: a replica's capacity must be at least 1: replica "r" has 0`)
	assert.EqualError(t, Register(ctx, pool, "", 4), "fairschedpg: a replica needs a name")
	assert.Equal(t, []entry{}, registry(t, pool), "nothing registered")
	require.ErrorIs(t, Heartbeat(ctx, pool, "r"), ErrNotRegistered)
}

func TestRegisterHeartbeatDeregister(t *testing.T) {
	t.Parallel()
	pool := migrated(t, 2)
	ctx := context.Background()
	require.NoError(t, Register(ctx, pool, "c", 1))
	require.NoError(t, Register(ctx, pool, "a", 4))
	require.NoError(t, Register(ctx, pool, "b", 2))
	assert.Equal(t, []entry{{"a", 4, true}, {"b", 2, true}, {"c", 1, true}}, registry(t, pool), "in the names' order")

	stale(t, pool, "b")
	rs, err := Replicas(ctx, pool)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, rs[1].Since, time.Hour)
	require.NoError(t, Heartbeat(ctx, pool, "b"))
	rs, err = Replicas(ctx, pool)
	require.NoError(t, err)
	assert.Less(t, rs[1].Since, time.Hour, "the heartbeat is now")

	require.NoError(t, Register(ctx, pool, "b", 3), "registered again: its capacity changes")
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
		require.NoError(t, Register(ctx, pool, r.ID, r.Capacity))
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
	require.NoError(t, Register(ctx, pool, "b", 2))
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
