package storetest

import (
	"context"
	"testing"

	"github.com/fairsched/fairsched/internal/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// StateOrder checks what st's writer does with the state writes of one
// transaction: a state put before an insert that writes the same state
// does not win over it, nor an insert's state over a Put made after it.
// A writer writes an insert's state with its jobs and a Put among the
// other requests, so it must write only the last of each name
// (store.MarkOverwritten); else a periodic schedule's next time, put as
// an occurrence's write ended, could overwrite the next occurrence's,
// and the stored time would go back. The interface does not reach a
// transaction, so each store's tests call this with apply, their
// writer's application of one transaction's requests.
func StateOrder(t *testing.T, st store.Store, apply func([]*store.Request) error) {
	t.Helper()
	ctx := context.Background()
	jobs := []*store.Job{{Type: "mail", Args: []byte(`{}`)}}
	value := func(v string) func([]*store.Job) []byte { return func([]*store.Job) []byte { return []byte(v) } }
	rs := []*store.Request{
		{Kind: store.Put, Name: "schedule:digest", Value: []byte(`"older"`)},
		{Kind: store.Insert, Jobs: jobs, State: &store.StateWrite{Name: "schedule:digest", Value: value(`"newer"`)}},
		{Kind: store.Insert, Jobs: []*store.Job{{Type: "mail", Args: []byte(`{}`)}}, State: &store.StateWrite{Name: "fair", Value: value(`"first"`)}},
		{Kind: store.Put, Name: "fair", Value: []byte(`"last"`)},
	}
	require.NoError(t, apply(rs))
	for name, want := range map[string]string{"schedule:digest": `"newer"`, "fair": `"last"`} {
		got, err := st.State(ctx, name)
		require.NoError(t, err)
		assert.Equal(t, want, string(got), name)
	}
	assert.NotZero(t, jobs[0].ID, "the jobs are inserted")
}
