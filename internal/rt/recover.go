package rt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/store"
)

// Restart. New reads every unfinished job of Config.Store and queues it
// again as it was: its submission time (so its aging goes on), moved on
// by what its clock stood paused (clockMovedLocked, the pauses kept with
// when each began, and, for a job set aside with its clock running, what
// its lane stood since: pauses.Stood), its attempts, its not-before time. A job whose attempt was running when the
// last process died has lost that attempt: it counts as failed, with
// ErrLost, and the job is retried by its type's policy (its backoff
// included) or, out of attempts, is dead.

// openStore registers the durable types and queues the store's
// unfinished jobs again. It runs in New, before the Scheduler is shared.
func (s *Runtime) openStore() error {
	d := &durable{st: s.cfg.Store, handlers: maps.Clone(s.cfg.Handlers)}
	if d.handlers == nil {
		d.handlers = make(map[string]*Handler)
	}
	for _, name := range slices.Sorted(maps.Keys(d.handlers)) {
		if _, known := s.decider().TypeTier(name); !known {
			if err := s.registerLocked(name, TypeConfig{}); err != nil {
				return err
			}
		}
	}
	s.durable = d
	s.eng.ClockMoved = s.clockMovedLocked
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	if err := s.loadDeadLocked(); err != nil { // first: Recover adds the jobs it finds dead
		return err
	}
	if err := s.loadFairLocked(now); err != nil { // before the jobs, whose keys it places
		return err
	}
	if err := s.loadPausesLocked(now); err != nil { // before the jobs, which they hold
		return err
	}
	if deps, err := d.st.HasDependencies(context.Background()); err != nil {
		return err
	} else if deps {
		d.byID = make(map[int64]*durableTask) // an index of the jobs read, for those that run after them
	}
	err := d.st.Recover(context.Background(), func(j *store.Job) error {
		s.restoreLocked(j, now)
		return nil
	})
	d.byID, d.stood = nil, nil
	if err != nil {
		return err
	}
	if len(d.orphans) > 0 && s.cfg.Logger != nil {
		for _, name := range slices.Sorted(maps.Keys(d.orphans)) {
			s.cfg.Logger.Warn("fairsched: durable jobs wait for a handler of their type, which this process lacks",
				slog.String("type", name), slog.Int("jobs", d.orphans[name]))
		}
	}
	s.armLocked(now)     // for the jobs that wait for a time
	s.catchUpLocked(now) // and those whose start deadline passed while no one ran them
	s.dispatchLocked(now, false)
	s.scheduleFairSaveLocked()
	if w, ok := d.st.(store.Watcher); ok { // jobs of callers' transactions (EnqueueTx)
		return w.Watch(s.arrived)
	}
	return nil
}

