package fairschedpg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fairsched/fairsched/fairschedpg/internal/cluster"
	"github.com/fairsched/fairsched/fairschedpg/internal/schema"
	"github.com/fairsched/fairsched/internal/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Options configure Open and OpenPool. The zero value is the default.
type Options struct {
	// StatementTimeout bounds every statement the Store runs, on the
	// server (statement_timeout, set for each of its transactions) and
	// on the client (a dead connection); 5 seconds by default. The
	// schema's migration as the Store opens is bounded by the larger of
	// it and the default: a migration may take longer than a statement.
	StatementTimeout time.Duration
	// PollInterval is how often the Store looks for jobs committed by
	// callers' transactions (EnqueueTx) whose notification it did not
	// receive; 1 second by default. A notification (LISTEN/NOTIFY)
	// brings them within milliseconds; the poll is the fallback.
	PollInterval time.Duration
	// Retention is how long jobs that completed or ended otherwise
	// (cancelled, expired) are kept after they finished, then deleted;
	// 0 means 24 hours, a negative value forever.
	Retention time.Duration
	// DeadRetention is how long dead jobs are kept after they died, to
	// be seen and retried by hand; 0 means until they are retried.
	DeadRetention time.Duration
}

const defaultRetention = 24 * time.Hour

// defaultStatementTimeout is Options.StatementTimeout's default.
const defaultStatementTimeout = 5 * time.Second

