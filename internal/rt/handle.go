package rt

import (
	"context"
)

// Done returns a channel that is closed when the job has ended: it ran, or
// it was cancelled or discarded before it started.
func (h Handle) Done() <-chan struct{} {
	if h.t == nil {
		if h.end != nil {
			return h.end.doneChan()
		}
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
	if h.t.ended() {
		return closedChan
	}
	if h.t.wake == nil {
		h.t.wake = make(chan struct{})
	}
	return h.t.wake
}

// Wait is the API's Handle.Wait, which documents it.
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
		if h.end != nil {
			return h.end.result()
		}
		return errNoJob
	}
	s := h.scheduler()
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.w != nil && h.w.gone {
		return context.Canceled // this submission detached
	}
	if !h.t.ended() {
		return nil
	}
	return resultOf(h.t)
}

// Cancel is the API's Handle.Cancel, which documents it.
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
	case h.t.waiting():
		s.cancelQueuedLocked(h.t, context.Canceled, s.nowLocked())
	case h.t.granted():
		h.t.ctx.cancel(context.Canceled)
	}
}

// Attempts is the API's Handle.Attempts, which documents it.
func (h Handle) Attempts() []AttemptInfo {
	if h.t == nil {
		return nil
	}
	s := h.scheduler()
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := attemptsOf(h.t); a != nil {
		return append([]AttemptInfo(nil), a.list...)
	}
	return nil
}

// scheduler returns the scheduler that runs the job.
func (h Handle) scheduler() *Runtime { return h.t.rec.Engine().Owner.(*Runtime) }

// ID returns the identity of a durable job in its Scheduler's Store, for
// as long as the store keeps it; 0 for a job that is not durable.
func (h Handle) ID() int64 {
	if h.t == nil {
		return h.elsewhere
	}
	if dt := h.scheduler().durable.of(h.t); dt != nil {
		return dt.id
	}
	return 0
}
