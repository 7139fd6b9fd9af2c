package engine

// Wait estimates. A service that refuses work answers with a time to come
// back (HTTP's Retry-After), and the honest one is the time a job of that
// key and type would have waited. EstimateWait computes it from counts the
// engine keeps anyway and the types' typical durations, in O(T + F) for T
// types and the F tiers the key has used, without looking at a job:
//
//   - each type's typical duration is the moving average of the observed
//     durations of all its jobs (typeState.typical), starting at its
//     default cost; queued work of a type is its pending jobs times that,
//     and a running job has half of it left, on average;
//   - higher tiers go first: all their queued work is ahead;
//   - in its own tier, the job waits for its key's queued work, which is
//     served at the key's weighted share w/W of the tier; meanwhile the
//     tier serves W/w times as much, but never more than it has queued;
//   - each limit the job is under (the slots, its tier's cap, its type's
//     cap, its key's cap, a held conflict lock, and once replicas are set
//     the capacity of those it may run on) serves the work ahead of it at
//     its capacity, and the slowest of them sets the wait.
//
// It ignores aging, reservations and work submitted later, so it is an
// estimate for telling a client when to retry, not a promise.

// EstimateWait estimates how long a job described by d would wait before
// it starts if it were submitted at now, in µs: 0 if it would start at
// once.
// It reports false if d's type is unknown.
func (e *Engine) EstimateWait(d *Desc, now int64) (int64, bool) {
	return e.EstimateWaitOn(d, "", now)
}

// EstimateWaitOn is EstimateWait for a job bound to replica
// (Times.Replica; "": none).
func (e *Engine) EstimateWaitOn(d *Desc, replica string, now int64) (int64, bool) {
	t := e.anyType
	if d.Type != "" {
		if t = e.types[d.Type]; t == nil {
			return 0, false
		}
	}
	if e.WouldStartOn(d, nil, replica, now) {
		return 0, true
	}
	k := e.anyKey
	if d.Key != "" {
		k = e.keys[d.Key] // nil for a key not yet known: nothing of its own
	}
	cfg := e.defaultOf(d.Key)
	if k != nil {
		cfg = k.cfg
	}
	tier := t.tier

	var higher, tierQueued, tierLeft, allLeft float64
	for _, tr := range e.tiers {
		queued, left := tr.work()
		allLeft += left
		switch {
		case tr.level > tier.level:
			higher += queued
		case tr == tier:
			tierQueued, tierLeft = queued, left
		}
	}
	var own, keyQueued float64
	weights := tier.activeWeight + cfg.Weight
	if k != nil {
		for _, f := range k.flows {
			q := f.queuedWork(t)
			keyQueued += q
			if f.tier == tier {
				own = q
				if f.actIdx >= 0 {
					weights -= cfg.Weight // already counted
				}
			}
		}
	}
	ahead := min(tierQueued, own*weights/cfg.Weight)

	var secs float64
	limit := func(capacity int, work float64) {
		if capacity > 0 {
			secs = max(secs, work/float64(capacity))
		}
	}
	limit(e.cfg.MaxConcurrency, allLeft+higher+ahead)
	limit(tier.limit, tierLeft+ahead)
	limit(t.limit, float64(t.running)*t.typical/2+float64(t.pending)*t.typical)
	if k != nil {
		limit(cfg.MaxConcurrency, float64(k.running)*t.typical/2+keyQueued)
	}
	if e.replicated {
		// The replicas it may run on serve the work ahead of it as the
		// slots do; with none known (or none with a slot), as one slot.
		slots, left := e.replicaCapacity(replica, t)
		limit(max(slots, 1), left+higher+ahead)
	}
	if g := t.cfg.ConflictGroup; g != "" {
		if lk := e.conflicts[conflictKey{g, d.ID}]; lk != nil && lk.holder != nil {
			waiting := 0
			for _, w := range lk.waits {
				waiting += w.n
			}
			limit(1, lk.holder.lane.typ.typical/2+float64(waiting)*t.typical)
		}
	}
	return int64(secs * 1e6), true
}

// work returns the tier's queued work and what its running jobs have
// left, in slot-seconds, by its types' typical durations. O(types).
func (tr *tierState) work() (queued, left float64) {
	for _, t := range tr.types {
		queued += float64(t.pending) * t.typical
		left += float64(t.running) * t.typical / 2
	}
	return queued, left
}

// queuedWork returns the flow's queued work in slot-seconds, by its
// lanes' types' typical durations; jobs held by a gate are counted at
// fallback's. O(lanes of the flow).
func (f *flow) queuedWork(fallback *typeState) float64 {
	work, counted := 0.0, 0
	for _, l := range f.lanes {
		work += float64(l.n) * l.typ.typical
		counted += l.n
	}
	return work + float64(f.pending-counted)*fallback.typical
}
