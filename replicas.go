package fairsched

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fairsched/fairsched/internal/cluster"
	"github.com/fairsched/fairsched/internal/store"
)

// Replicas. A service that runs several processes (replicas behind a
// load balancer) can make their schedulers one: each opens a replica's
// Store on one database (fairschedpg.OpenReplica) and sets
// Config.Replica, and every limit then holds across all of them, as if
// one scheduler ran all their slots: MaxConcurrency, the tier, type and
// key caps, fair share between keys, conflict groups and resources. A
// RunSync or Submit function runs in the process that submitted it, and
// each replica runs at most its Capacity of them at once.
//
// One replica at a time leads: it holds a lease in the database, renewed
// while it lives, and decides for all. When it dies another takes over
// within Lease: until then, the jobs that were running keep counting
// against every limit, and those waiting keep waiting (their callers'
// contexts aside). A replica that cannot reach the database for Lease
// stops its own runs Grace before the others may count its slots as
// free: their contexts end, and each such attempt fails with an error
// matching ErrLost, retried by its type's Retry policy. So handlers are
// expected to return within Grace once their context ends.
//
// Every replica must be configured alike (the same limits, keys, job
// types and their policies, and Lease): the leader decides with its own
// configuration. New refuses a replica configured unlike the live ones,
// with an error matching ErrConfigMismatch; so a deploy that changes the
// configuration stops the old replicas before it starts the new ones. A
// replica that stopped without Close (killed) counts as live until Lease
// has passed since its last heartbeat, and no longer: a cluster killed
// whole can start again with another configuration after Lease.
//
// TryRunSync on a replica asks the leader, which starts the job in its
// answer if a slot is free in the cluster and on the replica, or refuses
// it (ErrWouldWait): the call takes a round trip to the leader, and one
// made during a failover answers ErrWouldWait once the next leader hears
// of it (ctx bounds the wait).
//
// Submit on a replica returns once the leader has admitted the job (or
// refused it: a full queue is Submit's error, as in one process), which
// takes a round trip to the leader, and during a failover the time the
// next leader takes. SubmitMany likewise: the leader admits the batch
// all or none, within the cluster's queue limits.
//
// A change made at run time on any replica (SetMaxConcurrency,
// SetTierLimit, SetTypeLimit, SetKey, SetKeyWeight, ResetKey(s),
// SetResource, PauseKey, ResumeKey, PauseType, ResumeType) holds for the
// whole cluster: it is checked and applied on the calling replica at
// once (its error, if refused, is the call's), recorded in the database,
// and applied by the leader and every other replica, in the order
// recorded, within Lease/5. A new leader applies every change recorded
// before it decides anything, and a replica started later has them from
// New; they are kept with the configuration they changed, so a deploy
// that changes the configuration starts from its own. Two changes made
// at once on two replicas end, everywhere, as recorded last; one that a
// change made elsewhere at the same moment makes impossible (a key's
// MinSlots over a MaxConcurrency lowered elsewhere) may hold on its
// replica and be refused by the others, which log it.
//
// Durable jobs are the cluster's: Enqueue, EnqueueMany and EnqueueTx on
// any replica store the job in the database, and the leader keeps every
// durable job, recovers them as a new term begins, and runs each attempt
// on a replica that has a handler of its type (Config.Handlers may differ
// between replicas), within every limit, packed as closures are. Jobs of
// a type no live replica has a handler of wait, and start once one joins.
// The leader records each attempt's start before the replica runs it and
// its end when the replica reports it; a replica that stops while it runs
// one (killed, cut off, or closed) loses that attempt, which fails with
// ErrLost and is retried by its type's Retry policy, elsewhere; if the
// leader dies instead, the next one finds the attempt running where the
// replica says it runs, and waits for its end. So a handler runs at least
// once per attempt, and may run again after a fault: make it idempotent
// (JobID(ctx) is the same in every attempt). The job's admission is the
// leader's, as for a job of a caller's transaction: the calling
// replica's Enqueue is not refused for a full queue. Its Handle learns the
// job's end from the database, which the replica reads while a Handle is
// asked for it (Done, Err, Wait): within a quarter of a second of the
// end's commit, sooner for a short job. A Handle whose job has not ended
// when its replica shuts down or closes ends with ErrKept: the job goes
// on in the cluster.
//
// A durable job that dies is the cluster's too: DeadJobs on any replica
// lists the database's dead jobs beside its own dead Submit jobs, and
// RetryDead on any replica queues one of them again, for the leader to
// run (its Handle follows the job's end, as Enqueue's on a replica does).
// ScheduleDurable on every replica keeps one schedule, and a durable job
// may run after durable jobs enqueued on any replica (Job.After).
//
// What is not shared yet: a Submit or RunSync job that runs after others
// (Job.After) is refused on a replica; and Stats, Queue and EstimateWait
// tell of the calling replica's own jobs (its limits and paused keys are
// the cluster's, as applied on that replica; the leader's Stats.Cluster
// tells of the cluster's).

