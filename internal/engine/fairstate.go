package engine

// Fair state: what fairness between keys depends on, beyond the jobs
// themselves, for a durable store to keep across a restart. A key's place
// in its tier is its flow's virtual time V, ties broken by stamps; a new
// flow starts at its tier's floor; a job is charged its learned cost
// estimate. Saved and restored, these make the order after a restart the
// order the engine would have followed had it never stopped: the jobs come
// back through Enqueue, with their submission times (Times.Submitted).

// FairState is an engine's fair-share state: plain data, to encode as the
// caller likes.
type FairState struct {
	Stamp uint64         `json:"stamp"` // the last flow stamp handed out
	Tiers []TierFloor    `json:"tiers,omitempty"`
	Flows []FlowV        `json:"flows,omitempty"`
	Costs []CostEstimate `json:"costs,omitempty"` // least recently used first
}

// TierFloor is a tier's virtual clock.
type TierFloor struct {
	Tier  int     `json:"tier"`
	Floor float64 `json:"floor"`
}

// FlowV is a key's virtual time in a tier: its settled V (without the
// default-cost guesses charged for jobs running when it was saved, which
// a restart does not see end).
type FlowV struct {
	Key    string  `json:"key"`
	Tier   int     `json:"tier"`
	V      float64 `json:"v"`
	Stamp  uint64  `json:"stamp"`
	Active bool    `json:"active,omitempty"` // it had jobs: its V and stamp stand when it has them again
}

// CostEstimate is a learned cost, in seconds, of a (type, ID).
type CostEstimate struct {
	Type    string  `json:"type"`
	ID      string  `json:"id"`
	Seconds float64 `json:"s"`
}

// FairVersion changes whenever the fair state may have: a caller that
// saves it can skip a save when it has not. O(1).
func (e *Engine) FairVersion() uint64 { return e.stamp + uint64(e.costs.len()) + e.costs.observed }

// SaveFair returns the engine's fair state. O(keys + estimates).
func (e *Engine) SaveFair() FairState {
	s := FairState{Stamp: e.stamp}
	for _, t := range e.tiers {
		s.Tiers = append(s.Tiers, TierFloor{Tier: t.level, Floor: t.floor})
	}
	for _, k := range e.keys {
		for _, f := range k.flows {
			s.Flows = append(s.Flows, FlowV{Key: k.name, Tier: f.tier.level, V: f.settled(), Stamp: f.stamp, Active: f.actIdx >= 0})
		}
	}
	for c := e.costs.head; c != nil; c = c.next {
		s.Costs = append(s.Costs, CostEstimate{Type: c.key.typ.name, ID: c.key.id, Seconds: c.seconds})
	}
	return s
}

// RestoreFair takes back a saved fair state at now, before any job is
// enqueued: the keys it names come back idle (forgotten after IdleTTL
// unless jobs come for them), with their virtual times, and the estimates
// of types still registered come back as learned now. O(keys +
// estimates).
func (e *Engine) RestoreFair(s FairState, now int64) {
	e.stamp = max(e.stamp, s.Stamp)
	for _, tf := range s.Tiers {
		t := e.tierOf(tf.Tier)
		t.floor = max(t.floor, tf.Floor)
	}
	for _, fv := range s.Flows {
		k := e.keyOrNew(fv.Key)
		f := k.flowOf(e.tierOf(fv.Tier))
		f.v, f.stamp, f.restored = fv.V, fv.Stamp, fv.Active
		if !k.busy() {
			e.markIdle(k, now)
		}
	}
	for _, c := range s.Costs {
		if t := e.types[c.Type]; t != nil {
			e.costs.restore(t, c.ID, c.Seconds, now)
		}
	}
}

// restore sets the estimate of (t, id) to seconds, as used at now.
func (c *costTable) restore(t *typeState, id string, seconds float64, now int64) {
	e := c.lookup(t, id)
	if e != nil {
		c.unlink(e)
	} else {
		e = &estimate{key: costKey{t, id}}
		c.m[e.key] = e
		if id == "" {
			t.blankCost = e
		}
	}
	e.seconds, e.lastUsed = seconds, now
	c.pushTail(e)
}
