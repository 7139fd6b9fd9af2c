package rt

import (
	"context"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/store"
)

// Durable jobs. A job that must survive a restart is data, not a closure:
// a handler is registered per job type (AddHandler), and Enqueue stores
// the job with its arguments, encoded as JSON, in Config.Store before it
// returns. The Scheduler stays the one dispatcher, in the same order and
// limits as every other job; the store records what happens to each job,
// and gives back every unfinished one when the next Scheduler starts on
// it (recover.go).

// errDurableType is the error of Submit, RunSync and TryRunSync for a type
// with a handler.
func errDurableType(name string) error {
	return fmt.Errorf("fairsched: job type %q has a handler: its jobs are enqueued with Enqueue", name)
}

// durable is what a Scheduler with a Store keeps.
type durable struct {
	st       store.Store
	handlers map[string]*Handler
	// everyType: every job is durable, whatever its type (a keeper's:
	// its handlers are the replicas').
	everyType bool
	// byID indexes the unfinished jobs by ID, for those that run after
	// them (Job.After): while New queues again the jobs it recovers, a
	// job's dependencies coming before it; and for a keeper's whole term,
	// whose replicas enqueue jobs that run after any of its jobs. A job
	// leaves it as it ends (durableEndedLocked).
	byID map[int64]*durableTask
	// stood is, while New recovers the jobs, the paused time of each
	// job lane that the store keeps with the pauses (pauses.Stood).
	stood map[laneName]int64
	// orphans counts, by type, the unfinished jobs found at start whose
	// type has no handler here: they wait, their type held (WaitNoHandler).
	orphans map[string]int
	// Guarded by Runtime.mu.
	// leaving: Shutdown or Close began. A durable job that ends now
	// without completing stays in the store.
	leaving bool
	// saveStop stops the timer of the next save of the fair state;
	// savedVersion is the engine's FairVersion at the last save.
	saveStop     func() bool
	savedVersion uint64
	// atLeave is the fair state as Shutdown or Close found it, before the
	// queued jobs left.
	atLeave *engine.FairState
}

// laneName names a job lane: a key's jobs of one type.
type laneName struct{ key, typ string }

// durableTask is the record of a durable job: a task, and its
// identity in the store. Every job of a type with a handler is one, which
// is how durable.of knows one: a task carries no flag.
type durableTask struct {
	task
	id      int64 // in the store
	attempt int32 // attempts started
	dead    bool  // its last attempt failed for good: recorded as dead
}

// of returns t's durable record, or nil if t is not durable.
func (d *durable) of(t *task) *durableTask {
	if d == nil || !d.isDurableType(t.rec.Type()) {
		return nil
	}
	return (*durableTask)(unsafe.Pointer(t))
}

// isDurableType reports whether type name's jobs are durable: it has a
// handler, or jobs of it were found in the store without one.
func (d *durable) isDurableType(name string) bool {
	return d.everyType || d.handlers[name] != nil || d.orphans[name] > 0
}

// durableParent is the context a durable job's contexts derive from: the
// values of Enqueue's context are not kept, since the job may run in
// another process. Enqueue's task carries it as its submission context,
// which is how enqueueLocked tells it from a Submit of the same type.
var durableParent context.Context = durableRoot{context.Background()}

type durableRoot struct{ context.Context }

// durableFn is the function of every durable task: never called, since
// runAttempt runs a durable job's handler instead. Non-nil, as a Submit
// job's function is.
func durableFn(context.Context) error {
	panic("fairsched: internal error: a durable job's function was called")
}

// Handler runs the jobs of one durable type: the API's AddHandler makes
// one.
type Handler struct {
	Name    string
	ArgType reflect.Type
	Run     func(ctx context.Context, args []byte) error // decodes, then calls the user's function
}
