package fairsched

import (
	"context"

	"github.com/fairsched/fairsched/internal/engine"
)

// Child jobs (SPEC section 10). A job submitted, or run by RunSync, with a
// context that descends from a running job's context is that job's child:
// its base priority is raised to the priority the parent started at
// (its effective priority, aging included) when that is higher, so that
// work a job fans out does not fall behind it in its key's queue. The
// child is otherwise a job of its own: it runs in its own key's share,
// and the parent's end does not end it.

// parentKey is the context key under which a job's context answers with
// itself, so that a child finds its parent.
type parentKey struct{}

// parentOf returns the job context ctx descends from, or nil.
func parentOf(ctx context.Context) *jobContext {
	jc, _ := ctx.Value(parentKey{}).(*jobContext)
	return jc
}

// inheritLocked raises desc's priority to that of the running job whose
// context is parent, if it is higher. O(running jobs).
func (s *Scheduler) inheritLocked(parent *jobContext, desc *Job) {
	p := s.eng.FindRunning(func(j *engine.Job) bool { return taskOf(j).ctx == parent })
	if p == nil {
		return // it has ended
	}
	eff := s.eng.Effective(p, p.Started())
	if base, ok := s.eng.BasePriority(descOf(desc)); ok && eff > base {
		desc.Priority = eff
	}
}
