package fairschedsqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedsqlite"
	"github.com/fairsched/fairsched/internal/storetest"
)

// kill9 is the kill -9 test of durable stores (internal/storetest) on a
// SQLite file.
var kill9 = storetest.Kill{
	ChildTest: "TestKill9Child",
	Target:    func(t *testing.T) string { return filepath.Join(t.TempDir(), "jobs.db") },
	Open: func(t *testing.T, path string) (fairsched.Store, func() error) {
		st, err := fairschedsqlite.Open(path)
		require.NoError(t, err)
		return st, st.Close
	},
	EnqueueInTx: func(ctx context.Context, s *fairsched.Scheduler, st fairsched.Store, job fairsched.Job, arg int) int64 {
		tx, err := st.(*fairschedsqlite.Store).DB().BeginTx(ctx, nil)
		if err != nil {
			panic(err)
		}
		id, err := fairsched.EnqueueTx(ctx, s, tx, job, arg)
		if err != nil {
			panic(err)
		}
		if err := tx.Commit(); err != nil {
			panic(err)
		}
		return id
	},
	Counts: func(t *testing.T, path string) (notCompleted, poisonState, poisonAttempts, lost int) {
		st, err := fairschedsqlite.Open(path)
		require.NoError(t, err)
		defer st.Close()
		db := st.DB()
		require.NoError(t, db.QueryRow(`SELECT count(*) FROM fairsched_jobs WHERE type = 'work' AND state != 3`).Scan(&notCompleted))
		require.NoError(t, db.QueryRow(`SELECT state, attempt FROM fairsched_jobs WHERE type = 'poison'`).Scan(&poisonState, &poisonAttempts))
		require.NoError(t, db.QueryRow(`SELECT count(*) FROM fairsched_jobs, json_each(fairsched_jobs.attempts)
WHERE json_each.value ->> 'err' LIKE '%lost%'`).Scan(&lost))
		return notCompleted, poisonState, poisonAttempts, lost
	},
}

func TestKill9(t *testing.T)      { kill9.Run(t) }
func TestKill9Child(t *testing.T) { kill9.Child(t) }
