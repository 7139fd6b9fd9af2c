package engine

import (
	"sort"

	"github.com/fairsched/fairsched/internal/iheap"
)

// Fair share. Each tier is its own fair queue over flows, one flow per
// (tier, key). A flow's virtual time V is the cost charged to its key in
// that tier divided by the key's weight; the ready flow with the lowest V
// goes next. Ties in V go to the flow whose V was set first (stamp), which
// serves equals round-robin.

// keyState is one fairness key.
type keyState struct {
	// What the hot paths read, together.
	name     string
	cfg      Key // resolved: Weight > 0
	running  int // running jobs of the key, all tiers
	reserved int // running jobs started under the key's MinSlots
	pending  int // queued and parked jobs
	// pausedRunning counts its running jobs of paused types: work that
	// does not count for allocation (busy).
	pausedRunning int
	// aside counts its jobs set aside, outside every order (delayed,
	// paused or blocked): not pending, but the key is not idle.
	aside      int
	configured bool // named in Config.Keys or set at run time: never forgotten
	pinned     bool // the empty key: never forgotten either, nor given DefaultKey
	// ownDefault is set on the empty key when its default, the zero Key,
	// is not DefaultKey's configuration: then it is never counted among
	// the keys that share DefaultKey's (ownConfig).
	ownDefault bool
	paused     bool // the key is paused (pause.go)
	idle       bool // on the idle list
	// cap is the key's cap as a gate (gates.go): shut while the key runs
	// its MaxConcurrency or its bucket is empty (blocked), when its lanes
	// are out of the fair orders and it holds the key's urgent jobs that
	// the urgent step finds.
	cap gate

	flows []*flow // one per tier the key has used
	lanes []*lane // one per job type the key has used
	// laneTypes[i] is lanes[i].typ, kept beside them so that finding a
	// key's lane reads one small array, not every lane record.
	laneTypes []*typeState

	listed  bool // counted among the busy keys (busyOwn or busyDefault)
	busyIdx int  // position in Engine.busyOwn, -1 when not there

	idleSince        int64 // µs; valid while idle
	idlePrev, idleNx *keyState

	alloc float64 // last allocation reported in an event

	// What only the gates that need them read.
	bucket     bucket // its rate limit (ratelimit.go)
	pausedJobs []*Job // the jobs its pause set aside, Job.idx their positions

	// The key's first flow and the one-element arrays behind its lists,
	// in its record: most keys use one tier, and a key that comes back
	// after it was forgotten makes them again.
	firstFlow      flow
	firstFlows     [1]*flow
	firstLanes     [1]*lane
	firstTypes     [1]*typeState
	firstFlowLanes [1]*lane
}

// belowReservation reports whether the key runs fewer jobs under its
// reservation than its MinSlots.
func (k *keyState) belowReservation() bool { return k.cfg.MinSlots > k.reserved }

// blocked reports whether the key's gate is shut: it runs its cap, or
// its token bucket is empty.
func (k *keyState) blocked() bool { return k.atCap() || k.bucket.empty }

func (k *keyState) atCap() bool {
	return k.cfg.MaxConcurrency > 0 && k.running >= k.cfg.MaxConcurrency
}

// flow is a key's share of one tier.
type flow struct {
	key  *keyState
	tier *tierState
	v    float64 // virtual time: charged slot-seconds / weight
	// guessed is the part of v charged for running jobs at a type's
	// default cost, a guess not yet backed by any observation of their
	// (type, ID); v - guessed is the flow's settled virtual time.
	guessed float64
	stamp   uint64 // when v was last set, for ties
	pending int
	running int
	lanes   []*lane // the key's lanes of types in this tier
	actIdx  int     // handle in tier.active, -1 when inactive
	actW    float64 // the key's weight when the flow became active
	// restored: V and stamp came from a saved fair state (fairstate.go),
	// where the flow was active, and stand when it is first activated
	// again: an active flow's V may be below its tier's floor.
	restored bool
}

func flowBefore(a, b *flow) bool { return a.order().Less(b.order()) }

// order is the flow's place in the fair order, (V, stamp), kept inline in
// the type heaps so that sifting never dereferences a lane or a flow.
func (f *flow) order() iheap.Key { return iheap.Key{Hi: iheap.Float(f.v), Lo: f.stamp} }

// laneOrder is a lane's place in its type's heap: its flow's.
func laneOrder(l *lane) iheap.Key { return l.flow.order() }

