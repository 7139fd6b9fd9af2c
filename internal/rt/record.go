package rt

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/fairsched/fairsched/internal/decide"
	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/store"
)

// What the store records as durable jobs run and end. The store is told
// after the fact, in order: an attempt's start is committed before its
// handler runs (so a handler that kills the process is a failed attempt
// at the next start, not a crash at every start), and everything else is
// posted, committed in a later group, and flushed by Shutdown and Close.
// A crash before a posted record is committed runs the job again: at
// least once.

// durableAttempt records that an attempt of dt starts, and returns the
// function the attempt runs: its handler, with the arguments the store
// gave back and the job's ID in its context.
func (s *Runtime) durableAttempt(dt *durableTask) (func(context.Context) error, error) {
	if s.keeper != nil { // it runs on a replica
		return s.remoteAttempt(dt)
	}
	h := s.durable.handlers[dt.rec.Type()]
	dt.attempt++ // only the goroutine that runs it touches it while it runs
	args, err := s.durable.st.Start(context.Background(), dt.id, s.wallOf(dt.rec.Started()))
	if err != nil {
		return nil, fmt.Errorf("fairsched: recording the start of job %d: %w", dt.id, err)
	}
	return func(ctx context.Context) error {
		return h.Run(context.WithValue(ctx, jobIDKey{}, dt.id), args)
	}, nil
}

// jobIDKey is the context key of a durable job's ID.
type jobIDKey struct{}

// JobID is the API's JobID, which documents it.
func JobID(ctx context.Context) int64 {
	id, _ := ctx.Value(jobIDKey{}).(int64)
	return id
}

// durableRetriedLocked records that durable job t's attempt failed at now
// with err, and that it will be tried again not before notBefore. It
// reports whether the job leaves memory now, kept in the store alone: the
// scheduler is leaving, and the next start tries it again.
func (s *Runtime) durableRetriedLocked(t *task, err error, started, notBefore, now int64) (leaves bool) {
	dt := s.durable.of(t)
	if dt == nil {
		return false
	}
	stood, _ := s.eng.AsideStood(&t.rec) // backing off: set aside with its aging clock running
	s.durable.st.Post(store.Op{
		Kind: store.OpRetry, ID: dt.id, At: s.wallOf(now), NotBefore: s.wallOf(notBefore),
		Attempt: store.Attempt{Start: s.wallOf(started), End: s.wallOf(now), Err: errText(err)},
		Stood:   s.wallOf(stood),
	})
	return s.durable.leaving
}

// durableEndedLocked records how durable job t ended. While the
// scheduler is leaving (Shutdown, Close), a queued job stays in the store
// as it is, for the next start; so does a running one that Close cut
// short and that did not complete, queued again with that attempt not
// counted.
func (s *Runtime) durableEndedLocked(t *task) {
	dt := s.durable.of(t)
	if dt == nil {
		return
	}
	if s.durable.byID != nil {
		delete(s.durable.byID, dt.id)
	}
	now := s.nowLocked()
	o := t.rec.Outcome()
	ran := o == engine.Completed || o == engine.Failed
	op := store.Op{ID: dt.id, At: s.wallOf(now)}
	if ran && (o == engine.Failed || attemptsOf(t) != nil) {
		op.Attempt = store.Attempt{Start: s.wallOf(t.rec.Started()), End: s.wallOf(now), Err: errText(resultOf(t))}
	}
	switch {
	case o == engine.Completed:
		op.Kind = store.OpComplete
	case s.closed && ran: // cut short by Close
		op = store.Op{Kind: store.OpInterrupt, ID: dt.id, At: op.At}
	case dt.dead:
		op.Kind, op.Err = store.OpDead, errText(resultOf(t))
	case s.durable.leaving && !ran: // queued, or waiting for a retry posted already
		return
	default:
		op.Kind, op.Err = store.OpEnd, errText(resultOf(t))
	}
	s.durable.st.Post(op)
}

// requeueDurableLocked records that the dead durable job id is queued
// again by hand, with allowed attempts in all, made so far, and returns
// its new record.
func (s *Runtime) requeueDurableLocked(id int64, made, allowed int) *task {
	s.durable.st.Post(store.Op{Kind: store.OpRequeue, ID: id, Allowed: allowed})
	dt := &durableTask{task: task{fn: durableFn, submitCtx: durableParent}, id: id, attempt: int32(made)}
	return &dt.task
}

