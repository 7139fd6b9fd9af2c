package fairschedpg

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fairsched/fairsched/fairschedpg/internal/cluster"
	"github.com/fairsched/fairsched/internal/decide"
	"github.com/fairsched/fairsched/internal/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The Store's side of many replicas (store.Cluster), for maintainers: the
// lease, the registry and the links of internal/cluster, on the Store's
// pool and schema. Their statements run as the Store's own do (timed): each
// in a transaction of its own, READ COMMITTED, under the statement timeout,
// sent with its BEGIN and COMMIT in one round trip, so that a fenced write
// holds the lease's row no longer than that round trip. A Link has a
// connection of its own, with the pool's settings and the same timeout.
// A Leadership is one Lease, acquired once: it never acquires again, so
// once its term is over every call of it fails with ErrFenced.
//
// Its Jobs is the term's view of the durable jobs (termjobs.go), made at
// the first call, one per term: it reads as the Store does, and writes
// through a writer of its own whose every transaction is fenced by the
// term (qFence, writer.go: the lease row held FOR KEY SHARE to the commit,
// nothing committed once the term is over), and its Watch takes, from
// the snapshot of its Recover on, the jobs every replica's Store inserts
// unseen (watch.go, take.go). Its
// Close closes that writer and stops that watching, never the Store.

var (
	_ store.Cluster     = (*Store)(nil)
	_ store.ClosingLink = (*cluster.Link)(nil)
)

// Register is for the scheduler's replicas (store.Cluster): it records
// replica name, live, with capacity slots (at least 1), its
// configuration's fingerprint and its lease, or fails with an error
// wrapping store.ErrConfigMismatch if a live replica, its registration
// not lapsed, has another fingerprint.
func (st *Store) Register(ctx context.Context, name string, capacity int, fingerprint string, lease time.Duration) error {
	return cluster.Register(ctx, timed{st}, name, capacity, fingerprint, lease)
}

// Heartbeat is for the scheduler's replicas: it records that replica name
// is alive, or fails with an error wrapping store.ErrReplicaDead (declared
// dead, or its registration lapsed) or store.ErrNotRegistered.
func (st *Store) Heartbeat(ctx context.Context, name string) error {
	return cluster.Heartbeat(ctx, timed{st}, name)
}

// Deregister is for the scheduler's replicas: it removes replica name.
func (st *Store) Deregister(ctx context.Context, name string) error {
	return cluster.Deregister(ctx, timed{st}, name)
}

// Replicas is for the scheduler's replicas: it returns every replica
// registered, by name.
func (st *Store) Replicas(ctx context.Context) ([]store.ReplicaRecord, error) {
	rs, err := cluster.Replicas(ctx, timed{st})
	if err != nil {
		return nil, err
	}
	out := make([]store.ReplicaRecord, len(rs))
	for i, r := range rs {
		out[i] = store.ReplicaRecord{Name: r.ID, Capacity: r.Capacity, Live: r.Live, Incarnation: r.Registered}
	}
	return out, nil
}

// Campaign is for the scheduler's replicas: it makes replica name the
// leader for ttl (at least 1 ms) if the lease is free or lapsed, and
// returns its leadership; nil, with no error, if another holds it.
func (st *Store) Campaign(ctx context.Context, name string, ttl time.Duration) (store.Leadership, error) {
	lease, err := cluster.NewLease(timed{st}, name, ttl)
	if err != nil {
		return nil, err
	}
	won, err := lease.Acquire(ctx)
	if err != nil || !won {
		return nil, err
	}
	term, _ := lease.Term()
	return &leadership{st: st, lease: lease, term: uint64(term)}, nil
}

// ReplicaLink is for the scheduler's replicas: replica name's Link, which
// listens before it returns. Close it before the Store.
func (st *Store) ReplicaLink(ctx context.Context, name string, recv decide.Receiver) (store.ClosingLink, error) {
	return st.link(ctx, name, recv, nil, nil)
}

// AppendChange is for the scheduler's replicas: it appends body, a change
// of the configuration of fingerprint made at run time, to the cluster's
// log of them, and returns its number. Appends commit in the order of
// their numbers (internal/cluster, changes.go, says how).
func (st *Store) AppendChange(ctx context.Context, fingerprint string, body []byte) (int64, error) {
	return cluster.AppendChange(ctx, timed{st}, fingerprint, body)
}

// Changes is for the scheduler's replicas: the changes of the cluster's
// log of the configuration of fingerprint numbered after after, in order.
func (st *Store) Changes(ctx context.Context, fingerprint string, after int64) ([]store.ChangeRecord, error) {
	return cluster.Changes(ctx, timed{st}, fingerprint, after)
}

