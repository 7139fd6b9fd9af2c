package rt

// The three ways in: RunSync and TryRunSync, whose job runs on the
// caller's goroutine, and Submit, whose job runs on one of the
// scheduler's. Each admits its job (life.go) and, for the first two,
// waits for the grant and runs the job's attempts.

import (
	"context"
)

// RunSync is the API's Scheduler.RunSync, which documents it.
func (s *Runtime) RunSync(ctx context.Context, desc *Job, fn func(context.Context) error) error {
	if err := checkSyncCall(ctx, fn, "RunSync"); err != nil {
		return err
	}
	s.mu.Lock()
	t := s.spare.get(&jobContext{parent: ctx})
	now := s.nowLocked()
	if s.dups.policy != nil {
		if err := s.disabling.refuses(desc, now); err != nil { // a disabled pair joins nothing either
			s.spare.put(t)
			s.mu.Unlock()
			return err
		}
		if existing := s.joinableLocked(desc); existing != nil {
			s.inheritLocked(ctx, desc)
			s.spare.put(t)
			if s.stopping {
				s.mu.Unlock()
				return ErrClosed
			}
			w := &joiner{ctx: ctx, promoted: make(chan struct{})}
			s.joinLocked(existing, desc, w, now)
			return s.runJoined(ctx, existing, w, fn)
		}
	}
	if err := s.enqueueLocked(t, desc, now); err != nil {
		s.spare.put(t)
		s.mu.Unlock()
		return err
	}
	if s.dups.policy != nil && s.joinsLocked(t) {
		s.registerJoinLocked(t, nil, ctx)
	}
	if t.granted() { // with the answer: the common case
		s.mu.Unlock()
		return s.runStarted(ctx, t, fn)
	}
	if t.ended() { // a job it runs after had failed
		s.mu.Unlock()
		return resultOf(t)
	}
	s.raiseChildLocked(ctx, t, now)
	t.wake = make(chan struct{})
	s.dispatchLocked(now, false)
	if err := s.awaitStartLocked(ctx, t); err != nil {
		return err
	}
	return s.runStarted(ctx, t, fn)
}

// awaitStartLocked waits, with mu held and released on return, until the
// RunSync job t starts (nil), ends without starting (its error), or ctx
// ends (ctx's error: the job leaves the queue, or gives back the slot it
// got just then).
func (s *Runtime) awaitStartLocked(ctx context.Context, t *task) error {
	if t.granted() {
		s.mu.Unlock()
		return nil
	}
	if t.wake == nil {
		t.wake = make(chan struct{})
	}
	ready := t.wake
	s.mu.Unlock()
	select {
	case <-ready:
	case <-ctx.Done():
	}
	s.mu.Lock()
	var err error
	switch {
	case t.waiting():
		err = ctx.Err()
		if w := s.runnerOf(t); w != nil { // others joined it: this caller detaches alone
			s.detachLocked(t, w, s.nowLocked())
		} else {
			s.cancelQueuedLocked(t, err, s.nowLocked())
		}
	case t.ended(): // discarded by Close, or past its start deadline
		err = resultOf(t)
	case ctx.Err() != nil:
		// Started just as the caller gave up: give the slot back.
		err = ctx.Err()
		s.finishLocked(t, err, false, s.nowLocked())
		s.dispatchLocked(s.nowLocked(), false)
	}
	s.mu.Unlock()
	return err
}

// runStarted runs a started RunSync job's function on the calling
// goroutine, and again after each failed attempt its type retries, and
// ends the job with the last attempt's error.
func (s *Runtime) runStarted(ctx context.Context, t *task, fn func(context.Context) error) error {
	for {
		jc := t.ctx
		err := s.call(t, fn)
		cancelled := err != nil && jc.Err() != nil // the caller's context ended, or Close
		if cancelled {
			err, cancelled = lostAttempt(err, jc.Err())
		}
		jc.end()
		s.mu.Lock()
		now := s.nowLocked()
		retried := s.attemptEndedLocked(t, err, cancelled, now)
		s.dispatchLocked(now, false)
		if retried {
			if err := s.awaitStartLocked(ctx, t); err != nil {
				return err
			}
			continue
		}
		if s.dups.policy == nil || !s.joinsType(t.rec.Type()) { // joiners' handles may keep it
			s.spare.put(t)
		}
		s.mu.Unlock()
		return err
	}
}

