package fairsched

import (
	"fmt"
	"math"
	"time"

	"github.com/fairsched/fairsched/internal/engine"
)

// RateLimit is a token bucket on the starts of a fairness key's or a job
// type's jobs (KeyConfig.Rate, TypeConfig.Rate): it holds up to Burst
// tokens, gains one every 1/PerSecond seconds (rounded to the
// microsecond), and a job takes one as it starts. A key or type out of
// tokens is passed over, holding nothing, and its slots go to others; it
// is eligible again when its next token is due, on the scheduler's clock,
// with no submit or finish needed to notice. A bucket starts full.
//
// The zero RateLimit is no limit. PerSecond must not be negative; Burst 0
// means 1, and must not be negative, nor set without PerSecond.
type RateLimit struct {
	PerSecond float64
	Burst     int
}

// validate says what is wrong with r, configuring what.
func (r RateLimit) validate(what string) error {
	switch {
	case math.IsNaN(r.PerSecond) || math.IsInf(r.PerSecond, 0) || r.PerSecond < 0:
		return fmt.Errorf("fairsched: %s.Rate.PerSecond is %v; it must be 0 (no limit) or positive", what, r.PerSecond)
	case r.Burst < 0:
		return fmt.Errorf("fairsched: %s.Rate.Burst is %d; it must be 0 (one token) or positive", what, r.Burst)
	case r.Burst > 0 && r.PerSecond == 0:
		return fmt.Errorf("fairsched: %s.Rate.Burst is %d but PerSecond is 0: a bucket that never refills; set PerSecond, or neither", what, r.Burst)
	}
	return nil
}

// engine returns the bucket for the engine: a token every period µs.
func (r RateLimit) engine() engine.Rate {
	if r.PerSecond == 0 {
		return engine.Rate{}
	}
	period := int64(math.Round(float64(time.Second/time.Microsecond) / r.PerSecond))
	return engine.Rate{Period: max(period, 1), Burst: max(r.Burst, 1)}
}

// engine returns the key's configuration for the engine.
func (kc KeyConfig) engine() engine.Key {
	return engine.Key{Weight: kc.Weight, MinSlots: kc.MinSlots, MaxConcurrency: kc.MaxConcurrency,
		MaxPending: kc.MaxPending, Rate: kc.Rate.engine()}
}
