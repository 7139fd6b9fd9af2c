package fairsched

import (
	"errors"
	"fmt"

	"github.com/fairsched/fairsched/internal/engine"
)

// ErrDependency is matched (errors.Is) by the error of a job that ended
// without running because a job it runs after (Job.After) did not
// complete. The error is a *DependencyError.
var ErrDependency = errors.New("fairsched: a job it runs after did not complete")

// DependencyError is the error of a job that ended without running
// because Dep, a job it runs after, did not complete: it failed for good,
// was cancelled, missed its start deadline, or was itself ended so. It
// wraps Dep's error, so a chain of them leads to the first job that did
// not complete.
type DependencyError struct {
	Seq uint64 // the job that did not run
	Dep uint64 // the job it runs after that did not complete
	Err error  // Dep's error
}

func (e *DependencyError) Error() string {
	return fmt.Sprintf("fairsched: job %d runs after job %d, which did not complete: %v", e.Seq, e.Dep, e.Err)
}

// Unwrap returns the dependency's error.
func (e *DependencyError) Unwrap() error { return e.Err }

// Is reports whether target is ErrDependency.
func (e *DependencyError) Is(target error) bool { return target == ErrDependency }

// afterOf returns the engine records of the jobs job runs after, or an
// error if one of its handles is not one of this scheduler's.
func (s *Scheduler) afterOf(job *Job) ([]*engine.Job, error) {
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
func (s *Scheduler) waitsForAnyLocked(after []Handle) bool {
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
func (s *Scheduler) unrunLocked(now int64) {
	for _, u := range s.eng.TakeUnrun() {
		t := taskOf(u.Job)
		err := dependencyError(u.Job, u.Dep)
		setResultLocked(t, err)
		if s.events != nil {
			(*observer)(s).dependencyFailed(u.Job, err, now)
		}
		s.endedLocked(t)
	}
}

// dependencyError returns the error of job j, which will not run because
// dep did not complete.
func dependencyError(j, dep *engine.Job) error {
	return &DependencyError{Seq: j.Seq(), Dep: dep.Seq(), Err: resultOf(taskOf(dep))}
}
