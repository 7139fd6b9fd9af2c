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
// conflict at once). O(lanes + their wait lanes). The jobs held for a
// replica are counted in WaitCountsAll.
func (e *Engine) WaitCounts() [NumWhys]int {
	all := e.WaitCountsAll()
	return [NumWhys]int(all[:NumWhys])
}

// WaitCountsAll is WaitCounts with the reasons of replicas: a job held
// for a replica counts by what its replicas are now (replicaWhy). O(lanes
// + their wait lanes, times r for those held for a replica).
func (e *Engine) WaitCountsAll() [NumReasons]int {
	var n [NumReasons]int
	n[WhyNotBefore] = e.naside - e.npaused - e.nblocked
	n[WhyDependency] = e.nblocked
	n[WhyPaused] = e.npaused
	for _, k := range e.keys {
		if k.pending == 0 {
			continue
		}
		for _, l := range k.lanes {
			if why := laneWhy(l); why != WhyTurn {
				n[why] += l.n
				for _, w := range l.held {
					n[why] += w.n
				}
				continue
			}
			n[WhyTurn] += l.n
			for _, w := range l.held {
				switch {
				case !w.gate.shut || w.gate == &k.cap:
					n[WhyTurn] += w.n
				case w.gate.rep != nil:
					n[e.boundWhy(w.gate.rep)] += w.n
				case w.gate == &w.typ.rgate:
					n[e.typeReplicaWhy(w.typ)] += w.n
				case w.gate.res != nil:
					n[WhyResource] += w.n
				default:
					n[WhyConflict] += w.n
				}
			}
		}
	}
	return n
}
