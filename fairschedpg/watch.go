package fairschedpg

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/fairsched/fairsched/fairschedpg/internal/cluster"
	"github.com/fairsched/fairsched/internal/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Jobs enqueued in a caller's transaction (InsertTx) are not the
// scheduler's until that transaction commits, and only the database knows
// when it does. Unlike SQLite's one writer at a time, PostgreSQL's
// transactions commit in any order, their IDs taken from a sequence
// before: a committed job's ID may be below one still uncommitted, or one
// rolled back, so no cursor over IDs can tell which jobs are new. A
// cursor over snapshots can: InsertTx inserts its jobs unseen (a column),
// and each row keeps the transaction that inserted it (xid, the column's
// default). A snapshot tells which transactions had committed when it
// was taken: all below its xmin but those in progress, none from its xmax
// on, and of those between, all but its in-progress list (xip). So the
// jobs new since a snapshot known are the unseen rows whose xid is one
// known did not show, that is at or past known's xmax or in its xip list:
// an index on (xid, id) (partial, on the unseen unfinished rows) finds
// them in a few probes (take.go), whatever transactions stay open
// meanwhile (a transaction open for hours slows no look: its own jobs are
// read when it commits, and no other's twice).
//
// Recover reads every unfinished job in one snapshot (REPEATABLE READ)
// and keeps it; each of the watcher's looks then reads, in a snapshot of
// its own (to), the unseen jobs that to shows and known did not, in pages
// (each in ID order when handed on), and hands them on; once a page comes
// back short, to becomes known. A job is thus handed on once whatever the order transactions
// commit in, and a look writes nothing: where it once cleared a mark on
// each job it took (a row write a job, on the path of every replica's
// insert), it now only reads. The cursor is the watcher's, in memory; a
// new term, or a new Store, begins with its own Recover. After the
// server restarts, a Store of one process reads again the jobs its
// cursor had not handed on (restart.go).
//
// InsertTx also sends a notification in the caller's transaction,
// which the server delivers only if that transaction commits: the
// watcher's session listens, and looks at once. A notification can be
// missed (the session's connection drops, and the server forgets what it
// would have sent on it), so the watcher also looks every PollInterval,
// and after every reconnection.
//
// The session is also what keeps one Store per schema: it holds a
// session-level advisory lock from Open to Close. A connection that
// drops releases the lock once the server notices (connect ends the last
// session's backend if it has not); the watcher reconnects and takes the
// lock again, and if another Store took it meanwhile, every write of this
// one fails from then on (ErrInUse).
//
// What the lock protects is the one-process mode's premise: the Store's
// scheduler is the only one on the schema, so a job found running at
// Recover was its dead predecessor's (a lost attempt, started again), the
// jobs of callers' transactions are all its own to take, and its writes
// need no fence. Many replicas on one schema keep none of that; they
// have the leader's lease, its term's fence and the registry instead. A
// replica's Store (shared) therefore takes the same lock shared: any
// number of replicas' Stores hold it together, and a Store of one process
// is refused while any does, as they are while it does (ErrInUse either
// way). OpenReplica and OpenReplicaPool open a replica's Store.
//
// With replicas, the durable jobs are the leader's, whichever replica
// inserts them: the leader of each term keeps them (termjobs.go). A
// replica's Store therefore inserts every job of its own (Insert, through
// its writer) unseen, and sends the notification in the same
// transaction, exactly as InsertTx does in a caller's (writer.go): the
// leader's watcher takes it at once. A Store of one process inserts its
// own jobs seen, its scheduler having them already, and so does a term's
// view (the leader inserting). A replica's Store does not watch for
// itself: the leader's term's view sets this watcher (Watch on the view),
// with its lease and the snapshot of its Recover. A take needs no fence:
// it writes nothing, so a leader whose term is over can drop no job its
// successor's Recover would not read; it takes nothing once its Lease
// knows the term is over. A view that stops watching stops only its own
// watching (unset), not a later term's on the same Store.

// takeBatch is the most unseen jobs one look takes.
const takeBatch = 1000

// storeLockKey is the first key of the Store's advisory lock, the
// second being the schema's name's hash: "fsst" in ASCII (Migrate's lock
// is another).
const storeLockKey = 0x66737374