// options returns the Options given, with their defaults.
func options(opts []Options) Options {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.StatementTimeout <= 0 {
		o.StatementTimeout = defaultStatementTimeout
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.Retention == 0 {
		o.Retention = defaultRetention
	}
	return o
}

// ErrInUse is returned by Open and OpenPool for a schema that another
// Store holds, in this process or another (one Store at a time), and by
// OpenReplica and OpenReplicaPool for a schema that a Store of Open or
// OpenPool holds. It is also the error of every write of a Store whose
// own connection to the server dropped and that found, reconnecting,
// that another Store had taken the schema meanwhile.
var ErrInUse = errors.New("fairschedpg: the schema is in use by another Store")

// ErrCommitUnknown is wrapped by the error of a write whose transaction
// may or may not have committed: the connection failed after its COMMIT
// was sent. An Enqueue that fails so may have stored its job, which then
// runs after the next start.
var ErrCommitUnknown = errors.New("fairschedpg: the connection failed at the commit: whether the write committed is unknown")

// Store is a PostgreSQL database's durable jobs, for Config.Store. Give it
// to one Scheduler at a time; close it after the Scheduler. Its methods
// other than Pool and Close are for the scheduler, not to be called
// directly.
type Store struct {
	writes    // Insert, Start, Post, Flush, PutState: queued on w
	pool      *pgxpool.Pool
	ownsPool  bool // Open made pool: Close closes it
	o         Options
	schema    string // the schema of the tables: the pool's current_schema()
	jobsTable string // fairsched_jobs qualified by schema, for callers' transactions
	w         *writer
	watch     *watcher
	pruner    *store.Pruner
	shared    bool // a replica's: the schema's lock is held shared

	closeOnce sync.Once
	closeErr  error
}

// Open connects to the database dsn names (a URL or a key=value string,
// as pgx reads it) with a pool of its own, and is OpenPool on it; Close
// closes the pool.
func Open(ctx context.Context, dsn string, opts ...Options) (*Store, error) {
	return openDSN(ctx, dsn, func(pool *pgxpool.Pool) (*Store, error) { return OpenPool(ctx, pool, opts...) })
}

// openDSN connects to dsn with a pool of its own and opens a Store on it
// with open; the Store closes the pool.
func openDSN(ctx context.Context, dsn string, open func(*pgxpool.Pool) (*Store, error)) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("fairschedpg: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("fairschedpg: %w", err)
	}
	st, err := open(pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	st.ownsPool = true
	return st, nil
}

// OpenPool readies a Store on pool's database, in the schema its
// connections' search_path names first, creating or migrating the
// tables (Migrate). The service's own transactions on pool can then
// enqueue jobs (fairsched.EnqueueTx with a pgx.Tx). Give the pool at
// least two connections: the Store writes on one at a time and reads on
// others; it also holds one connection of its own, outside the pool, to
// listen for notifications. Close leaves pool open.
//
// It fails with ErrInUse if another Store holds the schema (it waits up
// to StatementTimeout for one whose process has just died, until the
// server notices), with an error wrapping ErrSchemaTooNew if a newer
// version of this module wrote it, and with the server's or the
// network's error otherwise.
func OpenPool(ctx context.Context, pool *pgxpool.Pool, opts ...Options) (*Store, error) {
	return openPool(ctx, pool, options(opts), false)
}

// OpenReplica is Open for one replica of a cluster: several processes,
// each with a Store of its own on one schema, whose schedulers behave as
// one (fairsched.Config.Replica). Any number of replicas' Stores may be
// open on a schema together, and none while a Store opened with Open or
// OpenPool holds it (ErrInUse), nor that one while they do.
func OpenReplica(ctx context.Context, dsn string, opts ...Options) (*Store, error) {
	return openDSN(ctx, dsn, func(pool *pgxpool.Pool) (*Store, error) { return OpenReplicaPool(ctx, pool, opts...) })
}

// OpenReplicaPool is OpenPool for one replica of a cluster (OpenReplica).
func OpenReplicaPool(ctx context.Context, pool *pgxpool.Pool, opts ...Options) (*Store, error) {
	return openPool(ctx, pool, options(opts), true)
}

// openPool is OpenPool; shared opens a replica's Store, which takes the
// schema's lock shared (watch.go): any number of replicas' Stores hold
// it together, and none while a Store of one process holds it.
func openPool(ctx context.Context, pool *pgxpool.Pool, o Options, shared bool) (*Store, error) {
	mctx, cancel := context.WithTimeout(ctx, max(o.StatementTimeout, defaultStatementTimeout))
	defer cancel()
	if _, err := schema.Migrate(mctx, pool); err != nil {
		return nil, err
	}
	st := &Store{pool: pool, o: o, shared: shared}
	if err := pool.QueryRow(mctx, `SELECT current_schema()`).Scan(&st.schema); err != nil {
		return nil, fmt.Errorf("fairschedpg: %w", err)
	}
	st.jobsTable = pgx.Identifier{st.schema, "fairsched_jobs"}.Sanitize()
	watch, err := newWatcher(ctx, st)
	if err != nil {
		return nil, err
	}
	st.watch = watch
	st.w = newWriter(st, nil)
	st.writes = writes{B: st.w.b}
	st.pruner = store.StartPruner(store.PruneThrough(st.w.b), o.Retention, o.DeadRetention)
	return st, nil
}

// Pool returns the pool the Store uses (the one Open made, or the one
// given to OpenPool), for the service's own tables: a job enqueued in
// one of its transactions (fairsched.EnqueueTx) exists if and only if
// the transaction commits.
func (st *Store) Pool() *pgxpool.Pool { return st.pool }

// Close waits for the writes queued, then releases the schema (another
// Store may open it) and, if Open made it, closes the pool. Close the
// Scheduler first. Calls after the first do nothing and return its
// error.
func (st *Store) Close() error {
	st.closeOnce.Do(func() {
		st.pruner.Stop()
		st.watch.stop()
		err := st.w.close()
		st.watch.release() // the lock last: no other Store writes before this one's last write
		if st.ownsPool {
			st.pool.Close()
		}
		st.closeErr = err
	})
	return st.closeErr
}

// stmtCtx returns a context for one round trip to the server: it ends
// StatementTimeout and a second after now, so that a connection that
// died without a word fails the call instead of hanging it (the server
// ends a slow statement itself, at StatementTimeout).
func (st *Store) stmtCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, st.o.StatementTimeout+time.Second)
}

// begin is the start of every transaction of the Store's: READ
// COMMITTED, whatever the server's or the pool's default, with the
// statement timeout set for this transaction only (the pool's
// connections keep theirs). The first time a connection meets one of the
// Store's statements, pgx prepares it before it sends the batch, outside
// the transaction: that round trip has the client's timeout only
// (stmtCtx), which ends the connection instead of the statement.
func (st *Store) begin(b *pgx.Batch, readOnly bool) {
	st.beginAs(b, "READ COMMITTED", readOnly)
}

// beginAs is begin at isolation level iso.
func (st *Store) beginAs(b *pgx.Batch, iso string, readOnly bool) {
	q := "BEGIN ISOLATION LEVEL " + iso
	if readOnly {
		q += " READ ONLY"
	}
	b.Queue(q)
	st.queueTimeout(b)
}

