package rt

import (
	"sort"
	"time"

	"github.com/fairsched/fairsched/internal/decide"
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

// Snapshot is the API's Scheduler.Snapshot, which documents it.
func (s *Runtime) Snapshot() []JobInfo {
	var l decide.Listing
	s.mu.Lock()
	s.decider().Snapshot(&l, s.nowLocked())
	s.noHandlerLocked(l.Jobs)
	s.mu.Unlock()
	out := make([]JobInfo, 0, len(l.Running)+len(l.Jobs))
	for _, list := range [][]decide.JobFacts{l.Running, l.Jobs} {
		for i := range list {
			out = append(out, s.info(&list[i], &l.Rule))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Running != out[j].Running {
			return out[i].Running
		}
		return out[i].Seq < out[j].Seq
	})
	return out
}

// noHandlerLocked tells, among jobs, those that wait because their type
// has no handler in this process (a durable job found in the store): the
// decisions hold them as if their type were paused, and this process
// knows why.
func (s *Runtime) noHandlerLocked(jobs []decide.JobFacts) {
	if s.durable == nil || len(s.durable.orphans) == 0 {
		return
	}
	for i := range jobs {
		f := &jobs[i]
		if f.Why == engine.WhyPaused && !f.KeyPaused && s.durable.orphans[f.Type] > 0 {
			f.Why = WhyNoHandler
		}
	}
}

// info returns the JobInfo of f, under rule; it reads nothing the lock
// guards.
func (s *Runtime) info(f *decide.JobFacts, rule *engine.AgingRule) JobInfo {
	urgent := f.Urgent
	if !f.Running {
		urgent = rule.Urgent(f.Base, f.Clock)
	}
	return JobInfo{
		Seq: f.Seq, Type: f.Type, ID: f.ID, Key: f.Key, Tier: Tier(f.Tier),
		BasePriority: f.Base, EffectivePriority: rule.Effective(f.Base, f.Clock),
		Urgent: urgent, Running: f.Running, Parked: f.Parked,
		Waiting: f.Why, WaitingOn: f.On, WaitingFor: f.Resource,
		Wait: usDuration(f.At - f.Submitted), Submitted: s.timeOf(f.Submitted),
	}
}

// EstimateWait is the API's Scheduler.EstimateWait, which documents it.
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
	wait, known := s.decider().EstimateWait(*descOf(job), now)
	if nb := s.timesOf(job).NotBefore; nb > 0 && nb-now > wait {
		wait = nb - now
	}
	return usDuration(wait), known
}

// WhyNoHandler is why a durable job found in the store waits whose type
// has no handler in this process: its type is held as if paused.
const WhyNoHandler = engine.NumWhys
