package rt

import "time"

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
