package rt

import (
	"context"
	"errors"

	"github.com/fairsched/fairsched/internal/engine"
)

// Handle refers to a job given to Submit: to wait for it, read its result
// or cancel it. It stays valid after the job has ended, for as long as it
// is kept. Handles are comparable; copies refer to the same job. Its
// methods are safe for concurrent use.
//
// The zero Handle refers to no job: Seq returns 0, Done a closed channel,
// Err and Wait an error saying so, and Cancel does nothing.
type Handle struct {
	t *task   // a Submit job's record, never reused while a Handle may hold it
	w *joiner // for a job of a type that joins duplicates: the submission it stands for
}

// errNoJob is the error of the zero Handle.
var errNoJob = errors.New("fairsched: the zero Handle refers to no job")

// Seq returns the job's sequence number: unique in its Scheduler, in
// submission order, and the Seq of its Events and Snapshot entries.
func (h Handle) Seq() uint64 {
	if h.t == nil {
		return 0
	}
	return h.t.rec.Seq()
}

// scheduler returns the scheduler that runs the job.
func (h Handle) scheduler() *Runtime { return h.t.rec.Engine().Owner.(*Runtime) }

// Done returns a channel that is closed when the job has ended: it ran, or
// it was cancelled or discarded before it started.
func (h Handle) Done() <-chan struct{} {
	if h.t == nil {
		return closedChan
	}
	s := h.scheduler()
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.w != nil { // a joiner: the job's end, or its own detaching
		if h.w.gone {
			return closedChan
		}
		return h.w.js.done
	}
	if h.t.rec.State() == engine.StateDone {
		return closedChan
	}
	if h.t.wake == nil {
		h.t.wake = make(chan struct{})
	}
	return h.t.wake
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
	if ctx == nil {
		panic("fairsched: Handle.Wait with a nil context")
	}
	select {
	case <-h.Done():
		return h.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Err returns the job's error once it has ended, and nil before.
func (h Handle) Err() error {
	if h.t == nil {
		return errNoJob
	}
	s := h.scheduler()
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.w != nil && h.w.gone {
		return context.Canceled // this submission detached
	}
	if h.t.rec.State() != engine.StateDone {
		return nil
	}
	return resultOf(h.t)
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
	if h.t == nil {
		return
	}
	s := h.scheduler()
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.w != nil {
		s.detachLocked(h.t, h.w, s.nowLocked())
		return
	}
	switch {
	case h.t.rec.Waiting():
		s.cancelQueuedLocked(h.t, context.Canceled, s.nowLocked())
	case h.t.rec.Running():
		h.t.ctx.cancel(context.Canceled)
	}
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
func (s *Runtime) Cancel(seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.eng.Find(seq)
	if j == nil {
		return false
	}
	t := taskOf(j)
	switch {
	case t.rec.Waiting():
		s.cancelQueuedLocked(t, context.Canceled, s.nowLocked())
	case t.rec.Running():
		t.ctx.cancel(context.Canceled)
	}
	return true
}
