package rt

import (
	"sync"
	"sync/atomic"

	"github.com/fairsched/fairsched/internal/cluster"
	"github.com/fairsched/fairsched/internal/decide"
	"github.com/fairsched/fairsched/internal/engine"
)

// Runtime is a Scheduler's run-time layer (see the package
// documentation). Make one with New; it is safe for concurrent use.
type Runtime struct {
	// Methods named ...Locked are called with mu held.

	// Set by New, then read-only.
	cfg Config
	timebase

	mu sync.Mutex
	// Guarded by mu.
	eng *engine.Engine
	// dec: the decisions, if Config.Decider made a Decider; nil: eng's,
	// asked directly (decisions.go).
	dec    decide.Decider
	inProc *decide.Local // the engine as a Decider, for the points off the hot path
	times  engine.Times  // a job's times as handed to a Decider, for the call only (decisions.go)
	spare  spareTasks    // ended RunSync records, for reuse
	closed bool          // Close began: queued work discarded
	// stopping: Shutdown or Close began, and no job is admitted any more
	// (stopAcceptingLocked).
	stopping bool
	idle     chan struct{} // closed when nothing is pending or running, while closing
	done     chan struct{} // closed when Shutdown or Close begins (Done)
	// The clock timer (life.go, dueLocked): set to fire at timerAt when
	// timerStop is not nil.
	timerAt   int64
	timerStop func() bool
	retries   retries  // the retry policy (retry.go)
	dead      deadJobs // the dead-job policy (dead.go)
	// disabling is what the disable policies keep (disable.go).
	disabling disabling
	// dups is what the duplicate policies keep (supersede.go, join.go).
	dups duplicates
	// watchEnds: a job's end has more to do than its own waiters' (idle
	// is set, or a type has a duplicate policy).
	watchEnds bool
	// durable is what a Scheduler with a Store keeps; nil without one.
	// Set by New, then read-only.
	durable *durable
	// periodic holds the schedules running (periodic.go).
	periodic           map[interface{ stopLocked() }]struct{}
	skippedOccurrences uint64

	// A replica of a cluster's (Config.Cluster): its Decider, what it
	// sends the leader, and its part in the cluster. Set by New, then
	// read-only.
	remote *decide.Remote
	outbox *decide.Outbox
	node   *cluster.Node
	// lapse is node, for the check a job makes before it begins
	// (lapsedBeforeBegin): stored once Start returned, which may already
	// have delivered a durable Run.
	lapse atomic.Pointer[lapser]
	// keeper is what the keeper of a leader's term keeps (keeper.go); nil
	// but in one.
	keeper *keeper
	// clusterDead is what a replica keeps of the cluster's dead jobs it
	// listed last (clusterdead.go). Guarded by mu.
	clusterDead clusterDead
	// runs are the contexts of the durable attempts this replica runs
	// for the leader, by job ID (runs.go). Guarded by mu.
	runs map[int64]*jobContext
	// follow is what the Handles of the durable jobs this replica
	// enqueued follow of their ends (elsewhere.go).
	follow following
	// afters are this replica's jobs that wait for others to end before
	// the leader is asked for them (replicaafter.go). Guarded by mu.
	afters replicaAfter
	// recorded, while Shutdown waits for the leader to have the ends of
	// this replica's attempts (awaitRecorded), is closed once it has.
	// Guarded by mu.
	recorded chan struct{}

	wg     sync.WaitGroup // job goroutines
	events *eventSink     // nil without Config.OnEvent
}
