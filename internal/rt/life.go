package rt

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/fairsched/fairsched/internal/engine"
)

// A job's life in the run-time layer, as named points in the order they
// come (doc.go describes them):
//
//	admitted -> queued -> granted -> running -> attempt ended -> job ended
//
// Each point is one function below, in that order, and names every
// policy it consults. Every function here that ends in Locked is called
// with Runtime.mu held.

// enqueueLocked hands a job to the engine, which queues it or starts it at
// once. On error nothing has changed.
func (s *Runtime) enqueueLocked(t *task, desc *Job, now int64) error {
	return s.enqueueAtLocked(t, desc, 0, now)
}

// enqueueAtLocked is enqueueLocked for a job admitted at sub, before now
// (a durable job, admitted before it was written), and 0 for now. An
// admitted job was checked then: a pair disabled since does not refuse
// it, as it does not touch the jobs of the pair already queued.
func (s *Runtime) enqueueAtLocked(t *task, desc *Job, sub, now int64) error {
	if s.durable != nil && s.durable.isDurableType(desc.Type) != (t.submitCtx == durableParent) {
		return errDurableType(desc.Type)
	}
	if s.disabling.pairs.Any() && sub == 0 { // a call spared on the hot path
		if err := s.disabling.refuses(desc, now); err != nil {
			return err
		}
	}
	if s.dec != nil || s.eng.MayBeDue() {
		s.catchUpLocked(now) // the clock timer may be late: what fell due comes first
	}
	var tm *engine.Times  // nil: none, the common case
	var deps *replicaDeps // a replica's job's, to wait for here
	if !desc.NotBefore.IsZero() || !desc.StartBy.IsZero() || desc.After != nil || desc.Needs != nil || sub != 0 {
		times := s.timesOf(desc)
		tm = &times
		if sub != 0 {
			tm.Submitted = max(sub, tm.NotBefore) // a delayed job's aging clock starts at its NotBefore
		}
		if desc.Needs != nil {
			if err := validateNeeds("the job", desc.Needs); err != nil {
				return err
			}
			tm.Needs = ownNeeds(desc.Needs)
		}
		if desc.After != nil {
			after, err := s.afterOf(desc)
			if err != nil {
				return err
			}
			if s.remote != nil {
				deps = replicaDepsOf(after) // waited for here (replicaafter.go)
			} else {
				tm.After = after
			}
		}
	}
	var r *engine.Refusal
	if s.dec == nil { // the engine, in this process (decisions.go)
		if r = s.eng.Enqueue(&t.rec, descOf(desc), tm, now); r == nil && t.rec.Running() {
			t.rec.Tag = tagGranted // started by launchLocked, or by its RunSync caller
		}
	} else {
		if deps != nil {
			s.remote.Park()
		}
		r = s.enqueueElsewhereLocked(t, desc, tm, now)
	}
	if r == nil {
		if deps != nil {
			s.parkedLocked(t, deps, now)
		}
		if t.rec.Timed() || s.eng.Rated() {
			s.armLocked(now)
		}
		if sub != 0 && t.rec.Timed() {
			s.catchUpLocked(now) // admitted before now: its deadline may have passed since
		}
		if s.eng.HasUnrun() { // a job it runs after had failed already
			s.unrunLocked(now)
		}
		if s.dups.policy != nil {
			s.supersedeLocked(s.dups.accepted(t), t, now)
		}
		if s.cfg.Signals != nil {
			s.cfg.Signals.Accepted <- t.rec.Seq()
		}
		return nil
	}
	err := s.refusalError(r, desc, now)
	s.rejectedLocked(desc, r.Reason != engine.RefusedUnknownType, err, now)
	return err
}