// settledKey is the flow's place in its tier's active heap.
func (f *flow) settledKey() iheap.Key { return iheap.Key{Hi: iheap.Float(f.settled())} }

// settled returns the flow's virtual time without the default-cost guesses
// charged for its running jobs. Learned estimates count: they are evidence.
func (f *flow) settled() float64 { return f.v - f.guessed }

// tierState is one tier: its cap, its types and its active flows.
type tierState struct {
	level   int
	limit   int
	running int
	types   []*typeState

	// active holds the flows with queued or running jobs, by settled V, so
	// that a flow entering the tier starts level with the least-served of
	// those present. Settled, because charges of running jobs are
	// corrected when they end, and default-cost guesses are the ones most
	// likely to be far off: a newcomer placed on an incumbent's guesses
	// would fall behind it once they are refunded (two clients' bursts, one after the other),
	// while one placed below an incumbent's learned estimates would burst
	// past its share. Each is filed at or below its settled V (charge).
	active iheap.Keyed[*flow]
	// activeWeight is the sum of the weights of the active flows.
	activeWeight float64
	// floor is the highest such minimum seen: the tier's virtual clock. It
	// never goes back, so a key cannot bank credit while the tier is idle.
	floor float64
}

func (t *tierState) atCap() bool { return t.limit > 0 && t.running >= t.limit }

func (t *tierState) raiseFloor() {
	if f, ok := t.active.TopAt((*flow).settledKey); ok && f.settled() > t.floor {
		t.floor = f.settled()
	}
}

// defaultOf returns the configuration of key name when nothing else
// configures it: DefaultKey, meant for clients, but the zero Key for the
// empty key, the service's own work.
func (e *Engine) defaultOf(name string) Key {
	if name == "" {
		return resolveKey(Key{})
	}
	return resolveKey(e.cfg.DefaultKey)
}

// ownConfig reports whether the key may be configured otherwise than by
// DefaultKey: it is configured, or it is the empty key and its default is
// not DefaultKey's. (When it is, the empty key counts among the keys of
// DefaultKey's configuration while unconfigured, as any other key.)
func (k *keyState) ownConfig() bool { return k.configured || k.ownDefault }

// keyOrNew returns the state of key name, creating it with the defaults.
func (e *Engine) keyOrNew(name string) *keyState {
	if k := e.keys[name]; k != nil {
		return k
	}
	k := &keyState{name: name, cfg: e.defaultOf(name), busyIdx: -1, paused: e.keyPaused(name)}
	k.bucket = bucket{idx: -1, key: k}
	k.flows, k.lanes, k.laneTypes = k.firstFlows[:0], k.firstLanes[:0], k.firstTypes[:0]
	if k.cfg.Rate.Period > 0 {
		e.setRate(&k.bucket, k.cfg.Rate, 0) // full: nothing taken yet
	}
	e.keys[name] = k
	return k
}

// laneOf returns the lane of (t, k), creating it and its flow at now:
// from a spare lane of t's if there is one (spare.go), else new.
func (e *Engine) laneOf(t *typeState, k *keyState, now int64) *lane {
	if l := k.lane(t); l != nil {
		if l.spareIdx >= 0 {
			t.unspare(l) // its key has work again
		}
		return l
	}
	f := k.flowOf(t.tier)
	l := e.takeSpare(t)
	if l == nil {
		l = new(lane)
		l.allIdx = len(t.all)
		t.all = append(t.all, l)
	}
	l.init(e, t, k, f, now)
	e.restoreStood(l, now)
	k.lanes = append(k.lanes, l)
	k.laneTypes = append(k.laneTypes, t)
	f.lanes = append(f.lanes, l)
	return l
}

// lane returns the key's lane of type t, or nil (laneOf makes one).
// O(types the key uses): it reads the small array of their types, not
// the lanes.
func (k *keyState) lane(t *typeState) *lane {
	for i, lt := range k.laneTypes {
		if lt == t {
			return k.lanes[i]
		}
	}
	return nil
}

