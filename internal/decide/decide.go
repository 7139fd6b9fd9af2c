// Package decide is the seam between fairsched's run-time layer
// (internal/rt) and its decisions: the one interface the run-time layer
// asks which admitted job runs next. This comment is for maintainers.
//
// The decisions are the engine's (internal/engine). In one process, Local
// takes them in the call that asks, under the run-time layer's lock. Once
// there are replicas, one process (the leader) holds the engine for all,
// and the others' grants arrive later and from elsewhere. So the
// interface is written for that second case, and the run-time layer never
// assumes a grant comes back in the call that asked for it:
//
//   - Enqueue admits a job or refuses it. It may say the job starts now,
//     and an in-process decider does, when a slot is free: the fast path
//     of an uncontended job. A decider elsewhere never does.
//   - Grant asks for what may start now; each job granted is handed to
//     the Grantee, before Grant returns or later: a decider elsewhere
//     hands its grants over through the run-time layer's Deliver, which
//     takes the lock.
//   - Finish and Retry report that a granted job's attempt ended; Cancel
//     takes out a job that was not granted to the run-time layer: none
//     is granted after Cancel returns, even one the decisions granted
//     and the run-time layer has not been handed yet.
//   - Configure applies a change of the configuration, sent as data.
//   - NextDue and Due give the times the decisions wait for: the clock
//     timer is the run-time layer's, the deadlines the decisions'.
//   - Room, Reserve and Unreserve admit a batch as a whole; the type
//     registry (RegisterType, TypeTier, BasePriority, DeadlineOf,
//     NeedsRefusal) answers what a submission's checks ask.
//   - Find, Each, FindRunning and Idle are the jobs this process gave
//     the decisions and has not seen end: an operator's Cancel, Close
//     and Shutdown, a child's parent.
//   - Failed, Disable and Enable decide the disabled pairs (pairs.go),
//     which every process reads in place (Pairs) on each submission.
//   - Figures, Page and Snapshot read the decisions' state at one
//     instant, as counts and as the facts of the jobs listed (a listing
//     is copied, never a job's record: a leader's are elsewhere).
//
// In this process the run-time layer asks the engine directly at the
// points a job passes on its hot path, and Local is the engine as a
// Decider for the rest (a leader's process, the tests' stand-in): a call
// through an interface cost an uncontended RunSync 4% more
// (internal/rt, decisions.go).
//
// What the run-time layer still does to the engine directly, besides the
// hot points above: the durable store's restore and its saved state (the
// fair state, a lane's paused time, the pauses, a retry's backoff set
// aside, a number for a dead job found in the store, a job's own needs), and whether jobs ended without running (a failed dependency)
// or a rate limit needs the clock timer. The first are the work of the
// process that holds the engine (with replicas, the leader, which
// rebuilds its engine from the database); the last two are read after
// the hot points' own engine calls, and a decider elsewhere will carry
// them as it carries grants: jobs ended without running handed back
// late, a rate limit's next token among NextDue's times. TryRunSync asks WouldStart, then for
// a grant in the call: with decisions elsewhere none comes, and it
// answers ErrWouldWait; a replica's asks the leader instead, and waits
// for its answer (Remote.AskNow).
//
// # Decisions elsewhere: replicas
//
// With replicas on one database, one of them leads: a Leader (leader.go)
// over an engine decides for all, and every replica's Runtime asks a
// Remote (remote.go), whose calls never wait under the lock: what they
// send goes to an Outbox that a goroutine sends (the database's module
// batches it per transaction), and the leader's answers come back
// through the run-time layer's Deliver. The messages and their protocol
// are wire.go's; internal/cluster runs a replica's part (membership,
// leadership, self-fencing) and carries them.
//
//   - Closures. A replica's closures live and die with its process, so
//     the replica is their record: its Remote keeps a held record of
//     each (engine.Hold: an identity, in no order), asks the leader for
//     it, and reports its end. The leader admits it as a stand-in bound
//     to that replica, so that every limit and the replica's capacity
//     count it, and sends back the grant, or the end of a job it never
//     granted (refused at admission, past its start deadline), which
//     the Grantee hears as Ended. A refusal therefore comes after the
//     call: a caller that must learn of it from its call (Submit) waits,
//     without the lock, for the leader's answer (Remote.Admission: the
//     leader says Admitted of a job it queues).
//
//   - A new term. The leader's engine starts empty: it asks every live
//     replica for its jobs and grants nothing until each has answered
//     (running jobs adopted, engine.Adopt, so they count from the first
//     grant) or was declared dead. A lost link is repaired the same way.
//
//   - Replica capacity is a cap of the order beside the type and key
//     caps, counting everything running on a replica (the engine's
//     SetReplica, Times.Replica, Job.Replica; its doc.go).
//
//   - Durable jobs (durable.go). The leader's own jobs, when its Grantee
//     is a Keeper (internal/rt's keeper, one per term, restored from the
//     database as at a restart), are the cluster's durable jobs: bound
//     to no replica, each is placed on the first replica by name
//     (packing) with a free slot and a handler of its type (its Hello's
//     Types). The Keeper records the attempt's start and sends a Run;
//     the replica runs the handler and reports Done; the Keeper applies
//     the policies (retries, dead jobs) and records the end. Each Hello
//     lists the attempts its replica runs (Runs), and the Keeper counts
//     lost any other it sent there; a Hello is read whole before
//     anything starts on its replica.
//
//   - Batches and TryRunSync. A replica's SubmitMany asks for its jobs
//     in one batch of messages headed by an AskAll, which the leader
//     admits or refuses whole (Remote.BeginBatch, EndBatch); a
//     TryRunSync's Ask is AskAtOnce: granted in the answer or refused
//     (Remote.AskNow). Jobs enqueued before the replica knew a leader
//     were never admitted: its first Hello asks for them after its
//     list, as new (Remote.hello).
//
// Still to come, and planned so:
//
//   - The reads (Figures, Page, Snapshot, EstimateWait) are the
//     leader's; a Remote answers them from its own process until they
//     are published to every replica. (The run-time changes of the configuration reach
//     every replica and the leader through the cluster's log:
//     change.go.)
//   - The leader's own process's jobs could be decided in the call, as
//     Local does (Leader's Enqueue and the rest serve them, and the
//     tests use it); internal/cluster routes them through messages
//     within the process for now, so that a change of leader moves no
//     job between engines.
package decide

