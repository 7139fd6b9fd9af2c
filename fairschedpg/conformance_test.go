package fairschedpg

import (
	"context"
	"testing"

	"github.com/fairsched/fairsched/fairschedpg/internal/pgtest"
	"github.com/fairsched/fairsched/internal/store"
	"github.com/fairsched/fairsched/internal/storetest"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// fresh is the conformance suite's database: a new schema.
func fresh(t *testing.T) storetest.Opener {
	pool := pgtest.Pool(t)
	return func(t *testing.T) store.Store {
		st, err := OpenPool(context.Background(), pool)
		require.NoError(t, err)
		return st
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, fresh)
}

func TestConformanceTx(t *testing.T) {
	t.Parallel()
	storetest.RunTx(t, fresh, storetest.Tx[pgx.Tx]{
		Begin: func(t *testing.T, st store.Store) pgx.Tx {
			tx, err := st.(*Store).Pool().Begin(context.Background())
			require.NoError(t, err)
			return tx
		},
		Commit:   func(tx pgx.Tx) error { return tx.Commit(context.Background()) },
		Rollback: func(tx pgx.Tx) error { return tx.Rollback(context.Background()) },
	})
}
