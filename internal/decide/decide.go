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
// What is not here yet, and is the engine's, reached by the run-time
// layer directly: a job found by
// its number (Cancel), the figures in the errors of refused changes, the
// registration of types (their tiers are asked: TypeTier), the admission of batches (Room, Reserve), a
// durable store's restore and saved fair state, a child's inherited
// priority and a join's raise, and whether the engine is accepting,
// idle, or has ended jobs without running them (a failed dependency).
// TryRunSync asks WouldStart, then for a grant in the call: with
// decisions elsewhere none comes, and it answers ErrWouldWait.
package decide

import "github.com/fairsched/fairsched/internal/engine"

// Decider takes the decisions of one scheduler. Its methods are called
// with the run-time layer's lock held, never concurrently.
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
	// Configure applies c at now. It reports false, changing nothing, for
	// a change refused: a global limit or a key's reservation that the
	// reservations would not fit, a type or a resource not known.
	Configure(c Change, now int64) bool
	// Figures returns the counts at this instant, listing at most maxKeys
	// keys, and counting the paused jobs of the types pausedOf names.
	Figures(maxKeys int, pausedOf []string) Figures
	// EstimateWait estimates how long a job described by d would wait if
	// admitted at now, in µs, and reports whether its type is known.
	EstimateWait(d engine.Desc, now int64) (int64, bool)
	// WouldStart reports whether a job described by d, needing needs
	// (nil: its type's), would start at once if admitted at now.
	WouldStart(d engine.Desc, needs []engine.Need, now int64) bool
	// Page fills l with one page, at offset and at most limit long, of
	// the listing of the jobs at now that Queue shows: the running jobs
	// (all of them, once the page reaches them), then the waiting jobs
	// in the order they would be considered to start, then the paused.
	Page(l *Listing, offset, limit int, now int64)
	// Snapshot fills l with every job running or not started at now.
	Snapshot(l *Listing, now int64)
	// TypeTier returns the tier of job type name, and whether it is
	// registered.
	TypeTier(name string) (int, bool)
	// NextDue returns the earliest time the decisions wait for, if any.
	NextDue() (int64, bool)
	// Due applies what fell due by now, and returns the jobs whose start
	// deadline passed: they ended, never granted.
	Due(now int64) []*engine.Job
}

// Grantee is handed the grants: with the run-time layer's lock held,
// within Grant, or within the run-time layer's Deliver for grants that
// come later.
type Grantee interface {
	Granted(j *engine.Job)
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
	Resources      map[string][2]int // capacity, units in use
	Waiting        [engine.NumWhys]int
	// TypePaused counts, for each type asked about, its jobs held by a
	// pause of the type.
	TypePaused map[string]int
}
