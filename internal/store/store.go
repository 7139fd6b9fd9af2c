// Package store defines what a scheduler records of its durable jobs, and
// the interface a store (the SQLite one in fairschedsqlite, later a
// PostgreSQL one) implements for it. It is internal so that the interface
// can grow with the second store without a change of public API.
//
// The store records; it never decides. The scheduler's engine stays the
// one dispatcher: it reads every unfinished job at start (Recover), and
// from then on tells the store what happened to each job, in the order it
// happened. A job's arguments stay on disk until an attempt starts
// (Start returns them).
//
// Writes are batched (Batcher): calls that must not return before their
// record is committed (Insert, Start) wait for the transaction that holds
// them; the others (Post) are applied in order in the next one, and Flush
// waits for them.
package store

import (
	"context"
	"errors"
)

// State is where a durable job is in its life, as stored.
type State uint8

const (
	Queued    State = 1 // waiting: queued, delayed, or backing off before a retry (NotBefore)
	Running   State = 2 // an attempt started, and was committed before its handler ran (a store may keep it as Queued with Started set)
	Completed State = 3 // the last attempt succeeded
	Ended     State = 4 // ended without completing and is not dead: cancelled, expired, a dependency failed
	Dead      State = 5 // failed for good; kept until retried by hand or pruned
)

// Finished reports whether a job in state s will never run again by
// itself.
func (s State) Finished() bool { return s >= Completed }

// Job is the record of one durable job. Times are in µs since the Unix
// epoch, of the wall clock; 0 means none.
type Job struct {
	ID        int64  // assigned by the store at Insert, never reused
	Type      string // the handler's name
	Key       string // fairness key
	Ref       string // fairsched.Job.ID: the resource it acts on
	Priority  int    // as given to Enqueue: 0 means the type's default
	Submitted int64  // when it was first enqueued, moved on by the time it stood paused (OpClock): its aging clock runs from here
	NotBefore int64  // not to start before; after a failed attempt, the end of its backoff
	StartBy   int64  // start deadline
	State     State
	// Attempts are the attempts made: Attempt is how many started, the
	// last one perhaps still running (or lost, when read by Recover).
	Attempt  int
	Attempts []Attempt
	Started  int64   // the last attempt's start, while it runs
	Allowed  int     // attempts allowed in all, if a retry by hand set it; 0: the type's policy
	After    []int64 // the jobs it runs after
	// Needs are the units of resources it needs in place of its type's,
	// by resource name; nil: its type's, empty: none.
	Needs map[string]int
	// Stood is the paused time of its lane (its key and type: µs either
	// was paused, from an origin of the lane's) when it was last set aside
	// with its aging clock running (a retry's backoff, waiting for the
	// jobs it runs after) or its clock moved (OpRetry, OpClock); 0: none
	// kept. A restart moves a job still set aside on by what its lane
	// stood since.
	Stood    int64
	Finished int64  // when it ended, if it did
	Err      string // why it ended, if it did not complete
	Args     []byte // the handler's arguments, JSON: given to Insert, returned by Start
}

// StateWrite is a state to put together with jobs (Insert): Value is
// called with them once they have their IDs.
type StateWrite struct {
	Name  string
	Value func(jobs []*Job) []byte
}

// Attempt is one finished attempt of a job.
type Attempt struct {
	Start int64  `json:"start"`
	End   int64  `json:"end"`
	Err   string `json:"err,omitempty"` // "" for success
}

// OpKind says what a posted operation records.
type OpKind uint8

const (
	OpRetry     OpKind = iota + 1 // an attempt failed; queued again, not before Op.NotBefore
	OpComplete                    // the last attempt succeeded
	OpEnd                         // ended without completing, not dead (Op.Err says why)
	OpDead                        // failed for good
	OpInterrupt                   // the attempt was cut short by Close: queued again, the attempt not counted
	OpRequeue                     // a dead job queued again by hand, Op.Allowed attempts allowed in all
	OpPriority                    // its priority rose to Op.Allowed (a duplicate joined it)
	OpClock                       // a pause moved its aging clock's start (Job.Submitted) on to Op.At; or, set aside at Enqueue, Job.Stood is Op.Stood
)

// Op records one thing that happened to job ID, posted after the fact.
type Op struct {
	Kind      OpKind
	ID        int64
	At        int64   // when it happened; OpClock: its new submission time
	NotBefore int64   // OpRetry: when the next attempt may start
	Stood     int64   // OpRetry, OpClock: Job.Stood
	Attempt   Attempt // the attempt that ended, if one did (Start 0: none)
	Err       string  // OpEnd, OpDead: why
	Allowed   int     // OpRequeue; OpPriority: the priority
}