// refusalError returns the error of a job described by desc that the
// decisions refused, with r, at now.
func (s *Runtime) refusalError(r *engine.Refusal, desc *Job, now int64) error {
	switch r.Reason {
	case engine.RefusedUnknownType:
		return errUnknownType(desc.Type)
	case engine.RefusedClosed:
		return ErrClosed
	case engine.RefusedNeverStarts:
		return fmt.Errorf("%w: the deadline, %v, is not after the job's submission and its NotBefore",
			ErrStartDeadline, s.timeOf(r.Deadline).Format(time.RFC3339Nano))
	case engine.RefusedUnknownResource, engine.RefusedTooMuch:
		return needsError(r)
	}
	wait, _ := s.estimateLocked(desc, now)
	return s.cfg.Errors.QueueFull(QueueFull{
		KeyLimit: r.Reason == engine.RefusedKeyFull, Key: desc.Key, Limit: r.Limit, Size: r.Size, Wait: wait,
	})
}

// needsError is the error of a job refused for the resources it needs.
func needsError(r *engine.Refusal) error {
	if r.Reason == engine.RefusedUnknownResource {
		return fmt.Errorf("%w %q", ErrUnknownResource, r.Resource)
	}
	return fmt.Errorf("%w: it needs %d units of %q, which has %d", ErrTooMuch, r.Size, r.Resource, r.Limit)
}

// supersedeLocked ends old, if not nil, replaced at now by t under its
// type's duplicate policy. No dispatch here: the submission dispatches
// next.
func (s *Runtime) supersedeLocked(old, t *task, now int64) {
	if old != nil {
		s.endQueuedLocked(old, fmt.Errorf("%w: job %d replaced by job %d", ErrSuperseded, old.rec.Seq(), t.rec.Seq()), now)
	}
}

// launchLocked gives a Submit job the engine just accepted a goroutine if
// it started at once, or dispatches.
func (s *Runtime) launchLocked(t *task, now int64) {
	if t.granted() {
		s.startedLocked(t)
		s.wg.Add(1)
		go s.work(t)
	} else {
		s.dispatchLocked(now, false)
	}
}

// dispatchLocked asks the decisions for every job that can start now.
// The engine's, in this process, are handed over here; a Decider's come
// through grantedLocked, before it returns or later. If self is true the
// caller is a job goroutine that can run one more Submit job itself: the
// first in-process grant of one is returned instead of being given a new
// goroutine.
func (s *Runtime) dispatchLocked(now int64, self bool) (next *task) {
	if s.dec != nil {
		s.dec.Grant(now)
	} else {
		for s.eng.CanStart() {
			j := s.eng.Next(now)
			if j == nil {
				break
			}
			if t := taskOf(j); self && next == nil && !t.isSync() {
				t.rec.Tag = tagGranted
				s.startedLocked(t)
				next = t
			} else {
				s.grantedLocked(t)
			}
		}
	}
	if s.eng.Rated() {
		s.armLocked(now) // a start may have emptied a token bucket
	}
	return next
}

// grantedLocked is the point where a job is granted: it starts, on its
// RunSync caller's goroutine or a new one.
func (s *Runtime) grantedLocked(t *task) {
	t.rec.Tag = tagGranted
	s.startedLocked(t)
	if t.isSync() {
		if t.wake != nil { // its caller waits (awaitStartLocked), or will see it granted
			close(t.wake)
			t.wake = nil
		}
		return
	}
	s.wg.Add(1)
	go s.work(t)
}

// grantee hands the decisions' grants to the Runtime (decide.Grantee).
type grantee Runtime

// Granted starts j, granted; the lock is held.
func (g *grantee) Granted(j *engine.Job) { (*Runtime)(g).grantedLocked(taskOf(j)) }

// Ended ends j, which the decisions ended without granting it at now:
// refused at admission (r), or past its start deadline; the lock is held.
func (g *grantee) Ended(j *engine.Job, o engine.Outcome, r *engine.Refusal, now int64) {
	s := (*Runtime)(g)
	t := taskOf(j)
	if !t.waiting() {
		return // taken out here first: Cancel, Close
	}
	var err error
	switch {
	case r != nil && r.Reason == engine.RefusedWouldWait: // a replica's TryRunSync: not a rejection
		err = ErrWouldWait
	case r != nil:
		desc := &Job{Type: j.Type(), ID: j.ID(), Key: j.Key()}
		err = s.refusalError(r, desc, now)
		s.rejectedLocked(desc, r.Reason != engine.RefusedUnknownType, err, now)
	default:
		err = s.expiredError(j, now)
	}
	setResultLocked(t, err)
	s.endedLocked(t)
}

