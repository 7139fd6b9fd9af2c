package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/fairsched/fairsched/internal/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier is what the functions here need of a database: a
// *pgxpool.Pool, a *pgx.Conn or a pgx.Tx (a fenced write then joins the
// caller's transaction).
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ErrFenced is returned for a leader's write, or a renewal, refused
// because its term is over: the lease lapsed, or another replica took
// it. The replica must step down: stop granting, and rebuild nothing
// from what it holds in memory. It is the store interface's error, so
// that the caller, written for any database, tells it by errors.Is.
var ErrFenced = store.ErrFenced

// Lease is one replica's side of the leader's lease: whether it holds
// it, in which term, and until when by its own clock. Its methods are
// safe for concurrent use.
type Lease struct {
	db     Querier
	holder string
	ttl    time.Duration

	mu    sync.Mutex
	term  int64     // the term held; 0: none
	until time.Time // the lease held is safe to act on until then, by this process's monotonic clock
}

// NewLease returns holder's side of the lease, holding nothing yet. ttl
// is how long an acquisition or a renewal holds it (at least 1 ms).
func NewLease(db Querier, holder string, ttl time.Duration) (*Lease, error) {
	if holder == "" {
		return nil, errors.New("fairschedpg: a lease needs a holder's name")
	}
	if ttl < time.Millisecond {
		return nil, fmt.Errorf("fairschedpg: a lease's time must be at least 1ms, not %v", ttl)
	}
	return &Lease{db: db, holder: holder, ttl: ttl}, nil
}

// Holder returns the name of the replica the Lease is for.
func (l *Lease) Holder() string { return l.holder }

// Term returns the term held, and false if none is.
func (l *Lease) Term() (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.term, l.term != 0
}

// Until returns the instant, by this process's clock, before which the
// lease held is certainly still this replica's: the start of the last
// acquisition or renewal that succeeded, plus the lease's time. The
// zero time if none is held. A leader stops granting, and cancels what
// it runs, before then (self-fencing).
func (l *Lease) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// Acquire takes the lease if it is free or has lapsed, in the term after
// the last, and reports whether it did; false, with no error, if another
// replica holds it. A replica that holds it already keeps its term.
func (l *Lease) Acquire(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, l.ttl)
	defer cancel()
	if _, held := l.Term(); held {
		if err := l.Renew(ctx); err == nil {
			return true, nil
		} else if !errors.Is(err, ErrFenced) {
			return false, err
		}
	}
	start := time.Now()
	var term int64
	err := l.db.QueryRow(ctx, qCampaign, l.holder, l.ttl).Scan(&term)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("fairschedpg: acquiring the leader's lease: %w", err)
	}
	l.mu.Lock()
	l.term, l.until = term, start.Add(l.ttl)
	l.mu.Unlock()
	return true, nil
}

// Renew extends the lease held by its time from now. It fails with
// ErrFenced, and the Lease holds nothing from then, if it holds none,
// or if its term is over: another replica took it, or it lapsed (a
// lapsed lease is never renewed, even if no one took it: its holder
// acquires it again, in a new term).
func (l *Lease) Renew(ctx context.Context) error {
	term, held := l.Term()
	if !held {
		return fmt.Errorf("%w (%s holds no lease)", ErrFenced, l.holder)
	}
	ctx, cancel := context.WithTimeout(ctx, l.ttl)
	defer cancel()
	start := time.Now()
	tag, err := l.db.Exec(ctx, `
UPDATE fairsched_leader
SET expires = clock_timestamp() + $3::interval
WHERE term = $1 AND holder = $2 AND expires > clock_timestamp()`, term, l.holder, l.ttl)
	if err != nil {
		return fmt.Errorf("fairschedpg: renewing the leader's lease: %w", err)
	}
	if tag.RowsAffected() == 0 {
		l.lost(term)
		return fmt.Errorf("%w (%s's term %d)", ErrFenced, l.holder, term)
	}
	l.mu.Lock()
	if l.term == term {
		l.until = start.Add(l.ttl)
	}
	l.mu.Unlock()
	return nil
}

