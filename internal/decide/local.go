package decide

import "github.com/fairsched/fairsched/internal/engine"

// Local is the in-process Decider: the engine, asked in the call. A job
// the engine starts as it admits it starts now; every other grant is
// handed to the Grantee within Grant.
type Local struct {
	e     *engine.Engine
	g     Grantee
	pairs Pairs
}

// NewLocal returns the Decider of e, handing its grants to g.
func NewLocal(e *engine.Engine, g Grantee) *Local { return &Local{e: e, g: g} }

// Enqueue admits j, which starts now if the engine started it.
func (l *Local) Enqueue(j *engine.Job, d engine.Desc, tm *engine.Times, now int64) (bool, *engine.Refusal) {
	if r := l.e.Enqueue(j, &d, tm, now); r != nil {
		return false, r
	}
	return j.Running(), nil
}

// Grant hands the Grantee every job the engine starts at now, in order.
func (l *Local) Grant(now int64) {
	for l.e.CanStart() {
		j := l.e.Next(now)
		if j == nil {
			return
		}
		l.g.Granted(j)
	}
}

// Finish ends j's attempt and j.
func (l *Local) Finish(j *engine.Job, o engine.Outcome, now int64) { l.e.Finish(j, o, now) }

// Retry ends j's attempt, to run again not before notBefore.
func (l *Local) Retry(j *engine.Job, notBefore, now int64) { l.e.Retry(j, notBefore, now) }

// Cancel takes j out.
func (l *Local) Cancel(j *engine.Job, now int64) bool { return l.e.Cancel(j, now) }

// NextDue returns the engine's next due time.
func (l *Local) NextDue() (int64, bool) { return l.e.NextDue() }

// Due applies what fell due by now.
func (l *Local) Due(now int64) []*engine.Job { return l.e.Due(now) }

// Configure applies c to the engine.
func (l *Local) Configure(c Change, now int64) bool {
	e := l.e
	switch c.Kind {
	case SetMaxConcurrency:
		return e.SetMaxConcurrency(c.N, now)
	case SetTierLimit:
		e.SetTierLimit(c.Tier, c.N)
	case SetTypeLimit:
		return e.SetTypeLimit(c.Name, c.N)
	case SetKey:
		return e.SetKey(c.Name, c.Key, now)
	case SetKeyWeight:
		e.SetKeyWeight(c.Name, c.Weight, now)
	case ResetKey:
		e.ResetKey(c.Name, now)
	case ResetKeys:
		e.ResetKeys(now)
	case SetResource:
		return e.SetResource(c.Name, c.N, now)
	case PauseKey:
		e.PauseKey(c.Name, now)
	case ResumeKey:
		e.ResumeKey(c.Name, now)
	case PauseType:
		return e.PauseType(c.Name, now)
	case ResumeType:
		return e.ResumeType(c.Name, now)
	default:
		panic("decide: unknown change")
	}
	return true
}

// Figures reads the engine's counts.
func (l *Local) Figures(maxKeys int, pausedOf []string) Figures {
	e := l.e
	f := Figures{
		Summary: e.Summary(), Tiers: e.Tiers(), Types: e.Types(), PausedKeys: e.PausedKeys(),
		MaxConcurrency: e.MaxConcurrency(), Resources: e.Resources(), Waiting: e.WaitCountsAll(),
	}
	f.Keys, f.OtherKeys = e.Keys(maxKeys)
	if len(pausedOf) > 0 {
		f.TypePaused = make(map[string]int, len(pausedOf))
		for _, name := range pausedOf {
			f.TypePaused[name] = e.TypePausedJobs(name)
		}
	}
	return f
}

// EstimateWait is the engine's estimate.
func (l *Local) EstimateWait(d engine.Desc, now int64) (int64, bool) {
	return l.e.EstimateWait(&d, now)
}

// WouldStart is the engine's answer.
func (l *Local) WouldStart(d engine.Desc, needs []engine.Need, now int64) bool {
	return l.e.WouldStart(&d, needs, now)
}

// Failed counts a failure of k.
func (l *Local) Failed(k Pair, r DisableRule, now int64) (Span, bool) {
	return l.pairs.Failed(k, r, now)
}

// Disable disables k.
func (l *Local) Disable(k Pair, span Span, now int64) { l.pairs.Disable(k, span, now) }

// Enable enables k.
func (l *Local) Enable(k Pair) { l.pairs.Enable(k) }

// Pairs returns the disabled pairs, the decisions' own.
func (l *Local) Pairs() *Pairs { return &l.pairs }

// Raise raises waiting j's base priority.
func (l *Local) Raise(j *engine.Job, p int, now int64) { l.e.Raise(j, p, now) }

// Room is the engine's admission check of a batch.
func (l *Local) Room(n int, perKey map[string]int) *engine.Refusal { return l.e.Room(n, perKey) }

// Reserve counts a batch being written down.
func (l *Local) Reserve(n int, perKey map[string]int) { l.e.Reserve(n, perKey) }

// Unreserve gives back what Reserve counted.
func (l *Local) Unreserve(n int, perKey map[string]int) { l.e.Unreserve(n, perKey) }

// Rejected counts submissions refused as a whole.
func (l *Local) Rejected(name string, closed bool, n int) { l.e.Rejected(name, closed, n) }

// RejectedUnknownType counts a submission of an unknown type.
func (l *Local) RejectedUnknownType() { l.e.RejectedUnknownType() }

// RegisterType registers a job type with the engine.
func (l *Local) RegisterType(name string, c engine.Type) error { return l.e.RegisterType(name, c) }

// TypeTier is the engine's registry of types.
func (l *Local) TypeTier(name string) (int, bool) { return l.e.TypeTier(name) }

// BasePriority is the engine's.
func (l *Local) BasePriority(d engine.Desc) (int, bool) { return l.e.BasePriority(&d) }

// DeadlineOf is the engine's.
func (l *Local) DeadlineOf(name string, startBy, submitted int64) int64 {
	return l.e.DeadlineOf(name, startBy, submitted)
}

// NeedsRefusal is the engine's.
func (l *Local) NeedsRefusal(name string, needs []engine.Need) *engine.Refusal {
	return l.e.NeedsRefusal(name, needs)
}

// Reserved returns the reservations with name's at minSlots, as they are,
// and the slots.
func (l *Local) Reserved(name string, minSlots int) (int, int, int) {
	return l.e.ReservedWith(name, minSlots), l.e.ReservedTotal(), l.e.MaxConcurrency()
}

// Find looks seq up among the engine's jobs: every one is this process's.
func (l *Local) Find(seq uint64) *engine.Job { return l.e.Find(seq) }

// Each calls f with the engine's running jobs, granted, then its jobs not
// started. It lists them before the first call, since f may end them.
func (l *Local) Each(f func(j *engine.Job, granted bool)) {
	running, pending := l.e.RunningJobs(), l.e.PendingJobs()
	for _, j := range running {
		f(j, true)
	}
	for _, j := range pending {
		f(j, false)
	}
}

// FindRunning returns the first running job match reports true for, and
// the effective priority it started at.
func (l *Local) FindRunning(match func(*engine.Job) bool) (*engine.Job, int) {
	j := l.e.FindRunning(match)
	if j == nil {
		return nil, 0
	}
	return j, l.e.Effective(j, j.Started())
}

// Idle reports whether the engine holds no job.
func (l *Local) Idle() bool { return l.e.Idle() }

// StopAccepting makes the engine refuse every later Enqueue.
func (l *Local) StopAccepting() { l.e.StopAccepting() }
