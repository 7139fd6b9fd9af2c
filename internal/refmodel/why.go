package refmodel

import "slices"

// Why is what holds a waiting job (docs/design.md, Why a job waits): the first of these,
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
	WhyReplicasFull
	WhyNoReplica
	WhyTurn
)

var whyNames = [...]string{"not-waiting", "not-before", "dependency", "paused", "rate", "tier-cap",
	"type-cap", "key-cap", "conflict", "resource", "replicas-full", "no-replica", "turn"}

func (w Why) String() string { return whyNames[w] }

// WaitInfo is what holds a waiting job: Why, and the number of the job
// that does (a conflict's holder, the first dependency), or the resource.
type WaitInfo struct {
	Why      Why
	On       uint64
	Resource string
}

// Why returns what holds the waiting job seq at now; NotWaiting if seq is
// not waiting.
func (m *Model) Why(now int64, seq uint64) WaitInfo {
	j := m.find(seq)
	switch {
	case j == nil || j.running:
		return WaitInfo{}
	case j.delayed:
		return WaitInfo{Why: WhyNotBefore}
	case j.blocked:
		return WaitInfo{Why: WhyDependency, On: slices.Min(j.after)}
	case j.paused:
		return WaitInfo{Why: WhyPaused}
	case !m.hasTokens(j, now):
		return WaitInfo{Why: WhyRate}
	}
	u := m.usage()
	under := func(n, limit int) bool { return limit == 0 || n < limit }
	switch {
	case !under(u.tier[j.typ.Tier], m.cfg.TierLimits[j.typ.Tier]):
		return WaitInfo{Why: WhyTierCap}
	case !under(u.typ[j.typName], m.typeCap(j.typName)):
		return WaitInfo{Why: WhyTypeCap}
	case !under(u.key[j.key], j.key.cfg.MaxConcurrency):
		return WaitInfo{Why: WhyKeyCap}
	}
	if g := j.typ.ConflictGroup; g != "" {
		for _, r := range m.jobs {
			if r.running && r.typ.ConflictGroup == g && r.id == j.id {
				return WaitInfo{Why: WhyConflict, On: r.seq}
			}
		}
	}
	if r := m.resourceWhy(j); r != "" {
		return WaitInfo{Why: WhyResource, Resource: r}
	}
	if why, ok := m.replicaWhy(j); ok {
		return WaitInfo{Why: why}
	}
	return WaitInfo{Why: WhyTurn}
}