// Deliver applies, with the lock held, what decisions taken elsewhere
// sent after the call that asked: apply hands grants and ends to the
// Grantee, at now. The clock timer is set again after it, for what the
// decisions now wait for.
func (s *Runtime) Deliver(apply func(now int64)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	apply(now)
	s.armLocked(now)
	if s.recorded != nil && s.remote.Unrecorded() == 0 {
		close(s.recorded)
		s.recorded = nil
	}
}

// startedLocked readies a job the engine started to run.
func (s *Runtime) startedLocked(t *task) {
	if s.dups.policy != nil {
		s.dups.started(t)
	}
	if t.ctx == nil { // a Submit job: its context is made as it starts
		t.ctx = &jobContext{parent: t.submitCtx, valuesOnly: true}
		t.submitCtx = nil
		if a := attemptsOf(t); a != nil { // retried by hand: attempts go on
			t.ctx.attempt = int32(len(a.list) + 1)
		}
	}
}

// work runs Submit jobs on a goroutine of the scheduler's: t, then any job
// the dispatcher hands back to it, until there is none.
func (s *Runtime) work(t *task) {
	defer s.wg.Done()
	for t != nil {
		err := s.runAttempt(t)
		cancelled := err != nil && t.ctx.Err() != nil // by its Handle or Close, while it ran
		if cancelled {
			err, cancelled = lostAttempt(err, t.ctx.Err())
		}
		t.ctx.end()
		s.mu.Lock()
		now := s.nowLocked()
		s.attemptEndedLocked(t, err, cancelled, now)
		t = s.dispatchLocked(now, true)
		s.mu.Unlock()
	}
}

// call runs a job's function fn, turning a panic into a *PanicError. If
// fn calls runtime.Goexit, the goroutine is ending and nothing after call
// will run on it, so call itself ends the job and gives its slot back.
func (s *Runtime) call(t *task, fn func(context.Context) error) (err error) {
	returned := false
	defer func() {
		if v := recover(); v != nil {
			err = s.cfg.Errors.Panic(t.rec.Seq(), v, debug.Stack())
			return
		}
		if !returned {
			t.ctx.end()
			s.mu.Lock()
			now := s.nowLocked()
			s.finishLocked(t, errGoexit, true, now)
			s.dispatchLocked(now, false)
			s.mu.Unlock()
		}
	}()
	if s.lapsedBeforeBegin() {
		returned = true
		return errLostRun // granted before a pause past the replica's lapse: it must not begin
	}
	err = fn(t.ctx)
	returned = true
	return err
}

// runAttempt runs one attempt of a job on a scheduler goroutine: a
// durable job's handler, or a Submit job's function.
func (s *Runtime) runAttempt(t *task) error {
	fn := t.fn
	if s.durable != nil {
		if dt := s.durable.of(t); dt != nil {
			var err error
			if fn, err = s.durableAttempt(dt); err != nil {
				return err
			}
		}
	}
	return s.call(t, fn)
}

// attemptEndedLocked settles the attempt of running job t that returned
// err at now; cancelled says its context was cancelled while it ran. A
// failure counts for its type's disable policy; then the job is put back
// for a retry, and attemptEndedLocked reports true, or it ends: dead if
// it failed for good.
func (s *Runtime) attemptEndedLocked(t *task, err error, cancelled bool, now int64) (retried bool) {
	if err == nil && t.err == nil { // succeeded, never retried: the common case, inlined
		s.finishLocked(t, nil, true, now)
		return false
	}
	return s.attemptSettledLocked(t, err, cancelled, now)
}

