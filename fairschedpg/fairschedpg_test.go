package fairschedpg_test

import (
	"context"
	"testing"

	"github.com/fairsched/fairsched/fairschedpg"
	"github.com/fairsched/fairsched/fairschedpg/internal/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	require.NoError(t, fairschedpg.Migrate(ctx, pool))
	require.NoError(t, fairschedpg.Migrate(ctx, pool), "again: nothing to do")
	var v int
	require.NoError(t, pool.QueryRow(ctx, `SELECT max(version) FROM fairsched_schema_version`).Scan(&v))
	assert.Equal(t, fairschedpg.SchemaVersion, v)
}

// The schema version gate of a rolling upgrade: a replica older than the
// schema stops with a clear error.
func TestMigrateSchemaTooNew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	require.NoError(t, fairschedpg.Migrate(ctx, pool))
	_, err := pool.Exec(ctx, `INSERT INTO fairsched_schema_version (version) VALUES ($1)`, fairschedpg.SchemaVersion+1)
	require.NoError(t, err)
	err = fairschedpg.Migrate(ctx, pool)
	require.ErrorIs(t, err, fairschedpg.ErrSchemaTooNew)
	assert.EqualError(t, err, "fairschedpg: the database's schema is newer than this version of fairschedpg knows; upgrade this replica: version 3, this one knows up to 2")
}

// A server that cannot be reached is an error, not a hang.
func TestMigrateUnreachable(t *testing.T) {
	t.Parallel()
	pgtest.DSN(t) // the suite runs against a server, or not at all
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=5&sslmode=disable")
	require.NoError(t, err, "a pool connects lazily")
	defer pool.Close()
	err = fairschedpg.Migrate(ctx, pool)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "fairschedpg: migrating the schema")
}
