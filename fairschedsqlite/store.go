// Package fairschedsqlite keeps a fairsched scheduler's durable jobs in
// one SQLite file, through database/sql and modernc.org/sqlite, a driver
// in pure Go: no cgo, nothing to install, nothing else to run.
//
//	st, err := fairschedsqlite.Open("jobs.db")
//	...
//	s, err := fairsched.New(fairsched.Config{Store: st, Handlers: handlers})
//
// The file is in WAL mode, with a busy timeout, and its schema is created
// or migrated by Open. One process at a time may hold it: a second Open
// of the same file, from this process or another, fails with ErrInUse
// until the first is closed (or its process has died: the lock is the
// kernel's, so a restart after kill -9 never waits).
//
// What "committed" means is SQLite's synchronous setting (Options): with
// Normal, the default, a committed job survives the process's death
// (kill -9, a panic, the OOM killer) but the last commits before a power
// loss or an operating system crash may be lost; with Full they survive
// those too, at the cost of an fsync per transaction.
package fairschedsqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/fairsched/fairsched/internal/store"
	_ "modernc.org/sqlite" // the "sqlite" driver
)

// Synchronous is SQLite's synchronous setting: when a commit is durable.
type Synchronous uint8

const (
	// Normal: a commit survives the process's death; the last ones may
	// be lost on a power loss or OS crash. The default.
	Normal Synchronous = iota
	// Full: a commit survives a power loss too; every transaction waits
	// for an fsync.
	Full
)

func (s Synchronous) String() string {
	if s == Full {
		return "FULL"
	}
	return "NORMAL"
}

// Options configure Open. The zero value is the default.
type Options struct {
	// Synchronous is when a commit is durable; Normal by default.
	Synchronous Synchronous
	// BusyTimeout is how long a statement waits for a lock another
	// connection holds before it fails; 5 seconds by default.
	BusyTimeout time.Duration
	// Retention is how long jobs that completed or ended otherwise
	// (cancelled, expired) are kept after they finished, then deleted;
	// 0 means 24 hours, a negative value forever.
	Retention time.Duration
	// DeadRetention is how long dead jobs are kept after they died, to
	// be seen and retried by hand; 0 means until they are retried.
	DeadRetention time.Duration
}

const defaultRetention = 24 * time.Hour

// ErrInUse is returned by Open for a file that another Store holds.
var ErrInUse = errors.New("fairschedsqlite: the database is in use by another process or Store")

// Store is a SQLite file of durable jobs, for Config.Store. Give it to one
// Scheduler at a time; close it after the Scheduler. Its methods other
// than DB and Close are for the scheduler, not to be called directly.
type Store struct {
	writes // Insert, Start, Post, Flush, PutState: queued on w
	db     *sql.DB
	owner  *os.File // holds the owner lock
	w      *writer
	pruner *store.Pruner
	watch  *watcher
	ownsDB bool // Open opened db: Close closes it

	closeOnce sync.Once
	closeErr  error
}

// Open opens, or creates, the SQLite file at path for durable jobs,
// creating or migrating its schema. It fails with ErrInUse if another
// Store holds the file, with ErrSchemaTooNew if a newer version of this
// package wrote it, and with the error of the file system or SQLite
// otherwise.
func Open(path string, opts ...Options) (*Store, error) {
	o, err := options(opts)
	if err != nil {
		return nil, err
	}
	owner, err := lockOwner(path)
	if err != nil {
		return nil, err
	}
	dsn := fmt.Sprintf("file:%s?_pragma=journal_mode(WAL)&_pragma=busy_timeout(%d)&_pragma=synchronous(%s)&_txlock=immediate",
		path, o.BusyTimeout.Milliseconds(), o.Synchronous)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		owner.Close()
		return nil, fmt.Errorf("fairschedsqlite: %w", err)
	}
	st, err := open(db, owner, o)
	if err != nil {
		db.Close()
		owner.Close()
		return nil, err
	}
	st.ownsDB = true
	return st, nil
}

