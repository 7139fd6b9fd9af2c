package fairschedpg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/fairsched/fairsched/fairschedpg/internal/cluster"
	"github.com/fairsched/fairsched/internal/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The writer commits every write of the Store in groups (store.Batcher),
// one transaction at a time: the writes that queued during one
// transaction share the next one's commit, and its round trips. A
// transaction is one pipelined batch of statements, BEGIN to COMMIT: one
// round trip, two when it inserts jobs (the states written with them
// need their IDs first).

// maxBatch bounds the requests of one transaction, so that a burst of
// writes never holds its rows' locks for long.
const maxBatch = 1000

// writes are the Store's methods that queue its writes (internal/store).
type writes = store.Writes

// maxRows bounds the rows of one multi-row statement.
const maxRows = 1000

// writer applies requests, one transaction at a time.
type writer struct {
	st *Store
	// lease, if set, fences every transaction by its term (termjobs.go):
	// the writer of a leader's view of the jobs.
	lease   *cluster.Lease
	b       *store.Batcher[*store.Request]
	commits atomic.Int64 // transactions committed, for the tests
	// What applyAll sorts a transaction's requests into, kept for reuse.
	groups store.Groups
}

func newWriter(st *Store, lease *cluster.Lease) *writer {
	w := &writer{st: st, lease: lease}
	w.b = store.NewBatcher(maxBatch, w.apply)
	return w
}

func (w *writer) do(r *store.Request) error { return w.b.Do(r) }

func (w *writer) post(r *store.Request) { w.b.Post(r) }
func (w *writer) flush() error          { return w.b.Flush() }
func (w *writer) close() error          { return w.b.Close() }

// errNotQueued is a Start's error for a job that is not queued in the
// store: it ended, or its attempt runs already.
var errNotQueued = errors.New("fairschedpg: the job is not queued in the store")

// The statements of the writer. Many rows go in one statement as arrays
// (unnest), whatever their number: one statement text, prepared once per
// connection.
const (
	// insertCols and insertRows insert jobs from arrays, in their order,
	// so that their IDs, assigned in the order the rows are inserted,
	// come back (RETURNING) in it too.
	insertCols = `(state, type, key, ref, priority, submitted, not_before, start_by, args, after, needs, unseen)`
	insertRows = `
SELECT 1, t.type, t.key, t.ref, t.priority, t.submitted, t.not_before, t.start_by, t.args, t.after::bigint[], t.needs::jsonb, $11::boolean
FROM unnest($1::text[], $2::text[], $3::text[], $4::integer[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bytea[], $9::text[], $10::text[])
	WITH ORDINALITY AS t(type, key, ref, priority, submitted, not_before, start_by, args, after, needs, n)
ORDER BY t.n
RETURNING id`
	qInsert = `INSERT INTO fairsched_jobs ` + insertCols + insertRows

	qStart = `UPDATE fairsched_jobs j SET attempt = j.attempt + 1, started = s.at
FROM unnest($1::bigint[], $2::bigint[]) AS s(id, at)
WHERE j.id = ANY($1) AND j.id = s.id AND j.state = 1 AND j.started = 0
RETURNING j.id, j.args`
	qComplete = `UPDATE fairsched_jobs j SET state = 3, finished = s.at, error = NULL, started = 0
FROM unnest($1::bigint[], $2::bigint[]) AS s(id, at) WHERE j.id = s.id`
	// An attempt that ended is appended to attempts when the op carries
	// one; $1 is its JSON or NULL.
	qRetry = `UPDATE fairsched_jobs SET state = 1, not_before = $2, started = 0, stood = $4,
	attempts = CASE WHEN $1::jsonb IS NULL THEN attempts ELSE coalesce(attempts, '[]'::jsonb) || jsonb_build_array($1::jsonb) END
WHERE id = $3`
	qEnd = `UPDATE fairsched_jobs SET state = $2, finished = $3, error = $4, started = 0,
	attempts = CASE WHEN $1::jsonb IS NULL THEN attempts ELSE coalesce(attempts, '[]'::jsonb) || jsonb_build_array($1::jsonb) END
WHERE id = $5`
	qInterrupt = `UPDATE fairsched_jobs SET attempt = attempt - 1, started = 0 WHERE id = $1 AND state = 1 AND started <> 0`
	qRequeue   = `UPDATE fairsched_jobs SET state = 1, allowed = $1, finished = 0, error = NULL, not_before = 0 WHERE id = $2`
	qPriority  = `UPDATE fairsched_jobs SET priority = $1 WHERE id = $2`
	qClock     = `UPDATE fairsched_jobs SET submitted = $1, stood = $2 WHERE id = $3`
	// qPrune deletes up to $3 jobs that finished before $1 (completed,
	// ended) or died before $2 (0: none).
	qPrune = `DELETE FROM fairsched_jobs WHERE id IN (
	(SELECT id FROM fairsched_jobs WHERE state >= 3 AND state <= 4 AND finished < $1 LIMIT $3)
	UNION ALL
	(SELECT id FROM fairsched_jobs WHERE state = 5 AND finished < $2 LIMIT $3)
	LIMIT $3)`
)

