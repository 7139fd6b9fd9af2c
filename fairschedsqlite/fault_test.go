package fairschedsqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fairsched/fairsched"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// faultScheduler returns a Scheduler on a fresh store with a handler of
// "job" that sends its argument to got.
func faultScheduler(t *testing.T, o Options, got chan<- string) (*fairsched.Scheduler, *Store) {
	t.Helper()
	st, err := Open(filepath.Join(t.TempDir(), "jobs.db"), o)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	var hs fairsched.Handlers
	fairsched.AddHandler(&hs, "job", func(_ context.Context, s string) error { got <- s; return nil })
	s, err := fairsched.New(fairsched.Config{Store: st, Handlers: &hs})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, st
}

// A full disk fails Enqueue with SQLite's error, and nothing is accepted:
// not in memory, not in the file. Once there is room, Enqueue works.
// (SQLite's max_page_count makes the file full as a full disk would.)
func TestFaultFullDisk(t *testing.T) {
	got := make(chan string, 1)
	s, st := faultScheduler(t, Options{}, got)
	ctx := context.Background()
	var pages int
	require.NoError(t, st.w.conn.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages))
	_, err := st.w.conn.ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", pages))
	require.NoError(t, err)
	big := strings.Repeat("x", 64<<10)
	_, err = s.Enqueue(ctx, fairsched.Job{Type: "job"}, big)
	require.ErrorContains(t, err, "full")
	assert.Zero(t, s.Stats().Queued+s.Stats().Running, "nothing accepted in memory")
	assert.Empty(t, column(t, st, "SELECT id FROM fairsched_jobs"), "nor in the file")

	_, err = st.w.conn.ExecContext(ctx, "PRAGMA max_page_count = 1000000")
	require.NoError(t, err)
	h, err := s.Enqueue(ctx, fairsched.Job{Type: "job"}, big)
	require.NoError(t, err)
	assert.Equal(t, big, <-got)
	require.NoError(t, h.Wait(ctx))
}

// A database another connection holds locked past the busy timeout fails
// Enqueue with SQLite's error, and nothing is accepted; once it is
// released, Enqueue works.
func TestFaultLocked(t *testing.T) {
	got := make(chan string, 1)
	s, st := faultScheduler(t, Options{BusyTimeout: 50 * time.Millisecond}, got)
	ctx := context.Background()
	other, err := st.DB().Conn(ctx)
	require.NoError(t, err)
	defer other.Close()
	_, err = other.ExecContext(ctx, "BEGIN IMMEDIATE")
	require.NoError(t, err)
	_, err = s.Enqueue(ctx, fairsched.Job{Type: "job"}, "a")
	require.ErrorContains(t, err, "locked")
	assert.Zero(t, s.Stats().Queued+s.Stats().Running, "nothing accepted in memory")
	_, err = other.ExecContext(ctx, "ROLLBACK")
	require.NoError(t, err)
	assert.Empty(t, column(t, st, "SELECT id FROM fairsched_jobs"), "nor in the file")

	h, err := s.Enqueue(ctx, fairsched.Job{Type: "job"}, "b")
	require.NoError(t, err)
	assert.Equal(t, "b", <-got)
	require.NoError(t, h.Wait(ctx))
}

// A database that cannot be written fails Enqueue with SQLite's error,
// and nothing is accepted. (SQLite's query_only makes the writer's
// connection read-only, as a read-only file would: the tests run as root,
// whom file modes do not stop.)
func TestFaultReadOnly(t *testing.T) {
	got := make(chan string, 1)
	s, st := faultScheduler(t, Options{}, got)
	ctx := context.Background()
	_, err := st.w.conn.ExecContext(ctx, "PRAGMA query_only = 1")
	require.NoError(t, err)
	_, err = s.Enqueue(ctx, fairsched.Job{Type: "job"}, "a")
	require.ErrorContains(t, err, "readonly")
	assert.Zero(t, s.Stats().Queued+s.Stats().Running, "nothing accepted in memory")
	_, err = st.w.conn.ExecContext(ctx, "PRAGMA query_only = 0")
	require.NoError(t, err)
	assert.Empty(t, column(t, st, "SELECT id FROM fairsched_jobs"), "nor in the file")
}
