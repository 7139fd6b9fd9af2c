package fairsched

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/fairsched/fairsched/internal/rt"
	"github.com/fairsched/fairsched/internal/store"
)

// Durable jobs. A job that must survive a restart is data, not a closure:
// a handler is registered per job type (AddHandler), and Enqueue stores
// the job with its arguments, encoded as JSON, in Config.Store before it
// returns. The Scheduler stays the one dispatcher, in the same order and
// limits as every other job; the store records what happens to each job,
// and gives back every unfinished one when the next Scheduler starts on
// it.

// Store is where a Scheduler keeps its durable jobs: open one with
// fairschedsqlite.Open (a file), or fairschedpg.Open (PostgreSQL). Only
// the stores of this repository implement it.
type Store = store.Store

// Handlers holds the handlers of durable job types, for Config.Handlers.
// The zero value is empty and ready to use; add handlers with AddHandler
// before New. A Handlers is not safe for concurrent use.
type Handlers struct {
	m map[string]*rt.Handler
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
		h.m = make(map[string]*rt.Handler)
	}
	h.m[name] = &rt.Handler{
		Name:    name,
		ArgType: reflect.TypeFor[T](),
		Run: func(ctx context.Context, raw []byte) error {
			var args T
			if err := json.Unmarshal(raw, &args); err != nil {
				return fmt.Errorf("%w: job type %q: %w", ErrArgs, name, err)
			}
			return fn(ctx, args)
		},
	}
}

// Enqueue stores a durable job of type job.Type with args, which must be
// of the type its handler takes, and returns its Handle once the job is
// committed to Config.Store: from then on it runs, here or after a
// restart, until it completes or fails for good. Handle.ID is its
// identity in the store. The wait for the commit, a few milliseconds
// shared with other writes, is not cut short by ctx: a job that may have
// been committed is never reported as refused. ctx's values do not reach
// the job, but a ctx that descends from a running job's context makes the
// job that job's child, as Submit does.
//
// Enqueue fails, storing nothing, with an error matching ErrNoHandler
// for a type without a handler, ErrArgs for arguments of the wrong type
// or that JSON cannot encode, and as Submit does otherwise (ErrClosed, a
// *QueueFullError, ErrStartDeadline ...); with the store's error if the
// write failed, and an error if the Scheduler has no Store. Job.After
// takes the Handles of durable jobs of the same Scheduler only. Job.Needs
// and Job.After are stored with the job and hold after a restart.
//
// The queue's limits are checked before the job is written, and the job
// counts against them from then on, while it is written, so Enqueues
// running at once never pass MaxQueue or a key's MaxPending together.
func (s *Scheduler) Enqueue(ctx context.Context, job Job, args any) (Handle, error) {
	h, err := s.rt.Enqueue(ctx, jobOf(&job), args)
	return Handle{h}, err
}

// EnqueueParams is one job for EnqueueMany: its description and its
// handler's arguments.
type EnqueueParams struct {
	Job  Job
	Args any
}

// EnqueueMany stores jobs in one transaction, all or none, and returns
// their Handles, in order, once they are committed: Enqueue for many jobs
// at the cost of one commit. A job that Enqueue would refuse for what it
// is (its type, its arguments, its start deadline) fails the batch with a
// *BatchError naming it; a batch that does not fit the queue's limits
// fails with a *QueueFullError. Nothing is stored then.
func (s *Scheduler) EnqueueMany(ctx context.Context, jobs []EnqueueParams) ([]Handle, error) {
	hs, err := s.rt.EnqueueMany(ctx, enqueueParamsOf(jobs))
	return handlesOf(hs), err
}

// ID returns the identity of a durable job in its Scheduler's Store, for
// as long as the store keeps it; 0 for a job that is not durable.
func (h Handle) ID() int64 {
	return h.h.ID()
}

// enqueueParamsOf reads a batch as the run-time layer's, without a copy:
// EnqueueParams is laid out as rt.EnqueueParams (TestRuntimeMirrors).
func enqueueParamsOf(jobs []EnqueueParams) []rt.EnqueueParams {
	return unsafe.Slice((*rt.EnqueueParams)(unsafe.Pointer(unsafe.SliceData(jobs))), len(jobs))
}

// JobID returns the ID, in its Store, of the durable job whose handler
// received ctx (or a context derived from it), and 0 for any other
// context. A handler can use it to make its effects idempotent: it is the
// same in every attempt, in every process.
func JobID(ctx context.Context) int64 {
	return rt.JobID(ctx)
}

// EnqueueTx enqueues a durable job inside the caller's own transaction tx
// on the Store's database (a *sql.Tx for fairschedsqlite, on Store.DB; a
// pgx.Tx for fairschedpg, on Store.Pool): the job exists if and only if
// tx commits, so a job and the change that calls for it are written
// together or not at all. It returns the job's
// ID in the store. The Scheduler takes the job once the commit is done,
// within milliseconds, and runs it as any durable job; a rolled-back job
// never runs.
//
// It checks the job as Enqueue does, and fails with an error matching
// ErrTxNotSupported if the Store takes no transaction of type Tx. The
// queue's limits are checked when EnqueueTx is called, not when tx
// commits.
func EnqueueTx[Tx any](ctx context.Context, s *Scheduler, tx Tx, job Job, args any) (int64, error) {
	return rt.EnqueueTx(ctx, s.rt, tx, jobOf(&job), args)
}
