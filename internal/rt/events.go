package rt

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fairsched/fairsched/internal/engine"
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
	EventRetrying                               // a job's attempt failed; it waits for its next
	EventDead                                   // a Submit job failed for good and joined the dead jobs
	EventDisabled                               // a (type, ID) pair was disabled by its type's DisablePolicy (Seq: the job whose failure did it) or by Scheduler.Disable (Seq 0)
)

var kindNames = [...]string{"", "submitted", "started", "finished", "rejected", "aged", "allocation_changed", "retrying", "dead", "disabled"}

func (k EventKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Outcome is how a job ended.
type Outcome uint8

const (
	OutcomeCompleted        Outcome = iota + 1 // ran and returned nil
	OutcomeFailed                              // ran and returned an error, or panicked
	OutcomeCancelled                           // did not run to the end: cancelled, caller gone, or closed
	OutcomeExpired                             // did not start by its start deadline
	OutcomeDependencyFailed                    // did not start: a job it runs after did not complete
)

var outcomeNames = [...]string{"", "completed", "failed", "cancelled", "expired", "dependency_failed"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// AllocationReason says why a key's allocation changed.
type AllocationReason uint8

const (
	ReasonConfigChange = AllocationReason(engine.ReasonConfigChange) // weight, reservation or cap changed
	ReasonRebalance    = AllocationReason(engine.ReasonRebalance)    // another key arrived or left
	ReasonKeyDrained   = AllocationReason(engine.ReasonKeyDrained)   // the key itself ran out of work, or was paused
)

var reasonNames = [...]string{"", "config_change", "rebalance", "key_drained"}

func (r AllocationReason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unknown"
}

// Event is what the run-time layer reports to the API's hook, which makes
// an Event of it: the same fields (see its documentation).
type Event struct {
	Kind                            EventKind
	Time                            time.Time
	Seq                             uint64
	Type, ID, Key                   string
	Tier                            Tier
	BasePriority, EffectivePriority int
	Urgent, Reserved                bool
	Wait, Duration                  time.Duration
	Outcome                         Outcome
	Err                             error
	OldSlots, NewSlots              float64
	Reason                          AllocationReason
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
	stopped    bool // guarded by Runtime.mu: no more sends, ch may be closed
}

func newEventSink(hook func(Event), size int, logger *slog.Logger, signals *Signals) *eventSink {
	if size == 0 {
		size = DefaultEventBuffer
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
			if signals != nil {
				signals.Delivered <- struct{}{}
			}
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

// send queues ev without blocking. Called under Runtime.mu. After the
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

func (e *eventSink) droppedCount() uint64 {
	if e == nil {
		return 0
	}
	return e.dropped.Load()
}

// DefaultEventBuffer is how many events may wait for the hook when
// Config.EventBuffer is 0.
const DefaultEventBuffer = 4096
