package fairsched

import (
	"context"

	"github.com/fairsched/fairsched/internal/rt"
)

// Scheduler decides which job runs next: bounded concurrency, tiers,
// fair share between keys by learned cost, priorities with aging, type and
// key caps and conflict exclusion, by the one order of the package
// documentation (and docs/design.md, The order). Create one with New; the
// zero value is not usable. A Scheduler is safe for concurrent use.
type Scheduler struct {
	// The Scheduler is the API: it checks what it is given and hands it
	// to its run-time layer (internal/rt), which holds the lock, runs the
	// jobs and asks the engine (internal/engine) for every decision.
	rt *rt.Runtime
}

// New returns a Scheduler configured by cfg, or an error naming every
// problem with cfg.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r, err := rt.New(cfg.runtime())
	if err != nil {
		return nil, err
	}
	return &Scheduler{rt: r}, nil
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
func (s *Scheduler) RunSync(ctx context.Context, desc Job, fn func(context.Context) error) error {
	return s.rt.RunSync(ctx, jobOf(&desc), fn)
}

// TryRunSync runs fn on the calling goroutine, as RunSync does, if the job
// can start at once, and otherwise returns ErrWouldWait at once, queueing
// nothing: semaphore.TryAcquire for a scheduler. A job can start at once
// when it passes every hard limit (the slots, its tier's, type's and key's
// caps, and no conflicting job running); jobs already queued do not stand
// in its way, since each of them is held back by a limit. It fails as
// RunSync does otherwise, and the queue's limits apply. On a replica
// (Config.Replica) the leader answers, a round trip away.
func (s *Scheduler) TryRunSync(ctx context.Context, desc Job, fn func(context.Context) error) error {
	return s.rt.TryRunSync(ctx, jobOf(&desc), fn)
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
func (s *Scheduler) Submit(ctx context.Context, desc Job, fn func(context.Context) error) (Handle, error) {
	h, err := s.rt.Submit(ctx, jobOf(&desc), fn)
	return Handle{h}, err
}

// WaitIdle waits until nothing is queued or running, as errgroup's Wait
// does, without closing the scheduler: work submitted meanwhile is waited
// for too, and it returns at the first instant the scheduler is idle. If
// ctx ends first it returns ctx.Err(); on a scheduler that is idle
// already it returns nil, whatever ctx says. Like Shutdown, it must not be
// called from a job, which it would wait for.
func (s *Scheduler) WaitIdle(ctx context.Context) error {
	return s.rt.WaitIdle(ctx)
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
// what happened, or with the store's error. On a replica of a cluster
// (Config.Replica) it also waits until the leader has the end of every
// durable attempt the replica ran, so that none runs again, or a lease
// if no leader answers.
func (s *Scheduler) Shutdown(ctx context.Context) error {
	return s.rt.Shutdown(ctx)
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
func (s *Scheduler) Close() error {
	return s.rt.Close()
}

// Done returns a channel closed when Shutdown or Close is first called:
// from then on the scheduler accepts no new work, though what it has may
// still be running (Shutdown's drain) and its read-only calls still
// answer. It is for what watches a scheduler without owning it, such as a
// sampler on a timer, to learn that it may stop; the owner learns that
// the work has ended from Shutdown's or Close's return. O(1).
func (s *Scheduler) Done() <-chan struct{} { return s.rt.Done() }