// OpenDB is Open on a database the service has opened already, so that
// its own transactions on db can enqueue jobs (fairsched.EnqueueTx). db
// must be a SQLite file opened through database/sql (modernc.org/sqlite's
// "sqlite" driver, or another); OpenDB puts it in WAL mode, and Options
// apply to the Store's own connection. For transactions that write, open
// db with _txlock=immediate, or a transaction that read first may fail
// with SQLITE_BUSY when the Store writes meanwhile. Close releases the
// Store and leaves db open.
func OpenDB(db *sql.DB, opts ...Options) (*Store, error) {
	o, err := options(opts)
	if err != nil {
		return nil, err
	}
	var seq int
	var name, path string
	if err := db.QueryRow("PRAGMA database_list").Scan(&seq, &name, &path); err != nil {
		return nil, fmt.Errorf("fairschedsqlite: %w", err)
	}
	if path == "" {
		return nil, errors.New("fairschedsqlite: OpenDB needs a database in a file, not in memory")
	}
	owner, err := lockOwner(path)
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec("PRAGMA journal_mode = WAL"); err != nil {
		owner.Close()
		return nil, fmt.Errorf("fairschedsqlite: %w", err)
	}
	st, err := open(db, owner, o)
	if err != nil {
		owner.Close()
		return nil, err
	}
	return st, nil
}

// options returns the Options given, with their defaults, or an error.
func options(opts []Options) (Options, error) {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 5 * time.Second
	}
	if o.Synchronous > Full {
		return o, fmt.Errorf("fairschedsqlite: unknown Synchronous setting %d", o.Synchronous)
	}
	return o, nil
}

// open readies a Store on db, whose owner lock is held.
func open(db *sql.DB, owner *os.File, o Options) (*Store, error) {
	ctx := context.Background()
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return nil, fmt.Errorf("fairschedsqlite: opening: %w", err)
	}
	if mode != "wal" {
		return nil, fmt.Errorf("fairschedsqlite: the database is in journal mode %q; it must allow WAL", mode)
	}
	if err := migrate(ctx, db); err != nil {
		return nil, err
	}
	w, err := newWriter(ctx, db, o)
	if err != nil {
		return nil, err
	}
	st := &Store{writes: writes{B: w.b}, db: db, owner: owner, w: w, watch: newWatcher(db)}
	w.watch = st.watch
	if o.Retention == 0 {
		o.Retention = defaultRetention
	}
	st.pruner = store.StartPruner(store.PruneThrough(w.b), o.Retention, o.DeadRetention)
	return st, nil
}

// DB returns the database the Store uses (the one Open opened, or the one
// given to OpenDB), for the service's own tables: a job enqueued in one of
// its transactions (fairsched.EnqueueTx) exists if and only if the
// transaction commits.
func (st *Store) DB() *sql.DB { return st.db }

// Close waits for the writes queued, then closes the database and
// releases the file. Close the Scheduler first. Calls after the first
// do nothing and return its error.
func (st *Store) Close() error {
	st.closeOnce.Do(func() {
		st.pruner.Stop()
		st.watch.stop()
		err := st.w.close()
		if st.ownsDB {
			if cerr := st.db.Close(); err == nil {
				err = cerr
			}
		}
		st.owner.Close()
		st.closeErr = err
	})
	return st.closeErr
}

// Recover is for the scheduler: it calls fn with every unfinished job, in
// ID order, without their arguments.
func (st *Store) Recover(ctx context.Context, fn func(*store.Job) error) error {
	return st.scan(ctx, `WHERE state < 3 ORDER BY id`, fn)
}

