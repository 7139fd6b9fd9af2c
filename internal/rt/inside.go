package rt

import (
	"context"
	"time"

	"github.com/fairsched/fairsched/internal/engine"
)

// What the API's tests and benchmarks reach inside for: the lock and the
// engine behind it, a job's record, and the clock conversions. Nothing
// else calls these.

// Task is a job's record (task), for the tests that size or drive one.
type Task = task

// JobContext is a job's context (jobContext), for the tests that size one.
type JobContext = jobContext

// NewSubmitTask returns the record of a Submit job, as Submit makes one.
func NewSubmitTask(ctx context.Context, fn func(context.Context) error) *Task {
	return newSubmitTask(ctx, fn)
}

// NewJobContext returns a job's context with parent, as RunSync makes one.
func NewJobContext(parent context.Context) *JobContext { return &jobContext{parent: parent} }

// TaskOf returns the record whose engine record j is.
func TaskOf(j *engine.Job) *Task { return taskOf(j) }

// Rec returns t's engine record.
func (t *Task) Rec() *engine.Job { return &t.rec }

// Task returns the record h refers to, and whether h stands for a
// submission that joined it.
func (h Handle) Task() (t *Task, joined bool) { return h.t, h.w != nil }

// OwnHandle returns a Handle on t itself, as its first submission's.
func OwnHandle(t *Task) Handle { return Handle{t: t} }

// Locked calls f with the lock held, the engine, and the engine's now.
func (s *Runtime) Locked(f func(e *engine.Engine, now int64)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.eng, s.nowLocked())
}

// TryLock reports whether the lock was free, and leaves it so.
func (s *Runtime) TryLock() bool {
	if !s.mu.TryLock() {
		return false
	}
	s.mu.Unlock()
	return true
}

// Verify checks the engine's invariants at now.
func (s *Runtime) Verify() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eng.Verify(s.nowLocked())
}

// EnqueueLocked, StartedLocked and FinishLocked drive a job's life by
// hand, with the lock held (Locked), for the benchmarks that run the
// dispatcher without goroutines.
func (s *Runtime) EnqueueLocked(t *Task, desc *Job, now int64) error {
	return s.enqueueLocked(t, desc, now)
}

// StartedLocked readies a job the engine started.
func (s *Runtime) StartedLocked(t *Task) { s.startedLocked(t) }

// FinishLocked ends a running job, as its return would.
func (s *Runtime) FinishLocked(t *Task, err error, now int64) { s.finishLocked(t, err, true, now) }

// Clock returns the scheduler's clock.
func (s *Runtime) Clock() Clock { return s.clock }

// Epoch returns New's instant, the origin of the engine's times.
func (s *Runtime) Epoch() time.Time { return s.epoch }

// TimeOf, EngineTime and WallOf are the clock conversions (enginetime.go).
func (s *Runtime) TimeOf(us int64) time.Time { return s.timeOf(us) }

// EngineTime returns t in the engine's µs.
func (s *Runtime) EngineTime(t time.Time) int64 { return s.engineTime(t) }

// WallOf returns the engine time us as µs since the Unix epoch.
func (s *Runtime) WallOf(us int64) int64 { return s.wallOf(us) }

// Spare returns the records kept for reuse.
func (s *Runtime) Spare() []*Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Task(nil), s.spare.list[:s.spare.n]...)
}

// WaitGoroutines waits for the job goroutines to end.
func (s *Runtime) WaitGoroutines() { s.wg.Wait() }

// DisabledPairsKept counts the pairs the disable policies keep, expired
// ones not yet swept included.
func (s *Runtime) DisabledPairsKept() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, disabled := s.disabling.pairs.Tracked()
	return disabled
}

// Signals returns the test signals the Runtime was given.
func (s *Runtime) Signals() *Signals { return s.cfg.Signals }

// Runtime returns the scheduler h's job belongs to.
func (h Handle) Runtime() *Runtime { return h.scheduler() }

// Lock and Unlock take and release the lock, and EngineLocked and
// NowLocked read under it, for the benchmarks that drive the dispatcher
// by hand (EnqueueLocked, StartedLocked, FinishLocked) at the cost the
// run-time layer's own calls pay: Locked's closure would add its own.
func (s *Runtime) Lock() { s.mu.Lock() }

// Unlock releases the lock Lock took.
func (s *Runtime) Unlock() { s.mu.Unlock() }

// EngineLocked returns the engine; the lock is held.
func (s *Runtime) EngineLocked() *engine.Engine { return s.eng }

// NowLocked returns the engine's now; the lock is held.
func (s *Runtime) NowLocked() int64 { return s.nowLocked() }

// PageCopy is what Queue copies under the lock, for the benchmark that
// times the lock (QueueLocked).
type PageCopy = pageCopy

// QueueLocked copies into c what Queue(offset, limit) copies while it
// holds the lock, at now, and does nothing else, the lock held by the
// caller (Locked): for the benchmark that times the lock.
func (s *Runtime) QueueLocked(c *PageCopy, offset, limit int, now int64) {
	var p QueuePage
	s.copyPageLocked(c, &p, offset, limit, now)
}