// restoreLocked queues the unfinished durable job j again at now.
func (s *Runtime) restoreLocked(j *store.Job, now int64) {
	d := s.durable
	if s.keeper != nil && j.Allowed > 0 { // perhaps a dead job a replica queued again
		s.forgetRevivedLocked(j.ID)
	}
	switch {
	case s.keeper != nil: // its handlers are the replicas': a type is registered as it first comes
		if _, known := s.decider().TypeTier(j.Type); !known && s.registerLocked(j.Type, TypeConfig{}) != nil {
			return
		}
	case d.handlers[j.Type] == nil && !s.holdOrphanLocked(j.Type, now):
		return
	}
	dt := &durableTask{task: task{fn: durableFn, submitCtx: durableParent}, id: j.ID, attempt: int32(j.Attempt)}
	var a *attempts
	if len(j.Attempts) > 0 || j.State == store.Running || j.Allowed > 0 {
		a = attemptsOfStored(j)
		dt.err = a
	}
	desc := storedDesc(j)
	if j.StartBy != 0 && j.StartBy <= s.wallOf(now) && j.State != store.Running {
		// Its start deadline passed while no process ran it.
		err := fmt.Errorf("%w: job %d did not start by %v", ErrStartDeadline, j.ID, time.UnixMicro(j.StartBy).Format(time.RFC3339Nano))
		d.st.Post(store.Op{Kind: store.OpEnd, ID: j.ID, At: s.wallOf(now), Err: err.Error()})
		return
	}
	// Admitted no later than now, though the wall clock read later then
	// (it was stepped back since): a job admitted in the future would
	// never reach the end of its grace period.
	tm := engine.Times{Submitted: min(s.engineTimeOf(j.Submitted), now), Needs: ownNeeds(j.Needs)}
	var moved int64
	if stood, ok := d.stood[laneName{j.Key, j.Type}]; ok && j.Stood != 0 && j.State != store.Running {
		// Set aside with its aging clock running when the last process
		// stopped: its lane stood paused since, up to its pause in
		// progress if one holds it (Times.Submitted counts that).
		moved = min(tm.Submitted+max(0, stood-j.Stood), now) - tm.Submitted
		tm.Submitted += moved
	}
	if j.StartBy != 0 {
		tm.StartBy = s.engineTimeOf(j.StartBy)
	}
	if len(j.After) > 0 {
		after, err := s.restoredAfterLocked(j)
		if errors.Is(err, errEndInFlight) {
			s.arriveAgainLocked(j)
			return
		}
		if err != nil {
			d.st.Post(store.Op{Kind: store.OpEnd, ID: j.ID, At: s.wallOf(now), Err: err.Error()})
			return
		}
		tm.After = after
	}
	if n := len(j.Attempts); n > 0 {
		tm.Ran, tm.AttemptEnded = true, s.engineTimeOf(j.Attempts[n-1].End)
	}
	if j.NotBefore != 0 {
		tm.NotBefore = s.engineTimeOf(j.NotBefore)
		if j.Attempt == 0 { // delayed, never started: its aging clock starts at its NotBefore
			tm.Submitted = max(tm.Submitted, tm.NotBefore)
		}
	}
	if j.State == store.Running && s.keeper != nil {
		r, ok := s.keeper.reported[j.ID]
		if m, ended := s.keeper.early[j.ID]; (!ok || r.attempt != j.Attempt) && ended && m.Attempt == j.Attempt {
			// No replica runs it, and its end came: it started as the
			// store has it, on the replica that ended it.
			r, ok = reportedRun{replica: m.Replica, attempt: m.Attempt, started: min(s.engineTimeOf(j.Started), now)}, true
		}
		if ok && r.attempt == j.Attempt { // it runs on that replica, or ended there
			if s.adoptLocked(dt, &desc, &tm, r, now) && d.byID != nil {
				d.byID[j.ID] = dt
			}
			return
		}
	}
	if j.State == store.Running {
		lost := store.Attempt{Start: j.Started, End: s.wallOf(now), Err: ErrLost.Error()}
		a.list = append(a.list, AttemptInfo{Start: time.UnixMicro(lost.Start), End: s.timeOf(now), Err: ErrLost})
		p := s.retries.byType[j.Type]
		limit := max(p.Attempts, 1)
		if a.allowed > 0 {
			limit = a.allowed
		}
		if len(a.list) >= limit {
			d.st.Post(store.Op{Kind: store.OpDead, ID: j.ID, At: s.wallOf(now), Attempt: lost, Err: ErrLost.Error()})
			s.buryRestoredLocked(dt.id, &desc, a, now)
			return
		}
		if j.StartBy != 0 && j.StartBy <= s.wallOf(now) { // and may not start again
			err := fmt.Errorf("%w: job %d did not start again by %v, after %d attempts; the last was lost",
				ErrStartDeadline, j.ID, time.UnixMicro(j.StartBy).Format(time.RFC3339Nano), len(a.list))
			d.st.Post(store.Op{Kind: store.OpEnd, ID: j.ID, At: s.wallOf(now), Attempt: lost, Err: err.Error()})
			return
		}
		tm.NotBefore = now + p.Wait(len(a.list)).Microseconds()
		tm.Ran, tm.AttemptEnded = true, now // it was running until the restart found it lost
		d.st.Post(store.Op{Kind: store.OpRetry, ID: j.ID, At: s.wallOf(now), NotBefore: s.wallOf(tm.NotBefore), Attempt: lost})
	}
	if r := s.restoreEnqueueLocked(dt, &desc, &tm, now); r != nil {
		// Its needs no longer fit the resources: with Submitted,
		// nothing else refuses it (a start deadline passed while no
		// process ran ends it above).
		err := fmt.Errorf("fairsched: durable job %d could not be queued again at start: %w", j.ID, needsError(r))
		d.st.Post(store.Op{Kind: store.OpEnd, ID: j.ID, At: s.wallOf(now), Err: err.Error()})
		return
	}
	// Its submission time and lane's paused time as this process counts
	// them, if they changed; or, no longer set aside, none.
	if stood, aside := s.eng.AsideStood(&dt.rec); aside {
		if moved != 0 || s.wallOf(stood) != j.Stood {
			s.asideClockLocked(dt)
		}
	} else if j.Stood != 0 {
		d.st.Post(store.Op{Kind: store.OpClock, ID: j.ID, At: s.wallOf(dt.rec.Submitted())})
	}
	if d.byID != nil {
		d.byID[j.ID] = dt
	}
	if s.eng.HasUnrun() { // a job it runs after had failed already
		s.unrunLocked(now)
	}
	if s.dups.policy != nil { // its duplicates join it, or it replaces an older one
		s.supersedeLocked(s.dups.accepted(&dt.task), &dt.task, now)
		if s.joinsLocked(&dt.task) {
			s.registerJoinLocked(&dt.task, durableFn, durableParent)
		}
	}
}