// HasDependencies is for the scheduler: it reports whether an unfinished
// job runs after others.
func (st *Store) HasDependencies(ctx context.Context) (bool, error) {
	var has bool
	err := st.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM fairsched_jobs WHERE state < 3 AND after IS NOT NULL)`).Scan(&has)
	if err != nil {
		return false, fmt.Errorf("fairschedsqlite: %w", err)
	}
	return has, nil
}

// Ended is for the scheduler: it says how job id ended.
func (st *Store) Ended(ctx context.Context, id int64) (store.State, string, bool, error) {
	var state store.State
	var why string
	err := st.db.QueryRowContext(ctx, `SELECT state, coalesce(error, '') FROM fairsched_jobs WHERE id = ?`, id).Scan(&state, &why)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", false, nil
	}
	if err != nil {
		return 0, "", false, fmt.Errorf("fairschedsqlite: %w", err)
	}
	return state, why, true, nil
}

// Dead is for the scheduler: it calls fn with the newest dead jobs, at
// most limit, newest first, without their arguments.
func (st *Store) Dead(ctx context.Context, limit int, fn func(*store.Job) error) error {
	return st.scan(ctx, `WHERE state >= 3 AND state = 5 ORDER BY finished DESC, id DESC LIMIT ?`, fn, limit)
}

// scan calls fn with each job that where selects.
func (st *Store) scan(ctx context.Context, where string, fn func(*store.Job) error, args ...any) error {
	return scanJobs(ctx, st.db, where, fn, args...)
}

// scanJobs calls fn with each job of db that where selects.
func scanJobs(ctx context.Context, db *sql.DB, where string, fn func(*store.Job) error, args ...any) error {
	rows, err := db.QueryContext(ctx, `
SELECT id, state, type, key, ref, priority, submitted, not_before, start_by, attempt, allowed, started, finished,
	coalesce(error, ''), attempts, after, needs, stood
FROM fairsched_jobs `+where, args...)
	if err != nil {
		return fmt.Errorf("fairschedsqlite: reading jobs: %w", err)
	}
	defer rows.Close()
	var intern store.Interner
	for rows.Next() {
		j := new(store.Job)
		var typ, key string
		var attempts, after, needs sql.RawBytes
		if err := rows.Scan(&j.ID, &j.State, &typ, &key, &j.Ref, &j.Priority, &j.Submitted, &j.NotBefore, &j.StartBy,
			&j.Attempt, &j.Allowed, &j.Started, &j.Finished, &j.Err, &attempts, &after, &needs, &j.Stood); err != nil {
			return fmt.Errorf("fairschedsqlite: reading jobs: %w", err)
		}
		j.Type, j.Key, j.Ref = intern.Of(typ), intern.Of(key), intern.Of(j.Ref)
		if j.State == store.Queued && j.Started != 0 { // an attempt started (multiStart)
			j.State = store.Running
		}
		if len(attempts) > 0 {
			if err := decodeAttempts(attempts, &j.Attempts); err != nil {
				return fmt.Errorf("fairschedsqlite: job %d: its attempts: %w", j.ID, err)
			}
		}
		if len(after) > 0 {
			if err := json.Unmarshal(after, &j.After); err != nil {
				return fmt.Errorf("fairschedsqlite: job %d: the jobs it runs after: %w", j.ID, err)
			}
		}
		if len(needs) > 0 {
			if err := json.Unmarshal(needs, &j.Needs); err != nil {
				return fmt.Errorf("fairschedsqlite: job %d: the resources it needs: %w", j.ID, err)
			}
		}
		if err := fn(j); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("fairschedsqlite: reading jobs: %w", err)
	}
	return nil
}

// State is for the scheduler: it returns the value last put under name,
// PutState's of before the call included: it waits for what was posted
// first, so that a scheduler started on a Store another one used reads
// what that one left, its last pauses among them.
func (st *Store) State(ctx context.Context, name string) ([]byte, error) {
	if err := st.w.flush(); err != nil {
		return nil, fmt.Errorf("fairschedsqlite: a write before reading the state %q failed: %w", name, err)
	}
	var v []byte
	err := st.db.QueryRowContext(ctx, `SELECT value FROM fairsched_state WHERE name = ?`, name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fairschedsqlite: reading the state %q: %w", name, err)
	}
	return v, nil
}

var _ store.Store = (*Store)(nil)