// EndsReader is a Store that reads how many jobs are in one call.
type EndsReader interface {
	// Ends calls fn with how each job of ids is, as Ended says, in any
	// order.
	Ends(ctx context.Context, ids []int64, fn func(id int64, state State, why string, found bool)) error
}

// Store is what a scheduler needs of a durable store. Its methods are safe
// for concurrent use.
type Store interface {
	// Recover calls fn, in ID order, with every job not finished; the
	// jobs Recover reads carry no Args. It is called once, before any
	// other method but Close.
	Recover(ctx context.Context, fn func(*Job) error) error
	// HasDependencies reports whether an unfinished job runs after
	// others (Job.After): Recover's caller then keeps an index of the
	// jobs it reads.
	HasDependencies(ctx context.Context) (bool, error)
	// Ended returns how job id ended: its state and, if it did not
	// complete, why; found is false if the store no longer has it.
	Ended(ctx context.Context, id int64) (state State, why string, found bool, err error)
	// Dead calls fn with the dead jobs, newest first, at most limit of
	// them, without their arguments.
	Dead(ctx context.Context, limit int, fn func(*Job) error) error
	// Insert stores jobs, assigning their IDs, and returns once they
	// are committed; on error none is stored. With a non-nil state, it
	// also puts state's name and value, computed once the jobs have
	// their IDs, in the same transaction (as PutState would).
	Insert(ctx context.Context, state *StateWrite, jobs ...*Job) error
	// Start records that an attempt of job id starts at at (the store
	// counts the job's attempts: one more), and returns the job's
	// arguments once that is committed. It fails for a job that is not
	// queued, or whose attempt runs already.
	Start(ctx context.Context, id int64, at int64) ([]byte, error)
	// Post records op after every op posted before it, in a transaction
	// to come; it does not wait.
	Post(op Op)
	// PutState records value under name, in place of what was there, as
	// Post does: state the scheduler keeps beside its jobs.
	PutState(name string, value []byte)
	// State returns the value last put under name, nil if none.
	State(ctx context.Context, name string) ([]byte, error)
	// Flush waits until every op posted before it is committed, and
	// returns the first error of their transactions since the last Flush.
	Flush(ctx context.Context) error
	// Close flushes and releases the store. The scheduler that uses the
	// store does not close it: its opener does.
	Close() error
}

// TxInserter is a Store that can insert jobs inside a transaction of the
// caller's, of type Tx (a *sql.Tx for a database/sql store): the jobs
// exist if and only if that transaction commits. A job inserted so is
// not the scheduler's until the store sees it committed: it calls the
// function given to Watch with it then.
type TxInserter[Tx any] interface {
	Watcher
	// InsertTx inserts jobs in tx, assigning their IDs.
	InsertTx(ctx context.Context, tx Tx, jobs ...*Job) error
}

// Watcher is a Store that tells of jobs committed by transactions other
// than its own (TxInserter).
type Watcher interface {
	// Watch makes the store call arrived, from a goroutine of its own,
	// with each job that InsertTx inserted, once its transaction has
	// committed, each job after the jobs committed before its own
	// transaction began (so after any it runs after), and those of one
	// look in ID order; without its arguments; until Watch is
	// called again (nil: no one). Once Watch returns, the callback it
	// replaced is not called again (Watch waits for a call in progress:
	// it must not be called from the callback). Called after Recover: the
	// jobs it read are known.
	Watch(arrived func(*Job)) error
}

// Swapper is a Store that several schedulers share (replicas): it can
// write a state only if the state still holds the value its caller read,
// so that of the replicas that keep one durable schedule, one enqueues
// each occurrence. The swap is a transaction of its own, not one of the
// store's grouped commits: a swap that finds another value fails alone.
type Swapper interface {
	// SwapInsert inserts jobs (none: it only puts the state), assigning
	// their IDs, and puts state.Value(jobs) under state.Name, in one
	// transaction, if the value under that name is old (nil: none);
	// otherwise it writes nothing and reports false.
	SwapInsert(ctx context.Context, state *StateWrite, old []byte, jobs ...*Job) (bool, error)
}

// Reviver is a Store that several schedulers share (replicas): a dead
// job is the database's, not one scheduler's, and any replica may queue
// it again, for the leader to take as it takes a job a replica inserted
// (Watcher).
type Reviver interface {
	// Revive queues dead job id again, with one more attempt allowed
	// than it made, submitted at submitted (its aging clock starts
	// there) and to start by startBy (0: no deadline), and tells the
	// watcher of the moment, as an insert of a replica's does. It reports
	// false, and changes nothing, if the job is not dead (queued again
	// already, or pruned).
	Revive(ctx context.Context, id, submitted, startBy int64) (bool, error)
}

// ErrClosed is returned by a store's methods after Close.
var ErrClosed = errors.New("fairsched: store closed")
