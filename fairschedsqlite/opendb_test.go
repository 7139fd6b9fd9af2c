package fairschedsqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/fairsched/fairsched"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Store opened on the service's own database: the service's
// transactions on it enqueue jobs, one process holds the file, and the
// Store's Close leaves the database open.
func TestOpenDB(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate")
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE signups (email TEXT)`)
	require.NoError(t, err)

	st, err := OpenDB(db, Options{Synchronous: Full})
	require.NoError(t, err)
	assert.Same(t, db, st.DB())
	_, err = Open(path)
	assert.ErrorIs(t, err, ErrInUse, "one Store per file, however it was opened")

	got := make(chan string, 1)
	var hs fairsched.Handlers
	fairsched.AddHandler(&hs, "welcome", func(_ context.Context, email string) error { got <- email; return nil })
	s, err := fairsched.New(fairsched.Config{Store: st, Handlers: &hs})
	require.NoError(t, err)
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.Exec(`INSERT INTO signups VALUES ('ann@example.com')`)
	require.NoError(t, err)
	_, err = fairsched.EnqueueTx(ctx, s, tx, fairsched.Job{Type: "welcome"}, "ann@example.com")
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	assert.Equal(t, "ann@example.com", <-got)
	require.NoError(t, s.Shutdown(ctx))
	require.NoError(t, st.Close())
	assert.NoError(t, db.Ping(), "the service's database stays open")

	mem, err := sql.Open("sqlite", ":memory:")
	require.NoError(t, err)
	defer mem.Close()
	_, err = OpenDB(mem)
	assert.ErrorContains(t, err, "in a file")
}
