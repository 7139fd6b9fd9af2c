package rt

import (
	"context"
	"errors"
	"runtime/debug"
	"unsafe"

	"github.com/fairsched/fairsched/internal/engine"
)

// A task is the shell's record of one job. This file holds its life in the
// shell: made or reused, started by the dispatcher, run on a goroutine of
// the scheduler's (Submit) or its caller's (RunSync), and ended, with
// whoever waits for it woken. Every function here that ends in Locked is
// called with Scheduler.mu held.

// task is the shell's side of one job: what it runs and who waits for it.
// Its engine record is embedded first, so that the engine's *Job is the
// task's address (taskOf).
type task struct {
	rec engine.Job
	// fn is a Submit job's function. A RunSync job's stays with its
	// caller, so nil fn marks a RunSync job.
	fn  func(context.Context) error
	err error
	// wake is closed when a waiting RunSync job starts or ends (then
	// cleared), and when a Submit job ends (made on demand by Handle.Done).
	wake chan struct{}
	// ctx is the context fn receives. It is a separate object because fn
	// may keep it after returning, while a RunSync job's record is reused.
	// A Submit job's is made when it starts, from submitCtx's values.
	ctx       *jobContext
	submitCtx context.Context // a queued Submit job's: the context Submit was given
}

// taskOf returns the task a job record is embedded in. Every engine.Job
// the Scheduler hands its engine is the first field of a task, so the
// record's address is the task's: a conversion, where a pointer back from
// every record to its task would cost each queued job 16 bytes, and a size
// class of the allocator that the collector then scans more slowly.
// TestTaskRecordFirst checks the layout it relies on.
func taskOf(j *engine.Job) *task { return (*task)(unsafe.Pointer(j)) }

// isSync reports whether t is a RunSync job: its function runs on its
// caller's goroutine.
func (t *task) isSync() bool { return t.fn == nil }

// maxSpareTasks bounds the records kept for reuse by RunSync: enough for
// the callers running at once in a busy service, about 10 kB in all.
const maxSpareTasks = 64

// newSyncTaskLocked returns a record for a RunSync job, reusing one when
// it can: the record never leaves the scheduler, so reuse is safe, and it
// spares the allocation that dominates an uncontended RunSync.
func (s *Runtime) newSyncTaskLocked(ctx *jobContext) *task {
	var t *task
	if n := len(s.spare); n > 0 {
		t = s.spare[n-1]
		s.spare[n-1] = nil
		s.spare = s.spare[:n-1]
	} else {
		t = new(task)
	}
	t.ctx = ctx
	return t
}

// recycleLocked keeps an ended RunSync job's record for reuse.
func (s *Runtime) recycleLocked(t *task) {
	if len(s.spare) == maxSpareTasks {
		return
	}
	*t = task{}
	s.spare = append(s.spare, t)
}

// newSubmitTask returns the record of a Submit job, submitted with ctx.
// Its own context is made when it starts (startedLocked), so that a queued
// job, which needs none, does not hold one: a quarter less memory per job
// while it waits.
func newSubmitTask(ctx context.Context, fn func(context.Context) error) *task {
	return &task{fn: fn, submitCtx: ctx}
}

// dispatchLocked starts every job that can start now. If self is true the
// caller is a job goroutine that can run one more Submit job itself: the
// first one started is returned instead of being given a new goroutine.
func (s *Runtime) dispatchLocked(now int64, self bool) (next *task) {
	for s.eng.CanStart() {
		j := s.eng.Next(now)
		if j == nil {
			break
		}
		t := taskOf(j)
		s.startedLocked(t)
		switch {
		case t.isSync():
			close(t.wake)
			t.wake = nil
		case self && next == nil:
			next = t
		default:
			s.wg.Add(1)
			go s.work(t)
		}
	}
	if s.eng.Rated() {
		s.armLocked(now) // a start may have emptied a token bucket
	}
	return next
}

// startedLocked readies a job the engine started to run.
func (s *Runtime) startedLocked(t *task) {
	if s.dups.policy != nil {
		s.dupStartedLocked(t)
	}
	if t.ctx == nil { // a Submit job: its context is made as it starts
		t.ctx = &jobContext{parent: t.submitCtx, valuesOnly: true}
		t.submitCtx = nil
		if a := attemptsOf(t); a != nil { // retried by hand: attempts go on
			t.ctx.attempt = int32(len(a.list) + 1)
		}
	}
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
	failed := err != nil && !cancelled
	if failed && s.disabling.policies != nil {
		s.noteFailureLocked(t, now)
	}
	if s.retryLocked(t, err, cancelled, now) {
		return true
	}
	if failed && !s.closed {
		s.buryLocked(t, err, now)
	}
	s.finishLocked(t, err, true, now)
	return false
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
	s.eng.Finish(&t.rec, o, now)
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
	unblocked = s.eng.Cancel(&t.rec, now)
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
	t.fn, t.ctx, t.submitCtx = nil, nil, nil // a Handle may keep the record long after
	if t.wake != nil || s.watchEnds {        // rare: kept out so that this inlines
		s.wakeEndedLocked(t)
	}
}

// wakeEndedLocked is what endedLocked does for a job someone waits for,
// or that duplicates may join or supersede.
func (s *Runtime) wakeEndedLocked(t *task) {
	if s.dups.policy != nil {
		s.dupEndedLocked(t)
	}
	if t.wake != nil {
		close(t.wake)
	}
	if s.idle != nil && s.eng.Idle() {
		close(s.idle)
		s.idle = nil
		s.watchEnds = s.dups.policy != nil
	}
}

// ErrNilFunc is the error of a RunSync or Submit given no function.
var ErrNilFunc = errors.New("fairsched: the job's function is nil")

// errGoexit is the error of a job whose function called runtime.Goexit
// (t.FailNow in a test, say).
var errGoexit = errors.New("fairsched: job function called runtime.Goexit")

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
	err = fn(t.ctx)
	returned = true
	return err
}

// work runs Submit jobs on a goroutine of the scheduler's: t, then any job
// the dispatcher hands back to it, until there is none.
func (s *Runtime) work(t *task) {
	defer s.wg.Done()
	for t != nil {
		err := s.runAttempt(t)
		cancelled := err != nil && t.ctx.Err() != nil // by its Handle or Close, while it ran
		t.ctx.end()
		s.mu.Lock()
		now := s.nowLocked()
		s.attemptEndedLocked(t, err, cancelled, now)
		t = s.dispatchLocked(now, true)
		s.mu.Unlock()
	}
}
