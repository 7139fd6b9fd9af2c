package fairschedpg_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedpg"
	"github.com/fairsched/fairsched/fairschedpg/internal/pgtest"
	"github.com/fairsched/fairsched/internal/storetest"
)

// kill9 is the kill -9 test of durable stores (internal/storetest) on a
// schema of the test server of its own.
var kill9 = storetest.Kill{
	ChildTest: "TestKill9Child",
	Target: func(t *testing.T) string {
		_, schema := pgtest.PoolSchema(t)
		return schema
	},
	Open: func(t *testing.T, schema string) (fairsched.Store, func() error) {
		pool, err := pgxpool.NewWithConfig(context.Background(), pgtest.Config(t, schema))
		require.NoError(t, err)
		st, err := fairschedpg.OpenPool(context.Background(), pool)
		require.NoError(t, err)
		return st, func() error {
			defer pool.Close()
			return st.Close()
		}
	},
	EnqueueInTx: func(ctx context.Context, s *fairsched.Scheduler, st fairsched.Store, job fairsched.Job, arg int) int64 {
		tx, err := st.(*fairschedpg.Store).Pool().Begin(ctx)
		if err != nil {
			panic(err)
		}
		id, err := fairsched.EnqueueTx(ctx, s, tx, job, arg)
		if err != nil {
			panic(err)
		}
		if err := tx.Commit(ctx); err != nil {
			panic(err)
		}
		return id
	},
	Counts: func(t *testing.T, schema string) (notCompleted, poisonState, poisonAttempts, lost int) {
		ctx := context.Background()
		pool, err := pgxpool.NewWithConfig(ctx, pgtest.Config(t, schema))
		require.NoError(t, err)
		defer pool.Close()
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM fairsched_jobs WHERE type = 'work' AND state <> 3`).Scan(&notCompleted))
		require.NoError(t, pool.QueryRow(ctx, `SELECT state, attempt FROM fairsched_jobs WHERE type = 'poison'`).Scan(&poisonState, &poisonAttempts))
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM fairsched_jobs, jsonb_array_elements(attempts) a
WHERE a ->> 'err' LIKE '%lost%'`).Scan(&lost))
		return notCompleted, poisonState, poisonAttempts, lost
	},
}

func TestKill9(t *testing.T)      { kill9.Run(t) }
func TestKill9Child(t *testing.T) { kill9.Child(t) }
