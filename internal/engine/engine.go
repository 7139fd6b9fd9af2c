package engine

import (
	"sort"

	"github.com/fairsched/fairsched/internal/iheap"
)

// Config is the part of fairsched.Config the engine decides with, with
// every default resolved and every value already validated.
type Config struct {
	MaxConcurrency int // 0: no global limit
	MaxQueue       int // 0: unlimited
	TierLimits     map[int]int
	DefaultType    Type           // the type "", of jobs that name none
	Keys           map[string]Key // configured keys
	DefaultKey     Key
	Aging          Aging
	CostAlpha      float64        // in (0, 1]
	DefaultCost    float64        // seconds, > 0
	IdleTTL        int64          // µs, > 0
	Resources      map[string]int // named resources' capacities (resources.go)
	// BackfillLookahead is how many jobs that may not use a resource's
	// held units backfill skips before it stops (resources.go); 0: none.
	BackfillLookahead int
}

// Type configures a job type; it mirrors fairsched.TypeConfig.
type Type struct {
	Tier            int
	MaxConcurrency  int
	ConflictGroup   string
	DefaultCost     float64 // seconds; 0: Config.DefaultCost
	DefaultPriority int     // 0: 50
	StartTimeout    int64   // µs from submission; 0: no start deadline
	Rate            Rate
	Needs           []Need // units of named resources its jobs need
}

// Key configures a fairness key; it mirrors fairsched.KeyConfig.
type Key struct {
	Weight         float64 // 0: 1
	MinSlots       int
	MaxConcurrency int
	MaxPending     int
	Rate           Rate
}

// Aging mirrors fairsched.AgingConfig, with durations in µs.
type Aging struct {
	GracePeriod     int64
	Interval        int64
	Step            int
	MaxEffective    int
	UrgentThreshold int
}

// Desc describes a job to Enqueue; it mirrors fairsched.Job.
type Desc struct {
	Type, ID, Key string
	Priority      int
}

// Times are the times a job carries, in µs; 0: none. NotBefore: it may not
// start before then (a time not after its submission means no delay).
// StartBy: its start deadline. And After are the jobs it runs after
// (deps.go): enqueued before it, in this engine; ended or not.
//
// Submitted restores a job that was admitted before, by an engine that
// has gone (a durable store's, restarted): its aging clock runs from
// Submitted, in the past or, for a job delayed until then, the future,
// and no admission limit refuses it, nor a start deadline already past
// (it expires at the next Due). It is queued, never started at once, so
// that jobs restored together start in the order's turn (Next). With NotBefore after now it waits as
// a retried job does, keeping that aging clock; a start deadline from its
// type's StartTimeout counts from Submitted. Held by a pause restored with
// when it began (PauseKeySince, PauseTypeSince), its clock has stood still
// since then, or since Submitted if that came later.
type Times struct {
	NotBefore, StartBy int64
	Submitted          int64
	// Ran is set for a restored job that has run, and AttemptEnded is
	// then when its last attempt ended: a restored pause stopped its
	// clock then at the earliest, since it ran until then.
	Ran          bool
	AttemptEnded int64
	After        []*Job
	Needs        []Need // the job's own needs, in place of its type's; nil: its type's
	// Replica binds the job to the replica of that name (replicas.go): a
	// closure runs where it was submitted. "": any replica with a handler
	// for its type. Ignored while no replica was ever set.
	Replica string
}

