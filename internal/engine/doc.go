// Package engine is fairsched's decision state and its order, apart from
// everything that runs jobs. This comment is for maintainers: it derives
// the structures and says why each operation costs what it does. Users
// read the fairsched package documentation.
//
// # The engine and its shell
//
// An Engine holds every decision of docs/design.md, Hard limits to Fair share and cost: which jobs wait,
// which run, the caps, the conflict locks, the fair-share clocks, the
// learnt costs and the counts. It has no lock, no goroutine, no channel,
// no context and no clock: time is an int64 count of µs passed into every
// call that depends on it, and it must never decrease. The run-time layer
// (internal/rt, under fairsched.Scheduler) is its shell: it holds a mutex
// around every call, makes the contexts, runs the functions on
// goroutines, wakes waiters and delivers events. The
// engine tells the shell what it decided through return values (Enqueue,
// Next) and through an Observer, called within its calls.
//
// A Job is a record with an identity: its sequence number, unique in the
// engine, handed out by Enqueue in submission order. The caller allocates
// the record, and may embed it in a record of its own (the run-time
// layer's task does) to keep its own state beside it.
//
// # The order
//
// Next starts the first admissible job by the order (docs/design.md, The order), and
// pick (order.go) carries it out step by step: urgent jobs, then keys
// below their reservation, then by tier, virtual time and priority. A job
// that arrives while nothing else is pending and is admissible starts at
// once, by stepOf: the same predicates as pick's steps applied to a queue
// of one, without filing the job first. And when every type with pending
// jobs is closed (it or its tier at its cap, or out of tokens), every step
// would pass over them all: pick says so after one look per type
// (anyOpen), as a dispatch after a job ends often asks just then.
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
// estimates were. Serving the lowest V first makes every backlogged key's
// V advance at the same rate, so each key's slot time is proportional to
// its weight: weighted max-min fairness, within caps. A weight change
// applies to charges from then on; V is not rescaled. Ties in V go to the
// flow whose V was set first (its stamp), which serves equals round-robin.
//
// The heaps that order flows by V, a tier's active flows by settled V and
// each type's ready lanes by their flow's (V, stamp), are read at their
// tops, and by the merge that lists the queue. Each item is filed at or
// below its own key, never above: a charge that moves a flow on leaves it
// where it is, one that moves it back refiles it at once. The top is
// refiled at its own key until it is filed there (iheap.Keyed.TopAt);
// then for every other item x,
//
//	own(x) >= filed(x) >= filed(top) = own(top),
//
// so the top is the least (and an item alone is, however it is filed).
// A start charges the flow on top, which the next look refiles: one sift,
// as before. What is saved is every other sift: the flow's other lanes,
// the tier's heap (read only as a flow enters or leaves the tier) and the
// corrections up at each end are refiled once, when the item comes to
// the top, for all the charges since. The listing's merge (queueorder.go)
// takes a lane at its filed key and lists its jobs at its flow's own, at
// or after it, and a heap's children at their filed keys, at or after
// their parent's: nothing is pushed below what was taken, so what it
// lists stays in order.
//
// Reservations: up to MinSlots of a key's jobs start ahead of fair share
// and are not charged, so a reservation adds to the key's weighted share
// of the rest. A job started under the reservation holds it until it ends,
// when the key's next job takes it over.
//
// Idle keys: each tier keeps a floor, the highest minimum settled V its
// active flows (those with queued or running jobs) have had. Settled means
// without the charges of running jobs whose cost was still the type's
// default cost, a guess: a newcomer placed on an incumbent's guesses would
// fall behind it once they are corrected to the real (often much smaller)
// slot time, and learned estimates are kept because a newcomer placed
// below them would burst past its share. A flow that becomes active starts
// at max(its own V, the floor): it cannot bank credit while idle, nor
// escape the cost of its recent use. Keys idle for IdleTTL are forgotten
// (unless configured), as are cost estimates unused for as long, each
// from a list kept in the order they went idle: amortised O(1). An idle
// key keeps its lanes but offers them to other keys, which take the last
// offered (spare.go): with many keys and few of them busy at once, the
// lanes in use are about as many as the busy keys, and the records a
// dispatch reads stay in the cache.
//
// # Aging without a pass over the queue
//
// Past the grace period G, a job's score is base + Step·(t − sub − G)/I.
// With scores scaled by I and time in µs, every comparison is exact
// integer arithmetic:
//
//	I·score(t) = A + Step·(t − G),   A = base·I − Step·sub,
//
// where A does not depend on t. All aged jobs rise at the same rate, so
// their relative order never changes: a heap keyed by A orders them by
// score at every instant, and the job with the greatest A is the first to
// reach any threshold.
//
// Each lane (the jobs of one type for one key, lane.go) keeps three heaps:
// jobs whose effective priority is fixed (in their grace period, or based
// at or above the ceiling) by base, then submission; aged jobs below the
// ceiling by A; and jobs aged to the ceiling, which tie, by submission.
// Fixed jobs mostly arrive already in their order (the same or a lower
// priority than the last, later): those queue in a sorted run beside the
// heaps (sortedrun.go), in O(1), and only the others pay the heap. Jobs
// in the heaps move between them when they cross the grace period,
// noticed through one queue of submissions in time order (grace.go), or
// the ceiling, noticed at the top of the rising heap: each move O(log n),
// at most twice per job.
//
// # The sorted run
//
// A job in the run never moves. Take a before b in it: base_a ≥ base_b,
// seq_a < seq_b and sub_a ≤ sub_b, which the run checks as a job joins
// its end. Then at every t:
//   - a's grace ends no later than b's (sub_a + G ≤ sub_b + G);
//   - both in their grace period: base_a ≥ base_b, ties to a by seq;
//   - a aged, b not: I·score_a ≥ base_a·I ≥ base_b·I, ties to a by seq;
//   - both aged below the ceiling: A_a = base_a·I − Step·sub_a ≥ A_b;
//   - b at the ceiling: A_a ≥ A_b, so a is there too, and capped jobs
//     tie and go by seq;
//   - a based at or above the ceiling: its score, its base, is at least
//     the ceiling, which bounds b's, ties to a by seq.
//
// So the run is in the lane's order in every phase mix, its front is its
// first job, and the front's rank is computed from its entry (base, seq,
// sub) at the instant of asking (runRank): the grace end and the ceiling
// cost a job of the run nothing, where a job of the heaps is moved twice.
// A job that comes back (retried, delayed, resumed) keeps its seq, and
// its sub moves on by its lane's paused time, so it joins the run only
// when both still come after the last job's.
//
// The urgent order is highest score first, then oldest, and a job is
// urgent when its uncapped score reaches the threshold, or from its
// submission when its base is at or above it, grace period or not. Per
// type, one more heap keyed by A holds the aged jobs: its top is the
// first of them to reach the threshold. A job urgent in its grace period
// cannot join it: its score, its base, stands still while the aged scores
// rise, so no time-invariant key places it among them. Those jobs wait in
// a heap of their own beside it, by base then submission, which does not
// move either, and the urgent step compares the two tops at the instant
// of asking (urgent.go); at its grace end such a job moves to the aged
// heap like every other job, noticed through the same grace queue. A job
// in its grace period below the threshold is in neither: leaving it out
// costs one comparison. The urgent step thus looks at four jobs per type
// (the two tops, and the same two of the gates' wait lanes, gates.go),
// and each move costs O(log n).
//
// Every heap keeps its entries' sort keys inline (iheap.Keyed), so sifting
// through a long queue does not read every job record it passes: of a
// lane's candidates only the winner's record is read.
//
// # Keeping blocked work out of sight: gates
//
// The engine never scans the queue. Per type, the lanes with work are kept
// in a heap by their flow's (V, stamp); per tier the types are few, so the
// fair steps look at the first lane of each type not at its cap and take
// the best: O(types + log n). Whatever keeps a job from starting is a gate
// (gates.go), and a gate keeps what it blocks out of sight until what
// blocks it changes:
//
//   - the global limit and a tier's or type's cap, and a type's rate limit
//     out of tokens: pick passes over the whole tier or type, one check
//     each;
//   - a key's cap, or its rate limit out of tokens (one gate, the key's
//     cap gate, shut while either holds): its lanes leave the type heaps
//     while it is shut;
//   - a key's cap, for the key's urgent jobs, and a conflict lock: the
//     gate holds the jobs, in a wait lane per lane they come from, out of
//     every order while it is shut. When it opens, the wait lanes are
//     attached to their lanes and their jobs compete as they are, and when
//     it shuts again (the key reaches its cap, the lock's next holder
//     starts) they are detached;
//   - a named resource short of units, or held for the job that claimed
//     it (resources.go): like a conflict lock, its gate holds the jobs it
//     blocks, in wait lanes; it shuts when, past the jobs it skips,
//     the next of them may not backfill and opens when units of it are
//     released or its claimant starts (below);
//   - no free replica to run on, once replicas are set (replicas.go,
//     below): like a conflict lock, the gate of the replica the job is
//     bound to, or of its type, holds it, shut by the order when it finds
//     every replica the gate's jobs may run on full, and opened when a
//     slot frees on one of them;
//   - a job's own gates that take it out of fair share as well (a
//     not-before time, dependencies, a pause): the job is set aside,
//     StateDelayed, StateBlocked or StatePaused, counted apart (naside: admission limits still count
//     it, and its key is not idle) but in no order and no flow, so that
//     its flow goes idle and its key's share goes to others, as docs/design.md
//     (Pause) asks of a pause. When the gate opens the job joins the
//     queue as a submission does: its flow re-enters at the tier's floor.
//     A pause finds its jobs through its lanes (typeState.all for a type)
//     and the wait lanes listed on them (lane.held), sets them aside in
//     submission order, and keeps them in the paused key's or type's
//     list; a paused job's aging clock stands still, which resuming
//     applies by moving its submission time on (pause.go). A job set
//     aside with its clock running (backing off, blocked) is not found
//     by a pause: each lane keeps its paused time instead (lane.stoodAt,
//     brought up to date at each pause and resume of its key or type,
//     O(lanes)), and the job, the lane's paused time as it left, so that
//     as it comes back its submission time moves on by what the lane
//     stood meanwhile. A restart keeps both for a durable job (stood.go):
//     a lane's paused time counts from when the lane was made, so that a
//     value kept of a forgotten lane is never more than a later one of
//     the same key and type.
//
// So Enqueue and Next cost O(log n) in pending jobs, plus the job types of
// a tier and the keys with reservations (both configured, so few),
// whatever the mix of keys, conflicts and aging. Opening or shutting a
// gate costs O(L log n) for the L lanes the jobs it holds come from,
// however many jobs those are.
//
// # Named resources: holding units, and backfill
//
// The first job the order finds short of a resource's units, needing none
// another job claims, claims every resource it needs: their units are
// held for it, the claimant C, until it starts or leaves. While they are,
// a job J that needs one of them may take its free units (backfill) only
// if J fits in the free units of everything it needs and
//
//	now + est(J) <= start(C),
//
// where est is the cost estimate fair share charges (the learned cost of
// J's (type, ID), its type's default before one is learned) and start(C)
// is when C could start by the estimates: with each running holder h of
// a resource r that C needs expected to end at end(h) = its start plus
// its estimate then, the earliest time by which the units released by the
// holders ending first cover what C lacks, the latest over C's resources:
//
//	start(C) = max over r of min { t : free(r) + Σ units(h) over end(h) <= t  >=  need(C, r) },
//
// math.MinInt64 when C has all its units (then no one backfills).
//
// start(C) never rises while C's claim lasts. The left side of each
// condition, f_r(t), grows with t, and the holders change only in two
// ways. A holder ends: its units move from the sum into free(r), so f_r
// is unchanged from its expected end on and grows before it, and the
// minimum can only fall. A job backfills, with end <= start(C): its units
// move from free(r) into the sum, so f_r is unchanged from its end on and
// falls before it; a minimum at or after its end stays, and one before
// it moves up to its end at most, still <= start(C). Only C and jobs that
// backfill take a claimed resource's units. So a job let past at any time
// during the claim ends, by its estimate, no later than S0, start(C) when
// C claimed.
//
// The bound in what happens. Let T0 be when the jobs holding the units C
// needs when it claimed have released enough of them for C, and o(J) the
// time a backfilled job J runs past its estimate. Once every backfilled
// job has ended, C's units are free as they would have been without
// backfill: they are free, at the latest, by
//
//	max(T0, max over J of (S0 + o(J)))  <=  max(T0, S0) + max over J of o(J).
//
// A job that overruns its estimate delays C by at most its overrun, one
// that ends within it not at all; C itself still waits for the jobs ahead
// of it in the order and for a slot, as any job does.
//
// Finding the jobs to backfill without a scan. The jobs that need a
// claimed resource are looked at as the order reaches them, as every job
// is, and each that backfills starts. One that may not (too long for the
// gap before start(C), or short of units) is skipped: the resource's
// skipped gate, always shut, holds it, and the jobs behind it are looked
// at in turn, as batch schedulers bound the jobs their backfill tests.
// Once K = Config.BackfillLookahead jobs are skipped, the next one that
// may not stops the resource's backfill: it shuts the resource's gate,
// which then holds it and every later job that needs the resource,
// without looking at them. Held units therefore sit idle only when none
// of the first K+1 jobs in the order that need them fits.
//
// Skipped jobs, and the gate, wait until units of the resource are
// released (a holder ends) or the claim ends, and no longer: then the
// skipped jobs go back to their lanes and the gate opens, and all of them
// compete again in order. Until then no skipped job could backfill, so
// none is looked at again. A job J skipped at t0 as too long had
// t0 + est(J) > start(C); until a release, now only grows, and start(C)
// does not move: it changes only as C's resources' holders change, and
// between releases the only change is a job that backfills, which leaves
// it where it was (above: each f_r falls, before an end <= start(C) only).
// A job skipped as short of units of r lacks them until r releases some:
// between releases, only starts take r's units. (A job skipped on r that
// would fit once another resource it needs releases units or ends its
// claim, or once its estimate falls as a job of its (type, ID) that held
// no unit of r ends, is looked at again only at r's next release or the
// end of r's claim: a chance to backfill put off, never a delay to C.)
// The claimant's start moving is thus no event of its own: it moves at a
// release, which brings the skipped jobs back anyway.
//
// Costs: holding a skipped job or putting it back is O(log n), and
// counting the skipped ones O(K); each open or shut of the gate costs
// O(L log n), as for any gate. Looking for the jobs to backfill thus costs
// O(log n + K) for each that starts and each skipped, plus one more, and
// a release O(K log n) for the skipped jobs it brings back: never in
// proportion to the jobs that wait. The claimant waits in a gate of its
// own (short), and goes back to its lane when the resource it waits on
// has its units. start(C) costs O(h log h) for the h running holders of
// C's resources (at most their units, configured) and is kept until
// those holders change (Engine.claimStarts).
//
// # Replicas: capacity and packing
//
// One engine may decide for many processes, replicas (replicas.go): each
// has a capacity and the types it has handlers for, and once one is set
// (SetReplica) a job starts only if a known replica it may run on (its
// own, for a job bound to one by Times.Replica; else one that serves its
// type) runs fewer jobs than its capacity, and it is placed on the first
// such replica by name (Job.Replica). Packing is then no search: the
// replicas are kept in a list by name, r of them, and placing a job or
// asking whether it has a replica is a walk of it, O(r); a replica's
// count is every job placed on it until its attempt ends, kept whether
// the replica is known or was removed. A job is placed as it starts: the
// jobs running when the first replica is set were placed on none and
// count on none, so replicas are to be set before jobs run.
//
// No head-of-line blocking, and no scan. The jobs that may run on the
// same replicas are alike for this rule: those bound to one replica, and
// those of one type bound to none. Each such class has a gate, the
// replica's (a record is kept for a name bound but not known, while it
// holds jobs) and the type's (typeState.rgate). When the order reaches a
// job, past every other hard limit, and finds no free replica for it, it
// holds the job in its class's gate and shuts the gate: every job held
// there is blocked as much, since its replicas are the same, all full.
// The jobs behind are looked at as past any gate.
//
// Found again when a slot frees. A shut gate's replicas are all full (or
// none is known), and stay so until one of these: a job placed on one of
// them ends, the replica was full and now has a free slot; or SetReplica
// makes one known, raises its capacity or gives it the type. Each opens
// the replica's own gate and the gates of the types it serves: their jobs
// compete where they are, as a conflict lock's waiters do, and the first
// of them the order reaches that finds no slot again shuts its gate,
// with every job in it, at once. A slot that frees on a replica that was
// not full opens nothing: no shut gate has it among its replicas, since a
// gate shuts only when all of its replicas are full. Removing a replica,
// lowering a capacity or taking a type away only makes jobs more blocked:
// a shut gate stays rightly shut, and an open one shuts when the order
// next reaches one of its jobs.
//
// Costs: holding a job O(log n); shutting a gate O(L log n) for the L
// lanes its jobs come from, however many jobs those are; a slot freeing
// on a full replica O(T + G·L log n) for the T types and the G gates it
// opens; SetReplica as much plus O(r), RemoveReplica O(r); the order's
// look at a job O(r). With no replica ever set none of it runs: Enqueue
// reads Times.Replica, a job's end and pick test one flag each, and
// start, the end of an attempt and a lone job's admission test one they
// share with named resources (Engine.placing).
//
// # Jobs decided elsewhere
//
// When one engine, the leader's, decides for many replicas, a replica's
// own engine decides nothing, yet its run-time layer needs a record for
// each closure it runs, with the identity Enqueue gives. Hold makes one,
// a held record (held.go): its lane (type and key), ID, base priority and
// a sequence number from Enqueue's counter, and nothing else. It waits
// or runs elsewhere (StateElsewhere; StateRunning with flagElsewhere
// once StartHeld) until EndHeld, in no order, gate, count or flow, and is
// not told to the Observer: the leader counts it. The engine lists the
// held records (Engine.elsewhere), so that Idle waits for them and
// Verify checks them; each call is O(1). The engine never reaches a lane
// through a held record but for its accessors, so a key with nothing
// else is idle and forgotten as any is, and a record keeping its lane
// reads its type from it, its key from its own field (Job.key: the lane
// may serve another key by then, spare.go), and changes nothing.
//
// The other way round, a new leader learns from the replicas the jobs
// the leader before it granted that still run, and a leader rebuilding
// from a store finds attempts still running: Adopt (adopt.go) admits
// such a job as Enqueue does a restored one and starts it at once,
// whatever holds, since it runs already. It counts against every limit
// from then on and may leave the engine above one (the global limit, a
// cap, a resource's units, a replica's capacity, its conflict lock held
// by another), as lowering a limit under running jobs does: every limit
// is a test of running >= limit, so the order starts nothing the limit
// holds until enough jobs end, and no structure assumes running <=
// limit (a key's cap gate shuts at once and opens below the cap; a
// replica's gate opens as a slot frees on it from full; a resource's
// units count free only past the excess). A conflict lock with two
// holders stays shut until the last ends (conflict.go). The job starts
// at its own start time: its charge, as a Fair start's (a Reserved one's
// if its key is below its reservation), is corrected, and its cost
// learnt, from then. It takes no rate-limit token, and goes on its own
// replica, full or not known. O(log n), as Enqueue, plus O(r).
//
// # Time
//
// The engine reads no clock: every call that depends on time takes now.
// What must happen at a time goes on one timeline (timeline.go), a heap of
// timers by due time; NextDue tells the caller the earliest, so that the
// caller keeps a single clock timer (the Clock's AfterFunc) however many
// jobs wait for a time. The gates and lifecycle rules that act at a time
// (a not-before time, a backoff, a rate limit's token, a start deadline)
// put their timers there; the rate limits' next tokens go on a rateline
// beside it (ratelimit.go), one entry per empty bucket. Three job timers
// are built (delay.go): a delayed job is
// StateDelayed, outside every order and fair-share account until its
// release timer joins it to the queue; a deadline timer expires a job
// wherever it waits; and a retried job (Retry) is delayed the same way
// for its backoff, keeping its aging clock: if its grace period has not
// ended when it rejoins, that end goes on lateGrace, since the grace queue
// takes jobs in submission order only. Timers due at one instant go by
// their job's sequence number, then kind, so that the reference model can
// state the order. A job's timers live in a side table (Engine.timed), so
// that a job without one carries only a flag.
//
// # Allocations
//
// A key's allocation is its weighted max-min fair share of the slots among
// the keys with work (Allocate). A paused key has no work, whatever it
// still runs, and a key's running jobs of paused types are no work
// (keyState.busy): each key counts those as they start and end, and from
// its lanes' running counts when a type is paused or resumed, O(lanes).
// The Observer hears when a configured key's allocation changes, which
// can happen whenever any key starts or stops having work. Every unconfigured key but the empty one has
// DefaultKey's configuration and, with a global limit, the same demand, so
// those with work enter the water-filling as one key of their summed
// weight and cap, and share its allocation equally: a transition costs
// O(c log c) for the c configured keys with work (and the empty key, whose
// default is the zero Key), whatever the number of other keys.
//
// # Listing the queue
//
// An admin page polls the queue, so a page of it must not cost a copy
// and sort of every job. QueueOrder lists the pending jobs in pick's
// order ranked once at now (the urgent jobs, the reserving keys', then
// by tier, flow and priority), every limit ignored, by a lazy k-way merge
// over the heaps and runs that already keep it (queueorder.go): a page of
// m jobs costs O(m log m) plus the shut gates, whatever n is. It keeps no
// index of its own, so costs no memory per queued job. The walk's buffers
// are kept from one page to the next, and EachInOrder hands the jobs to a
// function, so that a caller copies what it shows of them under its lock
// without allocating there.
//
// # Checking it
//
// Verify checks every invariant of these structures (each heap's order
// and handles, every count against a recount, the grace queue, the hard
// limits, each replica's count and that a shut replica gate's replicas
// are all full) in O(n). The tests call it after every step of the scenario,
// differential and fuzz runs.
package engine
