package engine

import "github.com/fairsched/fairsched/internal/iheap"

// Gates. Everything that keeps a pending job from starting is a gate, and
// a gate keeps the jobs it blocks out of the dispatcher's sight until what
// blocks them changes (docs/design.md, Complexity). By how much they cover, gates come
// in three scopes:
//
//   - the global limit, and the caps of a tier and of a type, cover jobs
//     by the thousand and are few: pick checks them once per tier or type
//     and passes over the whole tier or type while they are shut, so their
//     jobs stay filed in their lanes;
//   - a key's cap covers the key's lanes: shutting it takes them out of
//     the fair orders (capKey), and opening it puts them back;
//   - a key's cap also holds the key's urgent jobs, which the urgent step
//     still finds through their types' urgent orders, and a conflict lock
//     holds the jobs that find it held: these are held by a gate, one job
//     at a time, in the one way below.
//
// A gate holds its jobs in wait lanes, one per lane they come from: a lane
// of their own, with the same heaps, so that they keep their lane's order
// as they age. While the gate is shut its wait lanes are detached, out of
// every order. When it opens they are attached to their lanes: a lane's
// first job is then the first of its own and of its attached wait lanes
// (lane.first), a lane is ready if either has jobs, and, for the urgent
// step, an attached wait lane with jobs in its urgent order is filed in
// its type's openWaits and openFresh heaps by its most urgent ones. The
// held jobs thus compete as if they were queued, without being moved; one
// that a step finds blocked again is held again, by whatever blocks it
// now. Shutting or opening a gate costs O(L log n) for the L lanes its
// jobs come from, however many jobs those are.
//
// A pause, a rate limit, a dependency, a not-before time, a named
// resource or replica capacity is one more gate of one of these scopes.

// gate is a key's cap or a conflict lock, as it holds jobs.
type gate struct {
	shut  bool
	waits map[*lane]*waitLane // by the lane the held jobs come from; made for the first
	res   *resource           // a resource's gates: the resource
	rep   *replica            // a replica's gate (replicas.go): the replica
}

// What holds a parked job: Job.held.
const (
	heldByKey      uint8 = iota + 1 // its key's cap: keyState.cap
	heldByLock                      // its conflict lock: conflictLock.gate
	heldByResource                  // a resource's gate (resources.go): Engine.resHeld
	heldByReplica                   // its replica's gate, or its type's (replicas.go)
)

// waitLane holds the jobs a gate holds that come from one lane, in that
// lane's order. Its jobs are StateParked, filed in its heaps as in a lane;
// their uidx is their handle in urgent.
type waitLane struct {
	lane               // the heaps; lane.n counts the jobs
	gate     *gate     //
	of       *lane     // the lane the jobs come from
	urgent   urgentSet // the jobs that are or may become urgent, in urgent order
	attIdx   int       // position in of.attached, -1 when detached
	heldIdx  int       // position in of.held
	openIdx  int       // handle in typ.openWaits, -1 when not there
	freshIdx int       // handle in typ.openFresh, -1 when not there
}

// len returns how many jobs g holds. O(L) for the L lanes they come from.
func (g *gate) len() int {
	n := 0
	for _, w := range g.waits {
		n += w.n
	}
	return n
}

// gateOf returns the gate that holds a parked job.
func (e *Engine) gateOf(j *Job) *gate {
	switch j.held {
	case heldByKey:
		return &j.lane.key.cap
	case heldByResource:
		return e.resHeld[j]
	case heldByReplica:
		if j.is(flagBound) {
			return &e.replicaByName[e.boundTo[j]].gate
		}
		return &j.lane.typ.rgate
	}
	return &e.lockOf(j).gate
}

// hold takes j, queued or held by another gate, out of sight into gate
// g, which is shut; by says which gate it is. O(log n).
func (e *Engine) hold(j *Job, g *gate, by uint8, now int64) {
	if j.state == StateQueued {
		e.hide(j)
	} else {
		e.unhold(j)
	}
	w := g.waits[j.lane]
	if w == nil {
		if g.waits == nil {
			g.waits = map[*lane]*waitLane{}
		}
		l := j.lane
		w = &waitLane{lane: *newLane(e, l.typ, l.key, l.flow, 0), gate: g, of: l, attIdx: -1, openIdx: -1, freshIdx: -1}
		w.urgent = newUrgentSet()
		g.waits[l] = w
		w.heldIdx = len(l.held)
		l.held = append(l.held, w)
	}
	j.state, j.held = StateParked, by
	if by == heldByResource {
		if e.resHeld == nil {
			e.resHeld = make(map[*Job]*gate)
		}
		e.resHeld[j] = g
	}
	e.fileHeld(w, j, now)
}

