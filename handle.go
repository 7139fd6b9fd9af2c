package fairsched

import (
	"context"
	"sync"
	"time"

	"github.com/fairsched/fairsched/internal/engine"
)

// Handle is a job given to Submit. Its methods are safe for concurrent use.
type Handle task

// scheduler returns the scheduler that runs the job.
func (h *Handle) scheduler() *Scheduler { return h.rec.Engine().Owner.(*Scheduler) }

// Done returns a channel that is closed when the job has ended: it ran, or
// it was cancelled or discarded before it started.
func (h *Handle) Done() <-chan struct{} {
	t := (*task)(h)
	s := h.scheduler()
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.rec.State() == engine.StateDone {
		return closedChan
	}
	if t.wake == nil {
		t.wake = make(chan struct{})
	}
	return t.wake
}

// Wait waits for the job to end and returns its error: fn's error, a
// *PanicError, context.Canceled if it was cancelled before it started, or
// ErrClosed if Close discarded it. If ctx ends first, Wait returns ctx.Err()
// and the job is left as it was.
func (h *Handle) Wait(ctx context.Context) error {
	select {
	case <-h.Done():
		return h.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Err returns the job's error once it has ended, and nil before.
func (h *Handle) Err() error {
	s := h.scheduler()
	s.mu.Lock()
	defer s.mu.Unlock()
	return h.err
}

// Cancel cancels the job. A queued job leaves the queue at once and ends
// with context.Canceled; a running job's context is cancelled, and the job
// ends with whatever its function returns. Cancel does nothing once the job
// has ended.
func (h *Handle) Cancel() {
	t := (*task)(h)
	s := h.scheduler()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch t.rec.State() {
	case engine.StateQueued, engine.StateParked:
		s.cancelQueuedLocked(t, context.Canceled, s.nowLocked())
	case engine.StateRunning:
		t.ctx.cancel(context.Canceled)
	}
}

// jobContext is the context a job's function receives. It ends when its
// parent does (the RunSync caller's context), when the job is cancelled or
// the scheduler closed, and when the function returns. It allocates
// nothing until Done is first called.
type jobContext struct {
	parent context.Context

	mu         sync.Mutex
	done       chan struct{}
	err        error
	stopParent func() bool
}

func (c *jobContext) Deadline() (time.Time, bool) { return c.parent.Deadline() }
func (c *jobContext) Value(key any) any           { return c.parent.Value(key) }

func (c *jobContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		if c.err == nil && c.parent.Err() != nil {
			c.err = c.parent.Err()
		}
		if c.err != nil {
			c.done = closedChan
			return c.done
		}
		c.done = make(chan struct{})
		if c.parent.Done() != nil {
			parent := c.parent
			c.stopParent = context.AfterFunc(parent, func() { c.cancel(parent.Err()) })
		}
	}
	return c.done
}

func (c *jobContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		if err := c.parent.Err(); err != nil {
			c.cancelLocked(err)
		}
	}
	return c.err
}

func (c *jobContext) cancel(err error) {
	c.mu.Lock()
	c.cancelLocked(err)
	c.mu.Unlock()
}

func (c *jobContext) cancelLocked(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	if c.done != nil && c.done != closedChan {
		close(c.done)
	}
}

// end cancels the context once the function returned, as net/http does
// with a request's, and detaches it from its parent.
func (c *jobContext) end() {
	c.mu.Lock()
	if c.stopParent != nil {
		c.stopParent()
		c.stopParent = nil
	}
	c.cancelLocked(context.Canceled)
	c.mu.Unlock()
}
