package rt

import (
	"context"

	"github.com/fairsched/fairsched/internal/store"
)

// WaitIdle waits until nothing is queued or running, as errgroup's Wait
// does, without closing the scheduler: work submitted meanwhile is waited
// for too, and it returns at the first instant the scheduler is idle. If
// ctx ends first it returns ctx.Err(); on a scheduler that is idle
// already it returns nil, whatever ctx says. Like Shutdown, it must not be
// called from a job, which it would wait for.
func (s *Runtime) WaitIdle(ctx context.Context) error {
	s.mu.Lock()
	idle := s.idleChanLocked()
	s.mu.Unlock()
	select {
	case <-idle:
		return nil
	default:
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown stops new work (which gets ErrClosed) and waits until every
// queued and running job has ended and the OnEvent hook has been given
// every event, then returns nil. Queued work still starts as usual. If ctx
// ends first, Shutdown returns ctx.Err() and leaves the remaining work
// running and the events being delivered; call Close to stop the work and
// release the scheduler's goroutines (Close still hands the hook the
// events already queued). Shutdown may be called more than once, and with
// Close, but not from a job or the OnEvent hook: it would wait for itself.
//
// Durable jobs (Enqueue) are not run to the end: those queued, delayed or
// waiting for a retry leave memory at once and stay in the Store for the
// next start (their Handles end with ErrKept); those
// running finish as usual. Shutdown returns once the store has committed
// what happened, or with the store's error.
func (s *Runtime) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.stopAcceptingLocked()
	s.stopSchedulesLocked()
	if s.durable != nil {
		s.leaveLocked(s.nowLocked())
	}
	idle := s.idleChanLocked()
	s.mu.Unlock()
	select {
	case <-idle: // drained already: done, whatever ctx says
	default:
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.wg.Wait()
	if err := s.flushStore(ctx); err != nil {
		return err
	}
	return s.closeEvents(ctx)
}

// Close stops new work, ends every queued job with ErrClosed, cancels the
// contexts of running jobs and waits for them to return, and for the
// OnEvent hook to be given the events sent before (a hook that never
// returns keeps Close waiting, as a job that ignores its context does). It
// is safe to call more than once, but not from a job or the hook, for
// which it would wait. It returns nil, or the Store's error if what it was
// last told could not be committed.
//
// Durable jobs are not ended for good: the queued ones stay in the Store
// for the next start, and a running one whose handler returns an error
// once its context is cancelled is queued there again, that attempt not
// counted.
func (s *Runtime) Close() error {
	s.mu.Lock()
	s.closed = true
	s.stopAcceptingLocked()
	s.stopTimerLocked()
	s.stopSchedulesLocked()
	now := s.nowLocked()
	if s.durable != nil {
		s.leaveLocked(now)
	}
	for _, j := range s.eng.PendingJobs() {
		if t := taskOf(j); t.waiting() { // not ended already by a job it runs after, cancelled just before
			s.cancelQueuedLocked(t, ErrClosed, now)
		}
	}
	for _, j := range s.eng.RunningJobs() {
		if t := taskOf(j); t.granted() {
			t.ctx.cancel(context.Canceled)
		} else { // granted by the decisions, not handed over yet: it never starts
			s.cancelQueuedLocked(t, ErrClosed, now)
		}
	}
	idle := s.idleChanLocked()
	s.mu.Unlock()
	<-idle
	s.wg.Wait()
	err := s.flushStore(context.Background())
	if cerr := s.closeEvents(context.Background()); err == nil {
		err = cerr
	}
	return err
}

// stopAcceptingLocked makes every later submission fail with ErrClosed,
// and closes Done's channel the first time.
func (s *Runtime) stopAcceptingLocked() {
	if s.eng.Accepting() {
		close(s.done)
	}
	s.eng.StopAccepting()
}

// Done returns a channel closed when Shutdown or Close is first called:
// from then on the scheduler accepts no new work, though what it has may
// still be running (Shutdown's drain) and its read-only calls still
// answer. It is for what watches a scheduler without owning it, such as a
// sampler on a timer, to learn that it may stop; the owner learns that
// the work has ended from Shutdown's or Close's return. O(1).
func (s *Runtime) Done() <-chan struct{} { return s.done }

// flushStore waits until the store has committed what it was told, if
// the scheduler has one, and stops watching it.
func (s *Runtime) flushStore(ctx context.Context) error {
	if s.durable == nil {
		return nil
	}
	if w, ok := s.durable.st.(store.Watcher); ok {
		w.Watch(nil) // the jobs callers commit from now on stay for the next start
	}
	s.saveFairFinal()
	return s.durable.st.Flush(ctx)
}

// idleChanLocked returns a channel closed once nothing is pending or
// running.
func (s *Runtime) idleChanLocked() <-chan struct{} {
	if s.eng.Idle() {
		return closedChan
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
		s.watchEnds = true
	}
	return s.idle
}

// leaveLocked readies the durable jobs for Shutdown and Close: the queued
// ones leave memory, staying in the store as they are. The fair state is
// taken first: their leaving makes their keys' flows inactive and raises
// the tiers' floors, which the next start must not inherit.
func (s *Runtime) leaveLocked(now int64) {
	s.durable.leaving = true
	fs := s.eng.SaveFair()
	s.durable.atLeave = &fs
	for _, j := range s.eng.PendingJobs() {
		if t := taskOf(j); t.waiting() && s.durable.of(t) != nil {
			s.endQueuedLocked(t, ErrKept, now)
		}
	}
}
