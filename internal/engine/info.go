package engine

import (
	"container/heap"
	"sort"
)

// What the engine tells about itself, for fairsched's Stats and Snapshot.
// Each is a copy: the caller may keep it.

// Summary is the engine's counts at one instant.
type Summary struct {
	Counters
	Running, Pending, Parked int
	Delayed, Paused, Blocked int // set aside: not in Pending
	KeysTracked, Estimates   int
	KeysForgotten, Forgot    uint64
}

// Summary returns the engine's counts. O(1).
func (e *Engine) Summary() Summary {
	return Summary{
		Counters: e.counters,
		Running:  e.nrunning, Pending: e.npending, Parked: e.nheld, Delayed: e.naside - e.npaused - e.nblocked, Paused: e.npaused, Blocked: e.nblocked,
		KeysTracked: len(e.keys), KeysForgotten: e.keysForgotten,
		Estimates: e.costs.len(), Forgot: e.costs.forgotten,
	}
}

// TierInfo describes one tier.
type TierInfo struct {
	Tier, Limit, Running, Queued int
}

// Tiers describes the tiers, highest first. O(types).
func (e *Engine) Tiers() []TierInfo {
	out := make([]TierInfo, 0, len(e.tiers))
	for _, t := range e.tiers {
		ti := TierInfo{Tier: t.level, Limit: t.limit, Running: t.running}
		for _, ty := range t.types {
			ti.Queued += ty.pending + ty.aside
		}
		out = append(out, ti)
	}
	return out
}

// TypeInfo describes one job type.
type TypeInfo struct {
	Name                                  string
	Tier, Limit, Running, Queued          int
	Started, Completed, Failed, Cancelled uint64
	Expired, Retries, DependencyFailed    uint64
	RejectedFull, RejectedClosed          uint64
	Paused                                bool
}

// Types describes the job types, by name. O(t log t).
func (e *Engine) Types() []TypeInfo {
	out := make([]TypeInfo, 0, len(e.types))
	for _, name := range sortedNames(e.types) {
		t := e.types[name]
		out = append(out, TypeInfo{
			Name: name, Tier: t.cfg.Tier, Limit: t.limit, Running: t.running, Queued: t.pending + t.aside,
			Started: t.stats.started, Completed: t.stats.completed, Failed: t.stats.failed, Cancelled: t.stats.cancelled, Expired: t.stats.expired, Retries: t.stats.retries, DependencyFailed: t.stats.dependencyFailed,
			RejectedFull: t.stats.rejectedFull, RejectedClosed: t.stats.rejectedClosed, Paused: t.paused,
		})
	}
	return out
}

// KeyInfo describes one fairness key.
type KeyInfo struct {
	Key             string
	Configured      bool
	Cfg             Key
	Running, Queued int
	Paused          bool
	Allocation      float64
	VirtualTime     map[int]float64 // by tier
}

// KeySummary sums up keys not listed by name.
type KeySummary struct {
	Keys, Running, Queued int
}

// Keys describes the configured and the paused keys and the max busiest
// others, by name, and sums up the other keys with work (running, queued
// or set aside). O(k log max + c log c) for k keys remembered and c
// listed: the busiest are selected with a heap of max, never by sorting
// every key with work.
func (e *Engine) Keys(max int) ([]KeyInfo, KeySummary) {
	var listed []*keyState
	var top busiest // the busiest others so far, the least busy at the root
	var rest KeySummary
	for _, k := range e.keys {
		switch {
		case k.configured || k.paused:
			listed = append(listed, k)
			continue
		case k.work() == 0:
			continue
		}
		rest.Keys++
		rest.Running += k.running
		rest.Queued += k.pending + k.aside
		switch {
		case len(top) < max:
			heap.Push(&top, k)
		case len(top) > 0 && busier(k, top[0]):
			top[0] = k
			heap.Fix(&top, 0)
		}
	}
	for _, k := range top {
		listed = append(listed, k)
		rest.Keys--
		rest.Running -= k.running
		rest.Queued -= k.pending + k.aside
	}
	sort.Slice(listed, func(i, j int) bool { return listed[i].name < listed[j].name })
	a := e.allocations()
	out := make([]KeyInfo, len(listed))
	for i, k := range listed {
		out[i] = k.info(e.allocationOf(k, a))
	}
	return out, rest
}

