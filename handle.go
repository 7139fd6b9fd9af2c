package fairsched

import (
	"context"

	"github.com/fairsched/fairsched/internal/rt"
)

// Handle refers to a job given to Submit: to wait for it, read its result
// or cancel it. It stays valid after the job has ended, for as long as it
// is kept. Handles are comparable; copies refer to the same job. Its
// methods are safe for concurrent use.
//
// The zero Handle refers to no job: Seq returns 0, Done a closed channel,
// Err and Wait an error saying so, and Cancel does nothing.
//
// The Handle of a durable job enqueued on a replica (Config.Replica) has
// the job's ID, and learns its end from the database once it is asked
// for it (see Replica); its Seq is 0, and Cancel does nothing.
type Handle struct {
	h rt.Handle // laid out as rt.Handle alone, so that a Job's After reads as the run-time layer's (jobOf)
}

// Seq returns the job's sequence number: unique in its Scheduler, in
// submission order, and the Seq of its Events and Snapshot entries.
func (h Handle) Seq() uint64 {
	return h.h.Seq()
}

// Done returns a channel that is closed when the job has ended: it ran, or
// it was cancelled or discarded before it started.
func (h Handle) Done() <-chan struct{} {
	return h.h.Done()
}

// Wait waits for the job to end and returns its error: fn's error, a
// *PanicError, context.Canceled if it was cancelled before it started, or
// ErrClosed if Close discarded it. If ctx ends first, Wait returns ctx.Err()
// and the job is left as it was.
//
// Waiting from inside a job for another job can deadlock: if every slot is
// taken by jobs that wait, the job they wait for never starts. A nil ctx
// is a programming error: Wait panics, naming it.
func (h Handle) Wait(ctx context.Context) error {
	return h.h.Wait(ctx)
}

// Err returns the job's error once it has ended, and nil before.
func (h Handle) Err() error {
	return h.h.Err()
}

// Cancel cancels the job. A queued job leaves the queue at once and ends
// with context.Canceled; a running job's context is cancelled, and the job
// ends with whatever its function returns. Cancel does nothing once the job
// has ended.
//
// For a job that others joined (TypeConfig.Duplicates), Cancel detaches
// the submission this Handle stands for: its Wait returns
// context.Canceled at once, and the job is cancelled only when no
// submission is left attached to it.
func (h Handle) Cancel() {
	h.h.Cancel()
}

// Cancel cancels the job numbered seq (Handle.Seq, JobInfo.Seq), as its
// Handle's Cancel would, for an operator who has its number but not its
// Handle: a queued job leaves the queue at once and ends with
// context.Canceled (a durable job is recorded so in the Store); a running
// job's context is cancelled. A RunSync job's caller gets
// context.Canceled. A job that duplicates joined is cancelled for every
// submission attached to it. It reports whether a job numbered seq was
// queued or running. O(n) in the jobs queued: it is for an operator, not
// for a path every job takes; a program that cancels keeps the Handle.
func (s *Scheduler) Cancel(seq uint64) bool {
	return s.rt.Cancel(seq)
}