// qFence begins a transaction of a leader's view of the jobs
// (termjobs.go): it holds the lease row FOR KEY SHARE, so that a successor's
// campaign waits for the transaction, and divides by zero, aborting the
// transaction, unless the lease is still in term $1, held by $2 and not
// lapsed by the database's clock. The writer sends a transaction as one
// pipelined batch, so the fence must fail it from SQL: once a statement
// fails, the server skips the rest of the batch, COMMIT included, and
// the writer rolls back. A division by zero does that with no function
// of our own in the schema: a plpgsql function that raised would need a
// migration, and a new schema version stops every replica still on the
// old one in a rolling upgrade (internal/schema). The divisor is a count
// the planner cannot fold, and no other statement of a writer divides,
// so the error's code (isFenceError) is the fence's alone.
const qFence = `SELECT 1 / (SELECT count(*)::int FROM (
	SELECT term FROM fairsched_leader WHERE term = $1 AND holder = $2 AND expires > clock_timestamp() FOR KEY SHARE) f)`

// qFenceRead is qFence for a read, which a successor need not wait for
// and which locks nothing: it divides by zero unless the lease is still
// in term $1, held by $2 and not lapsed, in the reading transaction's
// snapshot.
const qFenceRead = `SELECT 1 / (SELECT count(*)::int FROM fairsched_leader WHERE term = $1 AND holder = $2 AND expires > clock_timestamp())`

// isFenceError reports whether err is qFence's refusal (or qFenceRead's).
func isFenceError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "22012" // division_by_zero: no other statement of a writer divides
}

// fenced wraps fail, the failure of a transaction fenced by term, so
// that qFence's refusal is ErrFenced.
func (w *writer) fenced(term int64, fail func(error) error) func(error) error {
	if w.lease == nil {
		return fail
	}
	return func(err error) error {
		if isFenceError(err) {
			fail(err)
			return w.fenceError(term)
		}
		return fail(err)
	}
}

// fenceError is the error of a transaction qFence refused in term; the
// lease holds nothing from then.
func (w *writer) fenceError(term int64) error {
	w.lease.Lost(term)
	return fmt.Errorf("%w (%s's term %d: a write of an ended term)", store.ErrFenced, w.lease.Holder(), term)
}

// putState is the statement that puts a state in table.
func putState(table string) string {
	return `INSERT INTO ` + table + ` (name, value) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated = now()`
}