// busier reports whether a is listed before b: more work, then by name.
func busier(a, b *keyState) bool {
	if a.work() != b.work() {
		return a.work() > b.work()
	}
	return a.name < b.name
}

// busiest is a heap of keys with the least busy at the root.
type busiest []*keyState

func (h busiest) Len() int           { return len(h) }
func (h busiest) Less(i, j int) bool { return busier(h[j], h[i]) }
func (h busiest) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *busiest) Push(x any)        { *h = append(*h, x.(*keyState)) }
func (h *busiest) Pop() any {
	old := *h
	k := old[len(old)-1]
	*h = old[:len(old)-1]
	return k
}

// work counts the key's jobs: running, queued or set aside.
func (k *keyState) work() int { return k.running + k.pending + k.aside }

func (k *keyState) info(alloc float64) KeyInfo {
	ki := KeyInfo{
		Key: k.name, Configured: k.configured, Cfg: k.cfg, Running: k.running, Queued: k.pending + k.aside, Paused: k.paused,
		Allocation: alloc, VirtualTime: make(map[int]float64, len(k.flows)),
	}
	for _, f := range k.flows {
		ki.VirtualTime[f.tier.level] = f.v
	}
	return ki
}

// Effective returns j's effective priority at now, rounded down.
func (e *Engine) Effective(j *Job, now int64) int {
	r := AgingRule{e.aging}
	return r.Effective(int(j.base), e.AgingClock(j, now))
}

// Urgent reports whether a pending j is urgent at now.
func (e *Engine) Urgent(j *Job, now int64) bool {
	r := AgingRule{e.aging}
	return r.Urgent(int(j.base), e.AgingClock(j, now))
}

// AgingRule is the engine's rule of effective priority, copied (Engine's
// AgingRule): it answers Effective and Urgent from a job's base priority
// and aging clock (AgingClock) without the engine, so that a caller can
// copy those under its lock and work the answers out after.
type AgingRule struct{ p agingParams }

// AgingRule returns the rule of effective priority in force.
func (e *Engine) AgingRule() AgingRule { return AgingRule{e.aging} }

// Effective returns the effective priority, rounded down, of a job of base
// priority base whose aging clock is at (sub, at, started): Effective's.
func (r *AgingRule) Effective(base int, c Clock) int {
	if !c.Started {
		return base
	}
	return r.p.effective(base, c.Sub, c.At)
}

// Urgent reports whether a pending job of base priority base whose aging
// clock is at c is urgent: Urgent's.
func (r *AgingRule) Urgent(base int, c Clock) bool {
	return c.Started && r.p.isUrgent(base, c.Sub, c.At)
}

// Clock is where a job's aging clock is (AgingClock).
type Clock struct {
	Sub, At int64 // the submission time it counts from, and the time it reads
	Started bool  // false for a delayed job, whose clock starts at its NotBefore
}

// AgingClock returns where j's aging clock is at now (clockOf). A
// running job's reads at now as a pending one's does: Effective at its
// start is its effective priority as it started.
func (e *Engine) AgingClock(j *Job, now int64) Clock {
	sub, at, started := e.clockOf(j, now)
	return Clock{sub, at, started}
}

// clockOf returns where j's aging clock is at now: the submission time it
// counts from, and the time it reads, which stood still while j was
// paused; started is false for a delayed job whose clock starts at its
// NotBefore.
func (e *Engine) clockOf(j *Job, now int64) (sub, at int64, started bool) {
	switch j.state {
	case StateDelayed:
		if !e.timed[j].retry {
			return 0, 0, false
		}
		return j.setAsideSub(now), now, true // backing off
	case StateBlocked:
		return j.setAsideSub(now), now, true
	case StatePaused:
		return j.sub, j.at, true
	}
	return j.sub, now, true
}

// TypeTier returns the tier of the job type name, if it is registered.
func (e *Engine) TypeTier(name string) (int, bool) {
	if t := e.types[name]; t != nil {
		return t.cfg.Tier, true
	}
	return 0, false
}

// DeadlineOf returns the start deadline of a job of type name (which must
// be registered) with the deadline startBy (0: none), submitted at
// submitted: the earlier of startBy and its type's StartTimeout after
// submitted; 0 if it has none.
func (e *Engine) DeadlineOf(name string, startBy, submitted int64) int64 {
	return deadlineOf(e.types[name], startBy, submitted)
}

// FlowID names a flow: one key's share of one tier.
type FlowID struct {
	Key  string
	Tier int
}

