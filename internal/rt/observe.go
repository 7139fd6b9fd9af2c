package rt

import (
	"context"

	"github.com/fairsched/fairsched/internal/engine"
)

// The bridge from the engine to the events: the engine reports what it
// decided (engine.Observer), and the observer makes the Events of it.

// observer turns what the engine reports into Events for the hook. Its
// methods run under Runtime.mu and never block.
type observer Runtime

func (o *observer) jobEvent(kind EventKind, j *engine.Job, now int64) Event {
	s := (*Runtime)(o)
	return Event{
		Kind: kind, Time: s.timeOf(now), Seq: j.Seq(),
		Type: j.Type(), ID: j.ID(), Key: j.Key(), Tier: Tier(j.Tier()),
		BasePriority: j.Base(), EffectivePriority: j.Base(),
	}
}

func (o *observer) Submitted(j *engine.Job, now int64) {
	o.events.send(o.jobEvent(EventSubmitted, j, now))
}

func (o *observer) Started(j *engine.Job, eff int, aged bool, now int64) {
	ev := o.jobEvent(EventStarted, j, now)
	ev.EffectivePriority, ev.Wait = eff, usDuration(now-j.Submitted())
	ev.Urgent, ev.Reserved = j.Kind() == engine.Urgent, j.Kind() == engine.Reserved
	o.events.send(ev)
	if aged {
		ev.Kind = EventAged
		o.events.send(ev)
	}
}

func (o *observer) Finished(j *engine.Job, out engine.Outcome, now int64) {
	ev := o.jobEvent(EventFinished, j, now)
	ev.Wait = usDuration(j.Started() - j.Submitted())
	ev.Duration = usDuration(now - j.Started())
	ev.Outcome, ev.Err = outcomeOf(out), resultOf(taskOf(j))
	ev.Urgent, ev.Reserved = j.Kind() == engine.Urgent, j.Kind() == engine.Reserved
	o.events.send(ev)
}

func (o *observer) Cancelled(j *engine.Job, now int64) {
	ev := o.jobEvent(EventFinished, j, now)
	ev.Wait = usDuration(now - j.Submitted())
	ev.Outcome, ev.Err = OutcomeCancelled, resultOf(taskOf(j))
	o.events.send(ev)
}

func (o *observer) Expired(j *engine.Job, now int64) {
	ev := o.jobEvent(EventFinished, j, now)
	ev.Wait = usDuration(now - j.Submitted())
	ev.Outcome, ev.Err = OutcomeExpired, ErrStartDeadline
	o.events.send(ev)
}

// DependencyFailed is reported by the Scheduler itself as it ends the job
// (unrunLocked), once the error it wraps is known: a dependency that
// expired gets its error after the engine reports the expiry.
func (o *observer) DependencyFailed(j, dep *engine.Job, now int64) {}

// dependencyFailed reports a job that ended without running with err.
func (o *observer) dependencyFailed(j *engine.Job, err error, now int64) {
	ev := o.jobEvent(EventFinished, j, now)
	ev.Wait = usDuration(now - j.Submitted())
	ev.Outcome, ev.Err = OutcomeDependencyFailed, err
	o.events.send(ev)
}

func (o *observer) Retrying(j *engine.Job, _, now int64) {
	ev := o.jobEvent(EventRetrying, j, now)
	ev.Wait = usDuration(j.Started() - j.Submitted())
	ev.Duration = usDuration(now - j.Started())
	if a := attemptsOf(taskOf(j)); a != nil {
		ev.Err = a.list[len(a.list)-1].Err
	}
	o.events.send(ev)
}

func (o *observer) AllocationChanged(key string, old, new float64, r engine.AllocationReason, now int64) {
	s := (*Runtime)(o)
	o.events.send(Event{Kind: EventAllocationChanged, Time: s.timeOf(now), Key: key,
		OldSlots: old, NewSlots: new, Reason: AllocationReason(r)})
}

func outcomeOf(o engine.Outcome) Outcome {
	switch o {
	case engine.Completed:
		return OutcomeCompleted
	case engine.Failed:
		return OutcomeFailed
	}
	return OutcomeCancelled
}

// rejectedLocked reports a refused submission to the hook. typed is false
// when the type is unknown.
func (s *Runtime) rejectedLocked(d *Job, typed bool, err error, now int64) {
	if s.events == nil {
		return
	}
	ev := Event{Kind: EventRejected, Time: s.timeOf(now), Type: d.Type, ID: d.ID, Key: d.Key, Err: err}
	if typed {
		ev.Tier = s.tierOfTypeLocked(d.Type)
	}
	s.events.send(ev)
}

// tierOfTypeLocked returns the tier of a registered job type.
func (s *Runtime) tierOfTypeLocked(name string) Tier {
	t, _ := s.decider().TypeTier(name)
	return Tier(t)
}

// closeEvents stops event delivery once the events already sent are
// delivered, and waits for that. Later events are discarded. If ctx ends
// first, it returns ctx.Err() and delivery goes on, unless every event was
// delivered already: then it waits for the goroutine, which is ending.
func (s *Runtime) closeEvents(ctx context.Context) error {
	e := s.events
	if e == nil {
		return nil
	}
	s.mu.Lock()
	e.stopped = true
	s.mu.Unlock()
	e.once.Do(func() { close(e.ch) })
	if e.unfinished.Load() == 0 {
		<-e.done
		return nil
	}
	select {
	case <-e.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
