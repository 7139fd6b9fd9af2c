package fairschedsqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/fairsched/fairsched/internal/store"
)

// The writer owns one connection and commits every write through it, in
// groups (store.Batcher): SQLite has one writer at a time anyway, and one
// transaction for all the writes that queued during the last one shares
// its commit, and its fsync at synchronous=FULL.

// maxBatch bounds the requests of one transaction, so that a burst of
// writes never holds the write lock for long.
const maxBatch = 1000

// writes are the Store's methods that queue its writes (internal/store).
type writes = store.Writes

// writer applies requests on its connection.
type writer struct {
	conn    *sql.Conn
	stmts   map[string]*sql.Stmt
	b       *store.Batcher[*store.Request]
	commits atomic.Int64         // transactions committed, for the benchmarks
	watch   *watcher             // told of the IDs the writer inserts
	ids     []int64              // the IDs inserted by the transaction being applied
	multi   map[[2]int]*sql.Stmt // multi.go: by kind and row count
	// What applyAll sorts a transaction's requests into, kept for reuse.
	jobs   []*store.Job
	groups store.Groups
}

func newWriter(ctx context.Context, db *sql.DB, o Options) (*writer, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("fairschedsqlite: %w", err)
	}
	// Per connection: given in Open's DSN, not in OpenDB's.
	pragmas := fmt.Sprintf("PRAGMA busy_timeout = %d; PRAGMA synchronous = %s", o.BusyTimeout.Milliseconds(), o.Synchronous)
	if _, err := conn.ExecContext(ctx, pragmas); err != nil {
		conn.Close()
		return nil, fmt.Errorf("fairschedsqlite: %w", err)
	}
	w := &writer{conn: conn, stmts: make(map[string]*sql.Stmt)}
	for _, q := range statements {
		st, err := conn.PrepareContext(ctx, q)
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("fairschedsqlite: preparing %q: %w", q, err)
		}
		w.stmts[q] = st
	}
	w.b = store.NewBatcher(maxBatch, w.apply)
	return w, nil
}

func (w *writer) do(r *store.Request) error { return w.b.Do(r) }

func (w *writer) post(r *store.Request) { w.b.Post(r) }
func (w *writer) flush() error          { return w.b.Flush() }

func (w *writer) close() error {
	err := w.b.Close()
	for _, st := range w.stmts {
		st.Close()
	}
	for _, st := range w.multi {
		st.Close()
	}
	if cerr := w.conn.Close(); err == nil {
		err = cerr
	}
	return err
}

// The statements of the writer, prepared once on its connection; qInsert
// is the insert of one row in a caller's transaction (InsertTx): the
// writer inserts rows together (multi.go).
const (
	qInsert = `INSERT INTO fairsched_jobs (state, type, key, ref, priority, submitted, not_before, start_by, args, after, needs)
VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`
	// An attempt that ended is appended to attempts when the op carries
	// one; ?1 is its JSON or NULL.
	qRetry = `UPDATE fairsched_jobs SET state = 1, not_before = ?2, started = 0, stood = ?4,
	attempts = CASE WHEN ?1 IS NULL THEN attempts ELSE json_insert(coalesce(attempts, '[]'), '$[#]', json(?1)) END
WHERE id = ?3`
	qEnd = `UPDATE fairsched_jobs SET state = ?2, finished = ?3, error = ?4, started = 0,
	attempts = CASE WHEN ?1 IS NULL THEN attempts ELSE json_insert(coalesce(attempts, '[]'), '$[#]', json(?1)) END
WHERE id = ?5`
	qInterrupt = `UPDATE fairsched_jobs SET attempt = attempt - 1, started = 0 WHERE id = ? AND state = 1 AND started != 0`
	qRequeue   = `UPDATE fairsched_jobs SET state = 1, allowed = ?, finished = 0, error = NULL, not_before = 0 WHERE id = ?`

	// qPrune deletes up to ?3 jobs that finished before ?1 (completed,
	// ended) or died before ?2 (0: none). "state >= 3" lets SQLite use
	// the partial index on finished.
	qPrune = `DELETE FROM fairsched_jobs WHERE id IN (
	SELECT id FROM fairsched_jobs WHERE state >= 3 AND state <= 4 AND finished < ?1
	UNION ALL
	SELECT id FROM fairsched_jobs WHERE state >= 3 AND state = 5 AND finished < ?2
	LIMIT ?3)`
	qPriority = `UPDATE fairsched_jobs SET priority = ? WHERE id = ?`
	qClock    = `UPDATE fairsched_jobs SET submitted = ?, stood = ? WHERE id = ?`
	qPutState = `INSERT INTO fairsched_state (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value`
	qBegin    = `BEGIN IMMEDIATE`
	qCommit   = `COMMIT`
	qRollback = `ROLLBACK`
)

var statements = []string{qRetry, qEnd, qInterrupt, qRequeue, qPriority, qClock, qPrune, qPutState, qBegin, qCommit, qRollback}

// errNotQueued is a Start's error for a job that is not queued in the
// store: it ended, or another process took it.
var errNotQueued = errors.New("fairschedsqlite: the job is not queued in the store")

