package fairschedpg_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedpg"
	"github.com/fairsched/fairsched/fairschedpg/internal/pgtest"
)

// Two schedulers, each on a replica's Store of its own, as two processes
// would have: one cluster-wide limit of 2, and each a replica of
// capacity 2 that tells its own figures.
func TestReplicasThroughTheAPI(t *testing.T) {
	_, schema := pgtest.PoolSchema(t)
	var ss []*fairsched.Scheduler
	for _, name := range []string{"web-1", "web-2"} {
		st := openReplicaStore(t, schema)
		s, err := fairsched.New(fairsched.Config{MaxConcurrency: 2, Store: st,
			Replica: &fairsched.Replica{Name: name, Capacity: 2, Lease: time.Second}})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, s.Close()) })
		ss = append(ss, s)
	}
	var running, most atomic.Int32
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, ss[i%2].RunSync(context.Background(), fairsched.Job{Key: "k"}, func(context.Context) error {
				n := running.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				running.Add(-1)
				return nil
			}))
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, most.Load(), int32(2), "the cluster's limit")
	leaders := 0
	for i, s := range ss {
		st := s.Stats()
		require.NotNil(t, st.Replica)
		assert.Equal(t, []string{"web-1", "web-2"}[i], st.Replica.Name)
		assert.Equal(t, 2, st.Replica.Capacity)
		assert.EqualValues(t, 10, st.Completed, "a replica's figures are its own jobs'")
		assert.Positive(t, st.Replica.Busy+st.Replica.Idle)
		if st.Replica.Leader {
			leaders++
		}
	}
	assert.Equal(t, 1, leaders)
	assert.ErrorContains(t, ss[0].RegisterType("later", fairsched.TypeConfig{}), "registers its job types in Config.Types",
		"the leader decides by the types every replica has from New")
	assert.NoError(t, ss[0].RegisterType("", fairsched.TypeConfig{}), "a type known already, alike: nothing to do")
}

// openReplicaStore opens a replica's Store on schema, on a pool of its
// own, as a process of its own would; both close when the test ends.
func openReplicaStore(t *testing.T, schema string) *fairschedpg.Store {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), pgtest.Config(t, schema))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st, err := fairschedpg.OpenReplicaPool(context.Background(), pool)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, st.Close()) })
	return st
}
