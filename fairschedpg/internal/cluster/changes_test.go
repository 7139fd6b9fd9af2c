package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChangesAppendAndRead(t *testing.T) {
	t.Parallel()
	pool := migrated(t, 2)
	ctx := context.Background()
	recs, err := Changes(ctx, pool, "f", 0)
	require.NoError(t, err)
	assert.Empty(t, recs, "no change yet")
	_, err = AppendChange(ctx, pool, "f", nil)
	assert.Error(t, err, "an empty change")
	var seqs []int64
	for _, body := range []string{"one", "two", "three"} {
		seq, err := AppendChange(ctx, pool, "f", []byte(body))
		require.NoError(t, err)
		seqs = append(seqs, seq)
	}
	assert.Less(t, seqs[0], seqs[1])
	assert.Less(t, seqs[1], seqs[2])
	recs, err = Changes(ctx, pool, "f", 0)
	require.NoError(t, err)
	require.Len(t, recs, 3)
	for i, body := range []string{"one", "two", "three"} {
		assert.Equal(t, seqs[i], recs[i].Seq)
		assert.Equal(t, body, string(recs[i].Body))
	}
	recs, err = Changes(ctx, pool, "f", seqs[1])
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, "three", string(recs[0].Body))

	// Another configuration's changes are its own.
	g, err := AppendChange(ctx, pool, "g", []byte("of g"))
	require.NoError(t, err)
	recs, err = Changes(ctx, pool, "f", 0)
	require.NoError(t, err)
	assert.Len(t, recs, 3, "f's, not g's")
	recs, err = Changes(ctx, pool, "g", 0)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, g, recs[0].Seq)
	assert.Equal(t, "of g", string(recs[0].Body))
}

// While an append holds its number uncommitted, no other append takes a
// number: numbers commit in order, so a reader past a number never
// finds a smaller one later.
func TestChangesCommitInOrder(t *testing.T) {
	t.Parallel()
	pool := migrated(t, 3)
	ctx := context.Background()
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	// What AppendChange does, left uncommitted.
	_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))`, changesLockKey)
	require.NoError(t, err)
	var first int64
	require.NoError(t, tx.QueryRow(ctx, `INSERT INTO fairsched_changes (fingerprint, body) VALUES ('f', 'first') RETURNING seq`).Scan(&first))

	// The outcome does not depend on the time given: the append cannot
	// succeed while the lock is held.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = AppendChange(short, pool, "f", []byte("second"))
	cancel()
	require.Error(t, err, "an append waits for the one holding its number")
	recs, err := Changes(ctx, pool, "f", 0)
	require.NoError(t, err)
	assert.Empty(t, recs, "nothing committed")
	// The append gave up, but its statement may still wait on the
	// server: the request that cancels it travels apart from it, and, on
	// a busy machine, came after the lock was let go, so that the append
	// committed after all. End it, waiting until it has ended, before the
	// lock is let go.
	var waiting, ended int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE pg_terminate_backend(pid, 10000))
		FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
		AND classid = $1 AND objid = hashtext(current_schema())::oid AND objsubid = 2`, changesLockKey).Scan(&waiting, &ended))
	require.Equal(t, waiting, ended, "the append given up ended on the server")

	require.NoError(t, tx.Commit(ctx))
	second, err := AppendChange(ctx, pool, "f", []byte("second"))
	require.NoError(t, err)
	assert.Greater(t, second, first)
	recs, err = Changes(ctx, pool, "f", 0)
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.Equal(t, "first", string(recs[0].Body))
	assert.Equal(t, "second", string(recs[1].Body))
}

// Appenders at once and a reader that reads after the last it saw: the
// reader misses none, and sees them in order.
func TestChangesConcurrentReaderMissesNone(t *testing.T) {
	t.Parallel()
	const appenders, each = 6, 30
	pool := migrated(t, appenders+2)
	ctx := context.Background()
	var wg sync.WaitGroup
	done := make(chan struct{})
	for a := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				_, err := AppendChange(ctx, pool, "f", fmt.Appendf(nil, "%d/%d", a, i))
				assert.NoError(t, err)
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	var seen []int64
	last := int64(0)
	read := func() {
		recs, err := Changes(ctx, pool, "f", last)
		require.NoError(t, err)
		for _, r := range recs {
			require.Greater(t, r.Seq, last, "in order")
			last = r.Seq
			seen = append(seen, r.Seq)
		}
	}
	for reading := true; reading; {
		select {
		case <-done:
			reading = false
		default:
		}
		read() // the reader reads as fast as it can, the appends going on
	}
	read()
	all, err := Changes(ctx, pool, "f", 0)
	require.NoError(t, err)
	require.Len(t, all, appenders*each)
	want := make([]int64, len(all))
	for i, r := range all {
		want[i] = r.Seq
	}
	assert.Equal(t, want, seen, "read after the last seen, the reader missed none")
}