// apply applies rs in one transaction. The transaction is begun and
// committed by statements on the writer's own connection rather than
// through database/sql's Tx, whose Stmt would prepare every statement
// again in every transaction: SQL parsing was a third of the writer's
// time.
func (w *writer) apply(rs []*store.Request) error {
	ctx := context.Background()
	if _, err := w.stmts[qBegin].ExecContext(ctx); err != nil {
		return fmt.Errorf("fairschedsqlite: %w", err)
	}
	w.ids = w.ids[:0]
	if err := w.applyAll(ctx, rs); err != nil {
		w.stmts[qRollback].ExecContext(ctx)
		return fmt.Errorf("fairschedsqlite: %w", err)
	}
	var inserted func(bool)
	if len(w.ids) > 0 {
		inserted = w.watch.inserting(w.ids) // before they can be seen
	}
	_, err := w.stmts[qCommit].ExecContext(ctx)
	if err != nil {
		w.stmts[qRollback].ExecContext(ctx) // a failed COMMIT may leave the transaction open
	}
	if inserted != nil {
		inserted(err == nil)
	}
	if err != nil {
		return fmt.Errorf("fairschedsqlite: commit: %w", err)
	}
	w.commits.Add(1)
	return nil
}

// applyAll applies rs: first every insert (no other request can name a
// job not yet inserted), in one statement per maxRows jobs; then the
// other requests in the groups of store.Groups (multi.go writes a group
// in one statement).
func (w *writer) applyAll(ctx context.Context, rs []*store.Request) error {
	store.MarkOverwritten(rs)
	w.jobs = w.jobs[:0]
	for _, r := range rs {
		if r.Kind == store.Insert {
			w.jobs = append(w.jobs, r.Jobs...)
		}
	}
	if len(w.jobs) > 0 {
		err := w.insertAll(ctx, w.jobs)
		clear(w.jobs)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.Kind == store.Insert && r.State != nil && !r.Overwritten {
				if _, err := w.stmts[qPutState].ExecContext(ctx, r.State.Name, r.State.Value(r.Jobs)); err != nil {
					return err
				}
			}
		}
	}
	return w.groups.Apply(rs,
		func(rs []*store.Request) error { return w.startAll(ctx, rs) },
		func(rs []*store.Request) error { return w.completeAll(ctx, rs) },
		func(r *store.Request) error { return w.applyOne(ctx, r) })
}

// applyOne applies a request other than an insert (applyAll inserts
// first, all together).
func (w *writer) applyOne(ctx context.Context, r *store.Request) error {
	switch r.Kind {
	case store.Apply:
		return w.applyOp(ctx, &r.Op)
	case store.Put:
		if r.Overwritten {
			return nil
		}
		_, err := w.stmts[qPutState].ExecContext(ctx, r.Name, r.Value)
		return err
	case store.Prune:
		res, err := w.stmts[qPrune].ExecContext(ctx, r.Op.At, r.Op.NotBefore, store.PruneBatch)
		if err != nil {
			return err
		}
		r.Pruned, err = res.RowsAffected()
		return err
	}
	return nil
}

func (w *writer) applyOp(ctx context.Context, op *store.Op) error {
	var attempt any // NULL: no attempt to append
	if op.Attempt.Start != 0 {
		b, err := json.Marshal(op.Attempt)
		if err != nil {
			return err
		}
		attempt = string(b)
	}
	var why any // NULL: none
	if op.Err != "" {
		why = op.Err
	}
	var err error
	switch op.Kind {
	case store.OpRetry:
		_, err = w.stmts[qRetry].ExecContext(ctx, attempt, op.NotBefore, op.ID, op.Stood)
	case store.OpComplete:
		_, err = w.stmts[qEnd].ExecContext(ctx, attempt, store.Completed, op.At, why, op.ID)
	case store.OpEnd:
		_, err = w.stmts[qEnd].ExecContext(ctx, attempt, store.Ended, op.At, why, op.ID)
	case store.OpDead:
		_, err = w.stmts[qEnd].ExecContext(ctx, attempt, store.Dead, op.At, why, op.ID)
	case store.OpInterrupt:
		_, err = w.stmts[qInterrupt].ExecContext(ctx, op.ID)
	case store.OpRequeue:
		_, err = w.stmts[qRequeue].ExecContext(ctx, op.Allowed, op.ID)
	case store.OpPriority:
		_, err = w.stmts[qPriority].ExecContext(ctx, op.Allowed, op.ID)
	case store.OpClock:
		_, err = w.stmts[qClock].ExecContext(ctx, op.At, op.Stood, op.ID)
	default:
		err = fmt.Errorf("unknown op %d", op.Kind)
	}
	return err
}

// afterOf returns j's after column: JSON, or NULL for none.
func afterOf(j *store.Job) any {
	if len(j.After) == 0 {
		return nil
	}
	b, _ := json.Marshal(j.After) // integers: cannot fail
	return string(b)
}

// insertArgs returns the values of qInsert, and of each row of a
// multi-row insert, for j.
func insertArgs(j *store.Job) []any {
	return []any{j.Type, j.Key, j.Ref, j.Priority, j.Submitted, j.NotBefore, j.StartBy, j.Args, afterOf(j), needsOf(j)}
}

// needsOf returns j's needs column: JSON, or NULL for its type's.
func needsOf(j *store.Job) any {
	if j.Needs == nil {
		return nil
	}
	b, _ := json.Marshal(j.Needs) // names and integers: cannot fail
	return string(b)
}

// decodeAttempts reads a job's attempts column.
func decodeAttempts(b []byte, into *[]store.Attempt) error { return json.Unmarshal(b, into) }