// flowOf returns the key's flow in tier t, making it at t's floor if the
// key has none there yet. O(tiers the key uses).
func (k *keyState) flowOf(t *tierState) *flow {
	for _, f := range k.flows {
		if f.tier == t {
			return f
		}
	}
	var f *flow
	if len(k.flows) == 0 {
		f = &k.firstFlow
		*f = flow{key: k, tier: t, actIdx: -1, v: t.floor, lanes: k.firstFlowLanes[:0]}
	} else {
		f = &flow{key: k, tier: t, actIdx: -1, v: t.floor}
	}
	k.flows = append(k.flows, f)
	return f
}

// activate brings an idle flow into its tier: it starts at the
// tier's current minimum V, or keeps its own if that is higher.
func (e *Engine) activate(f *flow) {
	t := f.tier
	t.raiseFloor()
	if !f.restored {
		if f.v < t.floor {
			f.v = t.floor
		}
		e.restamp(f)
	}
	f.restored = false
	t.active.Push(f.settledKey(), f)
	f.actW = f.key.cfg.Weight
	t.activeWeight += f.actW
}

// deactivate takes a flow with nothing queued or running out of its
// tier, remembering the minimum V the tier had with it.
func (e *Engine) deactivate(f *flow) {
	t := f.tier
	t.raiseFloor()
	t.active.Remove(f.actIdx)
	t.activeWeight -= f.actW
	if t.active.Len() == 0 {
		t.activeWeight = 0 // no rounding drift
	}
}

func (e *Engine) restamp(f *flow) {
	e.stamp++
	f.stamp = e.stamp
}

// charge adds d slot-seconds at weight w to a flow's virtual time,
// of which guess are default-cost guesses for running jobs (negative to
// settle them).
//
// The heaps that order flows by V (the tier's active flows, the types'
// lanes) file a flow at or below its place (iheap.Keyed.TopAt), so a
// charge that moves it on leaves it where it is: it is refiled when it
// comes to the top, once for all the charges since. A charge that moves it
// back, an estimate corrected down at a job's end, refiles it at once.
// O(1), or O(lanes of the flow * log k) when it moves back.
func (e *Engine) charge(f *flow, d, guess, w float64) {
	v, settled := f.v, f.settled()
	f.v += d / w
	f.guessed += guess / w
	if f.running == 0 {
		f.guessed = 0 // no rounding drift
	}
	e.restamp(f)
	if f.actIdx >= 0 && f.settled() < settled {
		f.tier.active.Fix(f.actIdx, f.settledKey())
	}
	if f.v < v {
		for _, l := range f.lanes {
			if l.tyIdx >= 0 {
				l.typ.lanes.Fix(l.tyIdx, f.order())
			}
		}
	}
}

// ready puts a lane in its type's fair order if it has queued jobs (its
// own or attached waiters) and its key is below its cap.
func (e *Engine) ready(l *lane) {
	if l.tyIdx < 0 && l.n+l.nwaiting > 0 && !l.key.cap.shut {
		l.typ.lanes.Push(l.flow.order(), l)
	}
}

func (e *Engine) unready(l *lane) {
	if l.tyIdx >= 0 {
		l.typ.lanes.Remove(l.tyIdx)
	}
}

// capKey shuts the cap of a key that reached it: its lanes leave every
// fair order, and the jobs its cap holds leave the urgent order.
func (e *Engine) capKey(k *keyState) {
	e.nkeysShut++
	e.shut(&k.cap)
	for _, l := range k.lanes {
		e.unready(l)
	}
}

// uncapKey opens the cap of a key that fell below it: its lanes and the
// jobs its cap holds compete again.
func (e *Engine) uncapKey(k *keyState) {
	e.nkeysShut--
	k.cap.shut = false // before ready, which passes over a capped key
	for _, l := range k.lanes {
		e.ready(l)
	}
	e.open(&k.cap)
}

// recap brings a key's capped flag in line with its running count
// and cap, after either changed.
func (e *Engine) recap(k *keyState) {
	switch at := k.blocked(); {
	case at && !k.cap.shut:
		e.capKey(k)
	case !at && k.cap.shut:
		e.uncapKey(k)
	}
}

// SetKey sets the configuration of key name, which is then never
// forgotten, and returns whether it did: not if the keys' reservations
// would add up to more than MaxConcurrency. c is valid. The change applies
// from the next start: a new weight to the cost charged from then on.
func (e *Engine) SetKey(name string, c Key, now int64) bool {
	return e.setKey(name, func(Key) Key { return c }, now)
}

