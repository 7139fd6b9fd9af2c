package fairsched

import (
	"fmt"
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
	name       string
	cfg        KeyConfig // resolved: Weight > 0
	configured bool      // named in Config.Keys or set at run time: never forgotten
	pinned     bool      // the empty key: never forgotten either

	running  int // running jobs of the key, all tiers
	reserved int // running jobs started under the key's MinSlots
	pending  int // queued and parked jobs
	capped   bool

	flows []*flow // one per tier the key has used
	lanes []*lane // one per job type the key has used
	// laneTypes[i] is lanes[i].typ, kept beside them so that finding a
	// key's lane reads one small array, not every lane record.
	laneTypes []*typeState

	// parked holds the key's urgent jobs found blocked by its cap, in urgent
	// order; kpIdx is the key's handle in Scheduler.keyParked.
	parked iheap.Keyed[*job]
	kpIdx  int

	busyIdx int // position in Scheduler.busy, -1 when the key has no work

	idleSince        int64 // µs; valid while idle
	idlePrev, idleNx *keyState
	idle             bool // on the idle list

	alloc float64 // last allocation reported in an event
}

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
}

func flowBefore(a, b *flow) bool { return a.order().Less(b.order()) }

// order is the flow's place in the fair order, (V, stamp), kept inline in
// the type heaps so that sifting never dereferences a lane or a flow.
func (f *flow) order() iheap.Key { return iheap.Key{Hi: iheap.Float(f.v), Lo: f.stamp} }

// settledKey is the flow's place in its tier's active heap.
func (f *flow) settledKey() iheap.Key { return iheap.Key{Hi: iheap.Float(f.settled())} }

// settled returns the flow's virtual time without the default-cost guesses
// charged for its running jobs. Learned estimates count: they are evidence.
func (f *flow) settled() float64 { return f.v - f.guessed }

// tierState is one tier: its cap, its types and its active flows.
type tierState struct {
	level   Tier
	limit   int
	running int
	types   []*typeState

	// active holds the flows with queued or running jobs, by settled V, so
	// that a flow entering the tier starts level with the least-served of
	// those present. Settled, because charges of running jobs are
	// corrected when they end, and default-cost guesses are the ones most
	// likely to be far off: a newcomer placed on an incumbent's guesses
	// would fall behind it once they are refunded (seed 002, scenario 2),
	// while one placed below an incumbent's learned estimates would burst
	// past its share.
	active iheap.Keyed[*flow]
	// activeWeight is the sum of the weights of the active flows.
	activeWeight float64
	// floor is the highest such minimum seen: the tier's virtual clock. It
	// never goes back, so a key cannot bank credit while the tier is idle.
	floor float64
}

func (t *tierState) atCap() bool { return t.limit > 0 && t.running >= t.limit }

func (t *tierState) raiseFloor() {
	if f, ok := t.active.Top(); ok && f.settled() > t.floor {
		t.floor = f.settled()
	}
}

// keyLocked returns the state of key name, creating it with the defaults.
func (s *Scheduler) keyLocked(name string) *keyState {
	if k := s.keys[name]; k != nil {
		return k
	}
	k := &keyState{name: name, cfg: resolveKey(s.cfg.DefaultKey), kpIdx: -1, busyIdx: -1}
	k.parked = iheap.NewKeyed(jobSetIdx)
	s.keys[name] = k
	return k
}

func resolveKey(c KeyConfig) KeyConfig {
	if c.Weight == 0 {
		c.Weight = 1
	}
	return c
}

// laneLocked returns the lane of (t, k), creating it and its flow.
func (s *Scheduler) laneLocked(t *typeState, k *keyState) *lane {
	for i, lt := range k.laneTypes {
		if lt == t {
			return k.lanes[i]
		}
	}
	var f *flow
	for _, g := range k.flows {
		if g.tier == t.tier {
			f = g
			break
		}
	}
	if f == nil {
		f = &flow{key: k, tier: t.tier, actIdx: -1, v: t.tier.floor}
		k.flows = append(k.flows, f)
	}
	l := newLane(s, t, k, f)
	k.lanes = append(k.lanes, l)
	k.laneTypes = append(k.laneTypes, t)
	f.lanes = append(f.lanes, l)
	return l
}

// activateLocked brings an idle flow into its tier: it starts at the
// tier's current minimum V, or keeps its own if that is higher.
func (s *Scheduler) activateLocked(f *flow) {
	t := f.tier
	t.raiseFloor()
	if f.v < t.floor {
		f.v = t.floor
	}
	s.stampLocked(f)
	t.active.Push(f.settledKey(), f)
	f.actW = f.key.cfg.Weight
	t.activeWeight += f.actW
}

