// Package cluster runs one replica of a cluster of schedulers that share
// one database: its membership (registration, heartbeats, and fencing
// itself when it cannot renew them), its link to the leader, and, while
// it leads, the leader's decisions for every replica. It is the logic of
// any database; a database's module offers the calls (store.Cluster).
// This comment is for maintainers.
//
// # Roles
//
// Every replica's run-time layer asks a decide.Remote: its closures are
// decided by the leader, through messages (internal/decide, wire.go),
// the leader's own process's included. Leading is a role beside that: a
// replica that wins the lease (Campaign) makes the term's decisions
// (Config.NewTerm: a Term, internal/rt's keeper): an engine of its own,
// configured as every replica's, a decide.Leader over it, fed by the
// leader's link, and what keeps the cluster's durable jobs on the term's
// fenced view of the store (store.Leadership.Jobs), all under the Term's
// lock (leading.go). The Leader takes nothing and grants nothing once
// the term could be over (its guard), whatever goroutine asks. It
// begins its term by asking every live replica, itself included, for its
// jobs, and grants nothing until all have answered or were declared
// dead. When the term ends (the lease was refused, or could lapse before
// it is renewed) the role and its engine are dropped whole; the next
// leader asks everyone again. So a change of leader moves no state
// between engines, and a process's own jobs never change hands.
//
// What a leader's process sends its own replica, and what that replica
// sends its leader, does not cross the database: route.go hands it
// over in the process, on the Outbox's pump, as the database's link
// would (in order, by whole batches).
//
// # Configuration
//
// The leader decides for every replica with an engine of its own
// (NewEngine), configured as its own process's; so the replicas must
// agree on that configuration. Each registers with Config.Fingerprint
// (rt.Fingerprint: the engine's configuration, every job type's with its
// retry, disable and duplicate policies, and Lease), and the store
// refuses one, with store.ErrConfigMismatch, while a live replica other
// than itself, its registration not lapsed, has another, atomically: of
// two replicas of two configurations registering at once, one at most
// succeeds. So the first to register in a registry with no other live
// replica sets the cluster's configuration. A replica refused at Start
// fails it (and the scheduler's New); one refused as it registers again
// after it was declared dead, or lapsed, stays fenced, logs, and tries
// again at each heartbeat. Each replica's own settings are not in it: Capacity, Grace, the
// overflow hook, and its handlers (a durable job runs where a handler
// is).
//
// The fingerprint is of the configuration at New. Changing a live
// cluster's configuration is the business of the run-time changes
// (SetMaxConcurrency, weights, pauses: Changes, below), which reach every
// replica and the leader and survive a failover; they are not in the
// fingerprint, so a replica started after one joins, and takes it from
// the log; the log keeps each with the fingerprint of the configuration
// it changed (Changes, below). A deploy that changes the configuration
// cannot roll: its new replicas are refused while an old one is live. It
// stops the old replicas first (they deregister at Close; those killed
// lapse after Lease) and then starts the new ones, and no decision is
// taken between the two. A rolling deploy of
// the same configuration needs nothing, across versions too: a field
// added to the configuration and left at zero does not change the
// fingerprint.
//
// A replica counts as live until a leader declares it dead, but its
// registration lapses on its own: once its last heartbeat is Lease old,
// by the database's clock, Register ignores it when it checks the
// fingerprints, and its own Heartbeat fails with store.ErrReplicaDead,
// so that it registers again, and is checked, before it takes part
// again. It has fenced itself by then (Times): a lapsed replica runs
// nothing, whether or not a leader swept it. So a cluster killed whole
// (no Close, no leader left to sweep) can start again with another
// configuration once Lease has passed, and not before. Nothing but the
// leader's sweep, fenced by its term, declares a replica dead: a lapsed
// row stays live in the registry, and a leader that sees it drops it at
// its next sweep, or as a new incarnation when it registers again.
//
// Each registration lapses by its own Lease, recorded with it (Register
// takes it): the check judges the other replicas, whose configuration,
// and so whose Lease, may differ from the registering one's, and a
// heartbeat needs nothing but the row. Register and Heartbeat agree on
// the instant of a lapse (fairschedpg: the registry's advisory lock,
// exclusive for Register, shared for Heartbeat): a heartbeat that
// crosses a Register that counted its replica as lapsed finds it lapsed
// too, and cannot let back in what the check let another configuration
// past.
//
// # Changes
//
// A run-time change of the configuration (decide.Change: a limit, a
// key's weight or configuration, a resource's capacity, a pause) is made
// on one replica, and must hold at the leader, wherever it is, and at
// every replica, whose engine answers the reads and checks the next
// changes. The cluster keeps a log of them in the database
// (store.Cluster's AppendChange and Changes), numbered in the order the
// appends commit, and everyone applies it in that order (changes.go):
//
//   - The replica's Remote applies the change to its own engine, under
//     the run-time layer's lock, which refuses it or not as in one
//     process (the caller's error), and puts it in its ChangeOutbox. A
//     goroutine of the Node appends what is there, in order, trying again
//     each period while the database refuses, and once more at Stop;
//     having appended, it wakes the run loop.
//   - Each period, and when woken, the run loop reads the changes after
//     the last it applied, and applies each, in order, to the Remote
//     (through the Host's Deliver) and, while it leads, to the leader's
//     engine (decide.Leader.Apply, which grants what a change lets
//     start). Start applies the whole log before the replica takes part;
//     a new term's engine, made by NewEngine from the configuration at
//     New, applies the whole log before Begin. So a change outlives the
//     leader that first applied it, and the leader's own process's
//     changes reach its engine as everyone's do, through the log.
//   - The log keeps each change with the fingerprint of the
//     configuration it changed, and a replica reads only its own
//     configuration's: a deploy of another configuration starts from it
//     alone (a change to the old one, say a MaxConcurrency lowered for an
//     incident, does not override the new one's), while replicas of the
//     same configuration keep the changes, even once all stopped.
//   - Every change sets a value (a pause pauses, a reset resets): a
//     replica that applies its own change again from the log changes
//     nothing, and two replicas' changes that cross end, everywhere, as
//     the log orders them. Two leaders' engines that applied the log up
//     to one number agree, refusals included: both began from one
//     configuration (the fingerprint) and applied nothing else.
//
// What it does not do. A change takes effect at once on the replica that
// made it, and up to a period later (Lease/5) elsewhere. A change the
// replica's engine took may be refused by the log's replay (a key's
// reservation that a change made elsewhere, ahead of it in the log, no
// longer lets fit): the caller was told it held, and its replica's
// engine keeps it while the others refuse it, which each logs. An append
// whose commit was lost with its connection is appended again, so a
// change can appear twice, harmlessly unless another replica's change of
// the same value came between. A change this version cannot read (a
// newer version's, in a rolling upgrade) is logged and skipped. The log
// only grows; a new leader reads it whole.
//
// # Times
//
// Lease is both the leader's lease and a replica's registration: a
// replica whose last heartbeat is Lease old or older, by the database's
// clock, has lapsed (Configuration) and is declared dead by the leader's
// sweep. A replica heartbeats
// and a leader renews every Lease/5; a replica that does not lead
// campaigns every Lease/10, so that a dead leader is replaced within
// Lease plus Lease/10 after its last renewal, and the time its successor
// takes to hear from the replicas. What each may still believe it
// holds is measured by its own monotonic clock from before the call
// that succeeded: until = start + Lease, which is no later than the
// database's expiry, set from a clock reading taken after that start.
//
// # Fencing itself
//
// A replica that cannot heartbeat stops its runs Grace before its
// registration could lapse (until - Grace): it cancels the context of
// every job granted to it, and each such attempt fails with ErrLost, to
// be retried by its type's policy; grants that arrive while it is fenced
// are dropped. Handlers are assumed to return within Grace once their
// context ends; then no job of a replica declared dead still runs when
// the leader grants its slots again. When a heartbeat succeeds again (or
// the replica registers again, once declared dead) it sends its whole
// state to the leader (decide.Remote.Lost), which replaces what the
// leader knew of it, grants dropped included. A leader that cannot renew
// stops leading at until - Grace too, before another could take the
// lease.
package cluster
