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
		case h.t == nil:
			return nil, fmt.Errorf("fairsched: Job.After[%d] is the zero Handle, which refers to no job", i)
		case h.scheduler() != s:
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
		if h.t != nil && h.scheduler() == s && h.t.rec.State() != engine.StateDone {
			return true
		}
	}
	return false
}

// unrunLocked ends the jobs the engine ended without running, at now,
// because a job they run after did not complete: each one's error wraps
// its dependency's, set before it, since the engine lists a job after
// the dependency that failed it.
func (s *Runtime) unrunLocked(now int64) {
	for _, u := range s.eng.TakeUnrun() {
		t := taskOf(u.Job)
		err := s.dependencyError(u.Job, u.Dep)
		setResultLocked(t, err)
		if s.events != nil {
			(*observer)(s).dependencyFailed(u.Job, err, now)
		}
		s.endedLocked(t)
	}
}

// dependencyError returns the error of job j, which will not run because
// dep did not complete.
func (s *Runtime) dependencyError(j, dep *engine.Job) error {
	return s.cfg.Errors.Dependency(j.Seq(), dep.Seq(), resultOf(taskOf(dep)))
}
