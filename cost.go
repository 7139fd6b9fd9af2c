package fairsched

import (
	"fmt"
	"math"
	"time"
)

// Cost. A job's cost is the slot time it is expected to hold, learned per
// (type, ID) as an exponential moving average of observed wall time,
// starting from the type's DefaultCost (or Config.DefaultCost):
//
//	e_0 = DefaultCost,  e_{n+1} = CostAlpha*observed + (1-CostAlpha)*e_n.
//
// Fair share charges a key the estimate when its job starts and corrects
// the charge to the observed time when it ends. Estimates not used for
// Config.IdleTTL are forgotten.

// The defaults of Config's cost and memory fields.
const (
	defaultAlpha   = 0.3
	defaultCost    = time.Second
	defaultIdleTTL = 10 * time.Minute
)

// costs returns the cost settings of c, valid, with their defaults: the
// smoothing factor, the default cost in seconds and the idle TTL in µs,
// as the engine takes them.
func (c *Config) costs() (alpha, defaultCostSeconds float64, idleTTL int64) {
	alpha, cost, ttl := c.CostAlpha, c.DefaultCost, c.IdleTTL
	if alpha == 0 {
		alpha = defaultAlpha
	}
	if cost == 0 {
		cost = defaultCost
	}
	if ttl == 0 {
		ttl = defaultIdleTTL
	}
	return alpha, cost.Seconds(), ttl.Microseconds()
}

// validateCosts says what is wrong with c's cost settings.
func (c *Config) validateCosts() []error {
	var errs []error
	if c.CostAlpha < 0 || c.CostAlpha > 1 || math.IsNaN(c.CostAlpha) {
		errs = append(errs, fmt.Errorf("fairsched: CostAlpha is %v; it must be in (0, 1], or 0 for the default 0.3", c.CostAlpha))
	}
	if c.DefaultCost < 0 {
		errs = append(errs, fmt.Errorf("fairsched: DefaultCost is %v; it must not be negative", c.DefaultCost))
	}
	if c.IdleTTL < 0 {
		errs = append(errs, fmt.Errorf("fairsched: IdleTTL is %v; it must not be negative", c.IdleTTL))
	}
	return errs
}
