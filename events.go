package fairsched

import (
	"time"

	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/rt"
)

// EventKind says what an Event reports.
type EventKind uint8

const (
	EventSubmitted         = EventKind(rt.EventSubmitted)         // a job was queued
	EventStarted           = EventKind(rt.EventStarted)           // a job got a slot
	EventFinished          = EventKind(rt.EventFinished)          // a job ended; see Outcome
	EventRejected          = EventKind(rt.EventRejected)          // a submission was refused: queue full, closed, unknown type
	EventAged              = EventKind(rt.EventAged)              // a job started above its base priority, or as urgent
	EventAllocationChanged = EventKind(rt.EventAllocationChanged) // a configured key's fair allocation changed
	EventRetrying          = EventKind(rt.EventRetrying)          // a job's attempt failed; it waits for its next
	EventDead              = EventKind(rt.EventDead)              // a Submit job failed for good and joined the dead jobs
	EventDisabled          = EventKind(rt.EventDisabled)          // a (type, ID) pair was disabled by its type's DisablePolicy (Seq: the job whose failure did it) or by Scheduler.Disable (Seq 0)
)

func (k EventKind) String() string {
	return rt.EventKind(k).String()
}

// Outcome is how a job ended.
type Outcome uint8

const (
	OutcomeCompleted        = Outcome(rt.OutcomeCompleted)        // ran and returned nil
	OutcomeFailed           = Outcome(rt.OutcomeFailed)           // ran and returned an error, or panicked
	OutcomeCancelled        = Outcome(rt.OutcomeCancelled)        // did not run to the end: cancelled, caller gone, or closed
	OutcomeExpired          = Outcome(rt.OutcomeExpired)          // did not start by its start deadline
	OutcomeDependencyFailed = Outcome(rt.OutcomeDependencyFailed) // did not start: a job it runs after did not complete
)

func (o Outcome) String() string {
	return rt.Outcome(o).String()
}

// AllocationReason says why a key's allocation changed.
type AllocationReason uint8

const (
	ReasonConfigChange = AllocationReason(engine.ReasonConfigChange) // weight, reservation or cap changed
	ReasonRebalance    = AllocationReason(engine.ReasonRebalance)    // another key arrived or left
	ReasonKeyDrained   = AllocationReason(engine.ReasonKeyDrained)   // the key itself ran out of work, or was paused
)

func (r AllocationReason) String() string {
	return rt.AllocationReason(r).String()
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

// eventOf returns the run-time layer's event as the API's.
func eventOf(e *rt.Event) Event {
	return Event{
		Kind: EventKind(e.Kind), Time: e.Time,
		Seq: e.Seq, Type: e.Type, ID: e.ID, Key: e.Key, Tier: Tier(e.Tier),
		BasePriority: e.BasePriority, EffectivePriority: e.EffectivePriority,
		Urgent: e.Urgent, Reserved: e.Reserved, Wait: e.Wait, Duration: e.Duration,
		Outcome: Outcome(e.Outcome), Err: e.Err,
		OldSlots: e.OldSlots, NewSlots: e.NewSlots, Reason: AllocationReason(e.Reason),
	}
}
