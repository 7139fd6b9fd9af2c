// Package cluster is the PostgreSQL store's leadership and replica
// registry: which replica is the leader, in which term, and which
// replicas are alive with how many slots. It decides nothing about jobs;
// the store built on it does. This is its maintainers' documentation.
//
// # The lease
//
// One row, fairsched_leader (term, holder, expires), created by the first
// migration in term 0 with expires -infinity. A replica acquires it with
// one UPDATE whose WHERE is "expires <= the database's clock": the term
// goes up by one, the holder becomes the replica, expires becomes the
// clock plus the lease's time. Under READ COMMITTED, contenders' UPDATEs
// queue on the row lock, and each one after the first re-evaluates its
// WHERE on the row the first wrote (PostgreSQL's EvalPlanQual recheck),
// now unlapsed: exactly one wins, without a serializable transaction or
// a retry loop. Renewal is an UPDATE of expires WHERE term, holder and
// expires > the clock all still hold: a holder whose lease lapsed, even
// one no one took, is refused (ErrFenced) and must acquire again, in a
// new term, and rebuild its engine from the database as a new leader
// does. Stepping down sets expires to -infinity, so a successor takes it
// at once instead of after the lease's time.
//
// # Term fencing
//
// A leader paused past its lease (SIGSTOP, a long GC pause, a network
// cut) wakes believing it leads. Its writes are therefore checked in the
// same statement that makes them (Returning, Exec): the statement is
//
//	WITH fence AS MATERIALIZED (
//		SELECT term FROM fairsched_leader
//		WHERE term = $1 AND holder = $2 AND expires > clock_timestamp()
//		FOR KEY SHARE
//	), w AS (<the write, its WHERE including EXISTS (SELECT FROM fence)>)
//	SELECT EXISTS (SELECT FROM fence), ARRAY(SELECT * FROM w)
//
// so the write touches no row unless the lease is still the writer's,
// and the first column tells a refusal (ErrFenced: the Lease then holds
// nothing, and its owner steps down) from a write that had nothing to
// do. A check in a statement before the write would leave a window
// between the two; a check at commit would need a serializable
// transaction. FOR KEY SHARE closes the other window: a write checked
// and not yet committed holds the lease row, so a successor's
// acquisition, which locks the row FOR UPDATE first (qCampaign), waits
// for the commit, and the new leader's rebuild, after its acquisition,
// reads that write. The lock is held to the end of the writer's
// transaction: keep fenced transactions short, or a successor's
// acquisition waits for them. The holder's own renewal does not: it
// changes no key of the row, so its lock (FOR NO KEY UPDATE) does not
// conflict with KEY SHARE. (With FOR SHARE it did, and a renewal waiting
// for the fenced transactions in flight made every fenced transaction
// begun after it wait too: under load, renewals of 200 ms, and the
// leader's writes stalled behind each.)
//
// Fencing stops a stale leader's writes, not its code. The store built
// on this must also fence itself: Lease.Until is when the lease held
// could lapse at the earliest, by this process's monotonic clock (the
// start of the statement that acquired or renewed it, plus the lease's
// time: the database set expires from a clock reading taken after that
// start). Before then, a leader that could not renew stops granting; the
// same goes for a replica's heartbeat and the runs it holds: a replica
// that cannot renew cancels its own runs before its lease could lapse
// (self-fencing), so that none runs twice at once. Only the rate of the
// two clocks matters, not their offset.
//
// # The database's clock
//
// Every time that crosses replicas, the lease's expiry and the
// heartbeats, is the database's: clock_timestamp(), not the replicas'
// clocks (which may disagree by seconds) and not now(), which is frozen
// at the start of the transaction: a fence checked with now() inside a
// transaction begun before the lease lapsed would pass after it. A job's
// own times (submission, not-before, deadlines) are µs since the epoch,
// as store.Job carries them; the store built on this should take them
// from the database's clock too (the leader reads clock_timestamp() when
// it rebuilds, and measures from there), or aging and deadlines would
// jump at a failover by the two leaders' clock offset.
//
// # Replicas
//
// fairsched_replicas holds each replica's name, capacity (at least 1),
// configuration's fingerprint, lease, last heartbeat and state (live or
// dead). A replica registers (again after a restart, or after it was
// declared dead or lapsed) and heartbeats; one that shuts down
// deregisters. A registration whose heartbeat is its own lease old has
// lapsed: Register ignores it and Heartbeat refuses it (ErrReplicaDead),
// though it stays live. Register refuses (ErrConfigMismatch) a
// fingerprint other than a live replica's not lapsed, checked and
// recorded in one statement after an advisory lock every Register takes,
// exclusive, for its transaction, and every Heartbeat shared
// (replicas.go says why). The leader's Sweep declares dead, fenced by
// its term, every live replica whose heartbeat is older than the lapse
// it is given; a dead replica's heartbeat fails with ErrReplicaDead, so
// it learns it must stop its runs. What the leader
// does with a dead replica's jobs (lost attempts, retried by policy,
// counting against every limit until then) is the store's, in the same
// fenced transaction as the sweep; fairsched_jobs.replica records the
// replica each running attempt was granted to. Open: a replica that
// restarts under its name before it was declared dead looks, here, like
// the same one; the store needs to tell the two incarnations apart (a
// registration counter, or the sweep run at registration) before it can
// grant jobs.
//
// # The link
//
// A Link (link.go, where its design is) carries the messages between
// the replicas' decisions and the leader's (internal/decide's wire.go)
// over LISTEN/NOTIFY: a batch in one transaction, cut into
// notifications and joined again, a leader's fenced by its term as its
// writes are, and a listener that reconnects and says so (Lost).
//
// # Where the store interface should live (open)
//
// The store interface is internal/store in the root module, and the
// root's internal packages are importable here only because this module
// sits inside the root's tree. That is unsafe across versions: this
// module's go.mod pins a version of the root, a user may pair it with
// another, and an internal package carries no compatibility promise, so
// the two could disagree on the interface (or this could fail to build)
// with no go.mod able to say so. The likely answer is a small public home
// for the interface and its records, with a compatibility promise of its
// own (river's riverdriver is that), e.g. a package of the root module
// that the SQLite store and this one both implement, or a module of its
// own that both require. It is left open until the interface between the
// run-time layer and the decisions settles: what a remote leader
// implements decides what the store must offer.
package cluster
