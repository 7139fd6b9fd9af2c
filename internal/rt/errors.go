package rt

import (
	"errors"
	"fmt"
	"time"
)

// The errors the run-time layer returns, by identity; the API re-exports
// each under the same name, with its documentation.
var (
	ErrNotDead         = errors.New("fairsched: no such dead job")
	ErrDependency      = errors.New("fairsched: a job it runs after did not complete")
	ErrDisabled        = errors.New("fairsched: disabled")
	ErrArgs            = errors.New("fairsched: job arguments")
	ErrNoHandler       = errors.New("fairsched: no handler for the job type")
	ErrTxNotSupported  = errors.New("fairsched: the Store takes no transaction of this type")
	ErrKept            = errors.New("fairsched: the durable job stays in the store for the next start")
	ErrLost            = errors.New("fairsched: lost: the process running the attempt ended")
	ErrUnknownResource = fmt.Errorf("fairsched: unknown resource")
	ErrTooMuch         = fmt.Errorf("fairsched: a job needs more units than a resource has")
	ErrPermanent       = errors.New("fairsched: permanent failure")
	ErrClosed          = errors.New("fairsched: scheduler closed")
	ErrQueueFull       = errors.New("fairsched: queue full")
	ErrStartDeadline   = errors.New("fairsched: start deadline passed")
	ErrWouldWait       = errors.New("fairsched: the job would have to wait")
	ErrBatchTooLarge   = errors.New("fairsched: batch too large")
	ErrSuperseded      = errors.New("fairsched: superseded by a newer submission of the same type and ID")
	ErrUnknownType     = errors.New("fairsched: unknown job type")
)

// Errors makes the errors whose types the API declares, and which this
// package cannot name: the API imports it, not the other way round. Each
// is made where the run-time layer meets what it reports, so that the
// error a job ended with is one value, kept, whoever reads it.
type Errors struct {
	// Panic is the error of the job seq whose function panicked with v.
	Panic func(seq uint64, v any, stack []byte) error
	// QueueFull is the refusal of a submission past an admission limit.
	QueueFull func(QueueFull) error
	// Dependency is the error of the job seq that did not run because
	// the job dep it runs after ended with err.
	Dependency func(seq, dep uint64, err error) error
	// Batch is the error of a batch (EnqueueMany, SubmitMany) that the
	// job at index of it failed with err.
	Batch func(index int, err error) error
}

// QueueFull says which admission limit a submission hit.
type QueueFull struct {
	KeyLimit    bool // the key's MaxPending, not MaxQueue
	Key         string
	Limit, Size int
	Wait        time.Duration // the refused job's estimated wait
}

// batchError is the error of a batch that a job of it failed, until it
// leaves this package: then the API's Errors.Batch gives it the API's type
// (apiError); a batch of one (Enqueue) returns the job's own error
// (unbatched).
type batchError struct {
	index int // of the job in the batch
	err   error
}

func (e *batchError) Error() string { return e.err.Error() } // never shown: see apiError
func (e *batchError) Unwrap() error { return e.err }

// api returns err as the API gives it to its caller.
func (e *Errors) api(err error) error {
	if be, ok := err.(*batchError); ok {
		return e.Batch(be.index, be.err)
	}
	return err
}

// errUnknownType is the error of a job whose type name is not registered.
func errUnknownType(name string) error { return fmt.Errorf("%w %q", ErrUnknownType, name) }