// Engine is the whole decision state of a scheduler and the order of
// docs/design.md, The order. It holds no lock, starts no goroutine and never reads a
// clock: every method that depends on time takes now, in µs since the
// caller's epoch, and now must never decrease. The caller serialises
// calls (fairsched.Scheduler holds its mutex around each).
//
// The fields are grouped by concern; doc.go derives the structures.
type Engine struct {
	// Owner is whatever the caller attaches to the engine: in fairsched,
	// its Scheduler. The engine never reads it.
	Owner any
	// ClockMoved, if set, is called within the engine's calls when job
	// j's aging clock stood still for a pause and its submission time
	// moved on by as much, to j.Submitted(), and when j comes back from
	// being set aside with its clock running (AsideStood), moved or not:
	// fairsched records it for a durable job, so that a restart keeps
	// the time it stood. It must not call back into the engine.
	ClockMoved func(j *Job)

	cfg   Config
	aging agingParams
	obs   Observer // nil: no one listens

	// Shape: types, tiers and keys.
	types   map[string]*typeState
	anyType *typeState   // the default type, ""
	anyKey  *keyState    // the empty key, "": kept for good
	tiers   []*tierState // highest first
	keys    map[string]*keyState
	// The keys with work queued or running: those with a configuration
	// of their own (ownConfig), in no order, and how many others. The
	// others all have DefaultKey's configuration, so for fair allocations
	// a count of them is enough.
	busyOwn     []*keyState
	busyDefault int
	reserving   []*keyState // keys with MinSlots, by name
	idleHead    *keyState   // idle keys, least recently idle first
	idleTail    *keyState

	// What waits and what runs.
	conflicts map[conflictKey]*conflictLock
	spareLock *conflictLock // the last lock let go, for the next (newLock)
	grace     graceQueue
	timeline  timeline             // what falls due at a time
	rateline  iheap.Keyed[*bucket] // empty token buckets by their next token (ratelimit.go)
	rated     bool                 // some key or type has had a rate limit
	capped    bool                 // some tier or type has had a cap: pick looks for an open type first (anyOpen)
	lateGrace timeline             // grace ends of retried jobs (delay.go)
	running   []runningJob         // Job.idx is the position
	elsewhere []*Job               // the held records not ended (held.go); Job.idx is the position
	walker    orderWalk            // QueueOrder's buffers, kept for the next page
	seq       uint64               // the last sequence number handed out
	stamp     uint64               // the last flow stamp handed out
	nrunning  int
	npending  int               // queued and held
	naside    int               // accepted, set aside out of every order: delayed or paused
	npaused   int               // of them, StatePaused
	nblocked  int               // of them, StateBlocked
	deps      map[*Job]*depNode // the dependency graph (deps.go)
	// Named resources (resources.go): by name; the gate that holds each
	// job a resource blocks; when each claimant could start, as far as
	// it is known; the jobs with needs of their own.
	resources   map[string]*resource
	resHeld     map[*Job]*gate
	claimStarts map[*Job]int64
	unblocked   bool // a claim ended as a job left the queue (Cancel's answer)
	ownNeeds    map[*Job][]need
	nown        int
	// Replicas (replicas.go): whether one was ever set; the known ones,
	// by name; every record by name (known, or counting running jobs, or
	// holding jobs bound to it); the jobs bound to one, by name; the
	// replica each running job runs on.
	replicated    bool
	placing       bool // resources configured or replicated: a start takes units or a place (order.go, placeable)
	replicas      []*replica
	replicaByName map[string]*replica
	boundTo       map[*Job]string
	placedOn      map[*Job]*replica
	adoptOn       string // AdoptOn's replica, for the call only
	// Jobs admitted and being written down by the caller (Reserve): they
	// count against MaxQueue and their keys' MaxPending until Unreserve.
	reserved     int
	reservedKeys map[string]int
	unrun        []Unrun            // TakeUnrun's answer
	pausedKeys   map[string]int64   // paused keys by name, known to the engine or not, to when each pause began (pause.go)
	stoodLanes   []*lane            // the lanes that were ever paused (stood.go)
	stoodOf      map[laneName]int64 // restored paused times of lanes not yet made (stood.go)
	npausing     int                // paused keys and types: while 0, no job is paused
	timed        map[*Job]*jobTimers
	expired      []*Job // Due's answer
	nqueued      int    // visible in lanes
	closing      bool   // no new work is accepted

	// What it has learnt and counted.
	costs         costTable
	counters      Counters
	nheld         int // held out of sight by a shut gate
	nkeysShut     int // keys whose cap is shut (capKey), for QueueOrder
	keysForgotten uint64
	nconfigured   int // keys with configured set
}

// New returns an engine configured by cfg, with the default type "" and
// the configured keys. Types are added with RegisterType.
func New(cfg Config, obs Observer) *Engine {
	e := &Engine{
		cfg:       cfg,
		obs:       obs,
		aging:     newAgingParams(cfg.Aging),
		types:     make(map[string]*typeState),
		keys:      make(map[string]*keyState),
		conflicts: make(map[conflictKey]*conflictLock),
		costs:     newCostTable(cfg.CostAlpha),
		timeline:  newTimeline(),
		rateline:  newRateline(),
		lateGrace: newTimeline(),
	}
	for t := range cfg.TierLimits {
		e.tierOf(t)
	}
	e.setResources(cfg.Resources)
	e.registerType("", cfg.DefaultType)
	e.anyType = e.types[""]
	for _, name := range sortedNames(cfg.Keys) {
		k := e.keyOrNew(name)
		k.cfg, k.configured = resolveKey(cfg.Keys[name]), true
		e.setRate(&k.bucket, k.cfg.Rate, 0)
		e.nconfigured++
	}
	e.anyKey = e.keyOrNew("")
	e.anyKey.pinned = true
	e.anyKey.ownDefault = resolveKey(Key{}) != resolveKey(cfg.DefaultKey)
	e.rebuildReserving()
	return e
}

