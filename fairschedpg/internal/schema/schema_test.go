package schema_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fairsched/fairsched/fairschedpg/internal/pgtest"
	"github.com/fairsched/fairsched/fairschedpg/internal/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestMigrateCreatesEveryTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	was, err := schema.Migrate(ctx, pool)
	require.NoError(t, err)
	assert.Equal(t, 0, was)

	var tables []string
	rows, err := pool.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1`)
	require.NoError(t, err)
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		tables = append(tables, name)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []string{"fairsched_changes", "fairsched_jobs", "fairsched_leader", "fairsched_replicas", "fairsched_schedules",
		"fairsched_schema_version", "fairsched_state"}, tables)

	// The columns of a job: what the SQLite store keeps, and the
	// transaction that inserted it.
	var cols []string
	rows, err = pool.Query(ctx, `SELECT column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'fairsched_jobs' ORDER BY ordinal_position`)
	require.NoError(t, err)
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		cols = append(cols, name)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []string{"id", "state", "type", "key", "ref", "priority", "submitted", "not_before", "start_by",
		"attempt", "allowed", "started", "finished", "attempts", "error", "after", "needs", "stood", "args", "unseen", "xid"}, cols)

	// The columns of a replica: its capacity, its configuration's
	// fingerprint, its lease, its heartbeat.
	cols = nil
	rows, err = pool.Query(ctx, `SELECT column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'fairsched_replicas' ORDER BY ordinal_position`)
	require.NoError(t, err)
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		cols = append(cols, name)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []string{"id", "capacity", "fingerprint", "lease", "heartbeat", "state", "registered", "died"}, cols)

	// One lease row, free, in term 0.
	var n, term int
	var free bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), max(term), bool_and(expires < now()) FROM fairsched_leader`).Scan(&n, &term, &free))
	assert.Equal(t, 1, n)
	assert.Equal(t, 0, term)
	assert.True(t, free)

	// A second lease row, or a replica without capacity, is refused.
	_, err = pool.Exec(ctx, `INSERT INTO fairsched_leader (one, term, holder, expires) VALUES (false, 0, '', now())`)
	assert.Error(t, err)
	const replica = `INSERT INTO fairsched_replicas (id, capacity, fingerprint, lease, heartbeat, state, registered) VALUES ($1, $2, $3, $4, now(), 'live', now())`
	_, err = pool.Exec(ctx, replica, "r", 0, "f", time.Second)
	assert.ErrorContains(t, err, "capacity_check")
	_, err = pool.Exec(ctx, replica, "r", 1, nil, time.Second)
	assert.ErrorContains(t, err, `"fingerprint"`, "a replica without a fingerprint")
	_, err = pool.Exec(ctx, replica, "r", 1, "f", nil)
	assert.ErrorContains(t, err, `"lease"`, "a replica without a lease")
	_, err = pool.Exec(ctx, replica, "r", 1, "f", time.Duration(0))
	assert.ErrorContains(t, err, "lease_check", "a replica whose lease is not positive")
	_, err = pool.Exec(ctx, replica, "r", 1, "f", time.Second)
	assert.NoError(t, err, "one with all three")
}

func TestMigrateTwiceDoesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	_, err := schema.Migrate(ctx, pool)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO fairsched_jobs (state, type, key, ref, priority, submitted, args) VALUES (1, 't', 'k', '', 0, 1, '{}')`)
	require.NoError(t, err)

	was, err := schema.Migrate(ctx, pool)
	require.NoError(t, err)
	assert.Equal(t, schema.Version, was)
	var versions, jobs int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM fairsched_schema_version), (SELECT count(*) FROM fairsched_jobs)`).Scan(&versions, &jobs))
	assert.Equal(t, schema.Version, versions, "one row per version applied")
	assert.Equal(t, 1, jobs, "the job is kept")
}

// A schema of version 1 (unseen jobs marked, no inserting transaction
// kept) is brought to 2 with its jobs as they were: an unseen job keeps
// its mark and has no transaction (a scheduler's start reads it, as it
// reads every unfinished job); a job inserted since has the one that
// inserted it; a page of jobs has room for their starts.
func TestMigrateFromVersion1(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	_, err := schema.MigrateTo(ctx, pool, 1)
	require.NoError(t, err)
	const insert = `INSERT INTO fairsched_jobs (state, type, key, ref, priority, submitted, args, unseen) VALUES (1, 't', $1, '', 0, 1, '{}', true) RETURNING id`
	var old, later int64
	require.NoError(t, pool.QueryRow(ctx, insert, "old").Scan(&old))

	was, err := schema.Migrate(ctx, pool)
	require.NoError(t, err)
	assert.Equal(t, 1, was)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.QueryRow(ctx, insert, "later").Scan(&later))
	var xid string
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&xid))
	require.NoError(t, tx.Commit(ctx))

	var oldXid, laterXid *string
	var oldUnseen bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT xid::text FROM fairsched_jobs WHERE id = $1), (SELECT unseen FROM fairsched_jobs WHERE id = $1),
		(SELECT xid::text FROM fairsched_jobs WHERE id = $2)`, old, later).Scan(&oldXid, &oldUnseen, &laterXid))
	assert.Nil(t, oldXid, "a job inserted before has no transaction")
	assert.True(t, oldUnseen, "and keeps its mark")
	require.NotNil(t, laterXid)
	assert.Equal(t, xid, *laterXid, "a job inserted since has the transaction that inserted it")
	var options []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT reloptions FROM pg_class WHERE oid = 'fairsched_jobs'::regclass`).Scan(&options))
	assert.Equal(t, []string{"fillfactor=50"}, options)
}

// Replicas starting together all migrate: one does the work, none fails.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	const n = 8
	was := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { was[i], errs[i] = schema.Migrate(ctx, pool) })
	}
	wg.Wait()
	migrated := 0
	for i := range n {
		require.NoError(t, errs[i], "replica %d", i)
		if was[i] == 0 {
			migrated++
		} else {
			assert.Equal(t, schema.Version, was[i])
		}
	}
	assert.Equal(t, 1, migrated, "exactly one replica migrated")
	var versions int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM fairsched_schema_version`).Scan(&versions))
	assert.Equal(t, schema.Version, versions)
}

// A schema written by a newer version is refused, and left as it is.
func TestMigrateRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	_, err := schema.Migrate(ctx, pool)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO fairsched_schema_version (version) VALUES ($1)`, schema.Version+1)
	require.NoError(t, err)

	was, err := schema.Migrate(ctx, pool)
	require.ErrorIs(t, err, schema.ErrTooNew)
	assert.Equal(t, schema.Version+1, was)
	assert.Contains(t, err.Error(), "newer")
	var versions int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM fairsched_schema_version`).Scan(&versions))
	assert.Equal(t, schema.Version+1, versions, "untouched")
}
