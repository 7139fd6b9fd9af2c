package engine

import (
	"math"
	"slices"

	"github.com/fairsched/fairsched/internal/iheap"
)

// The queue in order, a page at a time, for an admin page that polls it.
//
// The engine keeps no global list of its pending jobs, and sorting them
// all for a page would cost O(n log n) under the caller's lock. It keeps
// orders instead: per type, the urgent heap and the ready lanes by their
// flow's virtual time; per lane, its jobs by effective priority. The order
// the dispatcher ranks the pending jobs by is a merge of those, so a page
// of it is a lazy k-way merge: one heap (the merge) holds the candidates,
// at first the top of each heap and the front of each run; popping an
// entry of a binary heap pushes its two children, the only entries of
// that heap that can come next, and popping a run's pushes the next in
// the run. A heap of lanes is merged the same way, a lane's own heaps
// entering the merge when the lane is popped. Yielding m jobs touches
// O(m) entries, each O(log m) to merge, however long the queue.
//
// The order is pick's, ranked once at now, as the reference model ranks
// every pending job before it starts one (refmodel.Model.Order):
//
//  1. the urgent jobs, by score, then oldest;
//  2. the jobs of the keys below their reservation, the key furthest
//     below first, then by name; within a key by tier, effective priority,
//     then oldest;
//  3. the rest by tier, then their flow's (virtual time, stamp), then
//     effective priority, then oldest;
//
// each job at its first place. It ignores every limit: jobs at a cap, a
// conflict or a resource short of units are listed where the order puts
// them. It is the order the dispatcher would consider them in if slots
// were free and no start moved a flow's virtual time: each start charges
// its flow, so in practice keys take turns where the listing shows one
// key's jobs together. The first job listed is the one Next would start
// if no limit held it, and each flow's jobs are in the order they would
// start.
//
// Besides the lanes and heaps the fair order keeps in sight, the walk must
// find what gates keep out of it: the lanes of keys whose cap is shut
// (taken out of the type heaps) and the wait lanes of shut gates
// (detached). A shut key runs its cap or has an empty token bucket, and a
// shut conflict lock has a running holder, so they are found from the
// running jobs and the empty buckets, the resources' gates from the
// resources, and the replica gates from the types and the replicas'
// records: O(r + b + R + T + P) for r running jobs, b empty buckets, R
// resources, T types and P replicas' records, plus O(L) for the L lanes the shut gates hold jobs from,
// which enter the merge at once. The engine counts the shut keys
// (nkeysShut), so the search for them stops once it has found them all,
// and reads no running job's record when none is shut.
//
// The walk's buffers (Engine.walker) are kept from one page to the next,
// so that a page allocates nothing while the caller holds its lock.

// QueueOrder returns the jobs waiting in the engine's orders (queued, or
// held by a gate: not those set aside, delayed, paused or blocked), from
// position offset of the order above, at most limit of them. It first
// brings the aged orders up to date at now, as Next does: the jobs whose
// grace period ended move to the aged heaps, and those that reached the
// ceiling to the capped ones, which is why it may change the engine
// (never its decisions).
//
// O((offset+limit) log(offset+limit) + r + b + R + L + types + P), amortised
// over the aging moves: see above. Its length is at most Pending() - offset.
func (e *Engine) QueueOrder(now int64, offset, limit int) []*Job {
	var out []*Job
	e.EachInOrder(now, offset, limit, func(j *Job) { out = append(out, j) })
	return out
}

// EachInOrder calls f with each job QueueOrder(now, offset, limit) would
// return, in its order, and allocates nothing once the walk's buffers
// have grown to the page (they are kept for the next walk, unless the
// page was deep). f may read the engine, not change it nor walk it again.
func (e *Engine) EachInOrder(now int64, offset, limit int, f func(*Job)) {
	if limit <= 0 || offset < 0 || offset >= e.npending {
		return
	}
	w := &e.walker
	for _, j := range w.walk(e, now, offset, limit) {
		f(j)
	}
	w.reset()
}

