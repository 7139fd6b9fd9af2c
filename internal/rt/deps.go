package rt

import (
	"fmt"

	"github.com/fairsched/fairsched/internal/engine"
)

// afterOf returns the engine records of the jobs job runs after, or an
// error if one of its handles is not one of this scheduler's.
func (s *Runtime) afterOf(job *Job) ([]*engine.Job, error) {
	after := make([]*engine.Job, len(job.After))
	for i, h := range job.After {
		switch {
		case h.t == nil && h.end != nil:
			return nil, fmt.Errorf("fairsched: Job.After[%d] is durable job %d, enqueued on a replica: a replica's Submit and RunSync jobs run after its Submit jobs only (durable jobs run after durable jobs)", i, h.elsewhere)
		case h.t == nil:
			return nil, fmt.Errorf("fairsched: Job.After[%d] is the zero Handle, which refers to no job", i)
		case h.t.rec.Engine() != s.eng:
			return nil, fmt.Errorf("fairsched: Job.After[%d] is job %d of another Scheduler", i, h.Seq())
		}
		after[i] = &h.t.rec
	}
	return after, nil
}

// waitsForAnyLocked reports whether one of the jobs of after has not
// ended: a job that runs after them would wait. A handle that is not one
// of s's does not count: submitting refuses it.
func (s *Runtime) waitsForAnyLocked(after []Handle) bool {
	for _, h := range after {
		if h.t != nil && h.t.rec.Engine() == s.eng && !h.t.ended() {
			return true
		}
	}
	return false
}
