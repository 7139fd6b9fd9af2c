package rt

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/fairsched/fairsched/internal/clock"
	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/store"
)

// Scheduler decides which job runs next: bounded concurrency, tiers,
// fair share between keys by learned cost, priorities with aging, type and
// key caps and conflict exclusion, by the one order of the package
// documentation (and docs/design.md, The order). Create one with New; the
// zero value is not usable. A Scheduler is safe for concurrent use.
type Runtime struct {
	// The Scheduler is the shell around its engine (internal/engine), which
	// holds every decision: the Scheduler adds the lock, the goroutines that
	// run jobs, contexts, handles and events. Methods named ...Locked are
	// called with mu held.

	// Set by New, then read-only.
	cfg       Config
	clock     Clock
	realClock bool      // clock is the system clock: read it with time.Since
	epoch     time.Time // New's instant, taken down to a whole µs: engine time origin (enginetime.go)

	mu sync.Mutex
	// Guarded by mu.
	eng    *engine.Engine
	spare  []*task       // ended RunSync records, for reuse
	closed bool          // Close began: queued work discarded
	idle   chan struct{} // closed when nothing is pending or running, while closing
	done   chan struct{} // closed when Shutdown or Close begins (Done)
	// The clock timer (timer.go): set to fire at timerAt when timerStop
	// is not nil.
	timerAt   int64
	timerStop func() bool
	// retries holds the retry policies of the types that retry.
	retries map[string]RetryPolicy
	// dead holds the dead jobs, oldest first (dead.go).
	dead      []*dead
	deadTotal uint64
	// disabling is what the disable policies keep (disable.go).
	disabling disabling
	// dups is what the duplicate policies keep (supersede.go, join.go).
	dups duplicates
	// watchEnds: a job's end has more to do than its own waiters' (idle
	// is set, or a type has a duplicate policy).
	watchEnds bool
	// durable is what a Scheduler with a Store keeps; nil without one.
	// Set by New, then read-only.
	durable *durable
	// periodic holds the schedules running (periodic.go).
	periodic           map[*Periodic]struct{}
	skippedOccurrences uint64

	wg     sync.WaitGroup // job goroutines
	events *eventSink     // nil without Config.OnEvent
}