// queueTimeout queues the setting of the statement timeout for the rest
// of the transaction b runs in.
func (st *Store) queueTimeout(b *pgx.Batch) {
	b.Queue(`SELECT set_config('statement_timeout', $1, true)`, fmt.Sprint(st.o.StatementTimeout.Milliseconds()))
}

// read runs the statements queue queues in one read-only transaction, in
// one round trip, and returns the first error.
func (st *Store) read(ctx context.Context, queue func(b *pgx.Batch)) error {
	return st.run(ctx, true, queue)
}

// readSnapshot runs the statements queue queues in one read-only
// transaction in one snapshot (REPEATABLE READ), in one round trip, and
// returns the first error.
func (st *Store) readSnapshot(ctx context.Context, queue func(b *pgx.Batch)) error {
	return st.runAs(ctx, "REPEATABLE READ", true, queue)
}

// run runs the statements queue queues in one transaction, in one round
// trip, and returns the first error.
func (st *Store) run(ctx context.Context, readOnly bool, queue func(b *pgx.Batch)) error {
	return st.runAs(ctx, "READ COMMITTED", readOnly, queue)
}

// runAs is run at isolation level iso.
func (st *Store) runAs(ctx context.Context, iso string, readOnly bool, queue func(b *pgx.Batch)) error {
	ctx, cancel := st.stmtCtx(ctx)
	defer cancel()
	conn, err := st.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release() // a connection left in a transaction is destroyed, not reused
	b := &pgx.Batch{}
	st.beginAs(b, iso, readOnly)
	queue(b)
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		conn.Exec(ctx, "ROLLBACK")
		if !readOnly {
			return commitUnknown(err)
		}
		return err
	}
	return nil
}

// Recover is for the scheduler: it calls fn with every unfinished job, in
// ID order, without their arguments. The jobs of other transactions
// (InsertTx) that Watch hands on next are those Recover did not read.
func (st *Store) Recover(ctx context.Context, fn func(*store.Job) error) error {
	from, err := st.recoverJobs(ctx, nil, fn)
	if err == nil {
		st.watch.recovered(from)
	}
	return err
}

// recoverJobs is Recover: it reads every unfinished job in one snapshot,
// in pages, and returns where the watcher's takes go on from: that
// snapshot, after which the jobs of other transactions are new (watch.go),
// and the server it read them on (qServerID). A leader's (lease not nil) reads them
// only while its term holds, and fails with ErrFenced once it is over.
func (st *Store) recoverJobs(ctx context.Context, lease *cluster.Lease, fn func(*store.Job) error) (from takeCursor, err error) {
	const page = 10_000 // jobs per statement, each under the timeout
	var term int64
	if lease != nil {
		var held bool
		if term, held = lease.Term(); !held {
			return takeCursor{}, fmt.Errorf("%w (%s holds no lease)", store.ErrFenced, lease.Holder())
		}
	}
	bctx, cancel := st.stmtCtx(ctx) // the acquisition and the BEGIN: round trips too
	defer cancel()
	conn, err := st.pool.Acquire(bctx)
	if err != nil {
		return takeCursor{}, fmt.Errorf("fairschedpg: reading jobs: %w", err)
	}
	defer conn.Release() // a connection left in a transaction is destroyed, not reused
	tx, err := conn.BeginTx(bctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return takeCursor{}, fmt.Errorf("fairschedpg: reading jobs: %w", err)
	}
	defer func() { // read only: nothing to commit
		ctx, cancel := st.stmtCtx(context.Background())
		defer cancel()
		tx.Rollback(ctx)
	}()
	var intern store.Interner
	last := int64(0)
	for {
		var jobs []*store.Job
		err := st.readIn(ctx, tx, func(b *pgx.Batch) {
			if from.known == "" { // the transaction's snapshot, which every page reads
				if lease != nil {
					b.Queue(qFenceRead, term, lease.Holder())
				}
				b.Queue(qSnapshot).QueryRow(func(r pgx.Row) error { return r.Scan(&from.known, &from.server) })
			}
			queueScan(b, `WHERE state < 3 AND id > $1 ORDER BY id LIMIT $2`, &intern, func(j *store.Job) {
				jobs = append(jobs, j)
			}, last, page)
		})
		if lease != nil && isFenceError(err) {
			lease.Lost(term)
			return takeCursor{}, fmt.Errorf("%w (%s's term %d: a read of the jobs once the term is over)", store.ErrFenced, lease.Holder(), term)
		}
		if err != nil {
			return takeCursor{}, fmt.Errorf("fairschedpg: reading jobs: %w", err)
		}
		for _, j := range jobs {
			if err := fn(j); err != nil {
				return takeCursor{}, err
			}
			last = j.ID
		}
		from.maxID = max(from.maxID, last)
		if len(jobs) < page {
			return from, nil
		}
	}
}