// loadFairLocked takes back the keys' virtual times and the learned costs
// that the last Scheduler on the store saved.
func (s *Runtime) loadFairLocked(now int64) error {
	b, err := s.durable.st.State(context.Background(), fairStateName)
	if err != nil || b == nil {
		return err
	}
	var fs engine.FairState
	if err := json.Unmarshal(b, &fs); err != nil {
		return fmt.Errorf("fairsched: the store's fair-share state: %w", err)
	}
	s.eng.RestoreFair(fs, now)
	return nil
}

// loadDeadLocked reads the newest dead jobs of the store into the dead
// list, each with a sequence number of this Scheduler's, so that they can
// be seen and retried by hand as those that died here can.
func (s *Runtime) loadDeadLocked() error {
	limit := s.dead.limit
	if limit < 0 {
		return nil
	}
	var found []*deadRecord
	err := s.durable.st.Dead(context.Background(), limit, func(j *store.Job) error {
		desc := storedDesc(j)
		found = append(found, s.durableDead(j.ID, &desc, attemptsOfStored(j), errorOf(j.Err), time.UnixMicro(j.Finished)))
		return nil
	})
	for i := len(found) - 1; i >= 0; i-- { // the list is oldest first
		s.dead.add(found[i])
	}
	return err
}

// restoredAfterLocked returns the records of the jobs restored job j runs
// after that are still here (byID), queued again before it (its
// dependencies have smaller IDs), or, for a keeper, taken before it (a
// replica enqueued j once it had their IDs). The others are as the store
// has them (as depEnds read them, for a keeper; else read here): one
// ended without completing fails j, as it would have had the process not
// stopped, and the error says so; one that completed, or that retention
// deleted, is no longer waited for.
func (s *Runtime) restoredAfterLocked(j *store.Job) ([]*engine.Job, error) {
	var after []*engine.Job
	for _, id := range j.After {
		if dt := s.durable.byID[id]; dt != nil {
			after = append(after, &dt.rec)
			continue
		}
		e, ok := depEnd{}, false
		if s.keeper != nil {
			e, ok = s.keeper.ends[id]
		}
		if !ok { // at start, or not read before: read now
			var err error
			if e.state, e.why, e.found, err = s.durable.st.Ended(context.Background(), id); err != nil {
				return nil, err
			}
		}
		state, why, found := e.state, e.why, e.found
		if found && !state.Finished() && s.keeper != nil && !s.keeper.again {
			return nil, errEndInFlight
		}
		if found && state != store.Completed {
			return nil, fmt.Errorf("%w: job %d runs after job %d, which did not complete: %s", ErrDependency, j.ID, id, why)
		}
	}
	return after, nil
}

// holdOrphanLocked readies type name, found in the store without a
// handler here, to hold its jobs: registered if it is not (with the zero
// TypeConfig), and paused, for good in this process (WaitNoHandler). It
// reports false if the type cannot be registered.
func (s *Runtime) holdOrphanLocked(name string, now int64) bool {
	d := s.durable
	if d.orphans[name] == 0 {
		if _, known := s.decider().TypeTier(name); !known && s.registerLocked(name, TypeConfig{}) != nil {
			return false
		}
		s.eng.PauseType(name, now)
	}
	if d.orphans == nil {
		d.orphans = make(map[string]int)
	}
	d.orphans[name]++
	return true
}

