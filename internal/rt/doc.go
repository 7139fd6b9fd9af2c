// Package rt is fairsched's run-time layer: everything the Scheduler does
// between its API (the fairsched package, which checks and converts what
// a caller gives) and its decisions (internal/engine, which decides what
// runs next and knows nothing of goroutines, locks or clocks). This
// comment is for maintainers.
//
// # What it holds
//
// A Runtime holds the lock that every decision is taken under, the
// goroutines that run Submit jobs, the contexts jobs receive, the clock
// timer of what falls due, the Handles that wait, the records kept for
// reuse (task.go), and the policies that act along a job's life. The
// engine is called only with the lock held; nothing here calls a user's
// function (a job, the event hook, Schedule.Next, a handler) with it.
//
// # A job's life
//
// Every job goes through the same named points, each one function of
// life.go, in the order they come:
//
//	admitted       enqueueAtLocked: the checks a submission passes, the
//	               engine's admission, the policies that act on a new job
//	granted        dispatchLocked, grantedLocked, startedLocked: the
//	               decisions' next starts, handed to the RunSync caller
//	               waiting for them or to a goroutine (launchLocked, work)
//	running        runAttempt, call: the job's function, a panic or a
//	               Goexit turned into its error
//	attempt ended  attemptEndedLocked: the retry, disable and dead-job
//	               policies, asked in that order (attemptSettledLocked)
//	job ended      finishLocked, endQueuedLocked, endedLocked: the
//	               engine told, the store told, the waiters woken
//
// and, for what waits on the clock, dueLocked: start deadlines that
// passed and delayed jobs whose time came, then a dispatch. The ways in
// (submit.go for RunSync, TryRunSync and Submit; submitmany.go; enqueue.go
// for durable jobs; periodic.go) admit a job and wait for, or hand off,
// what comes after. Files stand above what they use: the ways in, the
// operator's calls (operator.go) and the configuration changes
// (configure.go) use the life; the life uses the policies; the policies
// use the records (task.go, jobcontext.go) and the clock's conversions
// (enginetime.go), and none of them calls back up.
//
// # Policies
//
// A policy keeps its own state and makes its own decision at the point
// that consults it; the life carries the decision out:
//
//	retries     (retry.go)     again: will the job run again, and when
//	disabling   (disable.go)   failed: report a failure (the decisions
//	                           count it and disable the pair); refuses: is
//	                           a new submission's pair disabled
//	deadJobs    (dead.go)      bury: keep a job that failed for good
//	duplicates  (supersede.go) accepted, started, ended: which job a
//	                           duplicate meets, and which one it replaces
//	durable     (durable.go, record.go, recover.go): what the store is
//	                           told at each point, and what it gives back
//	events      (events.go, observe.go): what the hook is told
//
// Their fast paths are one comparison inlined at the point (no type
// retries, no pair is disabled, no type has a duplicate policy, no
// store), so that a job that needs none of them pays for none.
//
// # What is local and what is decided
//
// Once a scheduler spans replicas, some state is the cluster's and some
// is one process's. The rule that places a policy: what must hold across
// processes is decided with the engine's state, behind the decisions;
// what belongs to one attempt in one process stays here. Applied:
//
//   - Decided (internal/decide, asked through the Decider): the queues
//     and their order, admission and the limits (a batch's room
//     included), pauses, weights and reservations, the job types, start
//     deadlines and what else falls due, the listings, and the disabled
//     pairs with their failure counts (decide.Pairs): a pair that failed
//     on one replica is refused on all.
//   - Stored (the durable store, which every process that opens it
//     shares): durable jobs, the fields their duplicate policies match
//     on, dead durable jobs, durable schedules' next times, and the
//     decisions' saved state (fair share, pauses, a lane's paused time).
//     The process that holds the decisions restores them from it and
//     records them in it (recover.go, record.go, pause.go): the engine's
//     own calls there are that holder's work.
//   - Local, by nature: an attempt's goroutine, its context and
//     cancellation, the timers of this process, a Handle's wait, a
//     RunSync caller's goroutine, the records kept for reuse, the event
//     sink; and what holds a closure's function, which exists only in the
//     process that was given it: a closure's retries, a dead closure
//     (RetryDead runs its function again), and a closure's duplicates
//     (joining hands the job's function from one joiner's goroutine to
//     another's).
//
// With replicas, "the process that holds the decisions" is the leader of
// the moment: its process makes, for each term, a keeper (keeper.go), a
// Runtime of its own on the term's fenced view of the store whose
// Decider is the term's Leader, which keeps every durable job as the
// one-process durable mode does and runs each attempt on a replica; a
// replica's Runtime runs the attempts it is sent (runs.go) and inserts
// the jobs it is given (enqueue.go), and keeps no durable job itself.
//
// The decisions are asked through one seam (internal/decide, and
// decisions.go here). A grant may come in the call that asked for it
// (the engine in this process) or later, from another goroutine, through
// Deliver; what the run-time layer was told of a job is its own, in the
// job record's Tag (task.go), never read from the decisions' state. A
// job whose grant is on its way when it is cancelled, or when the
// scheduler closes, is taken back by the decisions (Decider.Cancel) and
// never runs.
//
// # Time
//
// The engine counts µs from origin at the epoch (New's instant); a
// timebase converts between its times, the clock's and the store's
// (enginetime.go), as pure functions of their argument.
package rt
