package engine

// Why is a job waiting? docs/design.md (Why a job waits) names, for each waiting job, the
// one thing that holds it: the first of these that applies.

// Why is what holds a waiting job.
type Why uint8

const (
	NotWaiting   Why = iota // running, or ended
	WhyNotBefore            // its NotBefore, or a retry's backoff
	WhyDependency
	WhyPaused   // its key or type
	WhyRate     // its key's or type's rate limit
	WhyTierCap  // its tier's cap
	WhyTypeCap  // its type's cap
	WhyKeyCap   // its key's cap
	WhyConflict // a running job with its conflict group and ID
	WhyResource
	WhyTurn // a free slot, or the jobs ahead of it in the order
	NumWhys // the reasons of one process: WaitCounts' (the run-time layer names NumWhys itself)
)

// The reasons of replicas (replicas.go), numbered after NumWhys and the
// run-time layer's reason. WhyWaiting names a configured limit first, so
// a job short of a resource's units and of a replica's slot waits for the
// resource there; the order, though, holds such a job in its replica gate
// (replicas are looked at before resources), and WaitCountsAll counts
// jobs where they are held: there it counts as WhyReplicasFull. The
// overflow hook of the replicas must count as WhyWaiting names, and will
// need the two to agree.
const (
	WhyReplicasFull Why = NumWhys + 1 + iota // every replica it may run on runs its capacity
	WhyNoReplica                             // no replica it may run on is known
	NumReasons                               // WaitCountsAll's length
)

// WaitInfo says what holds a waiting job: Why, and for WhyConflict the
// sequence number of the running job that holds the conflict, for
// WhyDependency that of the earliest submitted job it still waits for,
// for WhyResource the resource.
type WaitInfo struct {
	Why      Why
	On       uint64
	Resource string
}

// WhyWaiting says what holds j now. It looks at j's key, type, tier,
// conflict lock and resources: O(its dependencies and resources).
func (e *Engine) WhyWaiting(j *Job) WaitInfo {
	switch j.state {
	case StateDelayed:
		return WaitInfo{Why: WhyNotBefore}
	case StateBlocked:
		w := WaitInfo{Why: WhyDependency}
		if d := e.FirstDependency(j); d != nil {
			w.On = d.seq
		}
		return w
	case StatePaused:
		return WaitInfo{Why: WhyPaused}
	case StateQueued, StateParked:
	default:
		return WaitInfo{}
	}
	if why := laneWhy(j.lane); why != WhyTurn {
		return WaitInfo{Why: why}
	}
	if lk := e.conflict(j); lk != nil {
		return WaitInfo{Why: WhyConflict, On: lk.holder.seq}
	}
	if e.resources != nil {
		if r := e.blockingResource(j); r != nil {
			return WaitInfo{Why: WhyResource, Resource: r.name}
		}
	}
	if e.replicated {
		return WaitInfo{Why: e.replicaWhy(j)}
	}
	return WaitInfo{Why: WhyTurn}
}

// laneWhy returns what holds every queued job of lane l alike, or WhyTurn
// if nothing does.
func laneWhy(l *lane) Why {
	t, k := l.typ, l.key
	switch {
	case t.bucket.empty || k.bucket.empty:
		return WhyRate
	case t.tier.atCap():
		return WhyTierCap
	case t.atCap():
		return WhyTypeCap
	case k.atCap():
		return WhyKeyCap
	}
	return WhyTurn
}

// WaitCounts counts the waiting jobs by what holds them. Where a job is
// kept says it: jobs set aside are delayed or paused; what holds a lane
// holds all its jobs; and a job the dispatcher found blocked by a running
// conflict holder is held by that lock. A queued job whose conflict
// holder started after it queued counts as waiting its turn until the
// dispatcher reaches it (WhyWaiting, looking at the job, names the
// conflict at once). The jobs held for a replica are counted in
// WaitCountsAll, which says what it costs.
func (e *Engine) WaitCounts() [NumWhys]int {
	all := e.WaitCountsAll()
	return [NumWhys]int(all[:NumWhys])
}

// WaitCountsAll is WaitCounts with the reasons of replicas: a job held
// for a replica counts by what its replicas are now (replicaWhy).
//
// It counts by what holds jobs, not job by job nor lane by lane: a type
// whose rate, tier cap or cap holds it holds all its pending jobs (the
// type counts them); of the others, the shut keys hold their lanes' jobs,
// and the shut gates their wait lanes'; every other pending job waits its
// turn. The shut keys and gates are found as a page of the queue finds
// them (orderWalk.findShut). O(types + r + b + R + P + the lanes of the
// shut keys and the wait lanes of the shut gates, times r for those held
// for a replica), for r running jobs, b empty buckets, R resources and P
// replicas' records: not O(keys) nor O(lanes).
func (e *Engine) WaitCountsAll() [NumReasons]int {
	n := e.asideCounts()
	for _, t := range e.types {
		n[typeWhy(t)] += t.pending
	}
	w := orderWalk{e: e}
	w.findShut()
	move := func(from, to Why, m int) {
		n[from] -= m
		n[to] += m
	}
	for _, k := range w.shutKeys {
		why := WhyKeyCap
		if k.bucket.empty {
			why = WhyRate
		}
		for _, l := range k.lanes {
			// A key's empty bucket comes before its type's and tier's
			// caps; its own cap after them.
			tw := typeWhy(l.typ)
			if tw != WhyTurn && (tw == WhyRate || why == WhyKeyCap) {
				continue // counted with its type
			}
			move(tw, why, l.n)
			for _, wl := range l.held {
				move(tw, why, wl.n)
			}
		}
	}
	for _, wl := range w.detached {
		if wl.key.cap.shut || typeWhy(wl.typ) != WhyTurn {
			continue // counted with its key or its type
		}
		move(WhyTurn, e.gateWhy(wl), wl.n)
	}
	return n
}

// asideCounts returns the counts of the jobs set aside, by why: the
// start of WaitCountsAll's.
func (e *Engine) asideCounts() [NumReasons]int {
	var n [NumReasons]int
	n[WhyNotBefore] = e.naside - e.npaused - e.nblocked
	n[WhyDependency] = e.nblocked
	n[WhyPaused] = e.npaused
	return n
}

// gateWhy returns what holds the jobs of wait lane w, whose gate (not its
// key's cap) is shut: a replica's, a resource's or a conflict's.
func (e *Engine) gateWhy(w *waitLane) Why {
	switch g := w.gate; {
	case g.rep != nil:
		return e.boundWhy(g.rep)
	case g == &w.typ.rgate:
		return e.typeReplicaWhy(w.typ)
	case g.res != nil:
		return WhyResource
	}
	return WhyConflict
}

// typeWhy returns what holds every pending job of type t alike, or
// WhyTurn if nothing does.
func typeWhy(t *typeState) Why {
	switch {
	case t.bucket.empty:
		return WhyRate
	case t.tier.atCap():
		return WhyTierCap
	case t.atCap():
		return WhyTypeCap
	}
	return WhyTurn
}