// deactivateLocked takes a flow with nothing queued or running out of its
// tier, remembering the minimum V the tier had with it.
func (s *Scheduler) deactivateLocked(f *flow) {
	t := f.tier
	t.raiseFloor()
	t.active.Remove(f.actIdx)
	t.activeWeight -= f.actW
	if t.active.Len() == 0 {
		t.activeWeight = 0 // no rounding drift
	}
}

func (s *Scheduler) stampLocked(f *flow) {
	s.stamp++
	f.stamp = s.stamp
}

// chargeLocked adds d slot-seconds at weight w to a flow's virtual time,
// of which guess are default-cost guesses for running jobs (negative to
// settle them), and re-sorts the flow wherever it is ordered by V.
// O(lanes of the flow * log k).
func (s *Scheduler) chargeLocked(f *flow, d, guess, w float64) {
	f.v += d / w
	f.guessed += guess / w
	if f.running == 0 {
		f.guessed = 0 // no rounding drift
	}
	s.stampLocked(f)
	if f.actIdx >= 0 {
		f.tier.active.Fix(f.actIdx, f.settledKey())
	}
	for _, l := range f.lanes {
		if l.tyIdx >= 0 {
			l.typ.lanes.Fix(l.tyIdx, f.order())
		}
	}
}

// readyLocked puts a lane in its type's fair order if it has queued jobs
// and its key is below its cap.
func (s *Scheduler) readyLocked(l *lane) {
	if l.tyIdx < 0 && l.n > 0 && !l.key.capped {
		l.typ.lanes.Push(l.flow.order(), l)
	}
}

func (s *Scheduler) unreadyLocked(l *lane) {
	if l.tyIdx >= 0 {
		l.typ.lanes.Remove(l.tyIdx)
	}
}

// capKeyLocked takes a key that reached its cap out of every fair order.
func (s *Scheduler) capKeyLocked(k *keyState) {
	k.capped = true
	for _, l := range k.lanes {
		s.unreadyLocked(l)
	}
	if k.kpIdx >= 0 {
		s.keyParked.Remove(k.kpIdx)
	}
}

// uncapKeyLocked returns a key that fell below its cap to the fair orders.
func (s *Scheduler) uncapKeyLocked(k *keyState) {
	k.capped = false
	for _, l := range k.lanes {
		s.readyLocked(l)
	}
	if k.parked.Len() > 0 && k.kpIdx < 0 {
		top, _ := k.parked.Top()
		s.keyParked.Push(top.agedOrder(), k)
	}
}

// recapLocked brings a key's capped flag in line with its running count
// and cap, after either changed.
func (s *Scheduler) recapLocked(k *keyState) {
	switch at := k.atCap(); {
	case at && !k.capped:
		s.capKeyLocked(k)
	case !at && k.capped:
		s.uncapKeyLocked(k)
	}
}

// SetKey sets the configuration of fairness key name, which is then never
// forgotten. The change applies from the next dispatch: a new weight to the
// cost charged from then on, a cap or reservation to the next start. It
// fails, changing nothing, if the configuration is invalid or the keys'
// reservations would add up to more than MaxConcurrency.
func (s *Scheduler) SetKey(name string, c KeyConfig) error {
	if err := c.validate(fmt.Sprintf("key %q", name)); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.setKeyLocked(name, func(KeyConfig) KeyConfig { return c })
}

