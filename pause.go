package fairsched

// PauseKey pauses the fairness key name. Its queued jobs, and those
// submitted to it later, wait holding nothing, out of the order and out
// of fair share: for allocation the key counts as one with no work, so
// its share goes to the other keys at once. Its running jobs finish. A
// paused job's aging clock stands still, as does that of a job of the
// key backing off or waiting for jobs it runs after; its start deadline
// does not.
// A key the scheduler has not seen may be paused: the pause applies when
// it appears. Pausing a paused key does nothing.
//
// It takes the lock for O(m log n) time, for the key's m waiting jobs.
func (s *Scheduler) PauseKey(name string) {
	s.rt.PauseKey(name)
}

// ResumeKey resumes the fairness key name. Its waiting jobs whose type
// is not paused join the queue, and the key re-enters fair share as a key
// returning from idle does: at the lowest virtual time of the keys with
// work, or its own if that is higher. Resuming a key that is not paused
// does nothing.
//
// It takes the lock for O(m log n) time, for the key's m paused jobs.
func (s *Scheduler) ResumeKey(name string) {
	s.rt.ResumeKey(name)
}

// PauseType pauses the job type name, as PauseKey does a key: its queued
// jobs and those submitted later wait, holding nothing, until ResumeType.
// Its running jobs finish, and for allocation none of its jobs, waiting or
// running, is work of their key: a key whose only work is of the type
// counts as one with no work. A job waits while its key or its type is
// paused. It fails, changing
// nothing, if the type is not registered (the error wraps ErrUnknownType).
func (s *Scheduler) PauseType(name string) error {
	return s.rt.PauseType(name)
}

// ResumeType resumes the job type name, as ResumeKey does a key. It fails
// if the type is not registered (the error wraps ErrUnknownType), and for
// a type of durable jobs found in the Store without a handler here, whose
// jobs wait for a process that has one (WaitNoHandler).
func (s *Scheduler) ResumeType(name string) error {
	return s.rt.ResumeType(name)
}
