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
// replica that wins the lease (Campaign) makes an engine of its own,
// configured as every replica's, and a decide.Leader over it, fed by
// the leader's link and guarded by a lock of its own (leading.go). It
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
// # Times
//
// Lease is both the leader's lease and a replica's registration: a
// replica whose last heartbeat is older than Lease, by the database's
// clock, is declared dead by the leader's sweep. A replica heartbeats
// and a leader renews every Lease/5. What each may still believe it
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