// unhold takes a held job out of its gate (it starts, is cancelled, or is
// held by another gate). O(log n).
func (e *Engine) unhold(j *Job) {
	g := e.gateOf(j)
	w := g.waits[j.lane]
	e.unfileHeld(w, j)
	by := j.held
	j.held = 0
	if by == heldByResource {
		delete(e.resHeld, j)
	}
	if w.n > 0 {
		return
	}
	if w.attIdx >= 0 {
		e.detach(w)
	}
	delete(g.waits, j.lane)
	j.lane.held = swapRemove(j.lane.held, w.heldIdx, func(x *waitLane, i int) { x.heldIdx = i })
	switch {
	case by == heldByLock:
		e.dropLockIfUnused(j)
	case g.rep != nil:
		e.dropReplicaIfUnused(g.rep)
	}
}

// fileHeld puts j in w's heaps as its phase at now calls for. A held job
// counts as queued while its wait lane is attached, as held otherwise.
func (e *Engine) fileHeld(w *waitLane, j *Job, now int64) {
	w.insert(&e.aging, j, now)
	if e.aging.mayBeUrgent(j, now) {
		w.urgent.file(&e.aging, j, now)
		e.refileOpen(w)
	}
	if w.attIdx >= 0 {
		w.of.nwaiting++
		e.nqueued++
		e.ready(w.of)
	} else {
		e.nheld++
	}
}

// unfileHeld takes j out of w's heaps.
func (e *Engine) unfileHeld(w *waitLane, j *Job) {
	w.remove(j)
	if j.uidx != -1 {
		w.urgent.unfile(j)
		e.refileOpen(w)
	}
	if w.attIdx >= 0 {
		w.of.nwaiting--
		e.nqueued--
		if w.of.n+w.of.nwaiting == 0 {
			e.unready(w.of)
		}
	} else {
		e.nheld--
	}
}

// regrace refiles a held job whose grace period ended, as endGrace does a
// queued one.
func (e *Engine) regrace(j *Job, now int64) {
	w := e.gateOf(j).waits[j.lane]
	e.unfileHeld(w, j)
	e.fileHeld(w, j, now)
}

// shut closes g: its jobs go out of sight. O(L log n).
func (e *Engine) shut(g *gate) {
	g.shut = true
	if len(g.waits) == 0 { // most gates hold nothing: spare the map's iteration
		return
	}
	for _, w := range g.waits {
		e.detach(w)
	}
}

// open opens g: its jobs compete again, from where they are. O(L log n).
func (e *Engine) open(g *gate) {
	g.shut = false
	if len(g.waits) == 0 {
		return
	}
	for _, w := range g.waits {
		e.attach(w)
	}
}

// attach makes w's jobs compete in their lane. O(log n).
func (e *Engine) attach(w *waitLane) {
	l := w.of
	w.attIdx = len(l.attached)
	l.attached = append(l.attached, w)
	l.nwaiting += w.n
	e.nqueued += w.n
	e.nheld -= w.n
	e.ready(l)
	e.refileOpen(w)
}

// detach takes w's jobs out of their lane's sight. O(log n).
func (e *Engine) detach(w *waitLane) {
	l := w.of
	l.attached = swapRemove(l.attached, w.attIdx, func(x *waitLane, i int) { x.attIdx = i })
	w.attIdx = -1
	l.nwaiting -= w.n
	e.nqueued -= w.n
	e.nheld += w.n
	if l.n+l.nwaiting == 0 {
		e.unready(l)
	}
	e.refileOpen(w)
}

// refileOpen files w in its type's openWaits by its most urgent aged job,
// and in openFresh by its most urgent job in its grace period, while it is
// attached and has one, and takes it out otherwise.
func (e *Engine) refileOpen(w *waitLane) {
	attached := w.attIdx >= 0
	refileBy(&w.typ.openWaits, w.openIdx, &w.urgent.aged, attached, w)
	refileBy(&w.typ.openFresh, w.freshIdx, &w.urgent.fresh, attached, w)
}

// refileBy files w, whose handle in open is idx, in open under the key of
// the top of h while want holds and h has one, and takes it out
// otherwise.
func refileBy(open *iheap.Keyed[*waitLane], idx int, h *iheap.Keyed[*Job], want bool, w *waitLane) {
	_, top, ok := h.TopKey()
	switch want = want && ok; {
	case want && idx < 0:
		open.Push(top, w)
	case want:
		open.Fix(idx, top)
	case idx >= 0:
		open.Remove(idx)
	}
}

// swapRemove removes s[i] by moving the last element there, which learns
// its new position through setIdx, and returns the shorter slice: the
// way every list of the engine that knows its elements' positions drops
// one. O(1).
func swapRemove[T any](s []T, i int, setIdx func(T, int)) []T {
	last := len(s) - 1
	s[i] = s[last]
	setIdx(s[i], i)
	var zero T
	s[last] = zero
	return s[:last]
}
