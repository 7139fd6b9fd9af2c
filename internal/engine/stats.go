package engine

import (
	"math"
	"sort"
)

// Observer is told what the engine decided, as it decides it, for events
// and metrics. Its methods are called within the engine's calls (so under
// the caller's lock) and must not call back into the engine.
type Observer interface {
	// Submitted: j was accepted (it may start at once; Started follows).
	Submitted(j *Job, now int64)
	// Started: j got a slot; eff is its effective priority at now.
	Started(j *Job, eff int, aged bool, now int64)
	// Finished: j ran and ended with o (Completed, Failed, or NotRun if
	// its function never ran).
	Finished(j *Job, o Outcome, now int64)
	// Cancelled: j left the queue without starting.
	Cancelled(j *Job, now int64)
	// Expired: j was not started by its start deadline.
	Expired(j *Job, now int64)
	// DependencyFailed: j ended without running: dep, a job it runs
	// after, did not complete.
	DependencyFailed(j, dep *Job, now int64)
	// Retrying: j's attempt failed; j waits until notBefore to try again.
	Retrying(j *Job, notBefore, now int64)
	// AllocationChanged: a configured key's fair allocation moved.
	AllocationChanged(key string, old, new float64, r AllocationReason, now int64)
}

// AllocationReason says why a key's allocation changed.
type AllocationReason uint8

const (
	ReasonConfigChange AllocationReason = iota + 1 // weight, reservation or cap changed
	ReasonRebalance                                // another key arrived or left
	ReasonKeyDrained                               // the key itself ran out of work, or was paused
)

// Counters are the engine's cumulative counts.
type Counters struct {
	Submitted, Completed, Failed, Cancelled  uint64
	Expired                                  uint64 // not started by their start deadline
	DependencyFailed                         uint64 // not started: a job they run after did not complete
	Retries                                  uint64 // failed attempts followed by another
	RejectedUnknownType                      uint64 // the other refusals are counted by type
	HighCompleted, LowCompleted              uint64 // base priority >= 75, < 25
	Promotions, UrgentStarts, ReservedStarts uint64
	Excess                                   uint64
	Wait, Duration                           Histogram  // seconds
	Effective                                [11]uint64 // started jobs by effective priority / 10
}

// typeCounters are one job type's cumulative counts.
type typeCounters struct {
	started, completed, failed, cancelled uint64
	expired, retries, dependencyFailed    uint64
	rejectedFull, rejectedClosed          uint64
}

// Buckets are the upper bounds, in seconds, of the histograms.
var Buckets = [...]float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800}

// Histogram counts durations in seconds by Buckets, not cumulatively:
// Counts[i] is the observations in (Buckets[i-1], Buckets[i]].
type Histogram struct {
	Count  uint64
	Sum    float64
	Counts [len(Buckets)]uint64
}

func (h *Histogram) observe(seconds float64) {
	h.Count++
	h.Sum += seconds
	for i, b := range &Buckets { // & so as not to copy the array
		if seconds <= b {
			h.Counts[i]++
			return
		}
	}
}

func (e *Engine) recordStart(j *Job, now int64) {
	c := &e.counters
	t := j.lane.typ
	t.stats.started++
	c.Wait.observe(float64(now-j.sub) / 1e6)
	eff := e.aging.effective(int(j.base), j.sub, now)
	c.Effective[eff/10]++
	aged := eff > int(j.base) || j.kind == Urgent
	switch j.kind {
	case Urgent:
		c.UrgentStarts++
	case Reserved:
		c.ReservedStarts++
	}
	if aged {
		c.Promotions++
	}
	if k := j.lane.key; e.cfg.MaxConcurrency > 0 && k.cfg.MinSlots == 0 {
		// A start beyond the key's weighted share of the tier, made with
		// capacity that keys with a claim to it left idle.
		if share := float64(e.cfg.MaxConcurrency) * k.cfg.Weight / t.tier.activeWeight; float64(j.lane.flow.running) > share+1e-9 {
			c.Excess++
		}
	}
	if e.obs != nil {
		e.obs.Started(j, eff, aged, now)
	}
}

func (e *Engine) recordFinish(j *Job, o Outcome, now int64) {
	c := &e.counters
	t := j.lane.typ
	switch o {
	case NotRun:
		c.Cancelled++
		t.stats.cancelled++
	case Failed:
		c.Failed++
		t.stats.failed++
	default:
		c.Completed++
		t.stats.completed++
		if int(j.base) >= 75 {
			c.HighCompleted++
		} else if int(j.base) < 25 {
			c.LowCompleted++
		}
	}
	if o != NotRun {
		c.Duration.observe(float64(now-j.at) / 1e6)
	}
	if e.obs != nil {
		e.obs.Finished(j, o, now)
	}
}

func (e *Engine) recordCancel(j *Job, now int64) {
	e.counters.Cancelled++
	j.lane.typ.stats.cancelled++
	if e.obs != nil {
		e.obs.Cancelled(j, now)
	}
}

// emitAllocation reports changes of the configured keys' allocations
// after key k started or stopped having work, or was reconfigured. It is
// called on those transitions only, not as queues grow and shrink, and only
// with an observer and configured keys.
//
// Only busy configured keys and k can have changed: a configured key's
// allocation falls to 0 when it drains, and that is reported then, with k
// the key. O(c log c) for c configured keys with work, whatever the number
// of other keys with work.
func (e *Engine) emitAllocation(k *keyState, reason AllocationReason, now int64) {
	if e.obs != nil && e.nconfigured > 0 {
		e.reportAllocations(k, reason, now)
	}
}