// walkKept is the most entries of the merge a walk keeps for the next.
const walkKept = 1 << 12

// PausedJobs returns the jobs a pause set aside, which are in no order
// until it ends: those of the paused keys, by key name, then those of the
// paused types, by type name, each job in the list of the pause that set
// it aside, as that list keeps it; from position offset, at most limit
// of them. Its
// length is at most Summary().Paused - offset. O(p log p + t log t +
// limit) for p paused keys and t types: each list is skipped whole.
func (e *Engine) PausedJobs(offset, limit int) []*Job {
	var out []*Job
	e.EachPaused(offset, limit, func(j *Job) { out = append(out, j) })
	return out
}

// EachPaused calls f with each job PausedJobs(offset, limit) would return,
// in its order. f may read the engine, not change it.
func (e *Engine) EachPaused(offset, limit int, f func(*Job)) {
	if limit <= 0 || offset < 0 || offset >= e.npaused {
		return
	}
	take := func(list []*Job) bool {
		if offset >= len(list) {
			offset -= len(list)
			return false
		}
		n := min(len(list)-offset, limit)
		for _, j := range list[offset : offset+n] {
			f(j)
		}
		offset, limit = 0, limit-n
		return limit == 0
	}
	for _, name := range e.PausedKeys() {
		if k := e.keys[name]; k != nil && take(k.pausedJobs) {
			return
		}
	}
	for _, name := range sortedNames(e.types) {
		if take(e.types[name].pausedJobs) {
			return
		}
	}
}

// orderWalk is one QueueOrder; the engine keeps one (Engine.walker), so
// that its buffers serve the next walk.
type orderWalk struct {
	e     *Engine
	now   int64
	skip  int // jobs still to pass over before the page
	limit int

	merge []walkEntry // a binary min-heap by key
	hole  bool        // merge's top was taken (take), its place not yet filled
	units []walkUnit  // what the entries are in
	// The shut keys (their lanes are out of the type heaps) and the wait
	// lanes of shut gates (detached), found once.
	shutKeys []*keyState
	detached []*waitLane
	// reserved are the keys the reservations step listed: the fair step
	// passes over their lanes.
	reserved []*keyState
	// gates are the shut gates, and seen the keys among them, found once.
	gates []*gate
	seen  map[*keyState]bool
	// out is the page, handed to the caller's f once the walk is done.
	out []*Job
	// touched counts the entries pushed and popped, holes passed over
	// included: the walk's work, for the tests.
	touched int
}

// walkKey is an entry's place in the merge of one step. major is the
// step's outer order: none for the urgent step, the tier, highest first,
// for a reserving key, and the flow's (V, stamp) for the fair step. Within
// it, eff is the negated scaled priority (the uncapped score for the
// urgent step, the effective priority for the others), then seq the
// submission number.
type walkKey struct {
	major iheap.Key
	eff   int64
	seq   uint64
}

func (a walkKey) less(b walkKey) bool {
	if a.major != b.major {
		return a.major.Less(b.major)
	}
	if a.eff != b.eff {
		return a.eff < b.eff
	}
	return a.seq < b.seq
}

// What a walk entry stands for.
const (
	entryJob   uint8 = iota // a job at pos in its unit's jobs
	entryRun                // a job at pos in its unit's run
	entryLane               // a ready lane at pos in its unit's lanes, not yet opened
	entryWaits              // an attached wait lane at pos in its unit's waits, not yet opened
)

// phaseAged and phaseFresh mark the heaps of an urgent set (urgent.go),
// and the heaps of wait lanes by their tops, beside inFixed, inRising and
// inCapped.
const (
	phaseAged  uint8 = 254
	phaseFresh uint8 = 255
)

// walkEntry is an entry of the merge: a job, or a lane or wait lane not
// yet opened, at pos of its unit's heap or run. It holds no pointer, so
// that sifting the merge copies small words and no write barrier.
type walkEntry struct {
	key  walkKey
	unit int32 // in orderWalk.units
	pos  int32
	kind uint8
}

