package engine

// Aging arithmetic. Everything here is a pure function of a job's base
// priority, its submission time and "now", so it is tested without a clock.
//
// Time is counted in microseconds since the scheduler's epoch and scores are
// kept multiplied by the interval I, so that every comparison is exact
// integer arithmetic. Past its grace period G a job's scaled score is
//
//	S(now) = base*I + Step*(now - sub - G) = A + Step*(now - G),
//	A      = base*I - Step*sub.
//
// A does not depend on now: two aged jobs keep their relative order forever,
// so a heap keyed by A orders aged jobs by score at every instant, and the
// job with the greatest A is the first to reach any threshold. That is why
// no periodic pass over the queue is needed (see doc.go).

// agingParams is an Aging converted to the scheduler's units.
type agingParams struct {
	on       bool
	grace    int64 // µs
	interval int64 // µs, I
	step     int64
	maxEff   int64 // ceiling of the effective priority, 0..100
	urgent   int64 // urgent threshold, 0 = never
}

func newAgingParams(c Aging) agingParams {
	if c.Step == 0 || c.Interval == 0 {
		return agingParams{maxEff: 100}
	}
	p := agingParams{
		on:       true,
		grace:    c.GracePeriod,
		interval: c.Interval,
		step:     int64(c.Step),
		maxEff:   int64(c.MaxEffective),
		urgent:   int64(c.UrgentThreshold),
	}
	if p.maxEff == 0 {
		p.maxEff = 100
	}
	return p
}

// urgentOn reports whether jobs can become urgent.
func (p *agingParams) urgentOn() bool { return p.on && p.urgent > 0 }

// agedKey returns A, the time-invariant order of an aged job.
func (p *agingParams) agedKey(base int, sub int64) int64 {
	return int64(base)*p.interval - p.step*sub
}

// pastGrace reports whether a job submitted at sub has finished its grace
// period at now.
func (p *agingParams) pastGrace(sub, now int64) bool { return p.on && now-sub >= p.grace }

// scaledScore returns score*I at now, uncapped.
func (p *agingParams) scaledScore(base int, sub, now int64) int64 {
	if !p.pastGrace(sub, now) {
		return int64(base) * p.interval
	}
	return p.agedScore(p.agedKey(base, sub), now)
}

// agedScore returns score*I at now, uncapped, of an aged job with key a.
func (p *agingParams) agedScore(a, now int64) int64 { return a + p.step*(now-p.grace) }

// reached reports whether an aged job with key a has a score of at least
// level at now.
func (p *agingParams) reached(a, now, level int64) bool {
	return p.agedScore(a, now) >= level*p.interval
}

// isUrgent reports whether a job is urgent at now: its uncapped score has
// reached the urgent threshold, which a job based at or above it has from
// its submission, in its grace period too.
func (p *agingParams) isUrgent(base int, sub, now int64) bool {
	return p.urgentOn() && p.scaledScore(base, sub, now) >= p.urgent*p.interval
}

// effectiveScaled returns the effective priority times I at now:
// max(base, min(score, MaxEffective)).
func (p *agingParams) effectiveScaled(base int, sub, now int64) int64 {
	b := int64(base) * p.interval
	if !p.on {
		return int64(base)
	}
	if int64(base) >= p.maxEff {
		return b
	}
	s := p.scaledScore(base, sub, now)
	if c := p.maxEff * p.interval; s > c {
		s = c
	}
	return s
}

// effective returns the effective priority at now, rounded down.
func (p *agingParams) effective(base int, sub, now int64) int {
	if !p.on {
		return base
	}
	return int(p.effectiveScaled(base, sub, now) / p.interval)
}

// EffectiveAfter returns the effective priority, rounded down, of a job
// of priority base that has waited waited µs under c.
func EffectiveAfter(c Aging, base int, waited int64) int {
	p := newAgingParams(c)
	return p.effective(clampPriority(base), 0, waited)
}