// clockMovedLocked records the submission time of durable job j, which a
// pause moved on, or which came back from being set aside with its clock
// running: its aging clock stood still, and the next start must find it
// so; and it keeps no lane's paused time (store.Job.Stood) any longer.
func (s *Runtime) clockMovedLocked(j *engine.Job) {
	if j.Tag == decide.TagStandIn { // a keeper's engine: another replica's job
		return
	}
	if dt := s.durable.of(taskOf(j)); dt != nil {
		s.durable.st.Post(store.Op{Kind: store.OpClock, ID: dt.id, At: s.wallOf(j.Submitted())})
	}
}

// asideClockLocked records, of durable job t set aside with its aging
// clock running, its submission time and its lane's paused time then
// (engine.AsideStood), if it is so set aside: a restart before it comes
// back moves its submission time on by what its lane stood since.
func (s *Runtime) asideClockLocked(t *durableTask) {
	if stood, ok := s.eng.AsideStood(&t.rec); ok {
		s.durable.st.Post(store.Op{Kind: store.OpClock, ID: t.id, At: s.wallOf(t.rec.Submitted()), Stood: s.wallOf(stood)})
	}
}

// errText is err's message, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Fairness across a restart. The keys' virtual times and the learned
// costs (engine.FairState) are saved in the store every fairSaveEvery
// while they change, and once more when Shutdown or Close has let every
// job end: exact after those, at most that stale after a crash.

const (
	fairStateName = "fair"
	fairSaveEvery = 2 * time.Second
)

// scheduleFairSaveLocked sets the clock timer of the next save.
func (s *Runtime) scheduleFairSaveLocked() {
	s.durable.saveStop = s.clock.AfterFunc(fairSaveEvery, s.saveFairTick)
}

// saveFairTick saves the fair state if it changed, and schedules the next
// save.
func (s *Runtime) saveFairTick() {
	s.mu.Lock()
	if s.durable.leaving {
		s.mu.Unlock()
		return
	}
	s.wg.Add(1) // Shutdown and Close wait for the save they may race
	defer s.wg.Done()
	fs, changed := s.fairChangedLocked()
	s.scheduleFairSaveLocked()
	s.mu.Unlock()
	if changed {
		s.putFair(fs)
	}
}

// fairChangedLocked returns the fair state, and whether it changed since
// it was last saved.
func (s *Runtime) fairChangedLocked() (engine.FairState, bool) {
	v := s.eng.FairVersion()
	if v == s.durable.savedVersion {
		return engine.FairState{}, false
	}
	s.durable.savedVersion = v
	return s.eng.SaveFair(), true
}

// putFair encodes fs and posts it to the store, outside the lock.
func (s *Runtime) putFair(fs engine.FairState) {
	b, err := json.Marshal(fs)
	if err != nil { // plain data: cannot happen but for a NaN, which the engine never holds
		panic("fairsched: internal error: encoding the fair state: " + err.Error())
	}
	s.durable.st.PutState(fairStateName, b)
}

// saveFairFinal stops the periodic save and saves the fair state as the
// last job left it: Shutdown and Close, once every job has ended. The
// virtual times are the last ones (the jobs that ran to the end were
// charged); which flows were active, and the tiers' floors, are those of
// the moment the queued jobs left (leaveLocked).
func (s *Runtime) saveFairFinal() {
	s.mu.Lock()
	if s.durable.saveStop != nil {
		s.durable.saveStop()
		s.durable.saveStop = nil
	}
	fs, changed := s.fairChangedLocked()
	if at := s.durable.atLeave; at != nil {
		if !changed {
			fs = s.eng.SaveFair()
		}
		changed = true
		active := make(map[engine.FlowV]bool)
		for _, f := range at.Flows {
			if f.Active {
				active[engine.FlowV{Key: f.Key, Tier: f.Tier}] = true
			}
		}
		for i := range fs.Flows {
			f := &fs.Flows[i]
			f.Active = active[engine.FlowV{Key: f.Key, Tier: f.Tier}]
		}
		fs.Tiers = at.Tiers
		s.durable.atLeave = nil
	}
	s.mu.Unlock()
	if changed {
		s.putFair(fs)
	}
}

// durableDiedLocked marks t, whose last attempt failed for good, dead in
// the store, if it is durable, and returns its identity there (0: none).
func (s *Runtime) durableDiedLocked(t *task) int64 {
	dt := s.durable.of(t)
	if dt == nil {
		return 0
	}
	dt.dead = true
	return dt.id
}