func (s *Runtime) attemptSettledLocked(t *task, err error, cancelled bool, now int64) (retried bool) {
	if s.keeper != nil && errors.Is(err, errNotRun) && !s.closed {
		s.requeueUnrunLocked(t, now)
		return true
	}
	failed := err != nil && !cancelled
	if failed {
		s.disabling.failed(t, now) // the disable policy counts it
	}
	if notBefore, again := s.retries.again(t, err, cancelled || s.closed, now); again {
		s.retriedLocked(t, err, notBefore, now)
		return true
	}
	if failed && !s.closed && !t.isSync() { // a RunSync job's caller has its error
		s.dead.bury(t, err, s.needsOf(&t.rec), s.durableDiedLocked(t), now) // the dead-job policy keeps it
	}
	s.finishLocked(t, err, true, now)
	return false
}

// retriedLocked puts t, whose attempt ended at now with err, back for
// its next attempt, which the retry policy let start at notBefore: with
// a context of its own, aside until then, its attempt recorded in the
// store if it is durable.
func (s *Runtime) retriedLocked(t *task, err error, notBefore, now int64) {
	a := attemptsOf(t)
	t.ctx = &jobContext{parent: a.parent, valuesOnly: !t.isSync(), attempt: int32(len(a.list) + 1)}
	t.submitCtx = nil          // a Submit job's, made already
	started := t.rec.Started() // read first: Retry reuses the word
	s.decider().Retry(&t.rec, notBefore, now)
	t.rec.Tag = tagWaiting
	if s.durable != nil && s.durableRetriedLocked(t, err, started, notBefore, now) {
		s.endQueuedLocked(t, ErrKept, now) // the store keeps it for the next start
	}
	s.armLocked(now)
	if s.cfg.Signals != nil {
		s.cfg.Signals.Retried <- t.rec.Seq()
	}
}

// finishLocked ends a running job with err. ran is false when fn did not
// run (its caller gave up as it started), so no cost is learnt.
func (s *Runtime) finishLocked(t *task, err error, ran bool, now int64) {
	o := engine.Completed
	switch {
	case !ran:
		o = engine.NotRun
	case err != nil:
		o = engine.Failed
	}
	setResultLocked(t, err) // before the engine reports the end
	if s.dec == nil {
		s.eng.Finish(&t.rec, o, now)
	} else {
		s.dec.Finish(&t.rec, o, now)
	}
	s.endedLocked(t)
	if s.eng.HasUnrun() {
		s.unrunLocked(now)
	}
}

// cancelQueuedLocked takes a job that has not started out of the queue
// and ends it with err (cancelled, or the scheduler closed).
func (s *Runtime) cancelQueuedLocked(t *task, err error, now int64) {
	if s.endQueuedLocked(t, err, now) { // it held a resource's units for itself
		s.dispatchLocked(now, false)
	}
}

// endQueuedLocked is cancelQueuedLocked without the dispatch, for a caller
// that dispatches next: it reports whether other jobs may start now.
func (s *Runtime) endQueuedLocked(t *task, err error, now int64) (unblocked bool) {
	setResultLocked(t, err)
	unblocked = s.decider().Cancel(&t.rec, now)
	s.endedLocked(t)
	if s.eng.HasUnrun() {
		s.unrunLocked(now)
	}
	return unblocked
}

// endedLocked wakes whoever waits for a job that ended.
func (s *Runtime) endedLocked(t *task) {
	if s.durable != nil {
		s.durableEndedLocked(t)
	}
	t.rec.Tag = tagEnded
	t.fn, t.ctx, t.submitCtx = nil, nil, nil // a Handle may keep the record long after
	if t.wake != nil || s.watchEnds {        // rare: kept out so that this inlines
		s.wakeEndedLocked(t)
	}
}

// wakeEndedLocked is what endedLocked does for a job someone waits for,
// or that duplicates may join or supersede.
func (s *Runtime) wakeEndedLocked(t *task) {
	if s.dups.policy != nil {
		s.dups.ended(t)
	}
	if t.wake != nil {
		close(t.wake)
	}
	if s.afters.on != nil {
		s.afterEndedLocked(t)
	}
	s.wakeIdleLocked()
}

// wakeIdleLocked wakes Shutdown, Close or WaitIdle if they wait and
// nothing is pending or running any more.
func (s *Runtime) wakeIdleLocked() {
	if s.idle != nil && s.decider().Idle() {
		close(s.idle)
		s.idle = nil
		s.watchEnds = s.dups.policy != nil || len(s.afters.waits) > 0
	}
}

