package refmodel

import "slices"

// Why is what holds a waiting job (SPEC section 10): the first of these,
// in this order, that applies.
type Why int

const (
	NotWaiting Why = iota
	WhyNotBefore
	WhyDependency
	WhyPaused
	WhyRate
	WhyTierCap
	WhyTypeCap
	WhyKeyCap
	WhyConflict
	WhyResource
	WhyTurn
)

var whyNames = [...]string{"not-waiting", "not-before", "dependency", "paused", "rate", "tier-cap",
	"type-cap", "key-cap", "conflict", "resource", "turn"}

func (w Why) String() string { return whyNames[w] }

// Why returns what holds the waiting job seq at now and, for a conflict,
// the number of the running job that holds it; NotWaiting if seq is not
// waiting.
func (m *Model) Why(now int64, seq uint64) (Why, uint64) {
	j := m.find(seq)
	switch {
	case j == nil || j.running:
		return NotWaiting, 0
	case j.delayed:
		return WhyNotBefore, 0
	case j.blocked:
		return WhyDependency, slices.Min(j.after)
	case j.paused:
		return WhyPaused, 0
	case !m.hasTokens(j, now):
		return WhyRate, 0
	}
	u := m.usage()
	under := func(n, limit int) bool { return limit == 0 || n < limit }
	switch {
	case !under(u.tier[j.typ.Tier], m.cfg.TierLimits[j.typ.Tier]):
		return WhyTierCap, 0
	case !under(u.typ[j.typName], m.typeCap(j.typName)):
		return WhyTypeCap, 0
	case !under(u.key[j.key], j.key.cfg.MaxConcurrency):
		return WhyKeyCap, 0
	}
	if g := j.typ.ConflictGroup; g != "" {
		for _, r := range m.jobs {
			if r.running && r.typ.ConflictGroup == g && r.id == j.id {
				return WhyConflict, r.seq
			}
		}
	}
	return WhyTurn, 0
}
