package fairsched

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// EventKind says what an Event reports.
type EventKind uint8

const (
	EventSubmitted         EventKind = iota + 1 // a job was queued
	EventStarted                                // a job got a slot
	EventFinished                               // a job ended; see Outcome
	EventRejected                               // a submission was refused: queue full, closed, unknown type
	EventAged                                   // a job started above its base priority, or as urgent
	EventAllocationChanged                      // a configured key's fair allocation changed
)

var kindNames = [...]string{"", "submitted", "started", "finished", "rejected", "aged", "allocation_changed"}

func (k EventKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Outcome is how a job ended.
type Outcome uint8

const (
	OutcomeCompleted Outcome = iota + 1 // ran and returned nil
	OutcomeFailed                       // ran and returned an error, or panicked
	OutcomeCancelled                    // did not run to the end: cancelled, caller gone, or closed
)

var outcomeNames = [...]string{"", "completed", "failed", "cancelled"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// AllocationReason says why a key's allocation changed.
type AllocationReason uint8

const (
	ReasonConfigChange AllocationReason = iota + 1 // weight, reservation or cap changed
	ReasonRebalance                                // another key arrived or left
	ReasonKeyDrained                               // the key itself ran out of work
)

var reasonNames = [...]string{"", "config_change", "rebalance", "key_drained"}

func (r AllocationReason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unknown"
}

// Event reports something the scheduler did. Fields that do not apply to
// the Kind are zero.
type Event struct {
	Kind EventKind
	Time time.Time

	// The job, for every kind but EventAllocationChanged.
	Seq               uint64
	Type, ID, Key     string
	Tier              Tier
	BasePriority      int
	EffectivePriority int           // at start, for EventStarted and EventAged
	Urgent            bool          // started as urgent
	Reserved          bool          // started under the key's MinSlots
	Wait              time.Duration // submission to start (or to end, if it never started)
	Duration          time.Duration // start to end, for EventFinished
	Outcome           Outcome       // for EventFinished
	Err               error         // the job's error, or why it was rejected

	// For EventAllocationChanged (Key is set too).
	OldSlots, NewSlots float64
	Reason             AllocationReason
}

// eventSink delivers events to the hook on its own goroutine, so that a
// slow hook never stalls dispatch: past the buffer, events are dropped and
// counted.
type eventSink struct {
	ch      chan Event
	dropped atomic.Uint64
	// unfinished counts the events sent and not yet delivered: queued, or
	// in the hook.
	unfinished atomic.Int64
	once       sync.Once
	done       chan struct{}
	logger     *slog.Logger
	stopped    bool // guarded by Scheduler.mu: no more sends, ch may be closed
}

func newEventSink(hook func(Event), size int, logger *slog.Logger) *eventSink {
	if size == 0 {
		size = defaultEventBuffer
	}
	e := &eventSink{ch: make(chan Event, size), done: make(chan struct{}), logger: logger}
	go func() {
		defer close(e.done)
		warned := false
		for ev := range e.ch {
			e.deliver(hook, ev)
			// Warn here, off the scheduler's lock: the logger is user code.
			if !warned && e.logger != nil && e.dropped.Load() > 0 {
				e.logger.Warn("fairsched: event hook is falling behind; dropping events")
				warned = true
			}
			e.unfinished.Add(-1) // after the user code: closeEvents may wait without ctx once it is 0
		}
	}()
	return e
}

func (e *eventSink) deliver(hook func(Event), ev Event) {
	defer func() {
		if v := recover(); v != nil && e.logger != nil {
			e.logger.Error("fairsched: event hook panicked", "event", ev.Kind.String(), "panic", v)
		}
	}()
	hook(ev)
}

// send queues ev without blocking. Called under Scheduler.mu. After the
// scheduler has shut down (a SetKey after Close, say) events are discarded.
func (e *eventSink) send(ev Event) {
	if e.stopped {
		return
	}
	e.unfinished.Add(1)
	select {
	case e.ch <- ev:
	default:
		e.unfinished.Add(-1)
		e.dropped.Add(1)
	}
}

// closeEvents stops event delivery once the events already sent are
// delivered, and waits for that. Later events are discarded. If ctx ends
// first, it returns ctx.Err() and delivery goes on, unless every event was
// delivered already: then it waits for the goroutine, which is ending.
func (s *Scheduler) closeEvents(ctx context.Context) error {
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

func (e *eventSink) droppedCount() uint64 {
	if e == nil {
		return 0
	}
	return e.dropped.Load()
}

func (s *Scheduler) timeOf(us int64) time.Time {
	return s.epoch.Add(time.Duration(us) * time.Microsecond)
}

func (s *Scheduler) jobEvent(kind EventKind, j *job, now int64) Event {
	return Event{
		Kind: kind, Time: s.timeOf(now), Seq: j.seq,
		Type: j.lane.typ.name, ID: j.id, Key: j.lane.key.name, Tier: j.lane.typ.cfg.Tier,
		BasePriority: int(j.base), EffectivePriority: int(j.base),
	}
}

func (s *Scheduler) recordSubmitLocked(j *job, now int64) {
	s.counters.submitted++
	if s.events != nil {
		s.events.send(s.jobEvent(EventSubmitted, j, now))
	}
}

// rejectLocked counts and reports a refused submission and returns err.
// t is nil when the type is unknown.
func (s *Scheduler) rejectLocked(d Job, t *typeState, err error, now int64) error {
	ev := Event{Kind: EventRejected, Time: s.timeOf(now), Type: d.Type, ID: d.ID, Key: d.Key, Err: err}
	switch {
	case t == nil:
		s.counters.rejectedUnknownType++
	case errors.Is(err, ErrClosed):
		t.stats.rejectedClosed++
		ev.Tier = t.cfg.Tier
	default: // ErrQueueFull
		t.stats.rejectedFull++
		ev.Tier = t.cfg.Tier
	}
	if s.events != nil {
		s.events.send(ev)
	}
	return err
}

func (s *Scheduler) recordStartLocked(j *job, now int64) {
	c := &s.counters
	t := j.lane.typ
	t.stats.started++
	wait := now - j.sub
	c.wait.observe(float64(wait) / 1e6)
	eff := s.aging.effective(int(j.base), j.sub, now)
	c.effective[eff/10]++
	aged := eff > int(j.base) || j.kind == startUrgent
	switch j.kind {
	case startUrgent:
		c.urgentStarts++
	case startReserved:
		c.reservedStarts++
	}
	if aged {
		c.promotions++
	}
	if k := j.lane.key; s.cfg.MaxConcurrency > 0 && k.cfg.MinSlots == 0 {
		// A start beyond the key's weighted share of the tier, made with
		// capacity that keys with a claim to it left idle.
		if share := float64(s.cfg.MaxConcurrency) * k.cfg.Weight / t.tier.activeWeight; float64(j.lane.flow.running) > share+1e-9 {
			c.excess++
		}
	}
	if s.events == nil {
		return
	}
	ev := s.jobEvent(EventStarted, j, now)
	ev.EffectivePriority, ev.Wait = eff, time.Duration(wait)*time.Microsecond
	ev.Urgent, ev.Reserved = j.kind == startUrgent, j.kind == startReserved
	s.events.send(ev)
	if aged {
		ev.Kind = EventAged
		s.events.send(ev)
	}
}

func (s *Scheduler) recordFinishLocked(j *job, err error, ran bool, now int64) {
	c := &s.counters
	t := j.lane.typ
	dur := now - j.start
	out := OutcomeCompleted
	switch {
	case !ran:
		out = OutcomeCancelled
		c.cancelled++
		t.stats.cancelled++
	case err != nil:
		out = OutcomeFailed
		c.failed++
		t.stats.failed++
	default:
		c.completed++
		t.stats.completed++
		if int(j.base) >= 75 {
			c.highCompleted++
		} else if int(j.base) < 25 {
			c.lowCompleted++
		}
	}
	if ran {
		c.duration.observe(float64(dur) / 1e6)
	}
	if s.events != nil {
		ev := s.jobEvent(EventFinished, j, now)
		ev.Wait = time.Duration(j.start-j.sub) * time.Microsecond
		ev.Duration = time.Duration(dur) * time.Microsecond
		ev.Outcome, ev.Err = out, err
		ev.Urgent, ev.Reserved = j.kind == startUrgent, j.kind == startReserved
		s.events.send(ev)
	}
}

func (s *Scheduler) recordCancelLocked(j *job, err error, now int64) {
	s.counters.cancelled++
	j.lane.typ.stats.cancelled++
	if s.events != nil {
		ev := s.jobEvent(EventFinished, j, now)
		ev.Wait = time.Duration(now-j.sub) * time.Microsecond
		ev.Outcome, ev.Err = OutcomeCancelled, err
		s.events.send(ev)
	}
}

// emitAllocationLocked reports changes of the configured keys' allocations
// after key k started or stopped having work, or was reconfigured. It is
// called on those transitions only, not as queues grow and shrink, and only
// with a hook and configured keys: computing allocations is O(b log b) in
// the busy keys b.
//
// Only busy keys and k can have changed: a configured key's allocation
// falls to 0 when it drains, and that is reported then, with k the key.
func (s *Scheduler) emitAllocationLocked(k *keyState, reason AllocationReason) {
	if s.events == nil || s.nconfigured == 0 {
		return
	}
	alloc := s.allocationsLocked()
	now := s.nowLocked()
	report := s.busy
	if k.busyIdx < 0 {
		report = append(report[:len(report):len(report)], k)
	}
	for _, other := range report {
		if !other.configured {
			continue
		}
		a := alloc[other]
		if a == other.alloc {
			continue
		}
		r := reason
		if other != k {
			r = ReasonRebalance
		}
		s.events.send(Event{Kind: EventAllocationChanged, Time: s.timeOf(now), Key: other.name,
			OldSlots: other.alloc, NewSlots: a, Reason: r})
		other.alloc = a
	}
}