// link makes a Link on the Store's pool and schema; a leader's if lease
// is not nil.
func (st *Store) link(ctx context.Context, name string, recv decide.Receiver, lease *cluster.Lease, onFenced func()) (store.ClosingLink, error) {
	l, err := cluster.NewLink(ctx, cluster.LinkConfig{
		Pool: st.pool, Schema: st.schema, Replica: name,
		Lease: lease, OnFenced: onFenced,
		Receiver: recv, StatementTimeout: st.o.StatementTimeout,
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// leadership is a store.Leadership: one term of a Lease.
type leadership struct {
	st    *Store
	lease *cluster.Lease
	term  uint64 // the term won; the Lease's own says whether it still holds it

	jobsOnce sync.Once
	jobs     *termJobs // Jobs': made at its first call
}

func (l *leadership) Term() uint64 { return l.term }

func (l *leadership) Renew(ctx context.Context) error { return l.lease.Renew(ctx) }

func (l *leadership) Sweep(ctx context.Context, lapse time.Duration) ([]string, error) {
	return cluster.Sweep(ctx, l.lease, timed{l.st}, lapse)
}

func (l *leadership) StepDown(ctx context.Context) error { return l.lease.StepDown(ctx) }

// Link makes the leader's Link, or fails with ErrFenced if the term is
// known to be over already.
func (l *leadership) Link(ctx context.Context, recv decide.Receiver, onFenced func()) (store.ClosingLink, error) {
	if _, held := l.lease.Term(); !held {
		return nil, fmt.Errorf("%w (%s's term %d)", store.ErrFenced, l.lease.Holder(), l.term)
	}
	return l.st.link(ctx, l.lease.Holder(), recv, l.lease, onFenced)
}

// timed is the cluster.Querier the Store gives internal/cluster: each
// statement runs in a transaction of its own, as the Store's do (begin),
// sent with its BEGIN and COMMIT in one round trip.
type timed struct{ st *Store }

func (q timed) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br, end, err := q.st.send(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	return tag, end(err)
}

// SendBatch runs b's statements in one transaction of their own, as a
// statement's: Close reads the COMMIT's result and releases the
// connection.
func (q timed) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	br, end, err := q.st.sendAll(ctx, b.QueuedQueries)
	if err != nil {
		return failedBatch{err}
	}
	return &timedBatch{BatchResults: br, end: end}
}

func (q timed) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return timedRow{st: q.st, ctx: ctx, sql: sql, args: args}
}

func (q timed) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br, end, err := q.st.send(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		rows.Close()
		return nil, end(err)
	}
	return &timedRows{Rows: rows, end: end}, nil
}

// timedRow is a row of timed's: its statement runs when it is scanned.
type timedRow struct {
	st   *Store
	ctx  context.Context
	sql  string
	args []any
}

func (r timedRow) Scan(dest ...any) error {
	br, end, err := r.st.send(r.ctx, r.sql, r.args)
	if err != nil {
		return err
	}
	return end(br.QueryRow().Scan(dest...))
}

// timedBatch is a batch's results of timed's: once closed, the
// transaction ends, and Close says how.
type timedBatch struct {
	pgx.BatchResults
	end  func(error) error
	done bool
	err  error
}

func (b *timedBatch) Close() error {
	if !b.done {
		b.done = true
		b.err = b.end(nil)
	}
	return b.err
}

// failedBatch is the results of a batch that was not sent: each is err.
type failedBatch struct{ err error }

func (b failedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b failedBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b failedBatch) QueryRow() pgx.Row                { return failedRow(b) }
func (b failedBatch) Close() error                     { return b.err }
func (b failedBatch) Tx() pgx.Tx                       { return nil }

type failedRow struct{ err error }

func (r failedRow) Scan(...any) error { return r.err }

// timedRows are rows of timed's: once read, or closed, the transaction
// ends, and Err says how.
type timedRows struct {
	pgx.Rows
	end  func(error) error
	done bool
	err  error
}

func (r *timedRows) Next() bool {
	if r.done {
		return false
	}
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *timedRows) Close() {
	if r.done {
		return
	}
	r.done = true
	r.Rows.Close()
	r.err = r.end(r.Rows.Err())
}

func (r *timedRows) Err() error {
	if r.done {
		return r.err
	}
	return r.Rows.Err()
}

// send sends sql in a transaction of its own (begin), in one round trip,
// and returns its results past the BEGIN and the timeout's setting, with
// end: given the error of reading sql's result (nil: none), end reads the
// COMMIT's, releases the connection, and returns the first error. A
// client-side error of the reading (pgx.ErrNoRows) comes back as it is:
// the transaction committed.
func (st *Store) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, func(error) error, error) {
	return st.sendAll(ctx, []*pgx.QueuedQuery{{SQL: sql, Arguments: args}})
}

// sendAll is send for several statements, in one transaction.
func (st *Store) sendAll(ctx context.Context, queries []*pgx.QueuedQuery) (pgx.BatchResults, func(error) error, error) {
	ctx, cancel := st.stmtCtx(ctx)
	conn, err := st.pool.Acquire(ctx)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	b := &pgx.Batch{}
	st.begin(b, false)
	b.QueuedQueries = append(b.QueuedQueries, queries...)
	b.Queue("COMMIT")
	br := conn.SendBatch(ctx, b)
	end := func(err error) error {
		defer cancel()
		defer conn.Release() // a connection left in a transaction is destroyed, not reused
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if conn.Conn().PgConn().TxStatus() != 'I' {
			conn.Exec(ctx, "ROLLBACK")
		}
		return err
	}
	for range 2 { // BEGIN, the timeout
		if _, err := br.Exec(); err != nil {
			return nil, nil, end(err)
		}
	}
	return br, end, nil
}
