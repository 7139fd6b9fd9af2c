package fairschedsqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/fairsched/fairsched/internal/store"
	"github.com/fairsched/fairsched/internal/storetest"
	"github.com/stretchr/testify/require"
)

// fresh is the conformance suite's database: a new file.
func fresh(t *testing.T) storetest.Opener {
	path := filepath.Join(t.TempDir(), "jobs.db")
	return func(t *testing.T) store.Store {
		st, err := Open(path)
		require.NoError(t, err)
		return st
	}
}

func TestConformance(t *testing.T) { storetest.Run(t, fresh) }

func TestConformanceTx(t *testing.T) {
	storetest.RunTx(t, fresh, storetest.Tx[*sql.Tx]{
		Begin: func(t *testing.T, st store.Store) *sql.Tx {
			tx, err := st.(*Store).DB().BeginTx(context.Background(), nil)
			require.NoError(t, err)
			return tx
		},
		Commit:   (*sql.Tx).Commit,
		Rollback: (*sql.Tx).Rollback,
	})
}