// Refusal says why Enqueue refused a job.
type Refusal struct {
	Reason   RefusalReason
	Limit    int    // RefusedFull, RefusedKeyFull: the limit
	Size     int    // and the jobs pending under it
	Deadline int64  // RefusedNeverStarts: the start deadline, µs
	Resource string // RefusedUnknownResource, RefusedTooMuch
	Key      string // RefusedKeyFull, from Room: the key
}

// RefusalReason is why a submission was refused.
type RefusalReason uint8

const (
	Accepted               RefusalReason = iota
	RefusedUnknownType                   // no such type
	RefusedClosed                        // StopAccepting was called
	RefusedFull                          // MaxQueue reached
	RefusedKeyFull                       // the key's MaxPending reached
	RefusedNeverStarts                   // its start deadline is not after its submission and NotBefore
	RefusedUnknownResource               // it needs a resource not configured: Refusal.Resource
	RefusedTooMuch                       // it needs more units than Refusal.Resource has (Limit), Size
	// RefusedWouldWait: asked to start at once or not at all (a
	// replica's TryRunSync, internal/decide), it would wait. The engine
	// never refuses so itself: its deciders do.
	RefusedWouldWait
)

// noTimes are the times of a job that carries none.
var noTimes Times

// StopAccepting makes every later Enqueue refuse with RefusedClosed.
func (e *Engine) StopAccepting() { e.closing = true }

// Accepting reports whether StopAccepting has not been called.
func (e *Engine) Accepting() bool { return !e.closing }

// Enqueue admits j, described by d and carrying the times tm (nil: none),
// at now: it
// gets its sequence number and is queued (or delayed, delay.go), or
// started at once when nothing else is pending and it is admissible (then
// j.State() is StateRunning), and Enqueue returns nil.
// A refused job changes nothing but the rejection counts. O(log n).
func (e *Engine) Enqueue(j *Job, d *Desc, tm *Times, now int64) *Refusal {
	if tm == nil {
		tm = &noTimes
	}
	t := e.anyType
	if d.Type != "" {
		if t = e.types[d.Type]; t == nil {
			e.counters.RejectedUnknownType++
			return &Refusal{Reason: RefusedUnknownType}
		}
	}
	if e.closing {
		t.stats.rejectedClosed++
		return &Refusal{Reason: RefusedClosed}
	}
	sub := now
	if tm.Submitted != 0 {
		sub = tm.Submitted
	}
	deadline := deadlineOf(t, tm.StartBy, sub)
	if deadline > 0 && deadline <= max(now, tm.NotBefore) && tm.Submitted == 0 {
		return &Refusal{Reason: RefusedNeverStarts, Deadline: deadline}
	}
	var own []need
	// A job's own needs are checked even with no resources at all: one it
	// names is unknown then. A type's were checked by its configuration.
	if (e.resources != nil || len(tm.Needs) > 0) && (tm.Needs != nil || t.needs != nil) {
		var r *Refusal
		if own, r = e.checkNeeds(t, tm.Needs); r != nil {
			return r
		}
	}
	if e.cfg.MaxQueue > 0 && e.npending+e.naside+e.reserved >= e.cfg.MaxQueue && tm.Submitted == 0 {
		t.stats.rejectedFull++
		return &Refusal{Reason: RefusedFull, Limit: e.cfg.MaxQueue, Size: e.npending + e.naside + e.reserved}
	}
	// Peek at the key: a refused submission must not create one.
	k := e.anyKey
	if d.Key != "" {
		k = e.keys[d.Key]
	}
	// A key not yet seen has no job queued: only jobs being written for it
	// can fill it.
	if (k != nil && k.cfg.MaxPending > 0 || k == nil && len(e.reservedKeys) > 0) && tm.Submitted == 0 {
		if r := e.keyRoom(k, d.Key, 1); r != nil {
			t.stats.rejectedFull++
			return r
		}
	}
	// Forget what has been idle too long, then take the key's record: a
	// key past its TTL comes back brand-new, not as its forgotten record.
	stale := k != nil && k.idle && now-k.idleSince >= e.cfg.IdleTTL
	e.forget(now)
	if k == nil || stale {
		k = e.keyOrNew(d.Key)
	}
	e.unmarkIdle(k)
	j.id = d.ID
	j.base = uint8(t.priority)
	if d.Priority != 0 {
		j.base = uint8(clampPriority(d.Priority))
	}
	e.seq++
	j.seq, j.sub, j.uidx = e.seq, sub, -1
	j.lane, j.key = e.laneOf(t, k, now), k
	if tm.Replica != "" {
		e.bind(j, tm.Replica)
	}
	if own != nil {
		e.keepNeeds(j, own)
	}
	e.counters.Submitted++
	if e.obs != nil {
		e.obs.Submitted(j, now)
	}
	if tm.NotBefore > now || tm.After != nil || e.npausing > 0 && j.paused() {
		if e.setAside(j, tm, deadline, now) {
			return nil
		}
	}
	e.join(j, sub, now)
	if e.npending == 1 && e.admissible(j) && tm.Submitted == 0 {
		// Nothing else waits: the order has nothing to decide but the step.
		e.start(j, e.stepOf(j, now), now)
		if deadline > 0 {
			e.timersOf(j).deadlineAt = deadline // to bound its retries
		}
		return nil
	}
	if sub < now {
		e.requeue(j, now) // restored: not in submission order
	} else {
		e.queue(j, now)
	}
	if deadline > 0 {
		e.setDeadline(j, deadline)
	}
	return nil
}

