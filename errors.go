package fairsched

import (
	"fmt"
	"time"

	"github.com/fairsched/fairsched/internal/rt"
	"github.com/fairsched/fairsched/internal/store"
)

// The errors of the package, in one place: sentinels to match with
// errors.Is, and the types to read with errors.As.

// ErrClosed is returned for work submitted after Shutdown or Close began,
// and is the error of queued jobs that Close discarded.
var ErrClosed = rt.ErrClosed

// ErrQueueFull is matched (errors.Is) by the *QueueFullError a submission
// gets when it would pass MaxQueue or its key's MaxPending. A service maps
// it to HTTP 429 with a Retry-After header.
var ErrQueueFull = rt.ErrQueueFull

// ErrStartDeadline is matched (errors.Is) by the error of a job that did
// not start by its start deadline (Job.StartBy, TypeConfig.StartTimeout),
// and by the refusal of a job whose deadline could never be met.
var ErrStartDeadline = rt.ErrStartDeadline

// ErrWouldWait is returned by TryRunSync for a job that could not start at
// once. Nothing was queued.
var ErrWouldWait = rt.ErrWouldWait

// ErrUnknownType is returned, wrapped with the type's name, for a job whose
// type was never registered.
var ErrUnknownType = rt.ErrUnknownType

// ErrUnknownResource is matched (errors.Is) by the refusal of a job that
// needs a resource Config.Resources does not have.
var ErrUnknownResource = rt.ErrUnknownResource

// ErrTooMuch is matched (errors.Is) by the refusal of a job that needs
// more units of a resource than its capacity.
var ErrTooMuch = rt.ErrTooMuch

// ErrDisabled is matched (errors.Is) by the error of a submission whose
// (type, ID) pair is disabled by its type's DisablePolicy.
var ErrDisabled = rt.ErrDisabled

// ErrSuperseded is matched (errors.Is) by the error of a job replaced by
// a newer submission of its type and ID (DuplicatePolicy Supersede).
var ErrSuperseded = rt.ErrSuperseded

// ErrDependency is matched (errors.Is) by the error of a job that ended
// without running because a job it runs after (Job.After) did not
// complete. The error is a *DependencyError.
var ErrDependency = rt.ErrDependency

// ErrPermanent is matched (errors.Is) by an error made by Permanent: a
// job that returns one is not retried.
var ErrPermanent = rt.ErrPermanent

// ErrNotDead is returned by RetryDead for a sequence number that names no
// job in the dead list.
var ErrNotDead = rt.ErrNotDead

// ErrArgs is matched (errors.Is) by the error of arguments that cannot be
// encoded (Enqueue's) or that no longer decode (an attempt's, which fails
// with it).
var ErrArgs = rt.ErrArgs

// ErrNoHandler is matched (errors.Is) by Enqueue's error for a job type
// that has no handler.
var ErrNoHandler = rt.ErrNoHandler

// ErrKept is the error a durable job's Handle ends with when Shutdown or
// Close took the job out of memory before it could complete: the job did
// not fail, it stays in the Store and runs at the next start. (It is not
// ErrClosed, the error of work that Close discards.)
var ErrKept = rt.ErrKept

// ErrLost is the error of an attempt that was running when its process
// died: the next start finds it so and counts it as failed.
var ErrLost = rt.ErrLost

// ErrTxNotSupported is matched by EnqueueTx's error for a transaction of a
// type the Store does not take.
var ErrTxNotSupported = rt.ErrTxNotSupported

// ErrConfigMismatch is matched by New's error for a replica
// (Config.Replica) configured unlike the live replicas of its cluster:
// other limits, keys, job types or their policies, or another Lease. A
// replica killed without Close counts as live until its Lease lapsed. Its
// message names the replicas that differ.
var ErrConfigMismatch = store.ErrConfigMismatch

// ErrBatchTooLarge is matched (errors.Is) by SubmitMany's error for a
// batch of more than MaxBatch jobs. Nothing was submitted.
var ErrBatchTooLarge = rt.ErrBatchTooLarge

