package fairschedpg_test

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedpg/internal/pgtest"
)

// A replica configured unlike the live ones is refused by New, with an
// error that says so; once they have left, it joins, and theirs is
// refused.
func TestReplicasConfigMismatch(t *testing.T) {
	_, schema := pgtest.PoolSchema(t)
	start := startAs(t, schema, nil)
	a, err := start("web-1", 4)
	require.NoError(t, err)
	b, err := start("web-2", 4)
	require.NoError(t, err, "configured alike")

	_, err = start("web-3", 5)
	require.ErrorIs(t, err, fairsched.ErrConfigMismatch)
	m := regexp.MustCompile(`^fairsched: this replica's configuration differs from the live replicas': ` +
		`replica "web-3" has configuration ([0-9a-f]{8}); live replica "web-1" has ([0-9a-f]{8}), "web-2" has ([0-9a-f]{8})$`).
		FindStringSubmatch(err.Error())
	require.NotNil(t, m, err.Error())
	assert.Equal(t, m[2], m[3], "web-1 and web-2 are alike")
	assert.NotEqual(t, m[1], m[2])

	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	c, err := start("web-3", 5)
	require.NoError(t, err, "the others left")
	_, err = start("web-1", 4)
	require.ErrorIs(t, err, fairsched.ErrConfigMismatch, "the old configuration, once the new one is live")
	require.NoError(t, c.RunSync(context.Background(), fairsched.Job{Type: "mail", Key: "k"}, func(context.Context) error { return nil }))
	require.NoError(t, c.Close())
}

// A cluster killed whole leaves its replicas live in the registry, with
// no leader to sweep them: replicas of a new configuration are refused
// until the old ones' registrations lapse, one lease after their last
// heartbeat, and then start; one of the old configuration is refused
// from then on.
func TestReplicasConfigChangeAfterKill(t *testing.T) {
	pool, schema := pgtest.PoolSchema(t)
	start := startAs(t, schema, nil)
	a, err := start("web-1", 4)
	require.NoError(t, err)
	b, err := start("web-2", 4)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, a.RunSync(ctx, fairsched.Job{Key: "k"}, func(context.Context) error { return nil }))

	// What kill -9 of both leaves: their rows, live, as their last
	// heartbeats left them. (They close here, and would deregister:
	// their rows are put back as they were, with their own times.)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rows, err := pool.Query(ctx, `SELECT id, capacity, fingerprint, lease, registered FROM fairsched_replicas`)
	require.NoError(t, err)
	type row struct {
		id          string
		capacity    int
		fingerprint string
		lease       time.Duration
		registered  time.Time
	}
	var left []row
	for rows.Next() {
		var r row
		require.NoError(t, rows.Scan(&r.id, &r.capacity, &r.fingerprint, &r.lease, &r.registered))
		left = append(left, r)
	}
	require.NoError(t, rows.Err())
	require.Len(t, left, 2)
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	for _, r := range left {
		_, err := pool.Exec(ctx, `INSERT INTO fairsched_replicas (id, capacity, fingerprint, lease, heartbeat, state, registered)
			VALUES ($1, $2, $3, $4, clock_timestamp(), 'live', $5)`, r.id, r.capacity, r.fingerprint, r.lease, r.registered)
		require.NoError(t, err)
	}
	killed := time.Now()

	_, err = start("web-3", 5)
	require.ErrorIs(t, err, fairsched.ErrConfigMismatch, "the killed replicas' registrations have not lapsed")
	// Their last heartbeats are a lease (a second, startAs's) old once a
	// lease has passed since they were written: time passing, not a
	// synchronisation.
	time.Sleep(time.Until(killed.Add(time.Second)))
	c, err := start("web-3", 5)
	require.NoError(t, err, "the killed replicas lapsed")
	_, err = start("web-1", 4)
	require.ErrorIs(t, err, fairsched.ErrConfigMismatch, "the old configuration, once the new one is live")
	require.NoError(t, c.RunSync(ctx, fairsched.Job{Type: "mail", Key: "k"}, func(context.Context) error { return nil }))
	var dead int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM fairsched_replicas WHERE id IN ('web-1', 'web-2') AND state = 'dead'`).Scan(&dead))
	assert.Equal(t, 2, dead, "web-3, leading, swept them")
	require.NoError(t, c.Close())
}

// startAs returns a function that starts a replica on schema, on a
// Store of its own, with the MaxConcurrency given, logging to logger.
func startAs(t *testing.T, schema string, logger *slog.Logger) func(name string, maxConcurrency int) (*fairsched.Scheduler, error) {
	return func(name string, maxConcurrency int) (*fairsched.Scheduler, error) {
		t.Helper()
		st := openReplicaStore(t, schema)
		return fairsched.New(fairsched.Config{MaxConcurrency: maxConcurrency, Store: st, Logger: logger,
			Types:   map[string]fairsched.TypeConfig{"mail": {MaxConcurrency: 1}},
			Replica: &fairsched.Replica{Name: name, Capacity: 2, Lease: time.Second}})
	}
}

// A replica declared dead registers again with its configuration: it is
// refused while a live replica has another, stays out and says so, and
// is let in once that one has gone.
func TestReplicasConfigMismatchAfterDeath(t *testing.T) {
	pool, schema := pgtest.PoolSchema(t)
	tap := &logTap{records: make(chan string, 100)}
	a, err := startAs(t, schema, slog.New(tap))("web-1", 4)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, a.Close()) })
	ctx := context.Background()
	require.NoError(t, a.RunSync(ctx, fairsched.Job{Key: "k"}, func(context.Context) error { return nil }))

	// As a leader's sweep would, and a replica of another configuration
	// registered then, in one transaction: web-1's next heartbeat finds
	// itself dead, and its registration is refused.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE fairsched_replicas SET state = 'dead', died = now() WHERE id = 'web-1'`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO fairsched_replicas (id, capacity, fingerprint, lease, heartbeat, state, registered)
		VALUES ('web-9', 1, 'another', interval '1 hour', now() + interval '1 hour', 'live', now())`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	for msg := ""; !strings.Contains(msg, "cannot register again"); {
		select {
		case msg = <-tap.records:
		case <-time.After(time.Minute):
			t.Fatal("web-1 did not say it was refused")
		}
	}
	var live bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT state = 'live' FROM fairsched_replicas WHERE id = 'web-1'`).Scan(&live))
	assert.False(t, live, "refused: nothing recorded")

	// web-9 goes: web-1 registers again, leads, and runs.
	_, err = pool.Exec(ctx, `DELETE FROM fairsched_replicas WHERE id = 'web-9'`)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(ctx, time.Minute) // a deadlock's bound
	defer cancel()
	require.NoError(t, a.RunSync(ctx, fairsched.Job{Key: "k"}, func(context.Context) error { return nil }))
}

// logTap is a slog.Handler that passes each record's message on, if
// there is room.
type logTap struct{ records chan string }

func (l *logTap) Enabled(context.Context, slog.Level) bool { return true }
func (l *logTap) Handle(_ context.Context, r slog.Record) error {
	select {
	case l.records <- r.Message:
	default:
	}
	return nil
}
func (l *logTap) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logTap) WithGroup(string) slog.Handler      { return l }
