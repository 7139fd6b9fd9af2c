package fairsched

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/fairsched/fairsched/internal/store"
)

// Durable jobs. A job that must survive a restart is data, not a closure:
// a handler is registered per job type (AddHandler), and Enqueue stores
// the job with its arguments, encoded as JSON, in Config.Store before it
// returns. The Scheduler stays the one dispatcher, in the same order and
// limits as every other job; the store records what happens to each job,
// and gives back every unfinished one when the next Scheduler starts on
// it (recover.go).

// Store is where a Scheduler keeps its durable jobs: open one with
// fairschedsqlite.Open. Only this module's stores implement it.
type Store = store.Store

// Handlers holds the handlers of durable job types, for Config.Handlers.
// The zero value is empty and ready to use; add handlers with AddHandler
// before New. A Handlers is not safe for concurrent use.
type Handlers struct {
	m map[string]*handler
}

// handler runs the jobs of one durable type.
type handler struct {
	name    string
	argType reflect.Type
	run     func(ctx context.Context, args []byte) error // decodes, then calls the user's function
}

// AddHandler registers fn as the handler of durable job type name: each
// job of that type enqueued with Enqueue runs fn with its arguments,
// decoded from JSON into a T. A type with a handler takes durable jobs
// only (Submit and RunSync refuse it); if Config.Types does not name it,
// it is registered with the zero TypeConfig. AddHandler panics if fn is
// nil or name has a handler already: both are programming errors.
func AddHandler[T any](h *Handlers, name string, fn func(ctx context.Context, args T) error) {
	if fn == nil {
		panic("fairsched: AddHandler of " + fmt.Sprintf("%q", name) + " with a nil function")
	}
	if _, ok := h.m[name]; ok {
		panic(fmt.Sprintf("fairsched: AddHandler: job type %q has a handler already", name))
	}
	if h.m == nil {
		h.m = make(map[string]*handler)
	}
	h.m[name] = &handler{
		name:    name,
		argType: reflect.TypeFor[T](),
		run: func(ctx context.Context, raw []byte) error {
			var args T
			if err := json.Unmarshal(raw, &args); err != nil {
				return fmt.Errorf("%w: job type %q: %w", ErrArgs, name, err)
			}
			return fn(ctx, args)
		},
	}
}

// ErrArgs is matched (errors.Is) by the error of arguments that cannot be
// encoded (Enqueue's) or that no longer decode (an attempt's, which fails
// with it).
var ErrArgs = errors.New("fairsched: job arguments")

// ErrNoHandler is matched (errors.Is) by Enqueue's error for a job type
// that has no handler.
var ErrNoHandler = errors.New("fairsched: no handler for the job type")

// errDurableType is the error of Submit, RunSync and TryRunSync for a type
// with a handler.
func errDurableType(name string) error {
	return fmt.Errorf("fairsched: job type %q has a handler: its jobs are enqueued with Enqueue", name)
}

// durable is what a Scheduler with a Store keeps.
type durable struct {
	st       store.Store
	handlers map[string]*handler
	// orphans counts the unfinished jobs found at start whose type has no
	// handler: they stay in the store, untouched.
	orphans map[string]int
	// leaving: Shutdown or Close began; guarded by Scheduler.mu. A
	// durable job that ends now without completing stays in the store.
	leaving bool
}

// durableTask is the shell's record of a durable job: a task, and its
// identity in the store. Every job of a type with a handler is one, which
// is how durableOf knows one: a task carries no flag.
type durableTask struct {
	task
	id      int64 // in the store
	attempt int32 // attempts started
	dead    bool  // its last attempt failed for good: recorded as dead
}