// New returns a Scheduler configured by cfg, or an error naming every
// problem with cfg.
func New(cfg Config) (*Runtime, error) {
	s := &Runtime{cfg: cfg, clock: cfg.Clock, done: make(chan struct{})}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	_, s.realClock = s.clock.(clock.Real)
	s.epoch = wholeMicro(s.clock.Now())
	var obs engine.Observer
	if cfg.OnEvent != nil {
		s.events = newEventSink(cfg.OnEvent, cfg.EventBuffer, cfg.Logger, cfg.Signals)
		obs = (*observer)(s)
	}
	s.eng = engine.New(cfg.Engine, obs)
	s.eng.Owner = s
	if _, ok := cfg.Types[""]; !ok {
		s.noteRetriesLocked("", Type{})
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Types)) {
		if err := s.registerLocked(name, cfg.Types[name]); err != nil {
			return nil, err
		}
	}
	if cfg.Store != nil {
		if err := s.openStore(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// RunSync waits until the job may start, runs fn on the calling goroutine
// and returns its error. If ctx ends while the job is queued, the job
// leaves the queue at once and ctx.Err() is returned; fn is not called and
// no slot stays taken. fn receives a context that ends when ctx does or
// when Close cancels running work. A panic in fn is recovered and returned
// as a *PanicError; if fn calls runtime.Goexit, the job still ends and
// gives its slot back.
//
// RunSync fails at once, changing nothing, with ErrClosed after Shutdown or
// Close, with an error wrapping ErrUnknownType, with a *QueueFullError,
// with an error matching ErrStartDeadline if the job's start deadline is
// not after its submission and NotBefore, or if fn is nil. A job that
// waits past its start deadline returns an error matching
// ErrStartDeadline, without running.
//
// A nil ctx is a programming error: RunSync panics, naming it, as the
// standard library does. Calling RunSync from inside a job can deadlock:
// the inner job waits for a slot, and if every slot is held by a job that
// waits so, none frees.
func (s *Runtime) RunSync(ctx context.Context, desc *Job, fn func(context.Context) error) error {
	if err := checkSyncCall(ctx, fn, "RunSync"); err != nil {
		return err
	}
	s.mu.Lock()
	t := s.newSyncTaskLocked(&jobContext{parent: ctx})
	now := s.nowLocked()
	if s.dups.policy != nil {
		if err := s.disabledLocked(desc, now); err != nil { // a disabled pair joins nothing either
			s.recycleLocked(t)
			s.mu.Unlock()
			return err
		}
		if existing := s.joinableLocked(desc); existing != nil {
			s.inheritLocked(ctx, desc)
			s.recycleLocked(t)
			if !s.eng.Accepting() {
				s.mu.Unlock()
				return ErrClosed
			}
			w := &joiner{ctx: ctx, promoted: make(chan struct{})}
			s.joinLocked(existing, desc, w, now)
			return s.runJoined(ctx, existing, w, fn)
		}
	}
	if err := s.enqueueLocked(t, desc, now); err != nil {
		s.recycleLocked(t)
		s.mu.Unlock()
		return err
	}
	if s.dups.policy != nil && s.joinsLocked(t) {
		s.registerJoinLocked(t, nil, ctx)
	}
	if t.rec.State() == engine.StateDone { // a job it runs after had failed
		s.mu.Unlock()
		return resultOf(t)
	}
	if !t.rec.Running() {
		s.raiseChildLocked(ctx, t, now)
		t.wake = make(chan struct{})
		s.dispatchLocked(now, false)
	}
	if t.rec.Running() {
		s.mu.Unlock()
	} else if err := s.awaitStartLocked(ctx, t); err != nil {
		return err
	}
	return s.runStarted(ctx, t, fn)
}

// awaitStartLocked waits, with mu held and released on return, until the
// RunSync job t starts (nil), ends without starting (its error), or ctx
// ends (ctx's error: the job leaves the queue, or gives back the slot it
// got just then).
func (s *Runtime) awaitStartLocked(ctx context.Context, t *task) error {
	if t.rec.Running() {
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
	case t.rec.Waiting():
		err = ctx.Err()
		if w := s.runnerOf(t); w != nil { // others joined it: this caller detaches alone
			s.detachLocked(t, w, s.nowLocked())
		} else {
			s.cancelQueuedLocked(t, err, s.nowLocked())
		}
	case t.rec.State() == engine.StateDone: // discarded by Close, or past its start deadline
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

// TryRunSync runs fn on the calling goroutine, as RunSync does, if the job
// can start at once, and otherwise returns ErrWouldWait at once, queueing
// nothing: semaphore.TryAcquire for a scheduler. A job can start at once
// when it passes every hard limit (the slots, its tier's, type's and key's
// caps, and no conflicting job running); jobs already queued do not stand
// in its way, since each of them is held back by a limit. It fails as
// RunSync does otherwise, and the queue's limits apply.
func (s *Runtime) TryRunSync(ctx context.Context, desc *Job, fn func(context.Context) error) error {
	if err := checkSyncCall(ctx, fn, "TryRunSync"); err != nil {
		return err
	}
	s.mu.Lock()
	now := s.nowLocked()
	s.catchUpLocked(now)                                // a limit's state as of now
	if err := s.disabledLocked(desc, now); err != nil { // refused, whether it would wait or not
		s.mu.Unlock()
		return err
	}
	if s.eng.Accepting() && (!s.eng.WouldStart(descOf(desc), EngineNeeds(desc.Needs), now) || s.joinableLocked(desc) != nil ||
		s.timesOf(desc).NotBefore > now || s.waitsForAnyLocked(desc.After)) {
		s.mu.Unlock()
		return ErrWouldWait
	}
	t := s.newSyncTaskLocked(&jobContext{parent: ctx})
	if err := s.enqueueLocked(t, desc, now); err != nil {
		s.recycleLocked(t)
		s.mu.Unlock()
		return err
	}
	if t.rec.State() == engine.StateDone { // a job it runs after had failed
		s.mu.Unlock()
		return resultOf(t)
	}
	if !t.rec.Running() {
		// Queued behind jobs that limits hold back: the dispatch starts it.
		s.dispatchLocked(now, false)
	}
	if !t.rec.Running() {
		panic("fairsched: internal error: a job that passed every limit did not start")
	}
	s.mu.Unlock()
	return s.runStarted(ctx, t, fn)
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

// runStarted runs a started RunSync job's function on the calling
// goroutine, and again after each failed attempt its type retries, and
// ends the job with the last attempt's error.
func (s *Runtime) runStarted(ctx context.Context, t *task, fn func(context.Context) error) error {
	for {
		jc := t.ctx
		err := s.call(t, fn)
		cancelled := err != nil && jc.Err() != nil // the caller's context ended, or Close
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
			s.recycleLocked(t)
		}
		s.mu.Unlock()
		return err
	}
}

// Submit queues the job and returns at once with a Handle to wait on or
// cancel it; fn runs on a goroutine the scheduler owns. Its context
// carries ctx's values (trace IDs, loggers) but not ctx's cancellation or
// deadline, since the job outlives the call that submitted it: it ends
// when Handle.Cancel or Close cancels it, and when fn returns. So an ended
// ctx does not matter; a nil one is a programming error, and Submit
// panics, naming it. A panic in fn is recovered and becomes the job's
// error, a *PanicError.
//
// Submit fails at once, changing nothing, with ErrClosed after Shutdown or
// Close, with an error wrapping ErrUnknownType, with a *QueueFullError,
// with an error matching ErrStartDeadline if the job's start deadline is
// not after its submission and NotBefore, or if fn is nil.
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
	if t.rec.Waiting() {
		s.raiseChildLocked(ctx, t, now)
	}
	s.launchLocked(t, now)
	s.mu.Unlock()
	return h, nil
}

// launchLocked gives a Submit job the engine just accepted a goroutine if
// it started at once, or dispatches.
func (s *Runtime) launchLocked(t *task, now int64) {
	if t.rec.Running() {
		s.startedLocked(t)
		s.wg.Add(1)
		go s.work(t)
	} else {
		s.dispatchLocked(now, false)
	}
}

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
	if len(s.disabling.disabled) > 0 && sub == 0 { // a call spared on the hot path
		if err := s.disabledLocked(desc, now); err != nil {
			return err
		}
	}
	s.catchUpLocked(now) // the clock timer may be late: what fell due comes first
	d := descOf(desc)
	var tm *engine.Times // nil: none, the common case
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
			tm.After = after
		}
	}
	r := s.eng.Enqueue(&t.rec, d, tm, now)
	if r == nil {
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
			s.acceptedDupLocked(t, now)
		}
		if s.cfg.Signals != nil {
			s.cfg.Signals.Accepted <- t.rec.Seq()
		}
		return nil
	}
	var err error
	switch r.Reason {
	case engine.RefusedUnknownType:
		err = errUnknownType(desc.Type)
	case engine.RefusedClosed:
		err = ErrClosed
	case engine.RefusedNeverStarts:
		err = fmt.Errorf("%w: the deadline, %v, is not after the job's submission and its NotBefore",
			ErrStartDeadline, s.timeOf(r.Deadline).Format(time.RFC3339Nano))
	case engine.RefusedUnknownResource, engine.RefusedTooMuch:
		err = needsError(r)
	default:
		wait, _ := s.estimateLocked(desc, now)
		err = s.cfg.Errors.QueueFull(QueueFull{
			KeyLimit: r.Reason == engine.RefusedKeyFull, Key: desc.Key, Limit: r.Limit, Size: r.Size, Wait: wait,
		})
	}
	s.rejectedLocked(desc, r.Reason != engine.RefusedUnknownType, err, now)
	return err
}

// needsError is the error of a job refused for the resources it needs.
func needsError(r *engine.Refusal) error {
	if r.Reason == engine.RefusedUnknownResource {
		return fmt.Errorf("%w %q", ErrUnknownResource, r.Resource)
	}
	return fmt.Errorf("%w: it needs %d units of %q, which has %d", ErrTooMuch, r.Size, r.Resource, r.Limit)
}

// kickLocked dispatches after a change that may have made jobs
// admissible, and sets the clock timer by the engine's next due time,
// which the change may have brought forward (a rate limit's next token).
func (s *Runtime) kickLocked() {
	now := s.nowLocked()
	if s.eng.Pending() > 0 {
		s.dispatchLocked(now, false)
	}
	if !s.closed {
		s.armLocked(now)
	}
}

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
		if j.Waiting() { // not ended already by a job it runs after, cancelled just before
			s.cancelQueuedLocked(taskOf(j), ErrClosed, now)
		}
	}
	for _, j := range s.eng.RunningJobs() {
		taskOf(j).ctx.cancel(context.Canceled)
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

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