// apply applies rs in one transaction.
func (w *writer) apply(rs []*store.Request) error {
	st := w.st
	if err := st.watch.lost(); err != nil {
		return err
	}
	var term int64 // the term that fences the transaction, if the writer is a term's
	if w.lease != nil {
		var held bool
		if term, held = w.lease.Term(); !held {
			return fmt.Errorf("%w (%s holds no lease)", store.ErrFenced, w.lease.Holder())
		}
	}
	ctx, cancel := st.stmtCtx(context.Background())
	defer cancel()
	conn, err := st.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("fairschedpg: %w", err)
	}
	defer conn.Release() // a connection left in a transaction is destroyed, not reused
	fail := w.fenced(term, func(err error) error {
		conn.Exec(ctx, "ROLLBACK")
		return fmt.Errorf("fairschedpg: %w", err)
	})
	b := &pgx.Batch{}
	st.begin(b, false)
	if w.lease != nil {
		b.Queue(qFence, term, w.lease.Holder())
	}
	store.MarkOverwritten(rs)
	var jobs []*store.Job
	for _, r := range rs {
		if r.Kind == store.Insert {
			jobs = append(jobs, r.Jobs...)
		}
	}
	if len(jobs) > 0 {
		// First every insert (no other request can name a job not yet
		// inserted), then the states written with them, which need
		// their IDs.
		// A replica's jobs are the leader's to take (watch.go): unseen,
		// and the leader's watcher told, as for a caller's transaction.
		unseen := st.shared && w.lease == nil
		queueInsert(b, qInsert, unseen, jobs)
		if unseen {
			b.Queue(`SELECT pg_notify($1, '')`, st.watch.channel) // sent at the commit
		}
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			return fail(err)
		}
		b = &pgx.Batch{}
		for _, r := range rs {
			if r.Kind == store.Insert && r.State != nil && !r.Overwritten {
				table, row := stateTable(r.State.Name)
				b.Queue(putState(table), row, r.State.Value(r.Jobs))
			}
		}
	}
	w.queueRest(b, rs)
	b.Queue("COMMIT")
	ctx2, cancel2 := st.stmtCtx(context.Background()) // a round trip of its own
	defer cancel2()
	if err := conn.SendBatch(ctx2, b).Close(); err != nil {
		conn.Exec(ctx2, "ROLLBACK")
		if w.lease != nil && isFenceError(err) {
			return w.fenceError(term)
		}
		return fmt.Errorf("fairschedpg: %w", commitUnknown(err))
	}
	w.commits.Add(1)
	return nil
}

// queueInsert queues the insert of jobs with q, maxRows per statement,
// and assigns their IDs when the results are read; unseen marks them as
// inserted in a caller's transaction.
func queueInsert(b *pgx.Batch, q string, unseen bool, jobs []*store.Job) {
	for len(jobs) > 0 {
		n := min(len(jobs), maxRows)
		chunk := jobs[:n]
		b.Queue(q, insertArgs(chunk, unseen)...).Query(func(rows pgx.Rows) error { return scanIDs(rows, chunk) })
		jobs = jobs[n:]
	}
}

// insertArgs returns the arrays of qInsert's columns for jobs.
func insertArgs(jobs []*store.Job, unseen bool) []any {
	n := len(jobs)
	types, keys, refs := make([]string, n), make([]string, n), make([]string, n)
	prios := make([]int32, n)
	submitted, notBefore, startBy := make([]int64, n), make([]int64, n), make([]int64, n)
	args := make([][]byte, n)
	after, needs := make([]*string, n), make([]*string, n)
	for i, j := range jobs {
		types[i], keys[i], refs[i], prios[i] = j.Type, j.Key, j.Ref, int32(j.Priority)
		submitted[i], notBefore[i], startBy[i] = j.Submitted, j.NotBefore, j.StartBy
		args[i] = j.Args
		if args[i] == nil {
			args[i] = []byte{}
		}
		after[i], needs[i] = afterOf(j), needsOf(j)
	}
	return []any{types, keys, refs, prios, submitted, notBefore, startBy, args, after, needs, unseen}
}