// VirtualTimes returns every flow's virtual time. O(flows).
func (e *Engine) VirtualTimes() map[FlowID]float64 {
	out := map[FlowID]float64{}
	for name, k := range e.keys {
		for _, f := range k.flows {
			out[FlowID{name, f.tier.level}] = f.v
		}
	}
	return out
}

// EstimateID names a cost estimate: a job type and a job ID.
type EstimateID struct{ Type, ID string }

// Estimates returns every learnt cost estimate, in seconds. O(estimates).
func (e *Engine) Estimates() map[EstimateID]float64 {
	out := map[EstimateID]float64{}
	for ck, est := range e.costs.m {
		out[EstimateID{ck.typ.name, ck.id}] = est.seconds
	}
	return out
}

// Held reports whether a pending job is held out of the dispatcher's
// sight by a shut gate: its key's cap, or a conflict lock that is held.
// (A job an open gate holds competes as a queued job does.)
func (e *Engine) Held(j *Job) bool {
	return j.state == StateParked && e.gateOf(j).shut
}

// WouldStart reports whether a job described by d, enqueued now, would
// start at once: whether it passes every hard limit, has a free replica
// to run on once replicas are set (replicas.go), taking units held for
// another job only as backfill allows (resources.go). Jobs already pending
// do not stand in its way, since after every call that may start one none
// that could is left waiting. It creates nothing. An unknown type answers
// true: Enqueue then says why it refuses.
//
// needs are the job's own needs of resources, in place of its type's, or
// nil; now is the time it would be enqueued, after what fell due.
func (e *Engine) WouldStart(d *Desc, needs []Need, now int64) bool {
	return e.WouldStartOn(d, needs, "", now)
}

// WouldStartOn is WouldStart for a job bound to replica (Times.Replica;
// "": none).
func (e *Engine) WouldStartOn(d *Desc, needs []Need, replica string, now int64) bool {
	t := e.anyType
	if d.Type != "" {
		if t = e.types[d.Type]; t == nil {
			return true
		}
	}
	if e.full() || t.blocked() || t.paused || e.keyPaused(d.Key) {
		return false
	}
	k := e.anyKey
	if d.Key != "" {
		k = e.keys[d.Key] // a key not yet known runs nothing
	}
	if k != nil && k.idle && now-k.idleSince >= e.cfg.IdleTTL {
		k = nil // Enqueue forgets it first: it comes back brand-new
	}
	if k != nil && k.blocked() {
		return false
	}
	if g := t.cfg.ConflictGroup; g != "" {
		if lk := e.conflicts[conflictKey{g, d.ID}]; lk != nil && lk.holder != nil {
			return false
		}
	}
	if e.replicated && !e.wouldHaveReplica(replica, t) {
		return false
	}
	resolved := t.needs
	if needs != nil {
		var unknown string
		if resolved, unknown = e.resolveNeeds(needs); unknown != "" {
			return true // Enqueue refuses it
		}
	}
	var claimed bool
	for _, n := range resolved {
		if n.units > n.r.capacity {
			continue // Enqueue refuses it
		}
		if n.r.capacity-n.r.used < n.units || n.r.gate.shut {
			return false
		}
		claimed = claimed || n.r.claimant != nil
	}
	if claimed { // it would start only by backfill (resources.go)
		secs := t.cost
		// An estimate unused for IdleTTL is one Enqueue forgets first.
		if est := e.costs.lookup(t, d.ID); est != nil && now-est.lastUsed < e.cfg.IdleTTL {
			secs = est.seconds
		}
		end := now + micros(secs)
		for _, n := range resolved {
			if c := n.r.claimant; c != nil && end > e.claimStart(c) {
				return false
			}
		}
	}
	return true
}

// FindRunning returns the first running job match reports true for, or
// nil. O(running).
func (e *Engine) FindRunning(match func(*Job) bool) *Job {
	for _, r := range e.running {
		if match(r.j) {
			return r.j
		}
	}
	return nil
}

// BasePriority returns the base priority a job described by d would get,
// and false if its type is unknown.
func (e *Engine) BasePriority(d *Desc) (int, bool) {
	t := e.anyType
	if d.Type != "" {
		if t = e.types[d.Type]; t == nil {
			return 0, false
		}
	}
	if d.Priority != 0 {
		return clampPriority(d.Priority), true
	}
	return t.priority, true
}
