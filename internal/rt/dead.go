package rt

import (
	"context"
	"time"
)

// Dead jobs. A Submit job that fails for good (its last attempt failed, or
// it returned an error matching ErrPermanent) is dead: the scheduler keeps
// it, newest first, in a list of Config.DeadJobs, so that an operator can
// see what failed and try it again by hand (RetryDead) once the cause is
// fixed. A RunSync job is never dead: its caller has the error. Jobs that
// were cancelled, or expired, are not dead either.

// defaultDeadJobs is how many dead jobs are kept when Config.DeadJobs is 0.
const defaultDeadJobs = 100

// DeadJob is a dead job as the API's DeadJobs lists it.
type DeadJob struct {
	Seq      uint64
	Job      Job // as submitted, without its times
	Err      error
	Attempts []AttemptInfo
	Died     time.Time
}

// deadRecord is a dead job as the scheduler keeps it: what RetryDead needs to
// submit it again.
type deadRecord struct {
	info     DeadJob
	fn       func(context.Context) error
	parent   context.Context // the values its attempts' contexts carry
	attempts *attempts
	// durableID is a durable job's identity in the store; 0 otherwise.
	durableID int64
}

// deadJobs is the dead-job policy: the dead jobs kept, and how a job
// that failed for good joins them. Guarded by Runtime.mu.
type deadJobs struct {
	list   []*deadRecord // oldest first
	total  uint64        // jobs that died, ever
	limit  int           // how many are kept: Config.DeadJobs or its default; negative: none
	tb     *timebase
	events *eventSink // nil: none
}

// newDeadJobs returns the policy keeping limit dead jobs (0: the default,
// negative: none).
func newDeadJobs(limit int, tb *timebase, events *eventSink) deadJobs {
	if limit == 0 {
		limit = defaultDeadJobs
	}
	return deadJobs{limit: limit, tb: tb, events: events}
}

// bury adds t, a Submit job whose last attempt failed at now with err and
// which is about to end, to the dead jobs; needs are its own needs (as
// Job.Needs gives them), durableID its identity in the store (0: none).
func (g *deadJobs) bury(t *task, err error, needs map[string]int, durableID int64, now int64) {
	g.total++
	j := &t.rec
	if g.events != nil {
		g.events.send(Event{Kind: EventDead, Time: g.tb.timeOf(now), Seq: j.Seq(), Type: j.Type(),
			ID: j.ID(), Key: j.Key(), Tier: Tier(j.Tier()), Err: err})
	}
	if g.limit < 0 {
		return
	}
	a := attemptsOf(t)
	if a == nil { // one attempt: its record is made here
		a = newAttempts(t)
		a.add(g.tb, t, err, now)
	}
	g.add(&deadRecord{
		info: DeadJob{
			Seq: j.Seq(), Job: Job{Type: j.Type(), ID: j.ID(), Key: j.Key(), Priority: priorityOf(j.Base()), Needs: needs},
			Err: err, Attempts: append([]AttemptInfo(nil), a.list...), Died: g.tb.timeOf(now),
		},
		fn: t.fn, parent: a.parent, attempts: a, durableID: durableID,
	})
}

// add adds d to the dead jobs, dropping the oldest if they are full.
func (g *deadJobs) add(d *deadRecord) {
	if len(g.list) == g.limit {
		copy(g.list, g.list[1:])
		g.list = g.list[:g.limit-1]
	}
	g.list = append(g.list, d) // oldest first
}

// priorityOf returns the Job.Priority that gives the base priority base.
func priorityOf(base int) int {
	if base == 0 {
		return priorityLowest // 0 would mean the default
	}
	return base
}
