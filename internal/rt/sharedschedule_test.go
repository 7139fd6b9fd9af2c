package rt

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched/fairschedsqlite"
	"github.com/fairsched/fairsched/internal/decide"
	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/store"
)

type hourly struct{}

func (hourly) Next(t time.Time) time.Time { return t.Add(time.Hour) }

// A replica keeps a durable schedule only on a store that can swap the
// schedule's state (store.Swapper): on another, every replica would
// enqueue each occurrence, so ScheduleDurable refuses.
func TestReplicaScheduleNeedsSwapper(t *testing.T) {
	st, err := fairschedsqlite.Open(filepath.Join(t.TempDir(), "jobs.db"))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, st.Close()) })
	_, swaps := any(st).(store.Swapper)
	require.False(t, swaps, "the test needs a store that cannot swap")
	r, err := New(Config{
		Engine:   engine.Config{MaxConcurrency: 1, CostAlpha: 0.3, DefaultCost: 1, IdleTTL: int64(10 * time.Minute / time.Microsecond)},
		Errors:   testErrors,
		Store:    st,
		Handlers: map[string]*Handler{"mail": {Name: "mail", ArgType: reflect.TypeOf(""), Run: func(context.Context, []byte) error { return nil }}},
		Decider: func(e *engine.Engine, g decide.Grantee, _ func(func(now int64))) decide.Decider {
			return decide.NewRemote("r1", e, g, new(decide.Outbox), 1)
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, r.Close()) })
	_, err = r.ScheduleDurable(context.Background(), "digest", hourly{}, Job{Type: "mail"}, "hi")
	assert.ErrorIs(t, err, errDurableScheduleOnReplica)
}
