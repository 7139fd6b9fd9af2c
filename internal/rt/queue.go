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

// Snapshot is the API's Scheduler.Snapshot, which documents it.
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
	rule := s.eng.AgingRule()
	var f jobFacts
	s.factsLocked(&f, j, now)
	return s.info(&f, &rule)
}

// jobFacts is what a JobInfo shows of a job, as its record and the engine
// tell it under the lock: the JobInfo but for its times, kept in the
// engine's µs, and its effective priority and urgency, which the engine's
// AgingRule works out from its aging clock. A record is reused once its
// job ends (RunSync's are), so a listing copies these under the lock and
// builds its JobInfos after.
type jobFacts struct {
	seq          uint64
	typ, id, key string
	tier, base   int
	sub, at      int64        // submitted, and when its wait ends: its start, or now
	clock        engine.Clock // its aging clock
	on           uint64
	resource     string
	why          engine.Why
	urgent       bool // started as urgent: for a running job
	running      bool
	parked       bool
}

// factsLocked sets every field of *f to what j's JobInfo shows at now.
// It writes each field where it lies, over whatever f held: a listing
// fills its buffers this way without clearing them first.
func (s *Runtime) factsLocked(f *jobFacts, j *engine.Job, now int64) {
	f.seq, f.typ, f.id, f.key, f.tier = j.Seq(), j.Type(), j.ID(), j.Key(), j.Tier()
	f.base, f.sub = j.Base(), j.Submitted()
	if j.Running() {
		// Its effective priority is the one it started with; it waits
		// for nothing.
		f.at, f.running, f.parked = j.Started(), true, false
		f.urgent = j.Kind() == engine.Urgent
		f.clock = engine.Clock{Sub: f.sub, At: f.at, Started: true}
		f.why, f.on, f.resource = 0, 0, ""
		return
	}
	f.at, f.running, f.urgent = now, false, false
	f.clock = s.eng.AgingClock(j, now)
	f.parked = s.eng.Held(j)
	w := s.eng.WhyWaiting(j)
	f.why, f.on, f.resource = w.Why, w.On, w.Resource
	if w.Why == engine.WhyPaused && s.durable != nil && s.durable.orphans[f.typ] > 0 && !s.eng.KeyPaused(f.key) {
		f.why = WhyNoHandler
	}
}

// info returns the JobInfo of f, under rule; it reads nothing the lock
// guards.
func (s *Runtime) info(f *jobFacts, rule *engine.AgingRule) JobInfo {
	urgent := f.urgent
	if !f.running {
		urgent = rule.Urgent(f.base, f.clock)
	}
	return JobInfo{
		Seq: f.seq, Type: f.typ, ID: f.id, Key: f.key, Tier: Tier(f.tier),
		BasePriority: f.base, EffectivePriority: rule.Effective(f.base, f.clock),
		Urgent: urgent, Running: f.running, Parked: f.parked,
		Waiting: f.why, WaitingOn: f.on, WaitingFor: f.resource,
		Wait: usDuration(f.at - f.sub), Submitted: s.timeOf(f.sub),
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