import "github.com/fairsched/fairsched/internal/engine"

// Decider takes the decisions of one scheduler. Its methods are called
// with the run-time layer's lock held, never concurrently. They fall in
// groups: a job's life (admission, grants, an attempt's end,
// cancellation, what falls due), the disabled pairs, the admission of a
// batch, the job types, the jobs this process gave it, and what it tells
// of its state.
type Decider interface {
	// Enqueue admits j, described by d and tm (nil: no times), at now, or
	// refuses it (the Refusal says why, and nothing changed). startsNow
	// says that j is granted with this answer: the caller starts it
	// without waiting for the Grantee. A decider whose decisions are taken
	// elsewhere never says so. The description is passed by value and
	// the times by a pointer the caller keeps on the heap: an interface's
	// arguments escape, and a caller's own would cost an allocation.
	Enqueue(j *engine.Job, d engine.Desc, tm *engine.Times, now int64) (startsNow bool, r *engine.Refusal)
	// Grant asks for every job that may start at now; each one granted is
	// handed to the Grantee, before Grant returns or later.
	Grant(now int64)
	// Finish reports that granted job j's attempt ended at now, and with
	// it the job, with outcome o.
	Finish(j *engine.Job, o engine.Outcome, now int64)
	// Retry reports that granted job j's attempt ended at now, and that j
	// is to run again, not before notBefore.
	Retry(j *engine.Job, notBefore, now int64)
	// Cancel takes admitted job j, which the caller was not handed a
	// grant of, out of the decisions at now: j is not granted after Cancel
	// returns. It reports whether other jobs may start now (Grant).
	Cancel(j *engine.Job, now int64) (unblocked bool)
	// Raise raises waiting job j's base priority to p, if that is higher,
	// at now: a duplicate that joined it, or its parent, asked for more.
	Raise(j *engine.Job, p int, now int64)
	// NextDue returns the earliest time the decisions wait for, if any.
	NextDue() (int64, bool)
	// Due applies what fell due by now, and returns the jobs whose start
	// deadline passed: they ended, never granted.
	Due(now int64) []*engine.Job
	// Failed reports a failed attempt of pair k at now, under its type's
	// rule r; it returns k's span and true if that disabled k.
	Failed(k Pair, r DisableRule, now int64) (Span, bool)
	// Disable disables pair k for span, at now; Enable enables it again.
	Disable(k Pair, span Span, now int64)
	Enable(k Pair)
	// Pairs returns the disabled pairs as this process reads them, in
	// place, with the lock held: the decisions' own, or a copy kept up
	// to date with them.
	Pairs() *Pairs
	// Configure applies c at now. It reports false, changing nothing, for
	// a change refused: a global limit or a key's reservation that the
	// reservations would not fit, a type or a resource not known.
	Configure(c Change, now int64) bool

	// Room reports whether n jobs, perKey of them by key, fit the
	// admission limits now: nil, or the refusal the first that does not
	// would get. It changes nothing.
	Room(n int, perKey map[string]int) *engine.Refusal
	// Reserve counts n jobs, perKey of them by key, against the
	// admission limits until Unreserve: a batch being written down
	// before it is enqueued.
	Reserve(n int, perKey map[string]int)
	// Unreserve gives back what Reserve counted.
	Unreserve(n int, perKey map[string]int)
	// Rejected counts n submissions of type name refused as a whole
	// (closed: the scheduler no longer accepts; else its queue is full);
	// RejectedUnknownType one refused for naming a type not registered.
	Rejected(name string, closed bool, n int)
	RejectedUnknownType()

	// RegisterType registers job type name; again with the same
	// configuration it does nothing, with another it fails.
	RegisterType(name string, c engine.Type) error
	// TypeTier returns the tier of job type name, and whether it is
	// registered.
	TypeTier(name string) (int, bool)
	// BasePriority returns the base priority a job described by d would
	// get, and whether its type is registered.
	BasePriority(d engine.Desc) (int, bool)
	// DeadlineOf returns the start deadline of a job of type name with
	// the deadline startBy (0: none) submitted at submitted; 0: none.
	DeadlineOf(name string, startBy, submitted int64) int64
	// NeedsRefusal returns the refusal a job of type name needing needs
	// (nil: its type's) would get for them, or nil if they fit.
	NeedsRefusal(name string, needs []engine.Need) *engine.Refusal
	// Reserved returns what the keys' reservations would add up to with
	// key name reserving minSlots, what they add up to, and the slots
	// there are: the figures of a refused change's error.
	Reserved(name string, minSlots int) (with, total, slots int)

	// Find returns the job numbered seq, admitted by this process and not
	// ended, or nil.
	Find(seq uint64) *engine.Job
	// Each calls f with every job admitted by this process and not ended,
	// and whether the decisions granted it (it may still be on its way);
	// f may end them.
	Each(f func(j *engine.Job, granted bool))
	// FindRunning returns the first granted job of this process match
	// reports true for, and the effective priority it started at.
	FindRunning(match func(*engine.Job) bool) (*engine.Job, int)
	// Idle reports whether no job of this process is admitted and not
	// ended.
	Idle() bool
	// StopAccepting refuses every later Enqueue of this process, with
	// engine.RefusedClosed: it is closing.
	StopAccepting()

	// Figures returns the counts at this instant, listing at most maxKeys
	// keys, and counting the paused jobs of the types pausedOf names.
	Figures(maxKeys int, pausedOf []string) Figures
	// Page fills l with one page, at offset and at most limit long, of
	// the listing of the jobs at now that Queue shows: the running jobs
	// (all of them, once the page reaches them), then the waiting jobs
	// in the order they would be considered to start, then the paused.
	Page(l *Listing, offset, limit int, now int64)
	// Snapshot fills l with every job running or not started at now.
	Snapshot(l *Listing, now int64)
	// EstimateWait estimates how long a job described by d would wait if
	// admitted at now, in µs, and reports whether its type is known.
	EstimateWait(d engine.Desc, now int64) (int64, bool)
	// WouldStart reports whether a job described by d, needing needs
	// (nil: its type's), would start at once if admitted at now.
	WouldStart(d engine.Desc, needs []engine.Need, now int64) bool
}

