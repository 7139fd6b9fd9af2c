package rt

import (
	"context"
	"fmt"
	"time"

	"github.com/fairsched/fairsched/internal/engine"
)

// Batches (docs/design.md, Calling it). SubmitMany decides together what
// arrives together: one lock acquisition, one clock reading and one check
// of the queue's limits for the whole batch, then each job placed as
// Submit places it. It is not a tier of its own: its jobs are in the
// order exactly where the same Submits, one after the other at that
// instant, would have put them.

// SubmitParams is one job for SubmitMany: its description and its
// function, as Submit takes them.
type SubmitParams struct {
	Job Job
	Fn  func(context.Context) error
}

// MaxBatch is the most jobs SubmitMany takes in one call. It holds the
// scheduler's lock for the whole batch, O(log n) per job as a Submit
// does, and this bounds how long other callers and the dispatcher wait
// for it. Split a larger batch: each part is all or none.
const MaxBatch = 10_000

// SubmitMany is the API's Scheduler.SubmitMany, which documents it.
func (s *Runtime) SubmitMany(ctx context.Context, jobs []SubmitParams) ([]Handle, error) {
	hs, err := s.submitMany(ctx, jobs)
	return hs, s.cfg.Errors.api(err)
}

// submitMany is SubmitMany, its error for a bad job a *batchError.
func (s *Runtime) submitMany(ctx context.Context, jobs []SubmitParams) ([]Handle, error) {
	if ctx == nil {
		panic("fairsched: SubmitMany with a nil context")
	}
	if len(jobs) > MaxBatch {
		return nil, fmt.Errorf("%w: %d jobs, at most %d", ErrBatchTooLarge, len(jobs), MaxBatch)
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	for i := range jobs {
		if jobs[i].Fn == nil {
			return nil, &batchError{index: i, err: ErrNilFunc}
		}
	}
	// The batch's records in one allocation: they stay in memory while
	// one of them is referred to.
	tasks := make([]task, len(jobs))
	hs := make([]Handle, len(jobs))
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	s.catchUpLocked(now) // the clock timer may be late: what fell due comes first
	if err := s.admitBatchLocked(jobs, now); err != nil {
		return nil, err
	}
	parent := batchParent{ctx: ctx}
	if s.remote != nil {
		s.remote.BeginBatch()
	}
	for i := range jobs {
		t := &tasks[i]
		t.fn, t.submitCtx = jobs[i].Fn, ctx
		hs[i] = s.submitOfBatchLocked(t, &jobs[i].Job, &parent, now)
		if s.cfg.Signals != nil && s.cfg.Signals.Batched != nil {
			s.cfg.Signals.Batched(hs[i], s.eng)
		}
	}
	if s.remote != nil {
		s.remote.EndBatch(now)
		return s.awaitBatchLocked(tasks, hs)
	}
	return hs, nil
}

// awaitBatchLocked is SubmitMany's end on a replica: the leader admits
// the batch's jobs all or none (Remote.EndBatch), and this waits for its
// answer to the first one asked for, with mu held on entry and on return
// but released meanwhile: the Handles hs if it admitted them, else the
// refusal's error (Grantee.Ended has ended every job of the batch).
func (s *Runtime) awaitBatchLocked(tasks []task, hs []Handle) ([]Handle, error) {
	for i := range tasks {
		t := &tasks[i]
		if !t.waiting() {
			continue // joined another job, or granted: not asked for
		}
		answer := s.remote.Admission(&t.rec)
		s.mu.Unlock()
		admitted := <-answer
		s.mu.Lock()
		if !admitted {
			return nil, resultOf(t)
		}
		break
	}
	return hs, nil
}

// submitOfBatchLocked submits job t, described by desc, of an admitted
// batch whose parent is parent, at now, as Submit would, and returns its
// Handle.
func (s *Runtime) submitOfBatchLocked(t *task, desc *Job, parent *batchParent, now int64) Handle {
	if s.dups.policy != nil {
		if existing := s.joinableLocked(desc); existing != nil {
			d := *desc // raised for its parent below: the caller's stays as it is
			if eff, ok := parent.priority(s); ok {
				if base, known := s.decider().BasePriority(*descOf(&d)); known && eff > base {
					d.Priority = eff
				}
			}
			w := &joiner{fn: t.fn, ctx: t.submitCtx}
			s.joinLocked(existing, &d, w, now)
			return Handle{t: existing, w: w}
		}
	}
	if err := s.enqueueLocked(t, desc, now); err != nil {
		panic("fairsched: internal error: a job of an admitted batch was refused: " + err.Error())
	}
	h := s.handleLocked(t)
	if t.waiting() {
		if eff, ok := parent.priority(s); ok {
			s.decider().Raise(&t.rec, eff, now)
		}
	}
	s.launchLocked(t, now)
	return h
}

// batchParent finds, once for a whole batch, the running job whose
// context the batch's descends from: its priority at its start does not
// change, and it cannot end while the batch holds the lock.
type batchParent struct {
	ctx    context.Context
	looked bool
	eff    int
	ok     bool
}

// priority returns the parent's priority, if the batch has a parent.
func (p *batchParent) priority(s *Runtime) (int, bool) {
	if !p.looked {
		p.eff, p.ok = s.parentPriorityLocked(p.ctx)
		p.looked = true
	}
	return p.eff, p.ok
}

// admitBatchLocked checks, at now, what would refuse a job of jobs, as
// Submit's checks would, and whether the batch fits the queue's limits as
// a whole. Once it returns nil, none of the jobs' Submits can be refused:
// nothing that refuses one changes while the lock is held, and the
// limits had room for every job as one more pending. On a refusal it
// counts and reports it as Submit would, and changes nothing else.
func (s *Runtime) admitBatchLocked(jobs []SubmitParams, now int64) error {
	if s.stopping {
		for i := range jobs {
			s.batchRejectedLocked(&jobs[i].Job, true, ErrClosed, now)
		}
		return ErrClosed
	}
	// The count by key, for the keys' MaxPending: the jobs of a run of one
	// key are counted without a map look-up each; the checks of a type
	// alone are made once for a run of jobs of that type.
	perKey := make(map[string]int, 1)
	runKey, run := jobs[0].Job.Key, 0
	var types typeRun
	noneDisabled := !s.disabling.pairs.Any()
	for i := range jobs {
		job := &jobs[i].Job
		// A job of the run's type with nothing of its own to check, the
		// common case, is spared the call.
		if !(noneDisabled && types.needsChecked && job.Type == types.name && job.Needs == nil && job.After == nil &&
			job.StartBy.IsZero() && job.NotBefore.IsZero()) {
			if err := s.refusedAloneLocked(job, &types, now); err != nil {
				return &batchError{index: i, err: err}
			}
		}
		if job.Key != runKey {
			perKey[runKey] += run
			runKey, run = job.Key, 0
		}
		run++
	}
	perKey[runKey] += run
	if r := s.decider().Room(len(jobs), perKey); r != nil {
		if r.Reason == engine.RefusedClosed {
			return ErrClosed // not reached: checked above, under the same lock
		}
		first := &jobs[0].Job // for the wait: the first job under the limit hit
		if r.Reason == engine.RefusedKeyFull {
			for i := range jobs {
				if jobs[i].Job.Key == r.Key {
					first = &jobs[i].Job
					break
				}
			}
		}
		wait, _ := s.estimateLocked(first, now)
		full := QueueFull{KeyLimit: r.Reason == engine.RefusedKeyFull, Key: r.Key, Limit: r.Limit, Size: r.Size, Wait: wait}
		if !full.KeyLimit {
			full.Key = first.Key
		}
		err := s.cfg.Errors.QueueFull(full)
		for i := range jobs {
			s.batchRejectedLocked(&jobs[i].Job, false, err, now)
		}
		return err
	}
	return nil
}

// typeRun is what admitBatchLocked knows of the type of a run of jobs:
// its checks of the type alone hold for every job of the run.
type typeRun struct {
	name         string
	checked      bool // the type is known, and not durable
	needsChecked bool // and the type's own needs fit the resources
	started      bool // name is set
}

// refusedAloneLocked returns the error Submit would refuse job with at
// now for what it is, or nil; types is what is known of the type of the
// jobs before it.
func (s *Runtime) refusedAloneLocked(job *Job, types *typeRun, now int64) error {
	if !types.started || job.Type != types.name {
		*types = typeRun{name: job.Type, started: true}
	}
	if !types.checked {
		if s.durable != nil && s.durable.isDurableType(job.Type) {
			return errDurableType(job.Type)
		}
		if _, known := s.decider().TypeTier(job.Type); !known {
			err := errUnknownType(job.Type)
			s.decider().RejectedUnknownType()
			s.rejectedLocked(job, false, err, now)
			return err
		}
		types.checked = true
	}
	if s.disabling.pairs.Any() {
		if err := s.disabling.refuses(job, now); err != nil {
			return err
		}
	}
	// A job's own needs stand in place of its type's.
	if job.Needs != nil || !types.needsChecked {
		if job.Needs != nil {
			if err := validateNeeds("the job", job.Needs); err != nil {
				return err
			}
		}
		if r := s.decider().NeedsRefusal(job.Type, ownNeeds(job.Needs)); r != nil {
			err := needsError(r)
			s.rejectedLocked(job, true, err, now)
			return err
		}
		if job.Needs == nil {
			types.needsChecked = true
		}
	}
	if job.After != nil {
		if _, err := s.afterOf(job); err != nil {
			return err
		}
		if s.remote != nil && s.waitsForAnyLocked(job.After) {
			return errBatchWaitsOnReplica
		}
	}
	// Without StartBy or NotBefore, a type's StartTimeout, counted from
	// now, ends after now.
	if !job.StartBy.IsZero() || !job.NotBefore.IsZero() {
		tm := s.timesOf(job)
		if dl := s.decider().DeadlineOf(job.Type, tm.StartBy, now); dl != 0 && dl <= max(now, tm.NotBefore) {
			err := fmt.Errorf("%w: the deadline, %v, is not after the job's submission and its NotBefore",
				ErrStartDeadline, s.timeOf(dl).Format(time.RFC3339Nano))
			s.rejectedLocked(job, true, err, now)
			return err
		}
	}
	return nil
}

// batchRejectedLocked counts and reports job, of a batch refused as a
// whole by closing or the queue's limits, as one refusal of its type.
func (s *Runtime) batchRejectedLocked(job *Job, closed bool, err error, now int64) {
	s.decider().Rejected(job.Type, closed, 1)
	s.rejectedLocked(job, true, err, now)
}
