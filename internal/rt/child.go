package rt

import (
	"context"

	"github.com/fairsched/fairsched/internal/engine"
)

// Child jobs (docs/design.md, Child jobs). A job submitted, enqueued (a durable job,
// whose raised priority is stored with it), or run by RunSync, with a
// context that descends from a running job's context is that job's child:
// when it has to wait, its base priority is raised to the priority the
// parent started at (its effective priority, aging included) when that
// is higher, so that work a job fans out does not fall behind it in its
// key's queue. A child that starts at once keeps its own: nothing is
// ordered against it. The child is otherwise a job of its own: it runs in
// its own key's share, and the parent's end does not end it.

// parentOf returns the job context ctx descends from, or nil.
func parentOf(ctx context.Context) *jobContext {
	jc, _ := ctx.Value(parentKey{}).(*jobContext)
	return jc
}

// parentPriorityLocked returns the priority the running job whose
// context ctx descends from started at, if there is one. O(running jobs).
func (s *Runtime) parentPriorityLocked(ctx context.Context) (int, bool) {
	parent := parentOf(ctx)
	if parent == nil {
		return 0, false
	}
	p, eff := s.decider().FindRunning(func(j *engine.Job) bool { return taskOf(j).ctx == parent })
	if p == nil {
		return 0, false // it has ended
	}
	return eff, true
}

// raiseChildLocked raises the priority of t, just queued at now, to its
// parent's, if it is a child and that is higher. Only a job that waits is
// looked at: one that starts at once has nothing to be ordered against,
// and the look-up walks the caller's context, which a request's makes
// long.
func (s *Runtime) raiseChildLocked(ctx context.Context, t *task, now int64) {
	if eff, ok := s.parentPriorityLocked(ctx); ok {
		s.decider().Raise(&t.rec, eff, now)
	}
}

// inheritLocked raises desc's priority to its parent's, if ctx makes it a
// child and that is higher: for a duplicate about to join a job.
func (s *Runtime) inheritLocked(ctx context.Context, desc *Job) {
	if eff, ok := s.parentPriorityLocked(ctx); ok {
		if base, known := s.decider().BasePriority(*descOf(desc)); known && eff > base {
			desc.Priority = eff
		}
	}
}
