package rt

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"time"

	"github.com/fairsched/fairsched/internal/decide"
	"github.com/fairsched/fairsched/internal/engine"
)

// Durable attempts a replica runs for the leader (decide.Runner). In a
// cluster the leader keeps the durable jobs (keeper.go) and sends each
// attempt to a replica that has its type's handler; the replica runs the
// handler on a goroutine of the scheduler's, with a context that carries
// the attempt's number and the job's ID as in one process, and reports
// the end to the leader, which records it. The context ends when the
// replica fences itself or closes: the attempt is then lost (ErrLost),
// retried by its type's policy; Shutdown waits for the attempts to end.

// errClosedRun ends the context of an attempt its replica's Close cut
// short: the leader counts it lost, and retries it elsewhere.
var errClosedRun = fmt.Errorf("%w (%w: its replica closed)", context.Canceled, ErrLost)

// openReplicaStore readies a replica to enqueue durable jobs in the
// store the replicas share (the leader's keeper takes them from there)
// and to run the attempts of the types it has handlers for, which its
// Hellos tell the leader. It runs in New, before the Scheduler is shared.
func (s *Runtime) openReplicaStore() error {
	d := &durable{st: s.cfg.Store, handlers: maps.Clone(s.cfg.Handlers)}
	if d.handlers == nil {
		d.handlers = make(map[string]*Handler)
	}
	names := slices.Sorted(maps.Keys(d.handlers))
	for _, name := range names {
		if _, known := s.decider().TypeTier(name); !known {
			if err := s.registerLocked(name, TypeConfig{}); err != nil {
				return err
			}
		}
	}
	s.durable = d
	s.remote.SetTypes(append([]string{}, names...))
	return nil
}

// errStoppingRun is the end of an attempt sent to a replica that is
// shutting down or closing: it never starts, and the leader queues its
// job again, the attempt uncounted (DoneNotRun).
var errStoppingRun = fmt.Errorf("%w: its replica is shutting down", ErrLost)

// RunDurable starts attempt of durable job id, of type typ, with args,
// on a goroutine of the scheduler's; the lock is held. Once Shutdown or
// Close has begun it starts nothing: the attempt ends at once, lost, so
// that no goroutine begins while Shutdown or Close waits for them.
func (g *grantee) RunDurable(id int64, attempt int, typ string, args []byte, now int64) {
	s := (*Runtime)(g)
	if s.stopping {
		s.remote.DurableDone(id, attempt, engine.Failed, errStoppingRun.Error(), decide.DoneLost|decide.DoneNotRun, now)
		return
	}
	ctx := &jobContext{parent: durableParent, valuesOnly: true, attempt: int32(attempt)}
	if s.runs == nil {
		s.runs = make(map[int64]*jobContext)
	}
	s.runs[id] = ctx
	s.wg.Add(1)
	go s.runDurable(id, attempt, s.durable.handlers[typ], ctx, args)
}

// runDurable runs one attempt of durable job id with h, and reports its
// end to the leader, even if h calls runtime.Goexit.
func (s *Runtime) runDurable(id int64, attempt int, h *Handler, ctx *jobContext, args []byte) {
	defer s.wg.Done()
	err := errGoexit // what the report says if h never returns
	defer func() { s.durableRunEnded(id, attempt, ctx, err) }()
	if h == nil { // the leader ran a type this replica has no handler of: cannot happen but by a bug
		err = Permanent(fmt.Errorf("fairsched: durable job %d: this replica has no handler of its type", id))
		return
	}
	hctx := context.WithValue(ctx, jobIDKey{}, id) // first: the handler is called right after the check
	if s.lapsedBeforeBegin() {
		err = errLostRun // sent before a pause past the replica's lapse: it must not begin
		return
	}
	err = s.callHandler(h, hctx, args)
}

// callHandler runs h, turning a panic into a *PanicError.
func (s *Runtime) callHandler(h *Handler, ctx context.Context, args []byte) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = s.cfg.Errors.Panic(0, v, debug.Stack())
		}
	}()
	return h.Run(ctx, args)
}

// durableRunEnded reports to the leader that the attempt of durable job
// id that ctx was for ended with err.
func (s *Runtime) durableRunEnded(id int64, attempt int, ctx *jobContext, err error) {
	cause := context.Cause(ctx)
	ctx.end()
	o, flags := engine.Completed, decide.DoneFlags(0)
	if err != nil {
		o = engine.Failed
		if errors.Is(err, ErrPermanent) {
			flags |= decide.DonePermanent
		}
		if cause == errLostRun || cause == errClosedRun {
			flags |= decide.DoneLost
			err = cause
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runs[id] == ctx {
		delete(s.runs, id)
	}
	s.remote.DurableDone(id, attempt, o, errText(err), flags, s.nowLocked())
	s.wakeIdleLocked()
}

// stopRunsLocked ends the context of every durable attempt this replica
// runs, with cause.
func (s *Runtime) stopRunsLocked(cause error) {
	for _, ctx := range s.runs {
		ctx.cancel(cause)
	}
}

// awaitRecorded waits, once Shutdown's jobs have ended, until the leader
// has Recorded the end of every durable attempt this replica ran: an end
// still on its way as the replica leaves would be lost with its Link,
// and the leader would count the attempt lost and run its job again. It
// waits at most a lease (in a cluster): a leader that does not answer
// within one is gone, and the next asks only the replicas still there.
// If ctx ends first it returns ctx.Err().
func (s *Runtime) awaitRecorded(ctx context.Context) error {
	if s.remote == nil {
		return nil
	}
	s.mu.Lock()
	if s.remote.Unrecorded() == 0 {
		s.mu.Unlock()
		return nil
	}
	if s.recorded == nil {
		s.recorded = make(chan struct{})
	}
	recorded := s.recorded
	s.mu.Unlock()
	var lapse <-chan time.Time
	if s.cfg.Cluster != nil {
		t := time.NewTimer(s.cfg.Cluster.Lease)
		defer t.Stop()
		lapse = t.C
	}
	select {
	case <-recorded:
	case <-lapse:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}