// admitType returns the type named name, or the refusal of a job of it:
// the type is unknown, or the engine no longer accepts work; each counted
// as a refusal. Hold and Adopt call it and name; Enqueue, on the path of
// every job, does the same inline, where even the inlined calls cost it
// instructions (scripts/ir.sh).
func (e *Engine) admitType(name string) (*typeState, *Refusal) {
	t := e.anyType
	if name != "" {
		if t = e.types[name]; t == nil {
			e.counters.RejectedUnknownType++
			return nil, &Refusal{Reason: RefusedUnknownType}
		}
	}
	if e.closing {
		t.stats.rejectedClosed++
		return nil, &Refusal{Reason: RefusedClosed}
	}
	return t, nil
}

// name gives j, described by d, of type t, being admitted, its identity
// but its lane: its ID, base priority, sequence number and submission
// time sub.
func (e *Engine) name(j *Job, d *Desc, t *typeState, sub int64) {
	j.id = d.ID
	j.base = uint8(t.priority)
	if d.Priority != 0 {
		j.base = uint8(clampPriority(d.Priority))
	}
	e.seq++
	j.seq, j.sub, j.uidx = e.seq, sub, -1
}

// keepNeeds keeps own, j's needs in place of its type's.
func (e *Engine) keepNeeds(j *Job, own []need) {
	if e.ownNeeds == nil {
		e.ownNeeds = make(map[*Job][]need)
	}
	e.ownNeeds[j] = own
	e.nown++
}

// setAside sets aside an accepted job that has a gate of its own to wait
// for, in their order: a not-before time, dependencies, a pause; a
// dependency that failed already ends it. It reports false if none holds
// the job after all: it goes on to the queue.
func (e *Engine) setAside(j *Job, tm *Times, deadline, now int64) bool {
	if tm.After != nil {
		if dep := e.link(j, tm.After); dep != nil {
			e.aside(j)
			e.block(j)
			e.failDependant(j, dep, now)
			if j.is(flagLinked) {
				e.resolve(j, DependencyFailed, now)
			}
			return true
		}
	}
	switch {
	case tm.NotBefore > now:
		e.delay(j, tm.NotBefore)
		if tm.Submitted != 0 && tm.Submitted < tm.NotBefore {
			// Restored backing off: its aging clock runs from Submitted.
			// (One that never started has its clock start at NotBefore.)
			e.timed[j].retry = true
			j.at = j.lane.stoodAt(now) - e.restoredStood(j, tm, now)
		}
	case e.waitsForDeps(j):
		e.aside(j)
		e.block(j)
		j.at = j.lane.stoodAt(now) // its aging clock runs, but stands while its lane is paused
		if tm.Submitted != 0 {
			j.at -= e.restoredStood(j, tm, now)
		}
	case j.paused():
		e.aside(j)
		at := now
		if tm.Submitted != 0 {
			at -= e.restoredStood(j, tm, now) // its clock stopped when the pause began
		}
		e.park(j, at)
	default:
		return false
	}
	if deadline > 0 {
		e.setDeadline(j, deadline)
	}
	return true
}