// SetKeyWeight changes the weight of key name, keeping the rest of its
// configuration. The weight is valid.
func (e *Engine) SetKeyWeight(name string, weight float64, now int64) {
	e.setKey(name, func(c Key) Key { c.Weight = weight; return c }, now)
}

// setKey applies change to key name's configuration.
func (e *Engine) setKey(name string, change func(Key) Key, now int64) bool {
	k := e.keys[name]
	// Idle past its TTL, a key is as good as forgotten, so it is
	// configured afresh: forgotten here, once the change is known to be
	// accepted (a refused change changes nothing).
	stale := k != nil && k.idle && now-k.idleSince >= e.cfg.IdleTTL
	old := e.defaultOf(name)
	if k != nil && !stale {
		old = k.cfg
	}
	c := resolveKey(change(old))
	if e.cfg.MaxConcurrency > 0 && e.reservedWith(name, c.MinSlots) > e.cfg.MaxConcurrency {
		return false
	}
	if stale {
		e.forgetKey(k)
		k = nil
	}
	if k == nil {
		k = e.keyOrNew(name)
	}
	e.configureKey(k, c, true, now)
	return true
}

// ReservedWith returns what the keys' reservations would add up to with
// key name reserving minSlots.
func (e *Engine) ReservedWith(name string, minSlots int) int { return e.reservedWith(name, minSlots) }

func (e *Engine) reservedWith(name string, minSlots int) int {
	total := minSlots
	for _, r := range e.reserving {
		if r.name != name {
			total += r.cfg.MinSlots
		}
	}
	return total
}

// ResetKeys returns every key to its default configuration (defaultOf);
// none is configured afterwards. Virtual times are kept.
func (e *Engine) ResetKeys(now int64) {
	for _, k := range e.keys {
		e.configureKey(k, e.defaultOf(k.name), false, now)
	}
}

// SetMaxConcurrency changes the number of slots (0: no limit) and reports
// whether it did: not if the keys' reservations would add up to more. Jobs
// running above a lowered limit run on; none starts until they drop below
// it. Allocations follow.
func (e *Engine) SetMaxConcurrency(n int, now int64) bool {
	if n > 0 && e.ReservedTotal() > n {
		return false
	}
	e.cfg.MaxConcurrency = n
	e.emitAllocations(now)
	return true
}

// ReservedTotal returns what the keys' reservations add up to.
func (e *Engine) ReservedTotal() int {
	total := 0
	for _, k := range e.reserving {
		total += k.cfg.MinSlots
	}
	return total
}

// MaxConcurrency returns the number of slots; 0: no limit.
func (e *Engine) MaxConcurrency() int { return e.cfg.MaxConcurrency }

// SetTierLimit changes the cap on a tier's running jobs (0: none).
func (e *Engine) SetTierLimit(level, n int) {
	e.tierOf(level).limit = n
	e.capped = e.capped || n > 0
}

// SetTypeLimit changes the cap on a job type's running jobs (0: none) and
// reports whether the type is known.
func (e *Engine) SetTypeLimit(name string, n int) bool {
	t := e.types[name]
	if t == nil {
		return false
	}
	t.limit = n
	e.capped = e.capped || n > 0
	return true
}

// ResetKey returns key name, if the engine knows it, to its default
// configuration (defaultOf), unconfigured. Its virtual time is kept.
func (e *Engine) ResetKey(name string, now int64) {
	if k := e.keys[name]; k != nil {
		e.configureKey(k, e.defaultOf(k.name), false, now)
	}
}

func (e *Engine) configureKey(k *keyState, c Key, configured bool, now int64) {
	old := k.cfg
	k.cfg = c
	if k.configured != configured {
		listed := k.listed
		if listed {
			e.removeBusy(k) // as it was, to be counted as it is
		}
		if configured {
			e.nconfigured++
		} else {
			e.nconfigured--
			k.alloc = 0 // no longer reported: a later report starts afresh
		}
		k.configured = configured
		if listed {
			e.addBusy(k)
		}
	}
	for _, f := range k.flows {
		if f.actIdx >= 0 {
			f.tier.activeWeight += c.Weight - f.actW
			f.actW = c.Weight
		}
	}
	if configured {
		e.unmarkIdle(k)
	} else if k.running == 0 && k.pending == 0 && k.aside == 0 && !k.idle {
		e.markIdle(k, now)
	}
	if old.MinSlots != c.MinSlots {
		e.rebuildReserving()
	}
	if old.Rate != c.Rate {
		e.setRate(&k.bucket, c.Rate, now)
	}
	e.recap(k)
	if old != c {
		e.emitAllocation(k, ReasonConfigChange, now)
	}
}

