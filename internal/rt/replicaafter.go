package rt

import (
	"errors"

	"github.com/fairsched/fairsched/internal/engine"
)

// A replica's Submit or RunSync job that runs after others (Job.After)
// waits in its replica until they have ended: the jobs it may name are
// the replica's own Submit jobs, whose ends this process knows. The
// leader admits it when it is submitted, within the queue's limits, and
// counts it against them while it waits, holding nothing else for it
// (decide.Remote.Park): a failover carries it in the replica's Hello.
// Once every job it runs after completed, it is released
// (Remote.Release): the leader takes it as admitted at its submission,
// so its aging clock runs from then. Once one did not, it ends without
// running with the error unrunLocked gives in one process, and so do the
// jobs that wait for it. Its start deadline, its own or its type's, is
// applied here while it waits (Remote.Due, through the clock timer).
//
// What waits is kept by the job waited for: afterEndedLocked, called
// from endedLocked (watchEnds is set while anything waits), settles the
// waits of a job that ended. A waiting job that ends otherwise
// (cancelled, expired, refused, closed) leaves its entries in the lists
// of the jobs it waited for, stale: each is matched against waits, by
// pointer, before it is settled, which also tells a RunSync record
// reused since.

// errBatchWaitsOnReplica refuses a replica's batch (SubmitMany) with a
// job that would wait for others: the leader admits a batch all or none,
// and a job that waits could end here, its dependency failed, between
// the batch's asking and the leader's answer.
var errBatchWaitsOnReplica = errors.New("fairsched: on a replica, a job of a SubmitMany batch cannot wait for others (its Job.After names a job that has not ended): submit it alone")

// afterWait is a replica's job waiting here for the jobs it runs after.
type afterWait struct {
	t    *task
	left int // the jobs it runs after that have not ended
}

// replicaAfter is what a replica's jobs that wait for others keep.
// Guarded by Runtime.mu.
type replicaAfter struct {
	waits map[*task]*afterWait   // by the job that waits
	on    map[*task][]*afterWait // by a job waited for
}

// replicaDeps are the jobs a replica's job runs after, as its submission
// finds them: those not ended, and the first that ended without
// completing, if one did.
type replicaDeps struct {
	pending []*task
	failed  *task
}

// replicaDepsOf returns what the replica's job whose dependencies are
// after must wait for, nil if nothing: they all completed.
func replicaDepsOf(after []*engine.Job) *replicaDeps {
	var d replicaDeps
	for _, j := range after {
		switch t := taskOf(j); {
		case !t.ended():
			d.pending = append(d.pending, t)
		case resultOf(t) != nil && d.failed == nil:
			d.failed = t
		}
	}
	if d.pending == nil && d.failed == nil {
		return nil
	}
	return &d
}

// parkedLocked keeps t, admitted at now and held by the Remote (Park),
// until the jobs of deps end; it ends at once, without running, if one
// had already failed.
func (s *Runtime) parkedLocked(t *task, deps *replicaDeps, now int64) {
	if deps.failed != nil {
		s.unrunHeldLocked(t, deps.failed, now)
		return
	}
	a := &s.afters
	if a.waits == nil {
		a.waits, a.on = make(map[*task]*afterWait), make(map[*task][]*afterWait)
	}
	w := &afterWait{t: t, left: len(deps.pending)}
	a.waits[t] = w
	for _, d := range deps.pending {
		a.on[d] = append(a.on[d], w)
	}
	s.watchEnds = true
	s.armLocked(now) // its start deadline, if it has one
}

// afterEndedLocked settles what waited for t, which has ended: each job
// that waited for it and nothing else is asked for, or, if t did not
// complete, ends without running.
func (s *Runtime) afterEndedLocked(t *task) {
	a := &s.afters
	delete(a.waits, t) // if it waited itself
	ws := a.on[t]
	if ws == nil {
		a.dropIfEmpty()
		return
	}
	delete(a.on, t)
	now := s.nowLocked()
	completed := resultOf(t) == nil
	for _, w := range ws {
		switch {
		case a.waits[w.t] != w: // ended meanwhile
		case !completed:
			delete(a.waits, w.t)
			s.unrunHeldLocked(w.t, t, now)
		default:
			if w.left--; w.left == 0 {
				delete(a.waits, w.t)
				s.remote.Release(&w.t.rec, now)
			}
		}
	}
	a.dropIfEmpty()
}

// dropIfEmpty lets the maps go once nothing waits, and no stale entry is
// left: the ends of jobs then skip afterEndedLocked.
func (a *replicaAfter) dropIfEmpty() {
	if len(a.waits) == 0 && len(a.on) == 0 {
		a.waits, a.on = nil, nil
	}
}

// unrunHeldLocked ends t, held here, without running at now, because
// dep, a job it runs after, did not complete.
func (s *Runtime) unrunHeldLocked(t, dep *task, now int64) {
	err := s.dependencyError(&t.rec, &dep.rec)
	setResultLocked(t, err)
	s.remote.Unrun(&t.rec, now)
	if s.events != nil {
		(*observer)(s).dependencyFailed(&t.rec, err, now)
	}
	s.endedLocked(t)
}