// join counts an accepted job among the pending ones at now: its flow
// becomes active and its key busy if they were not. Its aging clock
// starts at sub: its submission, or the end of its delay.
func (e *Engine) join(j *Job, sub, now int64) {
	l := j.lane
	k, f, t := l.key, l.flow, l.typ
	j.sub = sub
	if f.pending == 0 && f.running == 0 {
		e.activate(f)
	}
	e.npending++
	k.pending++
	f.pending++
	t.pending++
	e.rebusy(k, ReasonRebalance, now) // the key may have work again
}

// NeedsRefusal returns the refusal Enqueue would give a job of type name
// (registered) that needs needs (nil: its type's) for them: a resource not
// configured, or more units than one has; nil if they fit. O(needs).
func (e *Engine) NeedsRefusal(name string, needs []Need) *Refusal {
	t := e.types[name]
	if t == nil || e.resources == nil && len(needs) == 0 || needs == nil && t.needs == nil {
		return nil
	}
	_, r := e.checkNeeds(t, needs)
	return r
}

// checkNeeds resolves a job's own needs (nil: its type's) and checks them
// against the resources: own is what it needs in place of its type's.
func (e *Engine) checkNeeds(t *typeState, needs []Need) (own []need, r *Refusal) {
	resolved := t.needs
	if needs != nil {
		var unknown string
		if own, unknown = e.resolveNeeds(needs); unknown != "" {
			return nil, &Refusal{Reason: RefusedUnknownResource, Resource: unknown}
		}
		resolved = own
	}
	if n, ok := tooMuch(resolved); ok {
		return nil, &Refusal{Reason: RefusedTooMuch, Resource: n.r.name, Limit: n.r.capacity, Size: n.units}
	}
	return own, nil
}

// TakeSeq returns a sequence number no job of this engine has or will
// have: for a record the caller keeps outside the engine (a dead job read
// back from a store) that must be named as jobs are.
func (e *Engine) TakeSeq() uint64 {
	e.seq++
	return e.seq
}

// Room reports whether n more jobs, perKey[k] of them for key k, pass the
// admission limits now (MaxQueue, each key's MaxPending): nil, or the
// refusal the first that does not would get. It changes nothing: a caller
// that must write jobs down before it enqueues them (a durable store)
// asks first, then enqueues them with Times.Submitted. O(len(perKey)).
func (e *Engine) Room(n int, perKey map[string]int) *Refusal {
	if e.closing {
		return &Refusal{Reason: RefusedClosed}
	}
	if q := e.npending + e.naside + e.reserved; e.cfg.MaxQueue > 0 && q+n > e.cfg.MaxQueue {
		return &Refusal{Reason: RefusedFull, Limit: e.cfg.MaxQueue, Size: q}
	}
	for name, m := range perKey {
		if r := e.keyRoom(e.keys[name], name, m); r != nil {
			return r
		}
	}
	return nil
}

// keyRoom returns the refusal key name's MaxPending gives m more jobs, or
// nil if they fit; k is its record, nil if the engine has none.
func (e *Engine) keyRoom(k *keyState, name string, m int) *Refusal {
	var max, size int
	if k != nil {
		max, size = k.cfg.MaxPending, k.pending+k.aside+e.reservedOf(name)
	} else {
		max, size = e.defaultOf(name).MaxPending, e.reservedOf(name)
	}
	if max > 0 && size+m > max {
		return &Refusal{Reason: RefusedKeyFull, Limit: max, Size: size, Key: name}
	}
	return nil
}

// Reserve counts n jobs, perKey[k] of them for key k, against the
// admission limits until Unreserve: jobs a caller admitted (Room) and is
// writing down before it enqueues them with Times.Submitted, so that
// others admitted meanwhile, Enqueue's included, find the room taken.
// O(len(perKey)).
func (e *Engine) Reserve(n int, perKey map[string]int) {
	e.reserved += n
	if e.reservedKeys == nil {
		e.reservedKeys = make(map[string]int)
	}
	for name, m := range perKey {
		e.reservedKeys[name] += m
	}
}

