package fairschedsqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/fairsched/fairsched/internal/store"
)

// The writer owns one connection and commits every write through it, in
// groups (store.Batcher): SQLite has one writer at a time anyway, and one
// transaction for all the writes that queued during the last one shares
// its commit, and its fsync at synchronous=FULL.

// maxBatch bounds the requests of one transaction, so that a burst of
// writes never holds the write lock for long.
const maxBatch = 1000

type reqKind uint8

const (
	reqInsert reqKind = iota + 1
	reqStart
	reqOp
)

// request is one write, and, once applied, its result.
type request struct {
	kind    reqKind
	jobs    []*store.Job // reqInsert
	op      store.Op     // reqOp; reqStart: ID and At
	attempt int          // reqStart
	args    []byte       // reqStart: the job's arguments
	err     error        // reqStart: the job was not queued
}

// writer applies requests on its connection.
type writer struct {
	conn  *sql.Conn
	stmts map[string]*sql.Stmt
	b     *store.Batcher[*request]
}

func newWriter(ctx context.Context, db *sql.DB) (*writer, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
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

func (w *writer) do(r *request) error { return w.b.Do(r) }
func (w *writer) post(r *request)     { w.b.Post(r) }
func (w *writer) flush() error        { return w.b.Flush() }

func (w *writer) close() error {
	err := w.b.Close()
	for _, st := range w.stmts {
		st.Close()
	}
	if cerr := w.conn.Close(); err == nil {
		err = cerr
	}
	return err
}

// The statements of the writer, prepared once on its connection.
const (
	qInsert = `INSERT INTO fairsched_jobs (state, type, key, ref, priority, submitted, not_before, start_by, args)
VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`
	qStart = `UPDATE fairsched_jobs SET state = 2, attempt = ?, started = ? WHERE id = ? AND state = 1 RETURNING args`
	// An attempt that ended is appended to attempts when the op carries
	// one; ?1 is its JSON or NULL.
	qRetry = `UPDATE fairsched_jobs SET state = 1, not_before = ?2, started = 0,
	attempts = CASE WHEN ?1 IS NULL THEN attempts ELSE json_insert(coalesce(attempts, '[]'), '$[#]', json(?1)) END
WHERE id = ?3`
	qEnd = `UPDATE fairsched_jobs SET state = ?2, finished = ?3, error = ?4, started = 0,
	attempts = CASE WHEN ?1 IS NULL THEN attempts ELSE json_insert(coalesce(attempts, '[]'), '$[#]', json(?1)) END
WHERE id = ?5`
	qInterrupt = `UPDATE fairsched_jobs SET state = 1, attempt = attempt - 1, started = 0 WHERE id = ? AND state = 2`
	qRequeue   = `UPDATE fairsched_jobs SET state = 1, allowed = ?, finished = 0, error = NULL, not_before = 0 WHERE id = ?`
)

var statements = []string{qInsert, qStart, qRetry, qEnd, qInterrupt, qRequeue}

// errNotQueued is a Start's error for a job that is not queued in the
// store: it ended, or another process took it.
var errNotQueued = errors.New("fairschedsqlite: the job is not queued in the store")

// apply applies rs in one transaction.
func (w *writer) apply(rs []*request) error {
	ctx := context.Background()
	tx, err := w.conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("fairschedsqlite: %w", err)
	}
	for _, r := range rs {
		if err := w.applyOne(ctx, tx, r); err != nil {
			tx.Rollback()
			return fmt.Errorf("fairschedsqlite: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("fairschedsqlite: commit: %w", err)
	}
	return nil
}

func (w *writer) applyOne(ctx context.Context, tx *sql.Tx, r *request) error {
	stmt := func(q string) *sql.Stmt { return tx.StmtContext(ctx, w.stmts[q]) }
	switch r.kind {
	case reqInsert:
		ins := stmt(qInsert)
		for _, j := range r.jobs {
			if err := ins.QueryRowContext(ctx, j.Type, j.Key, j.Ref, j.Priority, j.Submitted, j.NotBefore, j.StartBy,
				j.Args).Scan(&j.ID); err != nil {
				return err
			}
		}
	case reqStart:
		err := stmt(qStart).QueryRowContext(ctx, r.attempt, r.op.At, r.op.ID).Scan(&r.args)
		if errors.Is(err, sql.ErrNoRows) {
			r.err = fmt.Errorf("%w: job %d", errNotQueued, r.op.ID)
			return nil
		}
		return err
	case reqOp:
		return w.applyOp(ctx, stmt, &r.op)
	}
	return nil
}

func (w *writer) applyOp(ctx context.Context, stmt func(string) *sql.Stmt, op *store.Op) error {
	var attempt any // NULL: no attempt to append
	if op.Attempt.Start != 0 {
		b, err := json.Marshal(op.Attempt)
		if err != nil {
			return err
		}
		attempt = string(b)
	}
	var err error
	switch op.Kind {
	case store.OpRetry:
		_, err = stmt(qRetry).ExecContext(ctx, attempt, op.NotBefore, op.ID)
	case store.OpComplete, store.OpEnd, store.OpDead:
		state := map[store.OpKind]store.State{store.OpComplete: store.Completed, store.OpEnd: store.Ended, store.OpDead: store.Dead}[op.Kind]
		var why any
		if op.Err != "" {
			why = op.Err
		}
		_, err = stmt(qEnd).ExecContext(ctx, attempt, state, op.At, why, op.ID)
	case store.OpInterrupt:
		_, err = stmt(qInterrupt).ExecContext(ctx, op.ID)
	case store.OpRequeue:
		_, err = stmt(qRequeue).ExecContext(ctx, op.Allowed, op.ID)
	default:
		err = fmt.Errorf("unknown op %d", op.Kind)
	}
	return err
}

// decodeAttempts reads a job's attempts column.
func decodeAttempts(b []byte, into *[]store.Attempt) error { return json.Unmarshal(b, into) }