// walkUnit is a heap or run the merge draws entries from: one of jobs,
// run, lanes and waits; the jobs' heap is of phase, within major.
type walkUnit struct {
	major iheap.Key
	phase uint8
	jobs  *iheap.Keyed[*Job]
	run   *sortedRun
	lanes *iheap.Keyed[*lane]
	waits *iheap.Keyed[*waitLane]
}

// unit adds u to the units and returns its number.
func (w *orderWalk) unit(u walkUnit) int32 {
	w.units = append(w.units, u)
	return int32(len(w.units) - 1)
}

func (w *orderWalk) walk(e *Engine, now int64, offset, limit int) []*Job {
	if e.aging.on && e.aging.grace > 0 {
		e.endGrace(now)
		e.endLateGrace(now)
	}
	w.e, w.now, w.skip, w.limit, w.touched = e, now, offset, min(limit, e.npending-offset), 0
	w.out = w.out[:0]
	if c := 2*(offset+w.limit) + 16; cap(w.merge) < c {
		w.merge = make([]walkEntry, 0, c)
	}
	w.findShut()
	if e.aging.urgentOn() {
		w.urgentStep()
	}
	if !w.full() {
		w.reservedStep()
	}
	for _, t := range e.tiers {
		if w.full() {
			break
		}
		w.fairStep(t)
	}
	return w.out
}

// reset readies w for the next walk: it lets go of what the walk pointed
// to, and of buffers grown past walkKept.
func (w *orderWalk) reset() {
	clear(w.out)
	clear(w.units)
	clear(w.shutKeys)
	clear(w.detached)
	clear(w.reserved)
	clear(w.gates)
	if len(w.seen) > 0 {
		clear(w.seen)
	}
	w.e = nil
	w.out, w.merge, w.units = w.out[:0], w.merge[:0], w.units[:0]
	w.shutKeys, w.detached, w.reserved, w.gates = w.shutKeys[:0], w.detached[:0], w.reserved[:0], w.gates[:0]
	if cap(w.out) > walkKept || cap(w.merge) > 2*walkKept || cap(w.units) > walkKept || cap(w.detached) > walkKept {
		*w = orderWalk{}
	}
}

func (w *orderWalk) full() bool { return len(w.out) >= w.limit }

// emit lists j, or passes over it while the page has not begun.
func (w *orderWalk) emit(j *Job) {
	if w.skip > 0 {
		w.skip--
		return
	}
	w.out = append(w.out, j)
}

// findShut finds the shut keys and the detached wait lanes.
func (w *orderWalk) findShut() {
	e := w.e
	addKey := func(k *keyState) {
		if k.cap.shut && !w.seen[k] {
			if w.seen == nil { // made for the first: keys are seldom shut
				w.seen = map[*keyState]bool{}
			}
			w.seen[k] = true
			w.shutKeys = append(w.shutKeys, k)
			w.gates = append(w.gates, &k.cap)
		}
	}
	for _, r := range e.running {
		if lk := r.lock; lk != nil && lk.holder == r.j && lk.shut {
			w.gates = append(w.gates, &lk.gate)
		}
	}
	// A key is shut by its cap, so runs a job, or by its empty bucket.
	for i := 0; i < len(e.running) && len(w.shutKeys) < e.nkeysShut; i++ {
		addKey(e.running[i].j.lane.key)
	}
	for i := 0; i < e.rateline.Len() && len(w.shutKeys) < e.nkeysShut; i++ {
		if b, _ := e.rateline.At(i); b.key != nil {
			addKey(b.key)
		}
	}
	for _, r := range e.resources {
		for _, g := range r.gates() {
			if g.shut {
				w.gates = append(w.gates, g)
			}
		}
	}
	if e.replicated {
		for _, t := range e.types {
			if t.rgate.shut {
				w.gates = append(w.gates, &t.rgate)
			}
		}
		for _, r := range e.replicaByName {
			if r.gate.shut {
				w.gates = append(w.gates, &r.gate)
			}
		}
	}
	for _, g := range w.gates {
		for _, wl := range g.waits {
			w.detached = append(w.detached, wl)
		}
	}
	w.touched += len(e.running) + e.rateline.Len() + len(w.detached)
}