func (e *Engine) rebuildReserving() {
	e.reserving = e.reserving[:0]
	for _, k := range e.keys {
		if k.cfg.MinSlots > 0 {
			e.reserving = append(e.reserving, k)
		}
	}
	sort.Slice(e.reserving, func(i, j int) bool { return e.reserving[i].name < e.reserving[j].name })
}

// addBusy counts a key that has just got work among the busy keys: a
// key with its own configuration in busyOwn, any other in busyDefault.
// O(1).
func (e *Engine) addBusy(k *keyState) {
	k.listed = true
	if !k.ownConfig() {
		e.busyDefault++
		return
	}
	k.busyIdx = len(e.busyOwn)
	e.busyOwn = append(e.busyOwn, k)
}

// removeBusy takes a key that has run out of work out of the busy keys.
// O(1).
func (e *Engine) removeBusy(k *keyState) {
	k.listed = false
	if !k.ownConfig() {
		e.busyDefault--
		return
	}
	last := len(e.busyOwn) - 1
	moved := e.busyOwn[last]
	e.busyOwn[k.busyIdx], moved.busyIdx = moved, k.busyIdx
	e.busyOwn[last] = nil
	e.busyOwn = e.busyOwn[:last]
	k.busyIdx = -1
}

// busy reports whether the key has work for allocation: jobs queued or
// running, but none while it is paused, nor its running jobs of paused
// types. A pause gives the key's share to the others at once, while its
// running jobs finish; its waiting jobs are set aside, not pending.
func (k *keyState) busy() bool { return !k.paused && k.running-k.pausedRunning+k.pending > 0 }

// rebusy brings the key's place among the busy keys in line with busy,
// after its work changed, and reports the allocations that moved: for
// the key itself, with reason if it got work, ReasonKeyDrained if it ran
// out. O(1) when nothing changed, else that of emitAllocation.
func (e *Engine) rebusy(k *keyState, reason AllocationReason, now int64) {
	switch busy := k.busy(); {
	case busy && !k.listed:
		e.addBusy(k)
		e.emitAllocation(k, reason, now)
	case !busy && k.listed:
		e.removeBusy(k)
		e.emitAllocation(k, ReasonKeyDrained, now)
	}
}

// markIdle puts a key with nothing queued, running or set aside on the
// idle list, to be forgotten after IdleTTL unless it is configured, and
// offers its lanes, empty now, to other keys (spare.go).
func (e *Engine) markIdle(k *keyState, now int64) {
	if k.configured || k.pinned {
		return
	}
	e.offerLanes(k) // an idle key's too: Hold made one
	if k.idle {
		return
	}
	k.idle, k.idleSince = true, now
	k.idlePrev, k.idleNx = e.idleTail, nil
	if e.idleTail != nil {
		e.idleTail.idleNx = k
	} else {
		e.idleHead = k
	}
	e.idleTail = k
}

func (e *Engine) unmarkIdle(k *keyState) {
	if !k.idle {
		return
	}
	if k.idlePrev != nil {
		k.idlePrev.idleNx = k.idleNx
	} else {
		e.idleHead = k.idleNx
	}
	if k.idleNx != nil {
		k.idleNx.idlePrev = k.idlePrev
	} else {
		e.idleTail = k.idlePrev
	}
	k.idle, k.idlePrev, k.idleNx = false, nil, nil
}

// forgetIdle forgets keys idle for longer than IdleTTL. Amortised
// O(1) per key.
func (e *Engine) forgetIdle(now int64) {
	for k := e.idleHead; k != nil && now-k.idleSince >= e.cfg.IdleTTL; k = e.idleHead {
		e.forgetKey(k)
	}
}

// forgetKey drops an idle key's record, and its lanes.
func (e *Engine) forgetKey(k *keyState) {
	for len(k.lanes) > 0 {
		e.releaseLane(k.lanes[len(k.lanes)-1])
	}
	e.unmarkIdle(k)
	delete(e.keys, k.name)
	if k.cap.shut { // by its empty bucket
		e.nkeysShut--
	}
	if k.bucket.idx >= 0 {
		e.rateline.Remove(int(k.bucket.idx))
	}
	e.keysForgotten++
}
