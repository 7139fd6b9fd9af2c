package fairschedpg_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedpg"
	"github.com/fairsched/fairsched/fairschedpg/internal/pgtest"
)

// A replica configured unlike the live ones is refused by New, with an
// error that says so; once they have left, it joins, and theirs is
// refused.
func TestReplicasConfigMismatch(t *testing.T) {
	_, schema := pgtest.PoolSchema(t)
	start := func(name string, maxConcurrency int) (*fairsched.Scheduler, error) {
		t.Helper()
		pool, err := pgxpool.NewWithConfig(context.Background(), pgtest.Config(t, schema))
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		st, err := fairschedpg.OpenReplicaPool(context.Background(), pool)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, st.Close()) })
		return fairsched.New(fairsched.Config{MaxConcurrency: maxConcurrency, Store: st,
			Types:   map[string]fairsched.TypeConfig{"mail": {MaxConcurrency: 1}},
			Replica: &fairsched.Replica{Name: name, Capacity: 2, Lease: time.Second}})
	}
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
