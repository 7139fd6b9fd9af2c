package fairsched

import (
	"time"

	"github.com/fairsched/fairsched/internal/engine"
)

// Score returns the uncapped aging score of a job of priority base that
// has waited w, as a float, for reports and tests.
func (c AgingConfig) Score(base int, w time.Duration) float64 {
	base = clampPriority(base)
	if !c.Enabled() || w < c.GracePeriod {
		return float64(base)
	}
	return float64(base) + float64(c.Step)*float64(w-c.GracePeriod)/float64(c.Interval)
}

// Effective returns the effective priority, rounded down, of a job of
// priority base that has waited w: max(base, min(score, MaxEffective)),
// the score capped at MaxEffective, never below base.
func (c AgingConfig) Effective(base int, w time.Duration) int {
	return engine.EffectiveAfter(c.engine(), base, w.Microseconds())
}
