package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched/internal/store"
)

// Pruned is a store's side of the retention test: its Store opened with
// a retention of an hour for finished jobs and two for dead ones, and
// what only the store can say.
type Pruned struct {
	Store store.Store
	// Prune deletes what is past its retention at now (store.Pruner's
	// Prune), and returns how many jobs.
	Prune func(now time.Time) (int64, error)
	// Commits counts the transactions the store committed.
	Commits func() int64
	// IDs lists the jobs the store keeps, by ID.
	IDs func() []int64
}

// Prune checks that finished jobs are deleted once past their retention,
// dead ones past theirs, in batches of store.PruneBatch, one transaction
// each; unfinished ones never.
func Prune(t *testing.T, p Pruned) {
	st, ctx := p.Store, context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) int64 { return t0.Add(d).UnixMicro() }
	const old = 2*store.PruneBatch + 500
	jobs := make([]*store.Job, old+4)
	for i := range jobs {
		jobs[i] = &store.Job{Type: "t", Submitted: at(0), Args: []byte(`1`)}
	}
	require.NoError(t, st.Insert(ctx, nil, jobs...))
	for _, j := range jobs[:old] { // completed or ended 90 minutes before the prune
		kind := store.OpComplete
		if j.ID%2 == 0 {
			kind = store.OpEnd
		}
		st.Post(store.Op{Kind: kind, ID: j.ID, At: at(0)})
	}
	rest := jobs[old:]
	st.Post(store.Op{Kind: store.OpComplete, ID: rest[0].ID, At: at(time.Hour)})        // 30 minutes before
	st.Post(store.Op{Kind: store.OpDead, ID: rest[1].ID, At: at(0), Err: "x"})          // 90 minutes before
	st.Post(store.Op{Kind: store.OpDead, ID: rest[2].ID, At: at(-time.Hour), Err: "x"}) // 150 minutes before
	// rest[3] is queued.
	require.NoError(t, st.Flush(ctx))

	commits := p.Commits()
	n, err := p.Prune(t0.Add(90 * time.Minute))
	require.NoError(t, err)
	assert.EqualValues(t, old+1, n, "the old finished jobs and the dead job past its 2 hours")
	assert.EqualValues(t, 3, p.Commits()-commits, "in batches of %d: 1000, 1000, 501", store.PruneBatch)
	assert.Equal(t, []int64{rest[0].ID, rest[1].ID, rest[3].ID}, p.IDs())
}