// TryRunSync is the API's Scheduler.TryRunSync, which documents it.
func (s *Runtime) TryRunSync(ctx context.Context, desc *Job, fn func(context.Context) error) error {
	if err := checkSyncCall(ctx, fn, "TryRunSync"); err != nil {
		return err
	}
	s.mu.Lock()
	now := s.nowLocked()
	s.catchUpLocked(now)                                   // a limit's state as of now
	if err := s.disabling.refuses(desc, now); err != nil { // refused, whether it would wait or not
		s.mu.Unlock()
		return err
	}
	// On a replica the leader decides whether it would start (awaitNow).
	if !s.stopping && ((s.remote == nil && !s.decider().WouldStart(*descOf(desc), EngineNeeds(desc.Needs), now)) ||
		s.joinableLocked(desc) != nil || s.timesOf(desc).NotBefore > now || s.waitsForAnyLocked(desc.After)) {
		s.mu.Unlock()
		return ErrWouldWait
	}
	t := s.spare.get(&jobContext{parent: ctx})
	if s.remote != nil {
		s.remote.AskNow()
	}
	if err := s.enqueueLocked(t, desc, now); err != nil {
		s.spare.put(t)
		s.mu.Unlock()
		return err
	}
	if t.ended() { // a job it runs after had failed
		s.mu.Unlock()
		return resultOf(t)
	}
	if !t.granted() {
		// Queued behind jobs that limits hold back: the dispatch starts it.
		s.dispatchLocked(now, false)
	}
	if !t.granted() && s.remote != nil {
		return s.awaitNow(ctx, t, fn)
	}
	if !t.granted() && s.dec != nil { // decisions taken elsewhere: no grant comes with the call
		s.cancelQueuedLocked(t, ErrWouldWait, now)
		s.mu.Unlock()
		return ErrWouldWait
	}
	if !t.granted() {
		panic("fairsched: internal error: a job that passed every limit did not start")
	}
	s.mu.Unlock()
	return s.runStarted(ctx, t, fn)
}

// awaitNow is TryRunSync's end on a replica: it waits, with mu held on
// entry and released, for the leader's answer to t, asked to start at
// once or not at all (Remote.AskNow), and runs fn if it was granted. The
// answer takes a round trip to the leader; if ctx ends first, t is
// cancelled, unless it was granted meanwhile (fn then runs, and sees
// ctx ended).
func (s *Runtime) awaitNow(ctx context.Context, t *task, fn func(context.Context) error) error {
	answer := s.remote.Admission(&t.rec)
	s.mu.Unlock()
	select {
	case <-answer:
	case <-ctx.Done():
	}
	s.mu.Lock()
	switch {
	case t.granted():
		s.mu.Unlock()
		return s.runStarted(ctx, t, fn)
	case t.waiting():
		s.cancelQueuedLocked(t, context.Cause(ctx), s.nowLocked())
	}
	s.mu.Unlock()
	return resultOf(t) // ErrWouldWait, or another refusal (Grantee.Ended), or ctx's
}

// checkSyncCall checks the arguments of RunSync or TryRunSync (named by
// caller): a nil ctx panics, naming it; a nil fn or an ended ctx is the
// call's error.
func checkSyncCall(ctx context.Context, fn func(context.Context) error, caller string) error {
	if ctx == nil {
		panic("fairsched: " + caller + " with a nil context")
	}
	if fn == nil {
		return ErrNilFunc
	}
	return ctx.Err()
}

// Submit is the API's Scheduler.Submit, which documents it.
func (s *Runtime) Submit(ctx context.Context, desc *Job, fn func(context.Context) error) (Handle, error) {
	if ctx == nil {
		panic("fairsched: Submit with a nil context")
	}
	if fn == nil {
		return Handle{}, ErrNilFunc
	}
	t := newSubmitTask(ctx, fn)
	s.mu.Lock()
	now := s.nowLocked()
	if s.dups.policy != nil {
		if h, joined, err := s.submitJoinLocked(t, desc, now); joined || err != nil {
			s.mu.Unlock()
			return h, err
		}
	}
	if err := s.enqueueLocked(t, desc, now); err != nil {
		s.mu.Unlock()
		return Handle{}, err
	}
	h := s.handleLocked(t)
	if t.waiting() {
		s.raiseChildLocked(ctx, t, now)
	}
	s.launchLocked(t, now)
	if s.remote != nil && t.waiting() {
		return s.awaitAdmission(t, h)
	}
	s.mu.Unlock()
	return h, nil
}

// awaitAdmission is Submit's end on a replica: it waits, with mu held on
// entry and released, for the leader to admit waiting job t, or refuse
// it, so that the caller learns of a full queue from Submit as in one
// process. h is t's Handle.
func (s *Runtime) awaitAdmission(t *task, h Handle) (Handle, error) {
	answer := s.remote.Admission(&t.rec)
	s.mu.Unlock()
	if <-answer {
		return h, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return Handle{}, resultOf(t) // refused: Grantee.Ended ended it with the refusal's error
}

// runJoined is RunSync for a duplicate that joined job t as w: it waits
// for the job's end and returns its error, or, if it is made the job's
// runner while the job waits, runs fn itself. If ctx ends first, w
// detaches and ctx's error is returned. mu is held on entry and released.
func (s *Runtime) runJoined(ctx context.Context, t *task, w *joiner, fn func(context.Context) error) error {
	done := w.js.done
	s.mu.Unlock()
	select {
	case <-done:
		s.mu.Lock()
		defer s.mu.Unlock()
		return resultOf(t)
	case <-w.promoted:
		s.mu.Lock()
		if err := s.awaitStartLocked(ctx, t); err != nil {
			return err
		}
		return s.runStarted(ctx, t, fn)
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		s.detachLocked(t, w, s.nowLocked())
		return ctx.Err()
	}
}