// Unreserve gives back what Reserve counted: the jobs are queued, or
// were not written. O(len(perKey)).
func (e *Engine) Unreserve(n int, perKey map[string]int) {
	e.reserved -= n
	for name, m := range perKey {
		if e.reservedKeys[name] -= m; e.reservedKeys[name] <= 0 {
			delete(e.reservedKeys, name)
		}
	}
}

// reservedOf returns the jobs reserved for key name.
func (e *Engine) reservedOf(name string) int {
	if len(e.reservedKeys) == 0 {
		return 0 // the common case, without a look-up
	}
	return e.reservedKeys[name]
}

// queue shows a joined job to the dispatcher.
func (e *Engine) queue(j *Job, now int64) {
	e.show(j, now)
	if e.aging.on && e.aging.grace > 0 {
		e.grace.push(j)
	}
}

// forget drops idle keys and unused cost estimates past IdleTTL.
func (e *Engine) forget(now int64) {
	if e.idleHead != nil {
		e.forgetIdle(now)
	}
	e.costs.expire(now, e.cfg.IdleTTL)
}

// Next starts the first admissible job by the order and returns it, or
// returns nil if no pending job can start now. The caller runs the job
// and calls Finish when it ends. O(log n) amortised, plus the types of a
// tier and the keys with reservations.
func (e *Engine) Next(now int64) *Job {
	if e.npending == 0 || e.full() {
		return nil // the common answer to the last call of a dispatch
	}
	if e.aging.on && e.aging.grace > 0 {
		e.endGrace(now)
		e.endLateGrace(now)
	}
	j, how := e.pick(now)
	if j == nil {
		return nil
	}
	e.start(j, how, now)
	return j
}

// CanStart reports whether Next may start a job: something is pending and
// a slot is free. O(1); a caller calls it before Next to spare the call
// that would answer nil, as the last of every dispatch does.
func (e *Engine) CanStart() bool { return e.npending > 0 && !e.full() }

// Finish ends a running job. With NotRun its function did not run (its
// caller gave up as it started), so no cost is learnt. O(log n). j must
// not be a held record (held.go), which EndHeld ends: Finish, on the path
// of every job, does not check.
func (e *Engine) Finish(j *Job, o Outcome, now int64) {
	e.finish(j, o, now)
}

// Cancel takes a job that has not started out of the queue and ends it,
// as not run, and reports whether other jobs may start now: it had
// claimed a resource (resources.go). O(log n).
func (e *Engine) Cancel(j *Job, now int64) bool {
	if j.Elsewhere() {
		panic("engine: Cancel of a held record: EndHeld ends it")
	}
	e.unblocked = false
	e.removeQueued(j, now)
	return e.unblocked
}

// Raise raises the base priority of waiting job j to p (clamped), if that
// is higher, at now: a duplicate that joined it asked for more. O(log n).
func (e *Engine) Raise(j *Job, p int, now int64) {
	b := uint8(clampPriority(p))
	if b <= j.base {
		return
	}
	switch j.state {
	case StateQueued:
		e.hide(j)
		j.base = b
		e.show(j, now)
	case StateParked:
		w := e.gateOf(j).waits[j.lane]
		e.unfileHeld(w, j)
		j.base = b
		e.fileHeld(w, j, now)
	case StateDelayed, StatePaused, StateBlocked:
		j.base = b // in no heap
	}
}

// Pending returns the number of jobs waiting, queued or parked (the
// delayed ones are in Summary).
func (e *Engine) Pending() int { return e.npending }

// Running returns the number of jobs holding a slot.
func (e *Engine) Running() int { return e.nrunning }

// Idle reports whether nothing is pending or running, and no held record
// (Hold) waits or runs elsewhere: a caller that waits for the engine to
// drain waits for those too.
func (e *Engine) Idle() bool {
	return e.npending == 0 && e.naside == 0 && e.nrunning == 0 && len(e.elsewhere) == 0
}

// runningJob is a running job, the conflict lock it holds, if any, and
// its key's weight when it started, at which its charge is corrected when
// it stops: kept here rather than in every job's record, where the 8
// bytes went to the job's key (Job.key).
type runningJob struct {
	j      *Job
	lock   *conflictLock
	weight float64
}