// scanIDs gives jobs, in order, the IDs an insert returned.
func scanIDs(rows pgx.Rows, jobs []*store.Job) error {
	i := 0
	for rows.Next() {
		if i == len(jobs) {
			return errors.New("an insert returned more rows than it was given")
		}
		if err := rows.Scan(&jobs[i].ID); err != nil {
			return err
		}
		i++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if i != len(jobs) {
		return fmt.Errorf("an insert returned %d IDs for %d jobs", i, len(jobs))
	}
	return nil
}

// afterOf returns j's after column as an array literal, or nil (NULL)
// for none.
func afterOf(j *store.Job) *string {
	if len(j.After) == 0 {
		return nil
	}
	b := []byte{'{'}
	for i, id := range j.After {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	s := string(append(b, '}'))
	return &s
}

// needsOf returns j's needs column, JSON, or nil (NULL) for its type's.
func needsOf(j *store.Job) *string {
	if j.Needs == nil {
		return nil
	}
	b, _ := json.Marshal(j.Needs) // names and integers: cannot fail
	s := string(b)
	return &s
}

// queueRest queues every request of rs but the inserts, in the groups
// of store.Groups.
func (w *writer) queueRest(b *pgx.Batch, rs []*store.Request) {
	w.groups.Apply(rs,
		func(rs []*store.Request) error { queueStarts(b, rs); return nil },
		func(rs []*store.Request) error { queueCompletes(b, rs); return nil },
		func(r *store.Request) error { queueOne(b, r); return nil })
}

// queueStarts queues the starts rs, maxRows per statement; each request
// gets its job's arguments, or errNotQueued, when the results are read.
// The store counts attempts itself (attempt + 1, as the scheduler does).
func queueStarts(b *pgx.Batch, rs []*store.Request) {
	for len(rs) > 0 {
		n := min(len(rs), maxRows)
		chunk := append([]*store.Request(nil), rs[:n]...)
		ids, ats := make([]int64, n), make([]int64, n)
		for i, r := range chunk {
			ids[i], ats[i] = r.Op.ID, r.Op.At
			r.Args, r.Err = nil, nil
		}
		b.Queue(qStart, ids, ats).Query(func(rows pgx.Rows) error {
			waiting := make(map[int64]*store.Request, len(chunk))
			for _, r := range chunk {
				waiting[r.Op.ID] = r
			}
			for rows.Next() {
				var id int64
				var a []byte
				if err := rows.Scan(&id, &a); err != nil {
					return err
				}
				if r := waiting[id]; r != nil {
					r.Args = a
				}
			}
			if err := rows.Err(); err != nil {
				return err
			}
			for _, r := range chunk {
				if r.Args == nil { // no row came back
					r.Err = fmt.Errorf("%w: job %d", errNotQueued, r.Op.ID)
				}
			}
			return nil
		})
		rs = rs[n:]
	}
}

// queueCompletes queues the completions rs (ops without an attempt to
// append), maxRows per statement.
func queueCompletes(b *pgx.Batch, rs []*store.Request) {
	for len(rs) > 0 {
		n := min(len(rs), maxRows)
		ids, ats := make([]int64, n), make([]int64, n)
		for i, r := range rs[:n] {
			ids[i], ats[i] = r.Op.ID, r.Op.At
		}
		b.Queue(qComplete, ids, ats)
		rs = rs[n:]
	}
}

// queueOne queues a request other than an insert, a start or a plain
// completion.
func queueOne(b *pgx.Batch, r *store.Request) {
	switch r.Kind {
	case store.Apply:
		queueOp(b, &r.Op)
	case store.Put:
		if r.Overwritten {
			return
		}
		table, row := stateTable(r.Name)
		b.Queue(putState(table), row, r.Value)
	case store.Prune:
		r.Pruned = 0
		b.Queue(qPrune, r.Op.At, r.Op.NotBefore, store.PruneBatch).Exec(func(ct pgconn.CommandTag) error {
			r.Pruned = ct.RowsAffected()
			return nil
		})
	}
}

func queueOp(b *pgx.Batch, op *store.Op) {
	var attempt *string // NULL: no attempt to append
	if op.Attempt.Start != 0 {
		j, _ := json.Marshal(op.Attempt) // integers and a string: cannot fail
		s := string(j)
		attempt = &s
	}
	var why *string // NULL: none
	if op.Err != "" {
		why = &op.Err
	}
	switch op.Kind {
	case store.OpRetry:
		b.Queue(qRetry, attempt, op.NotBefore, op.ID, op.Stood)
	case store.OpComplete:
		b.Queue(qEnd, attempt, int16(store.Completed), op.At, why, op.ID)
	case store.OpEnd:
		b.Queue(qEnd, attempt, int16(store.Ended), op.At, why, op.ID)
	case store.OpDead:
		b.Queue(qEnd, attempt, int16(store.Dead), op.At, why, op.ID)
	case store.OpInterrupt:
		b.Queue(qInterrupt, op.ID)
	case store.OpRequeue:
		b.Queue(qRequeue, int32(op.Allowed), op.ID)
	case store.OpPriority:
		b.Queue(qPriority, int32(op.Allowed), op.ID)
	case store.OpClock:
		b.Queue(qClock, op.At, op.Stood, op.ID)
	default:
		kind := op.Kind
		b.Queue(`SELECT 1`).Exec(func(pgconn.CommandTag) error { return fmt.Errorf("unknown op %d", kind) })
	}
}