// StepDown gives the lease up, so that another replica can take it at
// once. The Lease holds nothing from then, even if the statement fails
// (the lease then lapses in its time).
func (l *Lease) StepDown(ctx context.Context) error {
	term, held := l.Term()
	if !held {
		return nil
	}
	l.lost(term)
	_, err := l.db.Exec(ctx, `
UPDATE fairsched_leader SET expires = '-infinity'
WHERE term = $1 AND holder = $2`, term, l.holder)
	if err != nil {
		return fmt.Errorf("fairschedpg: stepping down: %w", err)
	}
	return nil
}

// Lost records that term is over, as a write fenced otherwise than by
// Returning found (a transaction that checks the lease itself): the
// Lease holds nothing from then, if term was the one it held.
func (l *Lease) Lost(term int64) { l.lost(term) }

// lost records that term is over.
func (l *Lease) lost(term int64) {
	l.mu.Lock()
	if l.term == term {
		l.term, l.until = 0, time.Time{}
	}
	l.mu.Unlock()
}

// qCampaign takes the lease for holder $1, for $2, if it has lapsed. It
// locks the row FOR UPDATE first, which waits for every fenced
// transaction of the predecessor (each holds the row FOR KEY SHARE to its
// commit), so that the new term's reads see what they wrote; the UPDATE
// alone changes no key, and would not wait for them. A renewal that
// committed meanwhile is seen by both: the row is then not taken.
const qCampaign = `WITH held AS MATERIALIZED (
	SELECT one FROM fairsched_leader WHERE expires <= clock_timestamp() FOR UPDATE
)
UPDATE fairsched_leader
SET term = term + 1, holder = $1, expires = clock_timestamp() + $2::interval
WHERE expires <= clock_timestamp() AND EXISTS (SELECT FROM held)
RETURNING term`

// fenceCTE is the head of a fenced statement: the lease row, if it is
// still in term $1, held by $2 and not lapsed by the database's clock,
// locked FOR KEY SHARE until the statement's transaction ends, so that a
// replica taking the lease over waits for the write, and then sees it.
const fenceCTE = `WITH fence AS MATERIALIZED (
	SELECT term FROM fairsched_leader
	WHERE term = $1 AND holder = $2 AND expires > clock_timestamp()
	FOR KEY SHARE
), w AS (
`

// Fenced is the condition that a fenced statement's WHERE includes:
// true only while the lease is the leader's, in its term.
const Fenced = `EXISTS (SELECT FROM fence)`

// Returning runs stmt, a write (UPDATE, DELETE, INSERT ... SELECT) that
// ends with a RETURNING clause of one column, fenced by l's term, and
// returns the values its rows returned. stmt's WHERE must include
// Fenced, and its parameters start at $3 ($1 and $2 are the term and
// the holder): it writes nothing unless the lease is l's, in its term,
// unlapsed, and then Returning fails with ErrFenced and l holds nothing
// from then. The check and the write are one statement.
func Returning[T any](ctx context.Context, l *Lease, q Querier, stmt string, args ...any) ([]T, error) {
	if !strings.Contains(stmt, Fenced) {
		return nil, errors.New("fairschedpg: a fenced statement must include the fence's condition in its WHERE")
	}
	term, held := l.Term()
	if !held {
		return nil, fmt.Errorf("%w (%s holds no lease)", ErrFenced, l.holder)
	}
	var ok bool
	var out []T
	err := q.QueryRow(ctx, fenceCTE+stmt+`
)
SELECT EXISTS (SELECT FROM fence), ARRAY(SELECT * FROM w)`, append([]any{term, l.holder}, args...)...).Scan(&ok, &out)
	if err != nil {
		return nil, fmt.Errorf("fairschedpg: a leader's write: %w", err)
	}
	if !ok {
		l.lost(term)
		return nil, fmt.Errorf("%w (%s's term %d)", ErrFenced, l.holder, term)
	}
	return out, nil
}

// Exec is Returning for a statement without a RETURNING clause: it
// returns how many rows stmt wrote.
func Exec(ctx context.Context, l *Lease, q Querier, stmt string, args ...any) (int64, error) {
	rows, err := Returning[int32](ctx, l, q, stmt+" RETURNING 1", args...)
	return int64(len(rows)), err
}
