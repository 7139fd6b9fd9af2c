package rt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"time"

	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/store"
)

// Enqueue and EnqueueMany: durable jobs admitted once the store has
// committed them, all or none, as data with an identity (their ID in the
// store).

// Enqueue is the API's Scheduler.Enqueue, which documents it.
func (s *Runtime) Enqueue(ctx context.Context, job *Job, args any) (Handle, error) {
	if ctx == nil {
		panic("fairsched: Enqueue with a nil context")
	}
	return s.enqueueOne(ctx, EnqueueParams{Job: *job, Args: args}, nil, nil)
}

// enqueueOne enqueues one job, putting state in its transaction if it is
// not nil, with the job's own error rather than a *BatchError.
func (s *Runtime) enqueueOne(ctx context.Context, p EnqueueParams, state *store.StateWrite, queued func([]Handle)) (Handle, error) {
	hs, err := s.enqueueMany(ctx, []EnqueueParams{p}, state, queued)
	if err != nil {
		return Handle{}, unbatched(err)
	}
	return hs[0], nil
}

// EnqueueParams is one job for EnqueueMany: its description and its
// handler's arguments.
type EnqueueParams struct {
	Job  Job
	Args any
}

// unbatched returns the error of a batch of one job as that job's own: a
// *BatchError's inner error.
func unbatched(err error) error {
	if be, ok := err.(*batchError); ok {
		return be.err
	}
	return err
}

// EnqueueMany is the API's Scheduler.EnqueueMany, which documents it.
func (s *Runtime) EnqueueMany(ctx context.Context, jobs []EnqueueParams) ([]Handle, error) {
	if ctx == nil {
		panic("fairsched: EnqueueMany with a nil context")
	}
	hs, err := s.enqueueMany(ctx, jobs, nil, nil)
	return hs, s.cfg.Errors.api(err)
}