// Replica configures a scheduler as one replica of several (Config.Replica).
type Replica struct {
	// Name identifies the replica among the others: unique, and stable
	// across its restarts (a pod's name, a host and port). Required.
	Name string
	// Capacity is the most jobs the replica runs at once, at least 1.
	Capacity int
	// Lease is how long a leader's lease, and a replica's registration,
	// hold without renewal: a dead leader is replaced, and a dead
	// replica's slots counted free, within it. 0 means DefaultLease.
	// Every replica of a cluster must use the same (ErrConfigMismatch).
	Lease time.Duration
	// Grace is how long a handler may take to return once its context
	// ended: a replica that cannot renew its registration stops its runs
	// this long before it could lapse. 0 means Lease/5; it must be less
	// than Lease/2.
	Grace time.Duration
	// Overflow, if set, is called by the leader when jobs have waited for
	// a free slot on a replica, and for nothing else (no limit, pause or
	// time holds them), for OverflowAfter or longer, at most once every
	// OverflowEvery, with how many wait so: a signal to start another
	// replica. It runs on a goroutine of its own, with a context that
	// ends after OverflowEvery; its error is logged (Config.Logger).
	// Best effort: a change of leader starts the count again.
	Overflow func(ctx context.Context, waiting int) error
	// OverflowAfter and OverflowEvery: 0 means DefaultOverflowAfter and
	// DefaultOverflowEvery.
	OverflowAfter, OverflowEvery time.Duration
}

// The defaults of Replica.
const (
	DefaultLease         = 5 * time.Second
	DefaultOverflowAfter = 30 * time.Second
	DefaultOverflowEvery = 5 * time.Minute
)

// ReplicaStats are a replica's own figures, in Stats.Replica: no other
// replica counts them, so summing the replicas' counts nothing twice.
type ReplicaStats struct {
	Name string
	// Leader reports whether the replica leads, and Term its term then.
	Leader bool
	Term   uint64
	// Capacity and Running: the most jobs it runs at once, and how many
	// run now.
	Capacity, Running int
	// Busy and Idle are how long, since New, it ran at least one job,
	// and none.
	Busy, Idle time.Duration
}

// validate reports the problems with r as a scheduler with st's.
func (r *Replica) validate(st Store) error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("fairsched: Replica: "+format, args...))
	}
	if r.Name == "" {
		add("Name is empty; each replica needs a name of its own")
	}
	if r.Capacity < 1 {
		add("Capacity is %d; a replica runs at least 1 job at once", r.Capacity)
	}
	if r.Lease < 0 {
		add("Lease is %v; it must be 0 (DefaultLease) or positive", r.Lease)
	}
	lease := r.lease()
	if r.Grace < 0 || r.Grace >= lease/2 && r.Grace != 0 {
		add("Grace is %v; it must be 0 (Lease/5) or positive and less than Lease/2 (%v)", r.Grace, lease/2)
	}
	if r.OverflowAfter < 0 || r.OverflowEvery < 0 {
		add("OverflowAfter and OverflowEvery must be 0 (their defaults) or positive")
	}
	if _, ok := st.(store.Cluster); !ok {
		add("Config.Store is not one that replicas share: open it with fairschedpg.OpenReplica")
	}
	return errors.Join(errs...)
}

func (r *Replica) lease() time.Duration {
	if r.Lease == 0 {
		return DefaultLease
	}
	return r.Lease
}

// cluster returns the replica's part, its defaults resolved, on st,
// logging to logger (nil: nowhere).
func (r *Replica) cluster(st Store, logger *slog.Logger) *cluster.Config {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &cluster.Config{
		Name: r.Name, Capacity: r.Capacity, Lease: r.lease(), Grace: r.Grace,
		Store: st.(store.Cluster), Logger: logger,
		Overflow: r.Overflow, OverflowAfter: r.OverflowAfter, OverflowEvery: r.OverflowEvery,
	}
	if c.Grace == 0 {
		c.Grace = c.Lease / 5
	}
	if c.OverflowAfter == 0 {
		c.OverflowAfter = DefaultOverflowAfter
	}
	if c.OverflowEvery == 0 {
		c.OverflowEvery = DefaultOverflowEvery
	}
	return c
}