// urgentStep lists the urgent jobs, by score at now, then oldest: those
// of each type's urgent set (its aged heap as far as it reaches the
// threshold, and its jobs urgent in their grace period), of the attached
// wait lanes' (by openWaits and openFresh) and of the detached ones'.
func (w *orderWalk) urgentStep() {
	e := w.e
	w.merge, w.units = w.merge[:0], w.units[:0]
	for _, t := range e.tiers {
		for _, ty := range t.types {
			w.openUrgent(&ty.urgent)
			if ty.openWaits.Len() > 0 {
				w.pushWaits(w.unit(walkUnit{waits: &ty.openWaits, phase: phaseAged}), 0)
			}
			if ty.openFresh.Len() > 0 {
				w.pushWaits(w.unit(walkUnit{waits: &ty.openFresh, phase: phaseFresh}), 0)
			}
		}
	}
	for _, wl := range w.detached {
		w.openUrgent(&wl.urgent)
	}
	for len(w.merge) > 0 && !w.full() {
		x := w.take()
		u := &w.units[x.unit]
		switch x.kind {
		case entryWaits:
			wl, _ := u.waits.At(int(x.pos))
			w.pushWaits(x.unit, 2*int(x.pos)+1)
			w.pushWaits(x.unit, 2*int(x.pos)+2)
			if u.phase == phaseAged {
				w.pushUrgent(w.unit(walkUnit{jobs: &wl.urgent.aged, phase: phaseAged}), 0)
			} else {
				w.pushUrgent(w.unit(walkUnit{jobs: &wl.urgent.fresh, phase: phaseFresh}), 0)
			}
		default:
			j, _ := u.jobs.At(int(x.pos))
			w.pushUrgent(x.unit, 2*int(x.pos)+1)
			w.pushUrgent(x.unit, 2*int(x.pos)+2)
			w.emit(j)
		}
		w.settle()
	}
}

// openUrgent pushes the tops of an urgent set's two heaps.
func (w *orderWalk) openUrgent(u *urgentSet) {
	if u.aged.Len() > 0 {
		w.pushUrgent(w.unit(walkUnit{jobs: &u.aged, phase: phaseAged}), 0)
	}
	if u.fresh.Len() > 0 {
		w.pushUrgent(w.unit(walkUnit{jobs: &u.fresh, phase: phaseFresh}), 0)
	}
}

// urgentKey returns the place in the urgent order, at now, of the job
// filed under k in a heap of phase, and whether it is urgent: a fresh
// heap's jobs all are, by base; an aged heap's by score, and none below
// one that is not.
func (w *orderWalk) urgentKey(k iheap.Key, phase uint8) (walkKey, bool) {
	p := &w.e.aging
	if phase == phaseFresh {
		r := p.fixedRank(k.Hi)
		return walkKey{eff: -r.eff, seq: r.seq}, true
	}
	s := p.agedScore(agedKeyOf(k), w.now)
	return walkKey{eff: -s, seq: k.Lo}, s >= p.urgent*p.interval
}

// pushUrgent pushes the job at pos of unit u's heap, an urgent set's, if
// it is there and urgent.
func (w *orderWalk) pushUrgent(u int32, pos int) {
	un := &w.units[u]
	if pos >= un.jobs.Len() {
		return
	}
	_, k := un.jobs.At(pos)
	if key, ok := w.urgentKey(k, un.phase); ok {
		w.push(walkEntry{key: key, kind: entryJob, unit: u, pos: int32(pos)})
	}
}

// pushWaits pushes the wait lane at pos of unit u's heap (openWaits or
// openFresh), by its most urgent job of the heap's kind, if it is there
// and urgent.
func (w *orderWalk) pushWaits(u int32, pos int) {
	un := &w.units[u]
	if pos >= un.waits.Len() {
		return
	}
	_, k := un.waits.At(pos)
	if key, ok := w.urgentKey(k, un.phase); ok {
		w.push(walkEntry{key: key, kind: entryWaits, unit: u, pos: int32(pos)})
	}
}