// SetKeyWeight changes the weight of fairness key name, keeping the rest
// of its configuration. The weight must be positive.
func (s *Scheduler) SetKeyWeight(name string, weight float64) error {
	if problem := weightProblem(weight); problem != "" {
		return fmt.Errorf("fairsched: key %q: weight %v %s", name, weight, problem)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.setKeyLocked(name, func(c KeyConfig) KeyConfig { c.Weight = weight; return c })
}

// setKeyLocked applies change to key name's configuration, in one critical
// section so that concurrent changes cannot undo each other.
func (s *Scheduler) setKeyLocked(name string, change func(KeyConfig) KeyConfig) error {
	k := s.keys[name]
	if k != nil && k.idle && s.nowLocked()-k.idleSince >= s.idleTTL {
		// Idle past its TTL: as good as forgotten, so configured afresh.
		s.forgetKeyLocked(k)
		k = nil
	}
	old := resolveKey(s.cfg.DefaultKey)
	if k != nil {
		old = k.cfg
	}
	c := resolveKey(change(old))
	if s.cfg.MaxConcurrency > 0 {
		total := c.MinSlots
		for _, r := range s.reserving {
			if r.name != name {
				total += r.cfg.MinSlots
			}
		}
		if total > s.cfg.MaxConcurrency {
			return fmt.Errorf("fairsched: key %q: MinSlots %d would make the reservations add up to %d, more than MaxConcurrency %d",
				name, c.MinSlots, total, s.cfg.MaxConcurrency)
		}
	}
	if k == nil {
		k = s.keyLocked(name)
	}
	s.configureKeyLocked(k, c, true)
	s.kickLocked()
	return nil
}

// ResetKeys returns every fairness key to Config.DefaultKey: equal weights,
// no reservations, the default caps. Virtual times are kept. The keys of
// Config.Keys are reset too: none is configured afterwards, so, like any
// other key, each is forgotten once it has been idle for IdleTTL.
func (s *Scheduler) ResetKeys() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.keys {
		s.configureKeyLocked(k, resolveKey(s.cfg.DefaultKey), false)
	}
	s.kickLocked()
}

func (s *Scheduler) configureKeyLocked(k *keyState, c KeyConfig, configured bool) {
	old := k.cfg
	k.cfg = c
	if k.configured != configured {
		if configured {
			s.nconfigured++
		} else {
			s.nconfigured--
			k.alloc = 0 // no longer reported: a later report starts afresh
		}
		k.configured = configured
	}
	for _, f := range k.flows {
		if f.actIdx >= 0 {
			f.tier.activeWeight += c.Weight - f.actW
			f.actW = c.Weight
		}
	}
	if configured {
		s.unidleLocked(k)
	} else if k.running == 0 && k.pending == 0 && !k.idle {
		s.idleLocked(k, s.nowLocked())
	}
	if old.MinSlots != c.MinSlots {
		s.rebuildReservingLocked()
	}
	s.recapLocked(k)
	if old != c {
		s.emitAllocationLocked(k, ReasonConfigChange)
	}
}

func (s *Scheduler) rebuildReservingLocked() {
	s.reserving = s.reserving[:0]
	for _, k := range s.keys {
		if k.cfg.MinSlots > 0 {
			s.reserving = append(s.reserving, k)
		}
	}
	sort.Slice(s.reserving, func(i, j int) bool { return s.reserving[i].name < s.reserving[j].name })
}

// busyLocked adds a key that has just got work to Scheduler.busy. O(1).
func (s *Scheduler) busyLocked(k *keyState) {
	k.busyIdx = len(s.busy)
	s.busy = append(s.busy, k)
}

// unbusyLocked takes a key that has run out of work out of
// Scheduler.busy. O(1).
func (s *Scheduler) unbusyLocked(k *keyState) {
	last := len(s.busy) - 1
	moved := s.busy[last]
	s.busy[k.busyIdx], moved.busyIdx = moved, k.busyIdx
	s.busy[last] = nil
	s.busy = s.busy[:last]
	k.busyIdx = -1
}

// idleLocked puts a key with nothing queued or running on the idle list,
// to be forgotten after IdleTTL unless it is configured.
func (s *Scheduler) idleLocked(k *keyState, now int64) {
	if k.configured || k.pinned || k.idle {
		return
	}
	k.idle, k.idleSince = true, now
	k.idlePrev, k.idleNx = s.idleTail, nil
	if s.idleTail != nil {
		s.idleTail.idleNx = k
	} else {
		s.idleHead = k
	}
	s.idleTail = k
}

func (s *Scheduler) unidleLocked(k *keyState) {
	if !k.idle {
		return
	}
	if k.idlePrev != nil {
		k.idlePrev.idleNx = k.idleNx
	} else {
		s.idleHead = k.idleNx
	}
	if k.idleNx != nil {
		k.idleNx.idlePrev = k.idlePrev
	} else {
		s.idleTail = k.idlePrev
	}
	k.idle, k.idlePrev, k.idleNx = false, nil, nil
}

// forgetIdleLocked forgets keys idle for longer than IdleTTL. Amortised
// O(1) per key.
func (s *Scheduler) forgetIdleLocked(now int64) {
	for k := s.idleHead; k != nil && now-k.idleSince >= s.idleTTL; k = s.idleHead {
		s.forgetKeyLocked(k)
	}
}

// forgetKeyLocked drops an idle key's record.
func (s *Scheduler) forgetKeyLocked(k *keyState) {
	s.unidleLocked(k)
	delete(s.keys, k.name)
	s.keysForgotten++
}