func (e *Engine) reportAllocations(k *keyState, reason AllocationReason, now int64) {
	a := e.allocations()
	report := e.busyOwn
	if !k.listed {
		report = append(report[:len(report):len(report)], k)
	}
	for _, other := range report {
		if !other.configured {
			continue
		}
		n := e.allocationOf(other, a)
		if n == other.alloc {
			continue
		}
		r := reason
		if other != k {
			r = ReasonRebalance
		}
		e.obs.AllocationChanged(other.name, other.alloc, n, r, now)
		other.alloc = n
	}
}

// emitAllocations reports the changes of every configured key's
// allocation after the slots changed. O(c log c).
func (e *Engine) emitAllocations(now int64) {
	if e.obs == nil || e.nconfigured == 0 {
		return
	}
	a := e.allocations()
	for _, k := range e.busyOwn {
		if !k.configured {
			continue
		}
		if n := e.allocationOf(k, a); n != k.alloc {
			e.obs.AllocationChanged(k.name, k.alloc, n, ReasonConfigChange, now)
			k.alloc = n
		}
	}
}

// allocation is the keys' fair allocations at one instant: each busy key
// with its own configuration's, and the one every other busy key has.
type allocation struct {
	own   map[*keyState]float64
	other float64
}

// allocations computes each busy key's allocation: its entitlement to
// slots as a key with work, whatever the length of its queue. It changes
// when keys start or stop having work or are reconfigured; a key using
// more than its allocation is using capacity others left idle.
//
// The keys without a configuration of their own all have DefaultKey's
// and, with a global limit, the same demand (any share they can get), so
// they enter the water-filling as one key of their summed weight and cap,
// whose allocation they share equally. O(c log c) for c busy keys with
// their own configuration (the configured ones and the empty key).
func (e *Engine) allocations() allocation {
	slots := e.cfg.MaxConcurrency
	demands := make([]Demand, 0, len(e.busyOwn)+1)
	for _, k := range e.busyOwn {
		demands = append(demands, e.demandOf(k))
	}
	m := e.busyDefault
	if slots > 0 && m > 0 {
		def := resolveKey(e.cfg.DefaultKey)
		demands = append(demands, Demand{Weight: def.Weight * float64(m), Limit: def.MaxConcurrency * m, Demand: slots * m})
	}
	shares := Allocate(slots, demands)
	a := allocation{own: make(map[*keyState]float64, len(e.busyOwn))}
	for i, k := range e.busyOwn {
		a.own[k] = shares[i]
	}
	if slots > 0 && m > 0 {
		a.other = shares[len(shares)-1] / float64(m)
	}
	return a
}

// demandOf returns a busy key's input to the water-filling.
func (e *Engine) demandOf(k *keyState) Demand {
	d := k.running - k.pausedRunning + k.pending
	if e.cfg.MaxConcurrency > 0 {
		d = e.cfg.MaxConcurrency // able to use any share
	}
	return Demand{Weight: k.cfg.Weight, MinSlots: k.cfg.MinSlots, Limit: k.cfg.MaxConcurrency, Demand: d}
}

// allocationOf returns key k's allocation from a: 0 without work; without
// a global limit, all it has or can run.
func (e *Engine) allocationOf(k *keyState, a allocation) float64 {
	switch {
	case !k.busy():
		return 0
	case e.cfg.MaxConcurrency == 0:
		return Allocate(0, []Demand{e.demandOf(k)})[0]
	case k.ownConfig():
		return a.own[k]
	}
	return a.other
}

// Demand is one key's input to Allocate; it mirrors
// fairsched.AllocationDemand.
type Demand struct {
	Weight   float64
	MinSlots int
	Limit    int // 0: no cap
	Demand   int // jobs running or queued
}

// Allocate is fairsched.Allocate, which states what it computes: the
// reservations first, then the rest water-filled by weight, keys that
// saturate first (least room per weight) giving their excess to the
// others. O(k log k) for k keys.
func Allocate(capacity int, keys []Demand) []float64 {
	out := make([]float64, len(keys))
	room := make([]float64, len(keys)) // what each key can still take
	for i, k := range keys {
		limit := float64(k.Demand)
		if k.Limit > 0 && float64(k.Limit) < limit {
			limit = float64(k.Limit)
		}
		if capacity <= 0 {
			out[i] = limit
			continue
		}
		out[i] = math.Min(float64(k.MinSlots), limit)
		room[i] = limit - out[i]
	}
	if capacity <= 0 {
		return out
	}
	left := float64(capacity)
	var weight float64
	order := make([]int, 0, len(keys))
	for i, k := range keys {
		left -= out[i]
		if room[i] > 0 && k.Weight > 0 {
			order = append(order, i)
			weight += k.Weight
		}
	}
	// Keys that saturate first are those with the least room per weight.
	sort.Slice(order, func(a, b int) bool {
		i, j := order[a], order[b]
		return room[i]/keys[i].Weight < room[j]/keys[j].Weight
	})
	for n, i := range order {
		if left <= 0 {
			break
		}
		w := keys[i].Weight
		if share := left * w / weight; room[i] <= share {
			out[i] += room[i]
			left -= room[i]
			weight -= w
			continue
		}
		// Nobody from here on saturates: share the rest by weight.
		for _, j := range order[n:] {
			out[j] += left * keys[j].Weight / weight
		}
		break
	}
	return out
}
