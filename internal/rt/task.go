package rt

import (
	"context"
	"errors"
	"unsafe"

	"github.com/fairsched/fairsched/internal/engine"
)

// The records of the run-time layer: a job's task, a submission that
// joined another's job, and the RunSync records kept for reuse. Their
// life is life.go's.

// task is the run-time layer's side of one job: what it runs and who waits for it.
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

// What the run-time layer was told of a job, kept in its engine record's
// Tag (the engine never reads it): admitted and waiting for a grant,
// granted (started here), or ended. The decisions' own state may be ahead
// of it: a grant taken and not handed over yet.
const (
	tagWaiting uint8 = iota
	tagGranted
	tagEnded
)

// waiting reports whether t was admitted and not granted yet.
func (t *task) waiting() bool { return t.rec.Tag == tagWaiting }

// granted reports whether t was granted and runs, or is about to.
func (t *task) granted() bool { return t.rec.Tag == tagGranted }

// ended reports whether t ended.
func (t *task) ended() bool { return t.rec.Tag == tagEnded }

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

// spareTasks are the records of ended RunSync jobs, kept for reuse: a
// stack in an array, so that keeping one is a store, not an append.
// Guarded by Runtime.mu.
type spareTasks struct {
	n    int
	list [maxSpareTasks]*task
}

// get returns a record for a RunSync job, reusing one when
// it can: the record never leaves the scheduler, so reuse is safe, and it
// spares the allocation that dominates an uncontended RunSync.
func (p *spareTasks) get(ctx *jobContext) *task {
	var t *task
	if p.n > 0 {
		p.n--
		t, p.list[p.n] = p.list[p.n], nil
	} else {
		t = new(task)
	}
	t.ctx = ctx
	return t
}

// put keeps an ended RunSync job's record for reuse.
func (p *spareTasks) put(t *task) {
	if p.n == maxSpareTasks {
		return
	}
	*t = task{}
	p.list[p.n] = t
	p.n++
}

// newSubmitTask returns the record of a Submit job, submitted with ctx.
// Its own context is made when it starts (startedLocked), so that a queued
// job, which needs none, does not hold one: a quarter less memory per job
// while it waits.
func newSubmitTask(ctx context.Context, fn func(context.Context) error) *task {
	return &task{fn: fn, submitCtx: ctx}
}

// ErrNilFunc is the error of a RunSync or Submit given no function.
var ErrNilFunc = errors.New("fairsched: the job's function is nil")

// errGoexit is the error of a job whose function called runtime.Goexit
// (t.FailNow in a test, say).
var errGoexit = errors.New("fairsched: job function called runtime.Goexit")

// joined is what a job that duplicates may join keeps.
type joined struct {
	waiters []*joiner     // still attached, in the order they joined
	done    chan struct{} // closed when the job ends
}

// joiner is one submission attached to a job.
type joiner struct {
	js     *joined
	fn     func(context.Context) error // a Submit joiner's; nil for RunSync
	ctx    context.Context             // a Submit joiner's (its values) or a RunSync joiner's
	runner bool                        // its function is the one the job runs
	gone   bool                        // detached
	// promoted is, for a RunSync joiner, closed when it becomes the
	// runner of a job that waits: it must then run the job itself.
	promoted chan struct{}
}
