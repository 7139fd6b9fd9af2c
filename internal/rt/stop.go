package rt

import (
	"context"

	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/store"
)

// WaitIdle is the API's Scheduler.WaitIdle, which documents it.
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

// Shutdown is the API's Scheduler.Shutdown, which documents it.
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
	if err := s.awaitRecorded(ctx); err != nil {
		return err
	}
	s.stopFollowing()
	if err := s.flushStore(ctx); err != nil {
		return err
	}
	if err := s.leaveCluster(ctx); err != nil {
		return err
	}
	return s.closeEvents(ctx)
}

// Close is the API's Scheduler.Close, which documents it.
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
	// The jobs queued first: none is granted once they are gone. Then the
	// jobs granted: those running are cancelled, and those whose grant is
	// on its way never start.
	s.decider().Each(func(j *engine.Job, granted bool) {
		if t := taskOf(j); !granted && t.waiting() { // not ended already by a job it runs after, cancelled just before
			s.cancelQueuedLocked(t, ErrClosed, now)
		}
	})
	s.decider().Each(func(j *engine.Job, granted bool) {
		switch t := taskOf(j); {
		case !granted:
		case t.granted():
			t.ctx.cancel(context.Canceled)
		case t.waiting():
			s.cancelQueuedLocked(t, ErrClosed, now)
		}
	})
	s.stopRunsLocked(errClosedRun) // a replica's durable attempts: the leader retries them elsewhere
	idle := s.idleChanLocked()
	s.mu.Unlock()
	<-idle
	s.wg.Wait()
	s.stopFollowing()
	err := s.flushStore(context.Background())
	if cerr := s.leaveCluster(context.Background()); err == nil {
		err = cerr
	}
	if cerr := s.closeEvents(context.Background()); err == nil {
		err = cerr
	}
	return err
}

// stopAcceptingLocked makes every later submission fail with ErrClosed,
// and closes Done's channel the first time.
func (s *Runtime) stopAcceptingLocked() {
	if s.stopping {
		return
	}
	close(s.done)
	s.stopping = true
	s.decider().StopAccepting()
	if s.remote != nil { // a replica's durable attempts: the leader sends them elsewhere from now on
		s.remote.StopRuns(s.nowLocked())
	}
}

// Done is the API's Scheduler.Done, which documents it.
func (s *Runtime) Done() <-chan struct{} { return s.done }

// flushStore waits until the store has committed what it was told, if
// the scheduler has one, and stops watching it.
func (s *Runtime) flushStore(ctx context.Context) error {
	if s.durable == nil {
		return nil
	}
	if s.remote != nil { // a replica's: its inserts; the fair state and the watch are the leader's
		return s.durable.st.Flush(ctx)
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
	if s.decider().Idle() {
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
	s.decider().Each(func(j *engine.Job, granted bool) { // one granted runs, even on its way
		if t := taskOf(j); !granted && t.waiting() && s.durable.of(t) != nil {
			s.endQueuedLocked(t, ErrKept, now)
		}
	})
}