// readIn runs the statements queue queues in tx, in one round trip, each
// under the statement timeout, and returns the first error.
func (st *Store) readIn(ctx context.Context, tx pgx.Tx, queue func(b *pgx.Batch)) error {
	ctx, cancel := st.stmtCtx(ctx)
	defer cancel()
	b := &pgx.Batch{}
	st.queueTimeout(b)
	queue(b)
	return tx.SendBatch(ctx, b).Close()
}

// HasDependencies is for the scheduler: it reports whether an unfinished
// job runs after others.
func (st *Store) HasDependencies(ctx context.Context) (bool, error) {
	var has bool
	err := st.read(ctx, func(b *pgx.Batch) {
		b.Queue(`SELECT EXISTS (SELECT 1 FROM fairsched_jobs WHERE state < 3 AND after IS NOT NULL)`).QueryRow(func(r pgx.Row) error {
			return r.Scan(&has)
		})
	})
	if err != nil {
		return false, fmt.Errorf("fairschedpg: %w", err)
	}
	return has, nil
}

// Ended is for the scheduler: it says how job id ended.
func (st *Store) Ended(ctx context.Context, id int64) (store.State, string, bool, error) {
	var state int16
	var why string
	found := true
	err := st.read(ctx, func(b *pgx.Batch) {
		b.Queue(`SELECT state, coalesce(error, '') FROM fairsched_jobs WHERE id = $1`, id).QueryRow(func(r pgx.Row) error {
			err := r.Scan(&state, &why)
			if errors.Is(err, pgx.ErrNoRows) {
				found = false
				return nil
			}
			return err
		})
	})
	if err != nil {
		return 0, "", false, fmt.Errorf("fairschedpg: %w", err)
	}
	if !found {
		return 0, "", false, nil
	}
	return store.State(state), why, true, nil
}

// Ends is for the scheduler: it says how each job of ids is, as Ended
// does, in one round trip: one statement per maxRows IDs, so that no
// statement's array grows with the jobs asked for.
func (st *Store) Ends(ctx context.Context, ids []int64, fn func(id int64, state store.State, why string, found bool)) error {
	seen := make(map[int64]bool, len(ids))
	err := st.read(ctx, func(b *pgx.Batch) {
		for chunk := range slices.Chunk(ids, maxRows) {
			b.Queue(`SELECT id, state, coalesce(error, '') FROM fairsched_jobs WHERE id = ANY($1)`, chunk).Query(func(rows pgx.Rows) error {
				for rows.Next() {
					var id int64
					var state int16
					var why string
					if err := rows.Scan(&id, &state, &why); err != nil {
						return err
					}
					seen[id] = true
					fn(id, store.State(state), why, true)
				}
				return rows.Err()
			})
		}
	})
	if err != nil {
		return fmt.Errorf("fairschedpg: %w", err)
	}
	for _, id := range ids {
		if !seen[id] {
			fn(id, 0, "", false)
		}
	}
	return nil
}

// Dead is for the scheduler: it calls fn with the newest dead jobs, at
// most limit, newest first, without their arguments.
func (st *Store) Dead(ctx context.Context, limit int, fn func(*store.Job) error) error {
	var jobs []*store.Job
	var intern store.Interner
	err := st.read(ctx, func(b *pgx.Batch) {
		queueScan(b, `WHERE state = 5 ORDER BY finished DESC, id DESC LIMIT $1`, &intern,
			func(j *store.Job) { jobs = append(jobs, j) }, limit)
	})
	if err != nil {
		return fmt.Errorf("fairschedpg: reading the dead jobs: %w", err)
	}
	for _, j := range jobs {
		if err := fn(j); err != nil {
			return err
		}
	}
	return nil
}

// queueScan queues the read of the jobs that where selects, each given
// to fn.
func queueScan(b *pgx.Batch, where string, intern *store.Interner, fn func(j *store.Job), args ...any) {
	b.Queue(`SELECT `+jobCols("")+` FROM fairsched_jobs `+where, args...).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			j, err := scanJob(rows, intern)
			if err != nil {
				return err
			}
			fn(j)
		}
		return rows.Err()
	})
}

