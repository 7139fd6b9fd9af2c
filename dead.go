package fairsched

import (
	"time"
)

// Dead jobs. A Submit job that fails for good (its last attempt failed, or
// it returned an error matching ErrPermanent) is dead: the scheduler keeps
// it, newest first, in a list of Config.DeadJobs, so that an operator can
// see what failed and try it again by hand (RetryDead) once the cause is
// fixed. A RunSync job is never dead: its caller has the error. Jobs that
// were cancelled, or expired, are not dead either.

// DeadJob describes a dead job.
type DeadJob struct {
	Seq      uint64        // its sequence number
	Job      Job           // as submitted, without its times
	Err      error         // its last attempt's error
	Attempts []AttemptInfo // every attempt, the last one failed
	Died     time.Time
}

// DeadJobs returns the dead jobs the scheduler keeps, newest first. On a
// replica (Config.Replica), it also lists the cluster's dead durable
// jobs, read from the database, at most Config.DeadJobs in all; if that
// read fails, the error is logged (Config.Logger) and only the replica's
// own are listed.
func (s *Scheduler) DeadJobs() []DeadJob {
	dead := s.rt.DeadJobs()
	out := make([]DeadJob, len(dead))
	for i, d := range dead {
		out[i] = DeadJob{Seq: d.Seq, Job: *jobFrom(&d.Job), Err: d.Err, Attempts: attemptInfos(d.Attempts), Died: d.Died}
	}
	return out
}

// RetryDead takes the dead job seq out of the dead list and submits it
// again with its function and its context's values, as if newly
// submitted (a fresh aging clock, and its type's StartTimeout from now),
// for one more attempt: its attempt numbers go on, and if that attempt
// fails too, the job is dead again. It returns the new job's Handle. It
// fails with ErrNotDead if seq is not in the dead list, and as Submit
// does otherwise (the job then stays dead).
//
// On a replica, a dead durable job DeadJobs listed is queued again in the
// database, for the leader to run; its Handle follows the job's end as
// the Handle of Enqueue on a replica does. It fails with ErrNotDead if the job is no longer dead
// there (another replica retried it first).
func (s *Scheduler) RetryDead(seq uint64) (Handle, error) {
	h, err := s.rt.RetryDead(seq)
	return Handle{h}, err
}
