package rt

import (
	"sort"
	"time"

	"github.com/fairsched/fairsched/internal/engine"
)

// JobInfo describes a job as the API's JobInfo does (see its
// documentation), its tier and what holds it as the engine numbers them.
type JobInfo struct {
	Seq                             uint64
	Type, ID, Key                   string
	Tier                            Tier
	BasePriority, EffectivePriority int
	Urgent, Running, Parked         bool
	Waiting                         engine.Why
	WaitingOn                       uint64
	WaitingFor                      string
	Wait                            time.Duration
	Submitted                       time.Time
}

// Snapshot lists every pending and running job, running first, then in
// submission order. It takes the lock for O(n log n) time: for debugging
// and admin pages, not for hot paths.
func (s *Runtime) Snapshot() []JobInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	var out []JobInfo
	for _, j := range s.eng.RunningJobs() {
		out = append(out, s.infoLocked(j, now))
	}
	for _, j := range s.eng.PendingJobs() {
		out = append(out, s.infoLocked(j, now))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Running != out[j].Running {
			return out[i].Running
		}
		return out[i].Seq < out[j].Seq
	})
	return out
}

func (s *Runtime) infoLocked(j *engine.Job, now int64) JobInfo {
	ji := JobInfo{
		Seq: j.Seq(), Type: j.Type(), ID: j.ID(), Key: j.Key(), Tier: Tier(j.Tier()),
		BasePriority: j.Base(), Running: j.Running(), Parked: s.eng.Held(j),
		Submitted: s.timeOf(j.Submitted()),
	}
	at := now
	if ji.Running {
		at = j.Started()
		ji.Urgent = j.Kind() == engine.Urgent
	} else {
		ji.Urgent = s.eng.Urgent(j, now)
	}
	w := s.eng.WhyWaiting(j)
	ji.Waiting, ji.WaitingOn, ji.WaitingFor = w.Why, w.On, w.Resource
	if w.Why == engine.WhyPaused && s.durable != nil && s.durable.orphans[j.Type()] > 0 && !s.eng.KeyPaused(j.Key()) {
		ji.Waiting = WhyNoHandler
	}
	ji.EffectivePriority = s.eng.Effective(j, at)
	ji.Wait = usDuration(at - j.Submitted())
	return ji
}

// EstimateWait estimates how long a job described by job would wait for a
// slot if it were submitted now: 0 if it would start at once. A service
// that refuses work tells the client when to come back with it
// (Retry-After); a *QueueFullError carries the same estimate.
//
// The estimate is the work ahead of the job, in its types' learned
// typical durations, served at the rate of the slowest limit it is
// under: the slots (after higher tiers, and within its tier at its key's
// weighted share), its tier's, type's and key's caps, and a conflict
// lock on its ID held by a running job. It grows with the queue ahead of
// the job and shrinks as the queue drains, but ignores aging,
// reservations and work submitted later: an estimate, not a promise. A
// job delayed by NotBefore waits at least until then. A paused key or type
// is estimated as if it were resumed now: its pause has no end the
// scheduler could know.
// O(types + tiers); it errors, wrapping ErrUnknownType, for a type not
// registered.
func (s *Runtime) EstimateWait(job *Job) (time.Duration, error) {
	s.mu.Lock()
	wait, known := s.estimateLocked(job, s.nowLocked())
	s.mu.Unlock()
	if !known {
		return 0, errUnknownType(job.Type)
	}
	return wait, nil
}

// estimateLocked is EstimateWait's answer for job at now, and whether its
// type is known.
func (s *Runtime) estimateLocked(job *Job, now int64) (time.Duration, bool) {
	wait, known := s.eng.EstimateWait(descOf(job), now)
	if nb := s.timesOf(job).NotBefore; nb > 0 && nb-now > wait {
		wait = nb - now
	}
	return usDuration(wait), known
}

// WhyNoHandler is why a durable job found in the store waits whose type
// has no handler in this process: its type is held as if paused.
const WhyNoHandler = engine.NumWhys
