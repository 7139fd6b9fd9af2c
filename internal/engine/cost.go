package engine

// Cost estimates. A job's cost is the slot time it is expected to hold,
// learned per (type, ID) as an exponential moving average of observed wall
// time, starting from the type's default cost:
//
//	e_0 = DefaultCost,  e_{n+1} = alpha*observed + (1-alpha)*e_n.
//
// Estimates not used for IdleTTL are forgotten, oldest first, so memory is
// bounded by the (type, ID) pairs seen within one TTL.

type costKey struct {
	typ *typeState
	id  string
}

type estimate struct {
	key        costKey
	seconds    float64
	lastUsed   int64 // µs
	forgotten  bool
	prev, next *estimate
}

// costTable is the estimates with a least-recently-used list. Guarded by
// Scheduler.mu.
type costTable struct {
	alpha      float64
	m          map[costKey]*estimate
	head, tail *estimate // least recently used first
	forgotten  uint64
	observed   uint64 // observations folded in
}

func newCostTable(alpha float64) costTable {
	return costTable{alpha: alpha, m: make(map[costKey]*estimate)}
}

// lookup returns the estimate of (t, id), or nil if there is none yet.
// O(1). Jobs without an ID are common (every plain RunSync), so their
// type keeps a pointer to theirs and the map is not hashed for them.
func (c *costTable) lookup(t *typeState, id string) *estimate {
	if id == "" {
		return t.blankCost
	}
	return c.m[costKey{t, id}]
}

// observe folds an observed duration, in seconds, into the estimate of
// (t, id); e is what lookup returned at the job's start (it saves a second
// map access when still valid). O(1).
func (c *costTable) observe(t *typeState, id string, e *estimate, seconds float64, now int64) {
	c.observed++
	if e == nil || e.forgotten {
		e = c.lookup(t, id)
	}
	if e == nil {
		k := costKey{t, id}
		e = &estimate{key: k, seconds: t.cost}
		c.m[k] = e
		if id == "" {
			t.blankCost = e
		}
	} else if e == c.tail {
		// Already the most recently used: nothing to move.
		e.seconds = c.alpha*seconds + (1-c.alpha)*e.seconds
		e.lastUsed = now
		return
	} else {
		c.unlink(e)
	}
	e.seconds = c.alpha*seconds + (1-c.alpha)*e.seconds
	e.lastUsed = now
	c.pushTail(e)
}

// pushTail puts e, on no list, last: the most recently used.
func (c *costTable) pushTail(e *estimate) {
	e.prev = c.tail
	if c.tail != nil {
		c.tail.next = e
	} else {
		c.head = e
	}
	c.tail = e
}

// expire forgets estimates not used for ttl µs. Amortised O(1).
func (c *costTable) expire(now, ttl int64) {
	for e := c.head; e != nil && now-e.lastUsed >= ttl; e = c.head {
		c.unlink(e)
		delete(c.m, e.key)
		e.forgotten = true
		if e.key.id == "" {
			e.key.typ.blankCost = nil
		}
		c.forgotten++
	}
}

func (c *costTable) unlink(e *estimate) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		c.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		c.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

func (c *costTable) len() int { return len(c.m) }