// buryRestoredLocked adds durable job id, found at start out of
// attempts, to the dead list.
func (s *Runtime) buryRestoredLocked(id int64, desc *Job, a *attempts, now int64) {
	s.dead.total++
	if s.dead.limit < 0 {
		return
	}
	s.dead.add(s.durableDead(id, desc, a, a.list[len(a.list)-1].Err, s.timeOf(now)))
}

// durableDead returns the dead-list record of durable job id, described
// by desc, with attempts a, dead at died with err.
func (s *Runtime) durableDead(id int64, desc *Job, a *attempts, err error, died time.Time) *deadRecord {
	return &deadRecord{
		info: DeadJob{Seq: s.eng.TakeSeq(), Job: *desc, Err: err, Attempts: append([]AttemptInfo(nil), a.list...), Died: died},
		fn:   durableFn, parent: durableParent, attempts: a, durableID: id,
	}
}

// storedDesc returns the description of stored job j, as Enqueue had it.
func storedDesc(j *store.Job) Job {
	return Job{Type: j.Type, ID: j.Ref, Key: j.Key, Priority: j.Priority, Needs: j.Needs}
}

// attemptsOfStored returns the attempt record of stored job j.
func attemptsOfStored(j *store.Job) *attempts {
	a := &attempts{parent: durableParent, allowed: j.Allowed}
	for _, at := range j.Attempts {
		a.list = append(a.list, AttemptInfo{Start: time.UnixMicro(at.Start), End: time.UnixMicro(at.End), Err: errorOf(at.Err)})
	}
	return a
}

// errorOf turns a stored error message back into an error; nil for "".
func errorOf(msg string) error {
	switch msg {
	case "":
		return nil
	case ErrLost.Error():
		return ErrLost
	}
	return errors.New(msg)
}

// errEndInFlight is restoredAfterLocked's answer, for a keeper, when a
// job the arrived job runs after is no longer held yet not ended in the
// store: it ended here, and its end is still being written.
var errEndInFlight = errors.New("fairsched: a dependency's end is being written")

// arriveAgainLocked queues arrived job j again, on a goroutine of the
// Scheduler's (arrive): a job it runs after ended here, its end not yet
// written when the store was read. Asked again, the store's answer
// stands.
func (s *Runtime) arriveAgainLocked(j *store.Job) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.arrive(j, true)
	}()
}

// depEnd is how the store has a job another runs after: its state, why
// it ended, whether the store has it at all.
type depEnd struct {
	state store.State
	why   string
	found bool
}

// depEnds reads, without the lock, how the store has the jobs j runs
// after, once it has written what was posted before (Flush): the ends of
// jobs that ended here. A dependency it could not read is left out, for
// restoredAfterLocked to read.
func (s *Runtime) depEnds(j *store.Job) map[int64]depEnd {
	ctx := context.Background()
	st := s.durable.st
	if err := st.Flush(ctx); err != nil {
		if s.cfg.Logger != nil {
			s.cfg.Logger.Error("fairsched: the leader could not write what it had posted before queuing a job that runs after others", "job", j.ID, "err", err)
		}
		return nil
	}
	ends := make(map[int64]depEnd, len(j.After))
	for _, id := range j.After {
		state, why, found, err := st.Ended(ctx, id)
		if err == nil {
			ends[id] = depEnd{state, why, found}
		}
	}
	return ends
}

// arrived queues a durable job that a caller's transaction committed
// (EnqueueTx), as the store found it. A Scheduler that is leaving leaves
// it in the store for the next start.
func (s *Runtime) arrived(j *store.Job) { s.arrive(j, false) }

// arrive is arrived; again: j came before, and the store's ends of the
// jobs it runs after stand (arriveAgainLocked). A keeper reads those ends
// first, without the lock (depEnds): the leader decides for the whole
// cluster, and waits for no database under its lock.
func (s *Runtime) arrive(j *store.Job, again bool) {
	var ends map[int64]depEnd
	if s.keeper != nil && len(j.After) > 0 {
		ends = s.depEnds(j)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.durable.leaving || s.closed {
		return
	}
	now := s.nowLocked()
	if k := s.keeper; k != nil {
		k.ends, k.again = ends, again
		defer func() { k.ends, k.again = nil, false }()
	}
	s.restoreLocked(j, now)
	s.armLocked(now)
	s.catchUpLocked(now) // its start deadline may have passed
	s.dispatchLocked(now, false)
}