// reservedStep lists the jobs of the keys below their reservation, the
// key furthest below first (e.reserving is by name, and the sort is
// stable): each key's lanes and the wait lanes that hold their jobs, by
// tier, then priority. Reserving keys are configured, so few.
func (w *orderWalk) reservedStep() {
	for _, k := range w.e.reserving {
		if k.belowReservation() && k.pending > 0 {
			w.reserved = append(w.reserved, k)
		}
	}
	slices.SortStableFunc(w.reserved, func(a, b *keyState) int {
		return (b.cfg.MinSlots - b.reserved) - (a.cfg.MinSlots - a.reserved)
	})
	for _, k := range w.reserved {
		if w.full() {
			return
		}
		w.merge, w.units = w.merge[:0], w.units[:0]
		for _, l := range k.lanes {
			major := iheap.Key{Hi: ^iheap.Int(int64(l.typ.tier.level))}
			w.open(l, major)
			for _, wl := range l.held {
				w.open(&wl.lane, major)
			}
		}
		w.drain()
	}
}

// isReserved reports whether the reservations step listed k's jobs.
func (w *orderWalk) isReserved(k *keyState) bool { return slices.Contains(w.reserved, k) }

// fairStep lists tier t's jobs by flow, then priority: the ready lanes
// through their types' heaps, lazily, and the shut keys' lanes and the
// detached wait lanes of the tier at once.
func (w *orderWalk) fairStep(t *tierState) {
	w.merge, w.units = w.merge[:0], w.units[:0]
	for _, ty := range t.types {
		if ty.lanes.Len() > 0 {
			w.pushLane(w.unit(walkUnit{lanes: &ty.lanes}), 0)
		}
	}
	for _, k := range w.shutKeys {
		if w.isReserved(k) {
			continue
		}
		for _, l := range k.lanes {
			if l.typ.tier == t {
				w.openLane(l)
			}
		}
	}
	for _, wl := range w.detached {
		if wl.typ.tier == t && !w.isReserved(wl.key) {
			w.open(&wl.lane, wl.flow.order())
		}
	}
	w.drain()
}

// openLane opens a lane's own jobs and those of its attached wait lanes,
// unless its key was listed by the reservations step.
func (w *orderWalk) openLane(l *lane) {
	if w.isReserved(l.key) {
		return
	}
	major := l.flow.order()
	w.open(l, major)
	for _, wl := range l.attached {
		w.open(&wl.lane, major)
	}
}

// pushLane pushes the ready lane at pos of unit u's heap, before every
// job of its flow.
func (w *orderWalk) pushLane(u int32, pos int) {
	h := w.units[u].lanes
	if pos >= h.Len() {
		return
	}
	_, k := h.At(pos)
	w.push(walkEntry{key: walkKey{major: k, eff: math.MinInt64}, kind: entryLane, unit: u, pos: int32(pos)})
}

// open pushes the first job of each of l's run and heaps (l a lane or a
// wait lane's), within major. It first moves the rising jobs that reached
// the ceiling to capped (settle), as head does, so that each heap yields its jobs
// by effective priority.
func (w *orderWalk) open(l *lane, major iheap.Key) {
	if l.n == 0 {
		return
	}
	l.settle(&w.e.aging, w.now)
	if !l.run.empty() {
		w.pushRun(w.unit(walkUnit{major: major, run: &l.run}), l.run.head)
	}
	if l.fixed.Len() > 0 {
		w.pushJob(w.unit(walkUnit{major: major, jobs: &l.fixed, phase: inFixed}), 0)
	}
	if l.rising.Len() > 0 {
		w.pushJob(w.unit(walkUnit{major: major, jobs: &l.rising, phase: inRising}), 0)
	}
	if l.capped.Len() > 0 {
		w.pushJob(w.unit(walkUnit{major: major, jobs: &l.capped, phase: inCapped}), 0)
	}
}

// empty reports whether the run holds no job.
func (r *sortedRun) empty() bool { return r.head == len(r.buf) }

