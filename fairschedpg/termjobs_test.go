package fairschedpg

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched/internal/store"
)

// A term's view of the durable jobs writes while its term holds; once
// another replica took the lease, every write of the old view (insert,
// start, a posted end, a state) fails fenced and commits nothing, its
// watch takes nothing the successor must read, and the new term's view
// writes. A replica's own Store inserts its jobs for the leader to take.
func TestTermJobsFenced(t *testing.T) {
	ctx := context.Background()
	schema := clusterSchema(t)
	a, b, c := replicaStore(t, schema), replicaStore(t, schema), replicaStore(t, schema)
	const ttl = 500 * time.Millisecond
	old, err := a.Campaign(ctx, "a", ttl)
	require.NoError(t, err)
	won := time.Now()
	view := old.Jobs()
	assert.Same(t, view, old.Jobs(), "one view per term")
	t.Cleanup(func() { view.Close() })

	// While the term holds: an insert, a start that returns the
	// arguments, a posted completion.
	j := &store.Job{Type: "mail", Args: []byte(`{"n":1}`)}
	require.NoError(t, view.Insert(ctx, nil, j))
	args, err := view.Start(ctx, j.ID, 10)
	require.NoError(t, err)
	assert.Equal(t, `{"n":1}`, string(args))
	view.Post(store.Op{Kind: store.OpComplete, ID: j.ID, At: 20})
	require.NoError(t, view.Flush(ctx))
	state, _, found, err := view.Ended(ctx, j.ID)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, store.Completed, state)

	// A replica's insert is the leader's to take: its watch hands it on.
	arrived := make(chan *store.Job, 4)
	require.NoError(t, view.(store.Watcher).Watch(func(j *store.Job) { arrived <- j }))
	fromC := &store.Job{Type: "mail", Key: "c"}
	require.NoError(t, c.Insert(ctx, nil, fromC))
	select {
	case got := <-arrived:
		assert.Equal(t, fromC.ID, got.ID)
	case <-time.After(time.Minute):
		t.Fatal("the leader's watch did not take the replica's job")
	}

	// Another replica takes the lease: the old view writes nothing more.
	queued := &store.Job{Type: "mail", Args: []byte(`{}`)}
	require.NoError(t, view.Insert(ctx, nil, queued))
	next := takeOver(t, b, "b", ttl, won)
	err = view.Insert(ctx, nil, &store.Job{Type: "mail"})
	require.ErrorIs(t, err, store.ErrFenced)
	_, err = view.Start(ctx, queued.ID, 30)
	require.ErrorIs(t, err, store.ErrFenced)
	view.Post(store.Op{Kind: store.OpEnd, ID: queued.ID, At: 40, Err: "stale"})
	view.PutState("fair", []byte(`{"stale":true}`))
	require.ErrorIs(t, view.Flush(ctx), store.ErrFenced)
	var rows int
	require.NoError(t, a.Pool().QueryRow(ctx, `SELECT count(*) FROM fairsched_jobs`).Scan(&rows))
	assert.Equal(t, 3, rows, "the stale insert committed nothing")
	state, _, _, err = view.Ended(ctx, queued.ID)
	require.NoError(t, err)
	assert.Equal(t, store.Queued, state, "nor did the stale start or end")
	st, err := view.State(ctx, "fair")
	require.NoError(t, err)
	assert.Nil(t, st, "nor the stale state")

	// The stale watch takes nothing: the successor's view reads it.
	late := &store.Job{Type: "mail", Key: "late"}
	require.NoError(t, c.Insert(ctx, nil, late))
	nextView := next.Jobs()
	t.Cleanup(func() { nextView.Close() })
	var recovered []int64
	require.NoError(t, nextView.Recover(ctx, func(j *store.Job) error {
		recovered = append(recovered, j.ID)
		return nil
	}))
	assert.Contains(t, recovered, late.ID, "a job inserted after the old term ended reaches the next leader")
	assert.Contains(t, recovered, queued.ID)
	select {
	case got := <-arrived:
		t.Fatalf("the stale leader's watch took job %d", got.ID)
	default:
	}
	_, err = nextView.Start(ctx, queued.ID, 50)
	require.NoError(t, err, "the new term writes")
}
