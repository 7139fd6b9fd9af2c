package store

import (
	"context"
	"errors"
	"time"

	"github.com/fairsched/fairsched/internal/decide"
)

// Cluster is what a store that many replicas share offers them, beside
// the durable jobs: a registry of replicas, one leader at a time under a
// lease, and links for the messages between the replicas' decisions and
// the leader's (internal/decide, wire.go). Every time that crosses
// replicas (a lease's expiry, a heartbeat's age) is the database's
// clock; the caller measures what it must know of them by its own
// monotonic clock, from before the call that set them: only the rates of
// two clocks need agree.
//
// The logic (when to heartbeat, campaign, renew, sweep; what the leader
// decides) is the caller's, the same for any database; a store
// implements these calls in its database's terms. Its methods are safe
// for concurrent use.
type Cluster interface {
	// Register records replica name, live, with capacity slots (at least
	// 1), its configuration's fingerprint, its lease and a heartbeat now:
	// again after a restart, or after it was declared dead or its
	// registration lapsed. It refuses, with ErrConfigMismatch, and records
	// nothing, while any live replica other than name whose registration
	// has not lapsed is registered with another fingerprint: the leader
	// decides for every replica by its own configuration, so all must
	// have one (internal/cluster, doc.go, Configuration). The check and
	// the record are atomic: of two replicas with different fingerprints
	// registering at once, with no other live, one at most succeeds.
	//
	// A registration lapses when its last heartbeat is lease old or
	// older, by the database's clock: its replica fenced itself before
	// (it stops its runs Grace before its lease, by its own clock), and
	// counts for nothing more until it registers again, though it stays
	// live in the registry until a leader's Sweep declares it dead. The
	// lease is the replica's own (its configuration's, in its
	// fingerprint): each registration lapses by its own.
	Register(ctx context.Context, name string, capacity int, fingerprint string, lease time.Duration) error
	// Heartbeat records that replica name is alive now. It fails with
	// ErrReplicaDead if a leader declared it dead or if its registration
	// lapsed (both: it must stop its runs and register again, which
	// checks its fingerprint), ErrNotRegistered if it is not registered.
	// Once lapsed, a registration is not renewed: a heartbeat that
	// crosses a Register does not let back in a replica whose lapse that
	// Register counted on.
	Heartbeat(ctx context.Context, name string) error
	// Deregister removes replica name: it left.
	Deregister(ctx context.Context, name string) error
	// Replicas returns every replica registered, by name.
	Replicas(ctx context.Context) ([]ReplicaRecord, error)
	// Campaign makes replica name the leader for ttl if no one holds the
	// lease, and returns its leadership; nil if another holds it.
	Campaign(ctx context.Context, name string, ttl time.Duration) (Leadership, error)
	// ReplicaLink returns replica name's Link: what it sends goes to the
	// leader of the moment; what the leader sends it is handed to recv.
	ReplicaLink(ctx context.Context, name string, recv decide.Receiver) (ClosingLink, error)
	// AppendChange appends body, a change of the configuration made at
	// run time on a replica (decide.EncodeChange), to the cluster's log of
	// changes, under the fingerprint of the configuration it changes, and
	// returns its number. Numbers grow in the order in which appends
	// commit: once Changes has returned a change, it returns none numbered
	// below it that it did not return then. A number may be skipped (an
	// append that failed).
	AppendChange(ctx context.Context, fingerprint string, body []byte) (seq int64, err error)
	// Changes returns the changes of the log appended under fingerprint
	// and numbered after after, in order of their numbers: after 0, all
	// of them. Another configuration's are not the cluster's any more (a
	// deploy changed it).
	Changes(ctx context.Context, fingerprint string, after int64) ([]ChangeRecord, error)
}

// ChangeRecord is one change of the cluster's log (Cluster.AppendChange).
type ChangeRecord struct {
	Seq  int64
	Body []byte
}

// Leadership is one term of a replica as the leader. Every write it
// makes is fenced by its term, in the statement that makes it: once the
// lease was lost (lapsed and taken, or refused at a renewal), each
// fails with ErrFenced and the leadership is over for good.
type Leadership interface {
	// Term is the lease's term: it grows with every new leader.
	Term() uint64
	// Renew extends the lease by its ttl from now, or fails with
	// ErrFenced.
	Renew(ctx context.Context) error
	// Sweep declares dead every live replica whose last heartbeat is
	// older than lapse, and returns their names.
	Sweep(ctx context.Context, lapse time.Duration) ([]string, error)
	// StepDown gives the lease up at once, so that a successor need not
	// wait for it to lapse.
	StepDown(ctx context.Context) error
	// Link returns the leader's Link: what the replicas send is handed to
	// recv, and what it sends each replica is fenced by the term;
	// onFenced is called once if a send is refused.
	Link(ctx context.Context, recv decide.Receiver, onFenced func()) (ClosingLink, error)
	// Jobs returns the cluster's durable jobs as this term's leader keeps
	// them: a Store and a Watcher on the database the replicas share,
	// whose every write (Insert, Start, Post, PutState) commits only in a
	// transaction fenced by the term (once the term is over, each fails
	// with ErrFenced, and nothing of it is committed), and whose Watch
	// takes the jobs every replica inserted (Insert on a replica's store
	// marks them for it, as InsertTx does). Its Close stops its writes and
	// its Watch, not the store it came from. One per term.
	Jobs() Store
}

// ClosingLink is a Link that holds connections until closed; Close
// returns once no call to its Receiver is in progress.
type ClosingLink interface {
	decide.Link
	Close()
}

// ReplicaRecord is one replica as the registry has it.
type ReplicaRecord struct {
	Name     string
	Capacity int
	Live     bool // false: declared dead
	// Incarnation changes each time the replica registers (again after
	// a restart under its name): never 0.
	Incarnation int64
}

// The cluster's errors, which a store returns wrapped.
var (
	ErrFenced = errors.New("fairsched: this replica's term as the leader is over")
	// ErrReplicaDead: the replica was declared dead, or its registration
	// lapsed. Its message says which.
	ErrReplicaDead   = errors.New("fairsched: this replica is out of the cluster: it must stop its runs and register again")
	ErrNotRegistered = errors.New("fairsched: this replica is not registered")
	// ErrConfigMismatch: Register refused a replica whose configuration
	// differs from the live replicas'. Its message names the replicas
	// that differ and both fingerprints.
	ErrConfigMismatch = errors.New("fairsched: this replica's configuration differs from the live replicas'")
)