// pushRun pushes the first job at or after i in unit u's run.
func (w *orderWalk) pushRun(u int32, i int) {
	r := w.units[u].run
	for ; i < len(r.buf) && r.buf[i].j == nil; i++ {
		w.touched++ // a hole
	}
	if i < len(r.buf) {
		rk := w.e.aging.runRank(r.buf[i].key, r.buf[i].sub, w.now)
		w.push(walkEntry{key: walkKey{w.units[u].major, -rk.eff, rk.seq}, kind: entryRun, unit: u, pos: int32(i)})
	}
}

// pushJob pushes the job at pos of unit u's heap, a lane heap.
func (w *orderWalk) pushJob(u int32, pos int) {
	un := &w.units[u]
	if pos >= un.jobs.Len() {
		return
	}
	_, k := un.jobs.At(pos)
	p := &w.e.aging
	var r rank
	switch un.phase {
	case inFixed:
		r = p.fixedRank(k.Hi)
	case inRising:
		r = rank{p.agedScore(agedKeyOf(k), w.now), k.Lo}
	case inCapped:
		r = rank{p.maxEff * p.interval, k.Hi}
	}
	w.push(walkEntry{key: walkKey{un.major, -r.eff, r.seq}, kind: entryJob, unit: u, pos: int32(pos)})
}

// drain lists the merge's jobs in order, expanding lanes as they come,
// until the page is full. An urgent job was listed by the urgent step.
func (w *orderWalk) drain() {
	p := &w.e.aging
	for len(w.merge) > 0 && !w.full() {
		x := w.take()
		var j *Job
		switch x.kind {
		case entryLane:
			l, _ := w.units[x.unit].lanes.At(int(x.pos))
			w.pushLane(x.unit, 2*int(x.pos)+1)
			w.pushLane(x.unit, 2*int(x.pos)+2)
			w.openLane(l)
			w.settle()
			continue
		case entryRun:
			j = w.units[x.unit].run.buf[x.pos].j
			w.pushRun(x.unit, int(x.pos)+1)
		default:
			j, _ = w.units[x.unit].jobs.At(int(x.pos))
			w.pushJob(x.unit, 2*int(x.pos)+1)
			w.pushJob(x.unit, 2*int(x.pos)+2)
		}
		w.settle()
		if !p.isUrgent(int(j.base), j.sub, w.now) {
			w.emit(j)
		}
	}
}

// push, take and settle keep the merge a binary min-heap by key, sifting
// a hole rather than swapping entries. take returns the top and leaves it
// in place, a hole: the next push fills it and sifts down, one sift where
// a pop and a push take two, and settle removes it if no push came. Keys are unique but for lanes of
// one flow, whose order among themselves does not change the jobs' (a
// lane's entry comes before every job of its flow), so the merge lists the
// same jobs in the same order whatever its shape.
func (w *orderWalk) push(x walkEntry) {
	w.touched++
	if w.hole {
		w.hole = false
		w.down(x)
		return
	}
	h := append(w.merge, walkEntry{})
	i := len(h) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !x.key.less(h[parent].key) {
			break
		}
		h[i] = h[parent]
		i = parent
	}
	h[i] = x
	w.merge = h
}

func (w *orderWalk) take() walkEntry {
	w.touched++
	w.hole = true
	return w.merge[0]
}

func (w *orderWalk) settle() {
	if !w.hole {
		return
	}
	w.hole = false
	h := w.merge
	n := len(h) - 1
	x := h[n]
	h[n] = walkEntry{}
	w.merge = h[:n]
	if n > 0 {
		w.down(x)
	}
}

// down puts x at the top of the merge, in place of the entry there, and
// sifts it down to its place.
func (w *orderWalk) down(x walkEntry) {
	h := w.merge
	n := len(h)
	i := 0
	for {
		m := 2*i + 1
		if m >= n {
			break
		}
		if r := m + 1; r < n && h[r].key.less(h[m].key) {
			m = r
		}
		if !h[m].key.less(x.key) {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = x
}
