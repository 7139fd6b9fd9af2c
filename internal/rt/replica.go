package rt

import (
	"context"
	"fmt"

	"github.com/fairsched/fairsched/internal/engine"
)

// A replica of a cluster (Config.Cluster): its decisions are the
// leader's, through a decide.Remote, and its part in the cluster is an
// internal/cluster Node, to which the Runtime is the Host.

// errLostRun ends the context of a run its replica stopped, because it
// could not renew its registration (self-fencing, internal/cluster): the
// handler sees context.Canceled, and the attempt fails with ErrLost, to
// be retried by its type's policy.
var errLostRun = fmt.Errorf("%w (%w: its replica could not renew its registration)", context.Canceled, ErrLost)

// Lose cancels the run of every job granted to this replica: each
// attempt fails with ErrLost (internal/cluster, Host).
func (s *Runtime) Lose() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.decider().Each(func(j *engine.Job, granted bool) {
		if t := taskOf(j); granted && t.granted() && t.ctx != nil {
			t.ctx.cancel(errLostRun)
		}
	})
	s.stopRunsLocked(errLostRun)
}

// lapser says whether a replica's registration could have lapsed, and
// if so stops its runs first: cluster.Node.Lapsed, or a test's stand-in.
type lapser interface{ Lapsed() bool }

// lapsedBeforeBegin reports whether a job granted to this replica must
// not begin, as its registration could have lapsed: the process was
// paused (SIGSTOP, a long pause) between the grant and now, and the
// leader may have declared it dead and stopped counting its jobs. The
// replica's runs stop then (its fence), and the job's attempt is lost
// (errLostRun) without its function being called. Asked on the job's
// goroutine just before it calls the function: a process woken past the
// lapse runs its goroutines in any order, the fence's timer maybe last.
func (s *Runtime) lapsedBeforeBegin() bool {
	l := s.lapse.Load()
	return l != nil && (*l).Lapsed()
}

// lostAttempt returns what a cancelled attempt that returned err ended
// with, and whether it counts as cancelled, given its context's error
// ctxErr: a run its replica stopped failed, with ErrLost.
func lostAttempt(err, ctxErr error) (error, bool) {
	if ctxErr == errLostRun {
		return errLostRun, false
	}
	return err, true
}

// leaveCluster ends the scheduler's part in its cluster, if it has one,
// once its jobs have ended: what it sends the leader is sent first.
func (s *Runtime) leaveCluster(ctx context.Context) error {
	if s.node == nil {
		return nil
	}
	return s.node.Stop(ctx)
}