// durableOf returns t's durable record, or nil if t is not durable.
func (s *Scheduler) durableOf(t *task) *durableTask {
	if s.durable == nil || s.durable.handlers[t.rec.Type()] == nil {
		return nil
	}
	return (*durableTask)(unsafe.Pointer(t))
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

// Enqueue stores a durable job of type job.Type with args, which must be
// of the type its handler takes, and returns its Handle once the job is
// committed to Config.Store: from then on it runs, here or after a
// restart, until it completes or fails for good. Handle.ID is its
// identity in the store. ctx bounds the wait for the commit; its values
// do not reach the job.
//
// Enqueue fails, storing nothing, with an error matching ErrNoHandler
// for a type without a handler, ErrArgs for arguments of the wrong type
// or that JSON cannot encode, and as Submit does otherwise (ErrClosed, a
// *QueueFullError, ErrStartDeadline ...); with the store's error if the
// write failed, and an error if the Scheduler has no Store. Job.After is
// not taken for durable jobs yet.
func (s *Scheduler) Enqueue(ctx context.Context, job Job, args any) (Handle, error) {
	d := s.durable
	if d == nil {
		return Handle{}, errors.New("fairsched: Enqueue needs a Store in Config")
	}
	h := d.handlers[job.Type]
	if h == nil {
		return Handle{}, fmt.Errorf("%w %q", ErrNoHandler, job.Type)
	}
	if job.After != nil {
		return Handle{}, errors.New("fairsched: Job.After is not supported for durable jobs")
	}
	if got := reflect.TypeOf(args); got != h.argType {
		return Handle{}, fmt.Errorf("%w: job type %q takes a %v, not a %v", ErrArgs, job.Type, h.argType, got)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return Handle{}, fmt.Errorf("%w: job type %q: %w", ErrArgs, job.Type, err)
	}
	rec, err := s.admitDurable(&job, raw)
	if err != nil {
		return Handle{}, err
	}
	if err := d.st.Insert(ctx, rec); err != nil {
		return Handle{}, err
	}
	t := &durableTask{task: task{fn: durableFn, submitCtx: durableParent}, id: rec.ID}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	if err := s.enqueueLocked(&t.task, &job, now); err != nil {
		// Admitted before the write, refused after it (the queue filled,
		// or the scheduler closed meanwhile): the job must not stay.
		d.st.Post(store.Op{Kind: store.OpEnd, ID: rec.ID, At: s.wallOf(now), Err: err.Error()})
		if ferr := d.st.Flush(ctx); ferr != nil {
			return Handle{}, errors.Join(err, ferr)
		}
		return Handle{}, err
	}
	hd := s.handleLocked(&t.task)
	s.launchLocked(&t.task, now)
	return hd, nil
}

// admitDurable checks, before anything is written, what would refuse job
// at once, and returns its store record.
func (s *Scheduler) admitDurable(job *Job, args []byte) (*store.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	if !s.eng.Accepting() {
		return nil, ErrClosed
	}
	if len(s.disabling.disabled) > 0 {
		if err := s.disabledLocked(job, now); err != nil {
			return nil, err
		}
	}
	if s.dups.policy[job.Type] != AllowDuplicates {
		return nil, errors.New("fairsched: duplicate policies are not supported for durable jobs")
	}
	rec := &store.Job{
		Type: job.Type, Key: job.Key, Ref: job.ID, Priority: job.Priority, Submitted: s.wallOf(now),
		State: store.Queued, Args: args,
	}
	if !job.NotBefore.IsZero() {
		rec.NotBefore = job.NotBefore.UnixMicro()
	}
	if !job.StartBy.IsZero() {
		rec.StartBy = job.StartBy.UnixMicro()
	}
	return rec, nil
}

// wallOf returns the wall-clock time, in µs since the Unix epoch, of the
// scheduler's time now: the store's time.
func (s *Scheduler) wallOf(now int64) int64 { return s.epoch.UnixMicro() + now }

// engineTimeOf returns the scheduler's time of the store's time us.
func (s *Scheduler) engineTimeOf(us int64) int64 { return us - s.epoch.UnixMicro() }

// ID returns the identity of a durable job in its Scheduler's Store, for
// as long as the store keeps it; 0 for a job that is not durable.
func (h Handle) ID() int64 {
	if h.t == nil {
		return 0
	}
	if dt := h.scheduler().durableOf(h.t); dt != nil {
		return dt.id
	}
	return 0
}
