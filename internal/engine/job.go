package engine

// State is where a job is in its life. Every job moves forward through
// these states and ends exactly once.
type State uint8

const (
	StateNew     State = iota // not yet enqueued, or refused
	StateQueued               // visible in its lane
	StateParked               // held by a gate (gates.go): its key's cap or a conflict lock
	StateRunning              // holding a slot
	StateDone                 // ended
	StateDelayed              // accepted, not before a time (delay.go): outside every order
	StatePaused               // accepted, its key or type paused (pause.go): outside every order
	StateBlocked              // accepted, waiting for the jobs it runs after (deps.go): outside every order
	// StateElsewhere: a record of a job another engine decides (Hold,
	// held.go), not running there: in no order and no count.
	StateElsewhere
)

// Kind is the step of the order that started a job, which decides how it
// is charged.
type Kind uint8

const (
	Fair     Kind = iota // by fair share: charged to its key's clock
	Reserved             // under its key's MinSlots: not charged
	Urgent               // urgent (score at the threshold, or base at or above it): charged
)

// Outcome is how a job ended.
type Outcome uint8

const (
	Completed        Outcome = iota + 1 // ran and returned nil
	Failed                              // ran and returned an error, or panicked
	NotRun                              // left without running to the end: cancelled, or its caller gave up as it started
	Expired                             // not started by its start deadline
	DependencyFailed                    // not started: a job it runs after did not complete (deps.go)
)

// Which heap of its lane (or, for a job a gate holds, of its wait lane)
// holds a pending job.
const (
	inFixed  uint8 = iota // effective priority == base (in grace, or base >= ceiling)
	inRun                 // in the lane's sorted run, in any phase (sortedrun.go)
	inRising              // aged, below the ceiling: ordered by the aged key A
	inCapped              // aged to the ceiling: FIFO among equals
)

// Job is the engine's record of one job, from Enqueue to its end: data
// with an identity, its sequence number. The caller allocates it (the
// zero Job is ready to enqueue), may embed it in a record of its own, and
// may reuse it once it is done.
type Job struct {
	// Fixed at Enqueue. Its type and key are its lane's; key is kept
	// too, so that a record names its key whatever becomes of its lane.
	lane *lane
	key  *keyState
	id   string
	seq  uint64 // submission order, unique in the engine, the final tie-break
	sub  int64  // submission time, µs
	base uint8  // clamped priority

	// The small fields first, packed together.
	state   State
	heap    uint8 // pending: which heap of its (wait) lane holds it; done: its Outcome
	held    uint8 // parked: the gate that holds it, heldByKey or heldByLock; paused: pausedByKey or pausedByType
	kind    Kind
	inGrace bool     // has an entry in the grace queue, numbered at
	flags   jobFlags // flagTimed, flagLinked, flagBound, flagPlaced, flagElsewhere, flagAdopted
	// Tag is the caller's: the engine never reads or writes it. The
	// run-time layer keeps there what it was told of the job.
	Tag  uint8
	idx  int32 // handle in a (wait) lane heap; position in the run, the running list or the held records (Engine.elsewhere)
	uidx int32 // handle in its type's or wait lane's urgent order (urgent.go); -1 when absent
	// at is, while the job is pending and inGrace, the number of its entry
	// in the grace queue; once it has started, its start time in µs; set
	// aside with its aging clock running (backing off, blocked), its lane's
	// paused time then (lane.stoodAt); paused, when its clock stopped. They
	// never overlap, as a job leaves the grace queue when it starts or is
	// set aside, and sharing the word keeps the record 8 bytes smaller.
	at       int64
	estimate float64   // cost estimate at start, seconds
	est      *estimate // the learnt estimate it came from; nil: a guess, the type's default cost
}

// Seq returns the job's sequence number: its submission order, unique in
// the engine. 0 before Enqueue.
func (j *Job) Seq() uint64 { return j.seq }

// State returns where the job is in its life.
func (j *Job) State() State { return j.state }

// Kind returns the step of the order that started the job.
func (j *Job) Kind() Kind { return j.kind }

// Type, ID and Key return the job's description as enqueued.
func (j *Job) Type() string { return j.lane.typ.name }
func (j *Job) ID() string   { return j.id }
func (j *Job) Key() string  { return j.key.name }

// Tier returns the tier of the job's type.
func (j *Job) Tier() int { return j.lane.typ.cfg.Tier }

// Base returns the job's clamped base priority.
func (j *Job) Base() int { return int(j.base) }

// Submitted and Started return when the job was enqueued and started, in
// µs of the engine's time; Started is meaningful once the job has started.
func (j *Job) Submitted() int64 { return j.sub }
func (j *Job) Started() int64   { return j.at }

// Engine returns the engine that holds the job, once it was enqueued.
func (j *Job) Engine() *Engine { return j.lane.e }

// jobFlags are a job's yes-or-no facts, one bit each.
type jobFlags uint8

const (
	flagTimed  jobFlags = 1 << iota // has timers (Engine.timed): a not-before time or a start deadline
	flagLinked                      // has a node in the dependency graph (Engine.deps)
	flagBound                       // bound to a replica (Engine.boundTo, replicas.go)
	flagPlaced                      // running on a replica (Engine.placedOn)
	// flagElsewhere: a held record (held.go) granted elsewhere, so
	// StateRunning, but in no count and not in the running list.
	flagElsewhere
	// flagAdopted: its attempt was adopted running (Adopt, adopt.go), not
	// started by the order; it may share its conflict lock.
	flagAdopted
)

// is reports whether j has flag f.
func (j *Job) is(f jobFlags) bool { return j.flags&f != 0 }

// set sets or clears j's flag f.
func (j *Job) set(f jobFlags, on bool) {
	if on {
		j.flags |= f
	} else {
		j.flags &^= f
	}
}

// Timed reports whether the job waits for a time: a not-before time or a
// start deadline, on the engine's timeline.
func (j *Job) Timed() bool { return j.is(flagTimed) }

// Waiting reports whether the job was accepted and has not started:
// queued, held by a gate, or delayed.
func (j *Job) Waiting() bool {
	return j.state == StateQueued || j.state == StateParked || j.aside()
}

// aside reports whether the job is set aside, outside every order:
// delayed, paused or blocked by a dependency.
func (j *Job) aside() bool {
	return j.state == StateDelayed || j.state == StatePaused || j.state == StateBlocked
}

// Outcome returns how the job ended, once it is StateDone.
func (j *Job) Outcome() Outcome { return Outcome(j.heap) }

// Running reports whether the job holds a slot.
func (j *Job) Running() bool { return j.state == StateRunning }

func jobSetIdx(j *Job, i int)  { j.idx = int32(i) }
func jobSetUIdx(j *Job, i int) { j.uidx = int32(i) }

// guessOf returns the part of j's charge that was a default-cost guess.
func (j *Job) guessOf() float64 {
	if j.est == nil { // its estimate was the type's default cost, not learned
		return j.estimate
	}
	return 0
}