// RunningJobs returns the running jobs, in no order the caller may rely on
// but this: the jobs started since the last call of Enqueue, Finish or
// Cancel come last, in the order they started. O(running).
func (e *Engine) RunningJobs() []*Job {
	out := make([]*Job, len(e.running))
	for i, r := range e.running {
		out[i] = r.j
	}
	return out
}

// EachRunning calls f with each running job, in no order the caller may
// rely on. O(r); it allocates nothing. f may read the engine, not change
// it.
func (e *Engine) EachRunning(f func(*Job)) {
	for _, r := range e.running {
		f(r.j)
	}
}

// PendingJobs returns every job not yet started, delayed ones included,
// in no particular order. O(n).
func (e *Engine) PendingJobs() []*Job {
	var out []*Job
	e.eachPending(func(j *Job) bool { out = append(out, j); return true })
	return out
}

// Find returns the job numbered seq if it is pending or running, else nil.
// O(n) in the jobs pending, without allocating, and it stops at the job:
// for an operator's call, not for a path every job takes.
func (e *Engine) Find(seq uint64) *Job {
	for _, r := range e.running {
		if r.j.seq == seq {
			return r.j
		}
	}
	var found *Job
	e.eachPending(func(j *Job) bool {
		if j.seq == seq {
			found = j
		}
		return found == nil
	})
	return found
}

// eachPending calls f with every job not yet started, delayed ones
// included, in no particular order, until f returns false; it reports
// whether f never did. O(n).
func (e *Engine) eachPending(f func(*Job) bool) bool {
	for _, k := range e.keys {
		for _, l := range k.lanes {
			if !eachInLane(l, f) {
				return false
			}
		}
		if !eachHeld(&k.cap, f) || !eachOf(k.pausedJobs, f) {
			return false
		}
	}
	for _, t := range e.types {
		if !eachOf(t.pausedJobs, f) {
			return false
		}
	}
	for _, lk := range e.conflicts {
		if !eachHeld(&lk.gate, f) {
			return false
		}
	}
	for _, r := range e.resources {
		for _, g := range r.gates() {
			if !eachHeld(g, f) {
				return false
			}
		}
	}
	if e.replicated {
		for _, t := range e.types {
			if !eachHeld(&t.rgate, f) {
				return false
			}
		}
		for _, r := range e.replicaByName {
			if !eachHeld(&r.gate, f) {
				return false
			}
		}
	}
	for j := range e.timed {
		if j.state == StateDelayed && !f(j) {
			return false
		}
	}
	for j := range e.deps {
		if j.state == StateBlocked && !f(j) {
			return false
		}
	}
	return true
}

// eachOf calls f with the jobs of js until f returns false; it reports
// whether f never did.
func eachOf(js []*Job, f func(*Job) bool) bool {
	for _, j := range js {
		if !f(j) {
			return false
		}
	}
	return true
}

// eachHeld calls f with the jobs gate g holds until f returns false; it
// reports whether f never did.
func eachHeld(g *gate, f func(*Job) bool) bool {
	for _, w := range g.waits {
		if !eachInLane(&w.lane, f) {
			return false
		}
	}
	return true
}

// eachInLane calls f with the jobs queued in l's run and heaps until f
// returns false; it reports whether f never did.
func eachInLane(l *lane, f func(*Job) bool) bool {
	if !l.run.eachUntil(f) {
		return false
	}
	for _, h := range []*iheap.Keyed[*Job]{&l.fixed, &l.rising, &l.capped} {
		for i := 0; i < h.Len(); i++ {
			if j, _ := h.At(i); !f(j) {
				return false
			}
		}
	}
	return true
}

// appendHeld appends the jobs gate g holds.
func appendHeld(out []*Job, g *gate) []*Job {
	eachHeld(g, func(j *Job) bool { out = append(out, j); return true })
	return out
}

// appendLane appends the jobs queued in l's run and heaps.
func appendLane(out []*Job, l *lane) []*Job {
	eachInLane(l, func(j *Job) bool { out = append(out, j); return true })
	return out
}

func appendJobs(out []*Job, h *iheap.Keyed[*Job]) []*Job {
	for i := 0; i < h.Len(); i++ {
		j, _ := h.At(i)
		out = append(out, j)
	}
	return out
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func clampPriority(p int) int { return min(max(p, 0), 100) }

func resolveKey(c Key) Key {
	if c.Weight == 0 {
		c.Weight = 1
	}
	return c
}