// jobCols returns the columns scanJob reads, each prefixed by p.
func jobCols(p string) string {
	var b strings.Builder
	for i, c := range []string{"id", "state", "type", "key", "ref", "priority", "submitted", "not_before", "start_by",
		"attempt", "allowed", "started", "finished", "error", "attempts", "after", "needs", "stood"} {
		if i > 0 {
			b.WriteString(", ")
		}
		if c == "error" {
			fmt.Fprintf(&b, "coalesce(%serror, '')", p)
			continue
		}
		b.WriteString(p + c)
	}
	return b.String()
}

// scanJob reads one row of jobCols's columns, and then of extra's.
func scanJob(rows pgx.Rows, intern *store.Interner, extra ...any) (*store.Job, error) {
	j := new(store.Job)
	var state int16
	var typ, key, ref string
	var attempts, needs []byte
	var priority, attempt, allowed int32
	dest := append([]any{&j.ID, &state, &typ, &key, &ref, &priority, &j.Submitted, &j.NotBefore, &j.StartBy,
		&attempt, &allowed, &j.Started, &j.Finished, &j.Err, &attempts, &j.After, &needs, &j.Stood}, extra...)
	if err := rows.Scan(dest...); err != nil {
		return nil, err
	}
	j.State, j.Priority, j.Attempt, j.Allowed = store.State(state), int(priority), int(attempt), int(allowed)
	j.Type, j.Key, j.Ref = intern.Of(typ), intern.Of(key), intern.Of(ref)
	if j.State == store.Queued && j.Started != 0 { // an attempt started
		j.State = store.Running
	}
	if len(attempts) > 0 {
		if err := json.Unmarshal(attempts, &j.Attempts); err != nil {
			return nil, fmt.Errorf("job %d: its attempts: %w", j.ID, err)
		}
	}
	if len(j.After) == 0 {
		j.After = nil
	}
	if needs != nil {
		if err := json.Unmarshal(needs, &j.Needs); err != nil {
			return nil, fmt.Errorf("job %d: the resources it needs: %w", j.ID, err)
		}
		if j.Needs == nil {
			j.Needs = map[string]int{} // none: not its type's
		}
	}
	return j, nil
}

// schedulePrefix begins the names of the states of durable periodic
// schedules (the run-time layer's ScheduleStateName): they are kept in
// fairsched_schedules, under the schedule's name, the others in
// fairsched_state.
const schedulePrefix = "schedule:"

// stateTable returns the table and row name of the state called name.
func stateTable(name string) (table, row string) {
	if s, ok := strings.CutPrefix(name, schedulePrefix); ok {
		return "fairsched_schedules", s
	}
	return "fairsched_state", name
}

// State is for the scheduler: it returns the value last put under name,
// PutState's of before the call included: it waits for what was posted
// first, so that a scheduler started on a Store another one used reads
// what that one left, its last pauses among them.
func (st *Store) State(ctx context.Context, name string) ([]byte, error) {
	return st.state(ctx, st.w, name)
}

// state is State, after what was posted to w: the Store's writer, or a
// term's view's (termjobs.go).
func (st *Store) state(ctx context.Context, w *writer, name string) ([]byte, error) {
	if err := w.flush(); err != nil {
		return nil, fmt.Errorf("fairschedpg: a write before reading the state %q failed: %w", name, err)
	}
	table, row := stateTable(name)
	var v []byte
	err := st.read(ctx, func(b *pgx.Batch) {
		b.Queue(`SELECT value FROM `+table+` WHERE name = $1`, row).QueryRow(func(r pgx.Row) error {
			err := r.Scan(&v)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("fairschedpg: reading the state %q: %w", name, err)
	}
	return v, nil
}

// commitUnknown wraps err, the failure of a transaction whose COMMIT was
// sent, in ErrCommitUnknown when the server did not answer it: a
// connection lost after the send, a timeout.
func commitUnknown(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) || pgconn.SafeToRetry(err) {
		return err // the server refused it, or nothing was sent
	}
	return fmt.Errorf("%w: %w", ErrCommitUnknown, err)
}

var (
	_ store.Store      = (*Store)(nil)
	_ store.EndsReader = (*Store)(nil)
)