// Grantee is handed the grants, and the jobs the decisions ended without
// granting them that they did not return from a call (Enqueue, Due):
// with the run-time layer's lock held, within Grant, or within the
// run-time layer's Deliver for what comes later.
type Grantee interface {
	Granted(j *engine.Job)
	// Ended ends j, never granted, at now: refused at admission (r), or
	// past its start deadline (r nil, o Expired). A job the run-time
	// layer took out first (Cancel) is not ended again.
	Ended(j *engine.Job, o engine.Outcome, r *engine.Refusal, now int64)
}

// Change is a change of the decisions' configuration, as data: what the
// run-time layer sends a leader elsewhere as well as what Local applies.
type Change struct {
	Kind   ChangeKind
	Name   string     // the key, type or resource changed
	Tier   int        // SetTierLimit's tier
	N      int        // the new limit or capacity
	Key    engine.Key // SetKey's configuration
	Weight float64    // SetKeyWeight's weight
}

// ChangeKind says what a Change changes.
type ChangeKind uint8

// The changes of the configuration, each as the engine's method of the
// same name.
const (
	SetMaxConcurrency ChangeKind = iota + 1
	SetTierLimit
	SetTypeLimit
	SetKey
	SetKeyWeight
	ResetKey
	ResetKeys
	SetResource
	PauseKey
	ResumeKey
	PauseType
	ResumeType
)

// Figures are the decisions' counts at one instant: what a scheduler's
// Stats reports of its queue, its limits and its keys.
type Figures struct {
	Summary        engine.Summary
	Tiers          []engine.TierInfo
	Types          []engine.TypeInfo
	Keys           []engine.KeyInfo // the busiest, at most the number asked for
	OtherKeys      engine.KeySummary
	PausedKeys     []string
	MaxConcurrency int
	Resources      map[string][2]int      // capacity, units in use
	Waiting        [engine.NumReasons]int // a replica's reasons included
	// TypePaused counts, for each type asked about, its jobs held by a
	// pause of the type.
	TypePaused map[string]int
}