type watcher struct {
	st      *Store
	channel string // the schema's notification channel

	// telling is held by a look from its read of arrived until it has
	// handed on what it took: Watch waits for it, so that the callback it
	// replaced is not called once it returns.
	telling sync.Mutex

	mu sync.Mutex
	// Guarded by mu.
	arrived func(*store.Job) // nil: no one watches
	// lease, if set, is the term whose view of the jobs watches
	// (termjobs.go): a take once its Lease knows the term is over takes
	// nothing.
	lease *cluster.Lease
	// cursor is where the takes have reached; since counts the cursors
	// set from a Recover, so that a look that began before one does not
	// put its own back.
	cursor  takeCursor
	since   uint64
	recover takeCursor // where the Store's last Recover left the takes, for its next Watch
	conn    *pgx.Conn  // the session; nil while it reconnects
	lostErr error      // the lock was taken by another Store while the session was down
	started bool
	again   bool               // look again before the next wait: Watch was called
	nudge   context.CancelFunc // ends the session's wait, for a look at once

	// last is the backend of the last session opened: its process ID
	// and start time. Only connect, on the loop's goroutine (or Open's,
	// before), touches it.
	last struct {
		pid   int32
		start time.Time
	}

	// Tests: called before each reconnection, and with its outcome.
	beforeReconnect func()
	afterReconnect  func(error)

	ctx    context.Context // ended by stop
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// channelOf returns the notification channel of schema: a name of at
// most 63 bytes, PostgreSQL's limit.
func channelOf(schema string) string {
	c := "fairsched_jobs:" + schema
	if len(c) > 63 {
		h := fnv.New64a()
		h.Write([]byte(schema))
		c = fmt.Sprintf("fairsched_jobs:%x", h.Sum64())
	}
	return c
}

// newWatcher opens the Store's session, takes its lock and listens.
func newWatcher(ctx context.Context, st *Store) (*watcher, error) {
	w := &watcher{st: st, channel: channelOf(st.schema)}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	conn, err := w.connect(ctx)
	if err != nil {
		w.cancel()
		return nil, err
	}
	w.conn = conn
	return w, nil
}

// connect opens a session: a connection of its own, outside the pool,
// with the pool's settings, that holds the lock and listens. It fails
// with ErrInUse if another Store holds the lock past the statement
// timeout (a process that died a moment ago holds it until the server
// notices).
//
// Reconnecting, the lock may still be held by this Store's own last
// session, whose connection the server has not yet seen drop (a network
// cut leaves it waiting for TCP's keepalive): connect ends that backend
// first, known by its process ID and start time, so that only another
// Store's session can keep the lock from this one.
func (w *watcher) connect(ctx context.Context) (*pgx.Conn, error) {
	st := w.st
	cfg := st.pool.Config().ConnConfig.Copy()
	ms := fmt.Sprint(st.o.StatementTimeout.Milliseconds())
	cfg.RuntimeParams["statement_timeout"] = ms
	cfg.RuntimeParams["lock_timeout"] = ms
	ctx, cancel := st.stmtCtx(ctx)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("fairschedpg: %w", err)
	}
	if w.last.pid != 0 {
		// Not allowed (another role's backend), or gone already: the
		// lock's wait says which.
		conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = $1 AND backend_start = $2`,
			w.last.pid, w.last.start)
	}
	lock := `SELECT pg_advisory_lock($1, hashtext($2))`
	if st.shared {
		lock = `SELECT pg_advisory_lock_shared($1, hashtext($2))`
	}
	_, err = conn.Exec(ctx, lock, storeLockKey, st.schema)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "57014") { // lock_not_available, query_canceled: the wait timed out
		conn.Close(context.Background())
		return nil, fmt.Errorf("%w (schema %q)", ErrInUse, st.schema)
	}
	if err == nil {
		_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{w.channel}.Sanitize())
	}
	if err == nil {
		err = conn.QueryRow(ctx, `SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()`).Scan(&w.last.pid, &w.last.start)
	}
	if err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("fairschedpg: %w", err)
	}
	return conn, nil
}

// lost returns the error every write fails with once the lock is lost.
func (w *watcher) lost() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lostErr
}

// Watch is for the scheduler: it calls arrived with each job a caller's
// transaction committed (InsertTx), from the Store's goroutine, until
// Watch is called again (nil: no one). Once Watch returns, the callback
// it replaced is not called again: Watch waits for a call in progress,
// so it must not be called from that callback.
func (st *Store) Watch(arrived func(*store.Job)) error {
	st.watch.mu.Lock()
	from := st.watch.recover
	st.watch.recover = takeCursor{}
	st.watch.mu.Unlock()
	st.watch.set(arrived, nil, from)
	st.watch.telling.Lock() // a look that read the callback replaced hands on what it took first
	st.watch.telling.Unlock()
	return nil
}

// recovered keeps from, where the Store's Recover left the takes, for
// its next Watch: the jobs its snapshot shows are the scheduler's.
func (w *watcher) recovered(from takeCursor) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.recover = from
}

// set makes the watcher hand the unseen jobs it takes to arrived (nil:
// no one), each take refused once lease's term is over if lease is not
// nil: the two together, so that no take of one term's is handed to
// another's. from, if it knows a snapshot, is where the Recover before
// left the takes: the jobs its snapshot shows are known, and the takes
// go on from it; else they go on from where the last took.
func (w *watcher) set(arrived func(*store.Job), lease *cluster.Lease, from takeCursor) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if arrived == nil {
		lease = nil
	}
	if from.known != "" {
		w.cursor = from
		w.since++
	}
	w.arrived, w.lease, w.again = arrived, lease, true
	if !w.started {
		w.started = true
		w.wg.Add(1)
		go w.loop()
	} else if w.nudge != nil {
		w.nudge()
	}
}

// unset stops the watching that lease fences, if it is the watching of
// the moment: a term's view that stops does not stop another's.
func (w *watcher) unset(lease *cluster.Lease) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lease == lease {
		w.arrived, w.lease = nil, nil
	}
}

// InsertTx is for the scheduler: it inserts jobs in the caller's
// transaction tx, on this Store's database, in the Store's schema
// whatever tx's search_path.
func (st *Store) InsertTx(ctx context.Context, tx pgx.Tx, jobs ...*store.Job) error {
	b := &pgx.Batch{}
	queueInsert(b, `INSERT INTO `+st.jobsTable+` `+insertCols+insertRows, true, jobs)
	b.Queue(`SELECT pg_notify($1, '')`, st.watch.channel) // sent if tx commits
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("fairschedpg: %w", err)
	}
	return nil
}

var _ store.TxInserter[pgx.Tx] = (*Store)(nil)

func (w *watcher) loop() {
	defer w.wg.Done()
	pause := 10 * time.Millisecond // between failed reconnections, doubling to PollInterval
	for {
		conn := w.session()
		if conn == nil {
			switch w.reconnect() {
			case stopped, lockLost:
				return
			case failed:
				select {
				case <-w.ctx.Done():
					return
				case <-time.After(pause):
				}
				pause = min(2*pause, w.st.o.PollInterval)
			}
			continue
		}
		pause = 10 * time.Millisecond
		w.look()
		err := w.wait(conn)
		switch {
		case w.ctx.Err() != nil:
			return
		case err != nil:
			conn.Close(context.Background())
			w.mu.Lock()
			w.conn = nil
			w.mu.Unlock()
		}
	}
}

// session returns the session's connection, nil if there is none.
func (w *watcher) session() *pgx.Conn {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.conn
}

// reconnection is how a reconnection ended.
type reconnection uint8

const (
	reconnected reconnection = iota // the session is open again, with its lock
	failed                          // try again
	lockLost                        // another Store holds the lock: this one writes no more
	stopped                         // the watcher stops
)

// reconnect tries once to open the session again.
func (w *watcher) reconnect() reconnection {
	if w.beforeReconnect != nil {
		w.beforeReconnect()
	}
	conn, err := w.connect(w.ctx)
	if w.afterReconnect != nil {
		defer w.afterReconnect(err) // once the outcome is in place
	}
	if w.ctx.Err() != nil {
		if conn != nil {
			conn.Close(context.Background())
		}
		return stopped
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case errors.Is(err, ErrInUse):
		w.lostErr = fmt.Errorf("%w: another Store took it while this one's session was down; this one writes no more", ErrInUse)
		return lockLost
	case err != nil:
		return failed
	}
	w.conn = conn
	return reconnected
}

// wait waits on conn for a notification, PollInterval at most, or a
// nudge; it returns an error if the connection failed.
func (w *watcher) wait(conn *pgx.Conn) error {
	ctx, cancel := context.WithTimeout(w.ctx, w.st.o.PollInterval)
	defer cancel()
	w.mu.Lock()
	if w.again {
		w.again = false
		w.mu.Unlock()
		return nil
	}
	w.nudge = cancel
	w.mu.Unlock()
	_, err := conn.WaitForNotification(ctx)
	w.mu.Lock()
	w.nudge = nil
	w.mu.Unlock()
	if err != nil && ctx.Err() != nil && !conn.IsClosed() {
		return nil // the time is up, or a nudge: look
	}
	return err
}

// look takes the unseen jobs and hands them on, in ID order, if someone
// watches. A failed look is tried again at the next.
func (w *watcher) look() {
	for w.lookOnce() {
	}
}

// lookOnce takes one page of unseen jobs and hands them on, if someone
// watches, holding telling from its read of the callback to its last
// call; it reports whether there may be more.
func (w *watcher) lookOnce() (more bool) {
	w.telling.Lock()
	defer w.telling.Unlock()
	w.mu.Lock()
	tell, lease, at, since := w.arrived, w.lease, w.cursor, w.since
	w.again = false
	w.mu.Unlock()
	if tell == nil {
		return false // the unseen jobs stay for the next start, or the next Watch
	}
	jobs, next, err := w.take(lease, at)
	if err != nil {
		return false
	}
	w.mu.Lock()
	if w.since == since { // no Recover's cursor replaced it meanwhile
		w.cursor = next
	}
	w.mu.Unlock()
	for _, j := range jobs {
		tell(j)
	}
	return next.to != ""
}

// stop ends the loop; the session stays, holding the lock, until
// release.
func (w *watcher) stop() {
	w.cancel()
	w.wg.Wait()
}

// release closes the session, which releases the lock.
func (w *watcher) release() {
	w.mu.Lock()
	conn := w.conn
	w.conn = nil
	w.mu.Unlock()
	if conn != nil {
		conn.Close(context.Background())
	}
}