// QueueFullError reports which admission limit a submission hit: the
// queue's (Config.MaxQueue) or, with KeyLimit, its key's
// (KeyConfig.MaxPending; the empty key's too). The submission changed
// nothing.
type QueueFullError struct {
	KeyLimit bool   // the key's MaxPending was hit, not MaxQueue
	Key      string // the fairness key submitted for
	Limit    int    // the limit
	Size     int    // jobs pending under that limit
	// Wait is what EstimateWait said of the refused job as it was
	// refused: how long it would have waited had there been room. It may
	// be 0; RetryAfter turns it into an HTTP Retry-After.
	Wait time.Duration
}

// RetryAfter returns when to try again, for an HTTP Retry-After header
// (which counts whole seconds): Wait rounded up to a whole second, and at
// least one second, since a Retry-After of 0 asks the client to come back
// at once, into the same full queue. fairschedhttp answers its 429s with
// it; a service refusing its own submissions writes
//
//	w.Header().Set("Retry-After", strconv.Itoa(int(full.RetryAfter()/time.Second)))
func (e *QueueFullError) RetryAfter() time.Duration {
	d := e.Wait.Truncate(time.Second)
	if d < e.Wait {
		d += time.Second
	}
	return max(d, time.Second)
}

func (e *QueueFullError) Error() string {
	if e.KeyLimit {
		return fmt.Sprintf("fairsched: queue full: key %q has %d pending jobs (its MaxPending is %d)", e.Key, e.Size, e.Limit)
	}
	return fmt.Sprintf("fairsched: queue full: %d pending jobs (MaxQueue is %d)", e.Size, e.Limit)
}

// Is makes errors.Is(err, ErrQueueFull) true.
func (e *QueueFullError) Is(target error) bool { return target == ErrQueueFull }

// PanicError is the error of a job whose function panicked. The slot is
// released and the scheduler carries on. Its message is one line, safe
// to show to a client; the stack is in Stack, for the logs.
type PanicError struct {
	Seq   uint64 // the job's sequence number
	Value any    // what was passed to panic
	Stack []byte // the goroutine's stack at the panic
}

// Error says which job panicked and with what, in one line.
func (e *PanicError) Error() string {
	return fmt.Sprintf("fairsched: job %d panicked: %v", e.Seq, e.Value)
}

// Unwrap returns the value passed to panic if it is an error, so that
// errors.Is and errors.As see through a panic(err).
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// DependencyError is the error of a job that ended without running
// because Dep, a job it runs after, did not complete: it failed for good,
// was cancelled, missed its start deadline, or was itself ended so. It
// wraps Dep's error, so a chain of them leads to the first job that did
// not complete.
type DependencyError struct {
	Seq uint64 // the job that did not run
	Dep uint64 // the job it runs after that did not complete
	Err error  // Dep's error
}

func (e *DependencyError) Error() string {
	return fmt.Sprintf("fairsched: job %d runs after job %d, which did not complete: %v", e.Seq, e.Dep, e.Err)
}

// Unwrap returns the dependency's error.
func (e *DependencyError) Unwrap() error { return e.Err }

// Is reports whether target is ErrDependency.
func (e *DependencyError) Is(target error) bool { return target == ErrDependency }

// BatchError is the error of EnqueueMany and SubmitMany for one bad job
// of the batch: none was stored or submitted.
type BatchError struct {
	Index int // of the job in the batch
	Err   error
}

func (e *BatchError) Error() string {
	return fmt.Sprintf("fairsched: job %d of the batch: %v", e.Index, e.Err)
}

func (e *BatchError) Unwrap() error { return e.Err }

// runtimeErrors makes the errors of the API's types for the run-time
// layer.
var runtimeErrors = rt.Errors{
	Panic: func(seq uint64, v any, stack []byte) error { return &PanicError{Seq: seq, Value: v, Stack: stack} },
	QueueFull: func(f rt.QueueFull) error {
		return &QueueFullError{KeyLimit: f.KeyLimit, Key: f.Key, Limit: f.Limit, Size: f.Size, Wait: f.Wait}
	},
	Dependency: func(seq, dep uint64, err error) error { return &DependencyError{Seq: seq, Dep: dep, Err: err} },
	Batch:      func(index int, err error) error { return &BatchError{Index: index, Err: err} },
}
