package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/fairsched/fairsched/internal/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tx is how the suite makes a caller's transaction of type T on a
// Store's database, and ends it.
type Tx[T any] struct {
	Begin    func(t *testing.T, st store.Store) T
	Commit   func(tx T) error
	Rollback func(tx T) error
}

// RunTx runs the suite of TxInserter[T] (and so of Watcher) on databases
// fresh makes, with transactions tx makes.
func RunTx[T any](t *testing.T, fresh Fresh, tx Tx[T]) {
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, open Opener, tx Tx[T])
	}{
		{"CommittedArrive", committedArrive[T]},
		{"RolledBackNever", rolledBackNever[T]},
		{"RecoveredNotAgain", recoveredNotAgain[T]},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, fresh(t), tx) })
	}
}

// txStore is a Store that takes transactions of type T.
type txStore[T any] interface {
	store.Store
	store.TxInserter[T]
}

// watching opens a Store, recovers it, and watches: the jobs that
// arrive go to the channel returned.
func watching[T any](t *testing.T, open Opener) (txStore[T], <-chan *store.Job) {
	t.Helper()
	st := opened(t, open)
	ins, ok := st.(txStore[T])
	require.True(t, ok, "%T is a TxInserter of the transactions given", st)
	Recovered(t, st)
	got := make(chan *store.Job, 100)
	require.NoError(t, ins.Watch(func(j *store.Job) { got <- j }))
	return ins, got
}

// insertTx inserts jobs in a transaction of tx's, and ends it with end.
func insertTx[T any](t *testing.T, st txStore[T], tx Tx[T], end func(T) error, jobs ...*store.Job) {
	t.Helper()
	x := tx.Begin(t, st)
	require.NoError(t, st.InsertTx(context.Background(), x, jobs...))
	for _, j := range jobs {
		require.NotZero(t, j.ID, "an ID is given at once")
	}
	require.NoError(t, end(x))
}

// next returns the next job that arrives; it fails t if none does within
// a minute (a store that never tells).
func next(t *testing.T, got <-chan *store.Job) *store.Job {
	t.Helper()
	select {
	case j := <-got:
		return j
	case <-time.After(time.Minute):
		t.Fatal("no job arrived")
		return nil
	}
}

// The jobs of a committed transaction arrive once committed, in ID
// order, without their arguments; the Store's own inserts never do.
func committedArrive[T any](t *testing.T, open Opener, tx Tx[T]) {
	st, got := watching[T](t, open)
	ctx := context.Background()
	require.NoError(t, st.Insert(ctx, nil, mails(1)...))
	jobs := mails(3)
	insertTx(t, st, tx, tx.Commit, jobs...)
	for _, want := range jobs {
		j := next(t, got)
		assert.Equal(t, want.ID, j.ID, "the caller's jobs, in order, and not the Store's own")
		assert.Equal(t, "mail", j.Type)
		assert.Equal(t, store.Queued, j.State)
		assert.EqualValues(t, want.Submitted, j.Submitted)
		assert.Nil(t, j.Args)
	}
	args, err := st.Start(ctx, jobs[1].ID, 5)
	require.NoError(t, err)
	assert.JSONEq(t, `{"n":1}`, string(args), "its arguments, at its start")
}

// The jobs of a transaction rolled back never arrive, nor exist.
func rolledBackNever[T any](t *testing.T, open Opener, tx Tx[T]) {
	st, got := watching[T](t, open)
	back := mails(2)
	insertTx(t, st, tx, tx.Rollback, back...)
	kept := mails(1)
	insertTx(t, st, tx, tx.Commit, kept...)
	assert.Equal(t, kept[0].ID, next(t, got).ID, "the committed job, and not the rolled-back ones")
	for _, j := range back {
		if j.ID == kept[0].ID {
			continue // a store may give a rolled-back ID again
		}
		_, _, found, err := st.Ended(context.Background(), j.ID)
		require.NoError(t, err)
		assert.False(t, found, "job %d was rolled back", j.ID)
	}
	require.NoError(t, st.Close())
	again := opened(t, open)
	got2 := Recovered(t, again)
	assert.Len(t, got2, 1)
	assert.NotNil(t, got2[kept[0].ID])
}

// A job committed before the Store was recovered is Recover's, and does
// not arrive again.
func recoveredNotAgain[T any](t *testing.T, open Opener, tx Tx[T]) {
	first := opened(t, open)
	ins := first.(txStore[T])
	before := mails(1)
	insertTx(t, ins, tx, tx.Commit, before...)
	require.NoError(t, first.Close())

	st, got := watching[T](t, open)
	_, _, found, err := st.Ended(context.Background(), before[0].ID)
	require.NoError(t, err)
	require.True(t, found)
	after := mails(1)
	insertTx(t, st, tx, tx.Commit, after...)
	assert.Equal(t, after[0].ID, next(t, got).ID, "the job committed before Recover does not arrive")
}
