// Package fairsched is a scheduler to embed in a Go service: it decides
// which piece of work runs next when a semaphore is no longer enough.
//
// Foreground handlers wrap their work in RunSync, background work goes to
// Submit, and one dispatcher, under one mutex, decides what starts:
// bounded concurrency, tiers with caps, weighted fair sharing between
// fairness keys by learned job cost, priorities with aging, per-type and
// per-key caps, conflict groups (two jobs on one resource never overlap),
// and no head-of-line blocking.
//
//	s, err := fairsched.New(fairsched.Config{
//		MaxConcurrency: 16,
//		TierLimits:     map[fairsched.Tier]int{fairsched.Background: 8},
//		Types: map[string]fairsched.TypeConfig{
//			"clone":  {Tier: fairsched.Foreground, ConflictGroup: "git"},
//			"repack": {Tier: fairsched.Background, MaxConcurrency: 3, ConflictGroup: "git"},
//		},
//	})
//	...
//	err = s.RunSync(ctx, fairsched.Job{Type: "clone", ID: repo, Key: clientIP}, clone)
//
// # Vocabulary
//
// A job is a func(context.Context) error and a Job description: its type
// (a registered TypeConfig giving its tier, caps, conflict group, default
// cost and priority), its ID (the resource it acts on), its fairness key
// (who it is for) and its priority (0..100). A slot is one unit of
// MaxConcurrency. Cost is the slot time a job is expected to hold, learned
// per (type, ID).
//
// # Hard limits
//
// A job starts only if, at that moment, running jobs are below
// MaxConcurrency, its tier's cap, its type's cap and its key's cap, no
// running job has its ID and its (non-empty) conflict group, and every
// named resource it needs has the units free (see Gates); and only once
// every gate of its own is open: its NotBefore, its dependencies, its key
// and type not paused, their rate limits holding a token. Blocked jobs
// hold no slot and never block others: if the next job in order is not
// admissible, the next admissible one starts. A slot stays idle only when
// no pending job is admissible (work conservation); caps are caps, not
// reservations.
//
// # The order
//
// Whenever a slot may be free, the next job to start is the first
// admissible job by one order:
//
//  1. urgent jobs (aged to Aging.UrgentThreshold, or based at or above it),
//     highest score first, then oldest;
//  2. a key running fewer reserved jobs than its MinSlots, the one furthest
//     below first (ties: key name); within the key, the highest tier, then
//     as in 5;
//  3. the higher tier;
//  4. within the tier, the key with the lowest virtual time V (ties: the key
//     that reached that V first);
//  5. within the key, the highest effective priority, then the earliest
//     submission.
//
// With one key and one tier this is plain priority order with aging, FIFO
// within a priority; with equal priorities it is weighted fair queuing by
// cost.
//
// # Fair share
//
// Each tier is its own fair queue over flows, one flow per (tier, key). A
// flow's virtual time is the cost charged to it divided by its key's
// weight:
//
//	V(tier, key) = Σ charged slot-seconds / weight.
//
// A job starting by fair share (or as urgent) charges its cost estimate at
// its key's current weight; when it ends the charge is corrected to the
// observed wall time, so V is measured in slot-seconds whatever the
// estimates were. Serving the lowest V first makes every backlogged key's V
// advance at the same rate, so each key's slot time is proportional to its
// weight: weighted max-min fairness, within caps. A weight change applies
// to charges from then on; V is not rescaled.
//
// Reservations: up to MinSlots of a key's jobs start ahead of fair share
// (step 2) and are not charged, so a reservation adds to the key's weighted
// share of the rest. A job started under the reservation holds it until it
// ends, when the key's next job takes it over. In the example of docs/design.md (16
// slots, A weight 3 cap 12, B weight 1 cap 6 MinSlots 2) B holds its 2
// reserved slots and the other 14 split 3:1, so A runs 10-11 and B 5-6.
//
// Idle keys: a key that comes back after being idle starts level with the
// least-served of the keys with work in its tier, or keeps its own virtual
// time if that is higher: it can neither bank credit while idle nor escape
// the cost of its recent use, and a brand-new key starts level with the
// others. Keys idle for Config.IdleTTL are forgotten (unless configured),
// as are cost estimates unused for as long, so memory stays bounded with
// many ephemeral keys.
//
// Cost: the estimate of (type, ID) is an exponential moving average of
// observed wall time with Config.CostAlpha (0.3), starting from the type's
// DefaultCost.
//
// # Aging
//
// A job's score is its base priority during Aging.GracePeriod, then rises
// by Step every Interval, continuously. Its effective priority is
// max(base, min(score, MaxEffective)): the score capped at MaxEffective,
// but never below its base (a priority above the ceiling is not lowered).
// When the uncapped score reaches UrgentThreshold the job is urgent and
// goes first, past tiers, weights and reservations, never past a hard
// limit; a job whose base is at or above the threshold is urgent from its
// submission, grace period or not. So every job is first in line within
//
//	GracePeriod + (UrgentThreshold - base) / Step × Interval
//
// (at once, for a base at or above the threshold) and starts at the next
// slot that frees and that it can use, provided the urgent jobs ahead of
// it are served: urgent jobs go by score, so a younger job of higher
// priority that is also urgent goes first. The bound is thus
// a guarantee when urgent work does not pile up faster than it is served,
// which admission limits (MaxQueue, a key's MaxPending) ensure under
// overload; no scheduler bounds every wait when more work arrives than can
// run.
//
// # Jobs in time
//
// A Job may carry times. NotBefore delays it: it is accepted at once and
// counts against MaxQueue and its key's MaxPending, but it is not in the
// queue, and takes no place in fair share, until then; its aging clock
// starts at that instant. StartBy, or its type's StartTimeout counted from
// submission (the earlier of the two), is a start deadline: a job that has
// not started by then ends, at that instant, with an error matching
// ErrStartDeadline, wherever it waits. A deadline that is not after the
// submission and the NotBefore is refused at submission. Both are kept on
// one timeline, served by one timer of the scheduler's Clock, however many
// jobs wait for a time; with a fake clock (fairschedtest) they fire in
// virtual time.
//
// A type's RetryPolicy retries failed attempts: the job goes back out of
// the queue for a backoff that doubles after each failed attempt (up to a
// ceiling, less some jitter), holding nothing, then competes again with
// the aging clock it had, its start deadline still bounding it and its key
// charged every attempt's time. An error matching ErrPermanent, an attempt
// cancelled while it ran, and the last attempt are not retried. Submit
// jobs retry on the scheduler's goroutines, RunSync jobs on their caller's;
// Attempt(ctx) is the attempt's number, Handle.Attempts their history. A
// Submit job that fails for good is dead: the scheduler keeps the latest
// (Config.DeadJobs) for DeadJobs to list and RetryDead to run again, with
// one more attempt, once the cause is fixed. A type's DisablePolicy turns
// away a (type, ID) pair whose attempts keep failing: after Failures
// within Window, its submissions fail with ErrDisabled for a while or
// until Enable.
//
// Schedule submits a job at each time of a Schedule (Every(d), or a parsed
// cron expression, which has the same Next method): each occurrence is a
// new job with a fresh aging clock, and one whose predecessor has not
// ended is skipped and counted, so a slow job never piles up.
//
// # Gates
//
// PauseKey and PauseType hold a key's or a type's queued jobs, and those
// submitted later, out of the queue until ResumeKey or ResumeType: they
// hold nothing, take no place in fair share (the key's share goes to the
// others at once), and their aging clocks stand still, as do those of the
// key's or type's jobs backing off or waiting for jobs they run after;
// running jobs finish, and start deadlines still run. A job waits while either its key
// or its type is paused. On resume the key re-enters fair share as a key
// returning from idle does. A key may be paused before it is first seen.
//
// KeyConfig.Rate and TypeConfig.Rate are token buckets on starts: a key or
// type out of tokens is passed over, holding nothing, and its slots go to
// others; it becomes eligible again when its next token is due, by the
// scheduler's clock timer. Tokens are taken as jobs start, whichever step
// of the order starts them.
//
// Job.After names jobs a job runs after: it waits for them, holding
// nothing and out of fair share (its aging clock runs), and starts once
// all completed. If one does not complete (it fails for good, is
// cancelled or misses its start deadline), the job ends without running
// with a *DependencyError wrapping that job's error (errors.Is(err,
// ErrDependency)), and so do the jobs after it, down the chain. A job that
// will be retried has not failed yet. RunSync jobs may run after Submit
// jobs too.
//
// Config.Resources gives named resources capacities in units, and
// TypeConfig.Needs (or a job's own Job.Needs) the units its jobs need: a
// job starts only when all are free, a hard limit like the caps, and it
// waits without blocking jobs that need other things. No starvation by
// size: the first job in the order that finds a resource short of its
// units claims the resources it needs, and their units are held for it
// (never a slot) until it starts or leaves the queue. A smaller job
// behind it may use them only if, by its estimated cost, it ends before
// the held job could start (backfill), so a large job waits at most for
// the jobs ahead of it, for the units in use when it claimed to be
// released or its estimated start, and for the overrun of a job let past
// it. Backfill looks past up to Config.BackfillLookahead waiting jobs
// that may not use the units. SetResource changes a capacity.
//
// A type whose Duplicates policy is JoinQueued (or JoinRunning) runs one
// job per ID at a time: a submission of an ID whose job waits (or runs)
// joins it. Submit returns a Handle on that job, standing for the joining
// submission; RunSync waits for it and returns its error without calling
// its own function. The job runs once, at the highest priority of those
// who joined; a joiner whose Handle or context is cancelled detaches
// alone, and the job is cancelled when none is left. A type whose policy
// is Supersede keeps one waiting job per ID: a new submission replaces
// the waiting one, which ends with ErrSuperseded. A job submitted (or run by RunSync) with a context that
// descends from a running job's is that job's child: if it has to wait,
// its base priority is raised to the priority its parent started at, when
// that is higher.
//
// Snapshot says, for each waiting job, the one thing that holds it
// (JobInfo.Waiting), the first of: its NotBefore or backoff, a dependency,
// a pause, a rate limit, its tier's, type's or key's cap, a running job
// holding its conflict (JobInfo.WaitingOn), a resource, or just its turn.
// Stats.Waiting counts them. Snapshot lists every job, sorting them under
// the scheduler's lock; Queue lists a page of them, in the order they
// would be considered to start, at a cost that does not grow with the
// queue: the call to poll, as an admin page does.
//
// # Durable jobs
//
// Work that must survive a restart is data, not a closure: a handler is
// registered per job type (AddHandler, Config.Handlers), and Enqueue
// stores a job with its arguments, encoded as JSON, in Config.Store (see
// the fairschedsqlite package), returning once it is committed. Durable
// jobs take their place in the same order and limits as every other job.
// EnqueueMany writes a batch in one transaction; EnqueueTx writes a job
// in the caller's own transaction, so that it exists if and only if that
// commits. A new Scheduler on the store queues every unfinished job
// again, with its submission time (its aging goes on, less the time it
// stood paused, before the restart and through it), its attempts and
// its not-before time, and takes back the keys' virtual times and the
// learned costs, saved every few seconds and at Shutdown and Close, so
// that it starts the jobs one that never stopped would have. An attempt
// that was running when the process died counts as failed, with ErrLost,
// and is retried by its type's policy. A job whose type has no handler in
// the process waits (WaitNoHandler). Pauses are kept in the store, with
// when each began, and so
// are the schedules of durable jobs (ScheduleDurable): their next time and
// latest occurrence, by name. Durable jobs may run after other durable
// jobs (Job.After), and their types' duplicate policies apply, across a
// restart too.
// A job runs at least once: an attempt's start is committed before its
// handler runs, but a crash after a handler returned and before its end
// was committed runs it again, so handlers should be idempotent.
//
// # Cost of scheduling
//
// Submitting and dispatching cost O(log n) in the pending jobs, plus the
// job types of a tier and the keys with reservations (both configured, so
// few), whatever the mix of keys, conflicts and aging: no periodic pass
// over the queue, and a job held back by a cap or a conflict is not looked
// at again until what holds it changes. When a conflict holder ends, the
// jobs waiting for its resource compete again at a cost in proportion to
// the (type, key) pairs they come from, not to their number.
//
// # Calling it
//
// RunSync runs the function on the caller's goroutine once admitted; if
// the caller's context ends while queued, the job leaves the queue at once.
// TryRunSync runs it only if it can start at once, and otherwise returns
// ErrWouldWait, queueing nothing. WaitIdle waits until nothing is queued
// or running, without closing the scheduler. SetMaxConcurrency,
// SetTierLimit, SetTypeLimit, SetKey and ResetKey change limits and keys
// at run time: a lowered limit stops new starts until the running jobs
// drop below it, and cancels nothing.
// Submit returns a Handle and runs the function on a goroutine the
// scheduler owns (a goroutine that finishes a job goes on with the next
// one it is handed, so a burst costs few goroutines). Every accepted job
// has a sequence number, unique in its Scheduler and in submission order:
// Handle.Seq, and the Seq of its Events, its Snapshot entry and a
// PanicError. SubmitMany submits many jobs in one call, all or none, at
// the cost of one decision, each placed as its own Submit at that instant
// would be. Panics are recovered into *PanicError with the stack. Shutdown drains gracefully; Close
// discards queued work with ErrClosed and cancels running jobs' contexts.
// Neither leaves a goroutine behind.
//
// Every method of Scheduler is safe for concurrent use. The event hook is
// called on the scheduler's own goroutine, never under its lock, through a
// bounded buffer, so a slow hook drops events (counted) rather than stall
// dispatch.
package fairsched