// kickLocked dispatches after a change that may have made jobs
// admissible, and sets the clock timer by the engine's next due time,
// which the change may have brought forward (a rate limit's next token).
func (s *Runtime) kickLocked() {
	now := s.nowLocked()
	s.dispatchLocked(now, false)
	if !s.closed {
		s.armLocked(now)
	}
}

// unrunLocked ends the jobs the engine ended without running, at now,
// because a job they run after did not complete: each one's error wraps
// its dependency's, set before it, since the engine lists a job after
// the dependency that failed it.
func (s *Runtime) unrunLocked(now int64) {
	for _, u := range s.eng.TakeUnrun() {
		t := taskOf(u.Job)
		err := s.dependencyError(u.Job, u.Dep)
		setResultLocked(t, err)
		if s.events != nil {
			(*observer)(s).dependencyFailed(u.Job, err, now)
		}
		s.endedLocked(t)
	}
}

// dependencyError returns the error of job j, which will not run because
// dep did not complete.
func (s *Runtime) dependencyError(j, dep *engine.Job) error {
	return s.cfg.Errors.Dependency(j.Seq(), dep.Seq(), resultOf(taskOf(dep)))
}

// armLocked makes sure the clock timer fires by the engine's next due
// time. A timer already set for that time or earlier is kept: firing
// early costs one call of Due that finds nothing.
func (s *Runtime) armLocked(now int64) {
	due, ok := s.decider().NextDue()
	if !ok || (s.timerStop != nil && s.timerAt <= due) {
		return
	}
	if s.timerStop != nil {
		s.timerStop()
	}
	s.timerAt = due
	// A due time past the longest timer (a rate limit's next token,
	// centuries off) is armed for the longest: it fires early and is set
	// again for what is left.
	s.timerStop = s.clock.AfterFunc(usDuration(due-now), s.onTimer)
}

// onTimer runs when the clock timer fires.
func (s *Runtime) onTimer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timerStop = nil
	if s.closed {
		return
	}
	now := s.nowLocked()
	s.dueLocked(now)
	s.armLocked(now)
}

// catchUpLocked applies what fell due by now if the clock timer is late
// to fire, so that what fell due comes before what the caller does at now.
func (s *Runtime) catchUpLocked(now int64) {
	if s.dec != nil {
		if due, ok := s.dec.NextDue(); ok && due <= now {
			s.dueLocked(now)
		}
		return
	}
	if due, ok := s.eng.NextDue(); ok && due <= now {
		s.dueLocked(now)
	}
}

// dueLocked applies what has fallen due by now, ends the jobs that
// expired, and dispatches. The clock timer calls it; so does a submission
// that comes before a timer late to fire, so that what fell due is
// applied first.
func (s *Runtime) dueLocked(now int64) {
	for _, j := range s.decider().Due(now) {
		setResultLocked(taskOf(j), s.expiredError(j, now))
		s.endedLocked(taskOf(j))
	}
	if s.eng.HasUnrun() {
		s.unrunLocked(now) // after the expired jobs, whose errors they wrap
	}
	s.dispatchLocked(now, false)
}

// expiredError returns the error of job j, which did not start by its
// start deadline, now.
func (s *Runtime) expiredError(j *engine.Job, now int64) error {
	at := s.timeOf(now).Format(time.RFC3339Nano)
	if a := attemptsOf(taskOf(j)); a != nil {
		last := a.list[len(a.list)-1].Err
		return fmt.Errorf("%w: job %d did not start again by %v, after %d attempts; the last failed with: %w",
			ErrStartDeadline, j.Seq(), at, len(a.list), last)
	}
	return fmt.Errorf("%w: job %d did not start by %v", ErrStartDeadline, j.Seq(), at)
}

// stopTimerLocked stops the clock timer: Close.
func (s *Runtime) stopTimerLocked() {
	if s.timerStop != nil {
		s.timerStop()
		s.timerStop = nil
	}
}