// enqueueMany is EnqueueMany, putting state in the store in the jobs'
// transaction if it is not nil, and calling queued, if it is not nil,
// with the jobs' Handles under the lock that queues them: before any of
// them can end.
func (s *Runtime) enqueueMany(ctx context.Context, jobs []EnqueueParams, state *store.StateWrite, queued func([]Handle)) ([]Handle, error) {
	d := s.durable
	if d == nil {
		return nil, errors.New("fairsched: Enqueue needs a Store in Config")
	}
	recs := make([]*store.Job, len(jobs))
	for i := range jobs {
		rec, err := d.record(&jobs[i])
		if err == nil && jobs[i].Job.After != nil {
			rec.After, err = s.durableAfter(jobs[i].Job.After)
		}
		if err != nil {
			return nil, &batchError{index: i, err: err}
		}
		recs[i] = rec
	}
	if s.remote != nil {
		return s.enqueueOnReplica(ctx, jobs, recs, state)
	}
	a, err := s.admitDurable(jobs, recs)
	if err != nil {
		return nil, err
	}
	defer s.wg.Done() // admitDurable's: Shutdown and Close wait for the batch
	if err := d.st.Insert(ctx, state, recs...); err != nil {
		s.mu.Lock()
		s.releaseLocked(a)
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked(a) // from here on they are queued, or refused
	now := s.nowLocked()
	if err := s.refusedAfterWriteLocked(jobs); err != nil {
		// Admitted before the write, refused after it: the scheduler is
		// closing, or a resource shrank. What was written must not run.
		for _, rec := range recs {
			d.st.Post(store.Op{Kind: store.OpEnd, ID: rec.ID, At: s.wallOf(now), Err: err.Error()})
		}
		return nil, err
	}
	hs := make([]Handle, len(jobs))
	for i := range jobs {
		if s.dups.policy != nil {
			if existing := s.joinableLocked(&jobs[i].Job); existing != nil {
				// A duplicate its type joins: the job it joins runs
				// once; the row written for this one ends unrun.
				d.st.Post(store.Op{Kind: store.OpEnd, ID: recs[i].ID, At: s.wallOf(now),
					Err: fmt.Sprintf("fairsched: joined job %d", s.durable.of(existing).id)})
				w := &joiner{fn: durableFn, ctx: durableParent}
				s.inheritLocked(ctx, &jobs[i].Job) // a child's priority, for the job it joins
				before := existing.rec.Base()
				s.joinLocked(existing, &jobs[i].Job, w, now)
				s.storeRaiseLocked(s.durable.of(existing), before, now)
				hs[i] = Handle{t: existing, w: w}
				continue
			}
		}
		t := &durableTask{task: task{fn: durableFn, submitCtx: durableParent}, id: recs[i].ID}
		if err := s.enqueueDurableLocked(t, &jobs[i].Job, recs[i], now); err != nil {
			panic("fairsched: internal error: an admitted durable job was refused: " + err.Error())
		}
		hs[i] = s.handleLocked(&t.task)
		if t.waiting() {
			before := t.rec.Base()
			s.raiseChildLocked(ctx, &t.task, now) // a child: its parent's priority
			s.storeRaiseLocked(t, before, now)
		}
		s.launchLocked(&t.task, now)
	}
	if queued != nil {
		queued(hs)
	}
	return hs, nil
}

// storeRaiseLocked records durable job t's priority if it was raised from
// before (a join, a parent's), so that a restart keeps it.
func (s *Runtime) storeRaiseLocked(t *durableTask, before int, now int64) {
	if p := t.rec.Base(); p != before {
		s.durable.st.Post(store.Op{Kind: store.OpPriority, ID: t.id, At: s.wallOf(now), Allowed: priorityOf(p)})
	}
}

// refusedAfterWriteLocked returns what would refuse one of jobs, admitted
// and written, now: the scheduler closing, or its needs no longer
// fitting the resources; nil if none. Nothing else can refuse them (they
// carry their admission time, past the queue's limits, and a start
// deadline that passed expires them instead), so a batch is queued all
// or none.
func (s *Runtime) refusedAfterWriteLocked(jobs []EnqueueParams) error {
	if s.stopping {
		return ErrClosed
	}
	for i := range jobs {
		if r := s.decider().NeedsRefusal(jobs[i].Job.Type, ownNeeds(jobs[i].Job.Needs)); r != nil {
			return &batchError{index: i, err: needsError(r)}
		}
	}
	return nil
}

// durableAfter returns the store IDs of the jobs a durable job runs
// after, which must be durable jobs of s.
func (s *Runtime) durableAfter(after []Handle) ([]int64, error) {
	ids := make([]int64, len(after))
	for i, h := range after {
		switch {
		case s.remote != nil && h.t == nil && h.elsewhere != 0:
			// A durable job enqueued on a replica of the cluster: the
			// leader keeps it, and resolves the ID.
			ids[i] = h.elsewhere
			continue
		case s.remote != nil && h.t != nil:
			return nil, fmt.Errorf("fairsched: Job.After[%d] is job %d, which is not durable: a durable job runs after durable jobs only", i, h.Seq())
		case h.t == nil:
			return nil, fmt.Errorf("fairsched: Job.After[%d] is the zero Handle, which refers to no job", i)
		case h.t.rec.Engine() != s.eng:
			return nil, fmt.Errorf("fairsched: Job.After[%d] is job %d of another Scheduler", i, h.Seq())
		case h.ID() == 0:
			return nil, fmt.Errorf("fairsched: Job.After[%d] is job %d, which is not durable: a durable job runs after durable jobs only", i, h.Seq())
		}
		ids[i] = h.ID()
	}
	return ids, nil
}

// record checks a job for Enqueue and returns its store record, its
// times left for admitDurable.
func (d *durable) record(p *EnqueueParams) (*store.Job, error) {
	job := &p.Job
	h := d.handlers[job.Type]
	if h == nil {
		return nil, fmt.Errorf("%w %q", ErrNoHandler, job.Type)
	}
	if job.Needs != nil {
		if err := validateNeeds("the job", job.Needs); err != nil {
			return nil, err
		}
	}
	if got := reflect.TypeOf(p.Args); got != h.ArgType {
		return nil, fmt.Errorf("%w: job type %q takes a %v, not a %v", ErrArgs, job.Type, h.ArgType, got)
	}
	raw, err := json.Marshal(p.Args)
	if err != nil {
		return nil, fmt.Errorf("%w: job type %q: %w", ErrArgs, job.Type, err)
	}
	rec := &store.Job{Type: job.Type, Key: job.Key, Ref: job.ID, Priority: job.Priority, State: store.Queued, Args: raw,
		Needs: maps.Clone(job.Needs)}
	if !job.NotBefore.IsZero() {
		rec.NotBefore = job.NotBefore.UnixMicro()
	}
	if !job.StartBy.IsZero() {
		rec.StartBy = job.StartBy.UnixMicro()
	}
	return rec, nil
}

// admitDurable checks, before anything is written, what would refuse
// jobs at once, and stamps their records with their submission time. The
// jobs it admits count against the queue's limits from then on: the
// caller releases them (releaseLocked) once they are queued, refused
// after the write, or not written.
func (s *Runtime) admitDurable(jobs []EnqueueParams, recs []*store.Job) (*admission, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	s.catchUpLocked(now)
	perKey := make(map[string]int, 1)
	for i := range jobs {
		if err := s.stampLocked(&jobs[i].Job, recs[i], now); err != nil {
			return nil, &batchError{index: i, err: err}
		}
		perKey[jobs[i].Job.Key]++
	}
	if err := s.refusedAfterWriteLocked(jobs); err != nil {
		return nil, err
	}
	if r := s.decider().Room(len(jobs), perKey); r != nil { // the jobs being written count as queued
		if r.Reason == engine.RefusedClosed {
			return nil, ErrClosed
		}
		return nil, s.cfg.Errors.QueueFull(QueueFull{KeyLimit: r.Reason == engine.RefusedKeyFull, Key: r.Key, Limit: r.Limit, Size: r.Size})
	}
	// They count against the limits from now on, for Submit and RunSync
	// too, until releaseLocked.
	s.decider().Reserve(len(jobs), perKey)
	s.wg.Add(1) // done by the caller once the jobs are queued or refused
	return &admission{n: len(jobs), perKey: perKey}, nil
}

// stampLocked checks durable job job, described by rec, for what refuses
// it at once whatever the queue holds (a disabled pair, an unknown type,
// a start deadline not after its submission), and stamps rec with its
// submission at now and its start deadline: its own, or its type's
// StartTimeout from now.
func (s *Runtime) stampLocked(job *Job, rec *store.Job, now int64) error {
	if s.disabling.pairs.Any() {
		if err := s.disabling.refuses(job, now); err != nil {
			return err
		}
	}
	rec.Submitted = s.wallOf(now)
	if _, known := s.decider().TypeTier(job.Type); !known {
		return errUnknownType(job.Type)
	}
	var startBy int64
	if rec.StartBy != 0 {
		startBy = s.engineTimeOf(rec.StartBy)
	}
	if dl := s.decider().DeadlineOf(job.Type, startBy, now); dl != 0 {
		notBefore := now
		if rec.NotBefore != 0 { // 0: none, not the Unix epoch
			notBefore = max(now, s.engineTimeOf(rec.NotBefore))
		}
		if dl <= notBefore {
			return fmt.Errorf("%w: the deadline, %v, is not after the job's submission and its NotBefore",
				ErrStartDeadline, s.timeOf(dl).Format(time.RFC3339Nano))
		}
		rec.StartBy = s.wallOf(dl)
	}
	return nil
}

// admission is what admitDurable let in: n jobs, perKey of them by key.
// They count against the queue's limits until releaseLocked.
type admission struct {
	n      int
	perKey map[string]int
}

// releaseLocked stops counting a's jobs as being admitted: they are queued
// now, or were refused, or their write failed.
func (s *Runtime) releaseLocked(a *admission) { s.decider().Unreserve(a.n, a.perKey) }

// enqueueDurableLocked queues durable job t, whose record rec was
// committed, with the submission time it was admitted at.
func (s *Runtime) enqueueDurableLocked(t *durableTask, job *Job, rec *store.Job, now int64) error {
	if rec.StartBy != 0 {
		job.StartBy = time.UnixMicro(rec.StartBy) // its StartTimeout counted from its admission
	}
	// Never 0, which would mean "admitted now" and be checked again.
	if err := s.enqueueAtLocked(&t.task, job, s.engineTimeOf(rec.Submitted), now); err != nil {
		return err
	}
	s.asideClockLocked(t) // waiting for the jobs it runs after
	return nil
}

// enqueueOnReplica stores jobs a replica enqueued, recs, with state, in
// the store the replicas share, and returns their Handles: the leader's
// keeper takes them from the store, and admits them, as it does the jobs
// of callers' transactions; so no limit of the queue refuses them here.
// Each is stamped here, as one process stamps its own (stampLocked): its
// aging clock runs from its Enqueue, and its type's StartTimeout too. A
// Handle learns its job's end from the store (elsewhere.go).
func (s *Runtime) enqueueOnReplica(ctx context.Context, jobs []EnqueueParams, recs []*store.Job, state *store.StateWrite) ([]Handle, error) {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	now := s.nowLocked()
	for i := range jobs {
		if err := s.stampLocked(&jobs[i].Job, recs[i], now); err != nil {
			s.mu.Unlock()
			return nil, &batchError{index: i, err: err}
		}
	}
	s.wg.Add(1) // Shutdown and Close wait for the write
	s.mu.Unlock()
	defer s.wg.Done()
	if err := s.durable.st.Insert(ctx, state, recs...); err != nil {
		return nil, err
	}
	hs := make([]Handle, len(recs))
	for i, rec := range recs {
		hs[i] = Handle{elsewhere: rec.ID, end: s.newEndWait(rec.ID)}
	}
	return hs, nil
}
