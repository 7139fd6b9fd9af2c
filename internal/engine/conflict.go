package engine

import "github.com/fairsched/fairsched/internal/iheap"

// Conflict groups. Two jobs conflict when their types share a non-empty
// conflict group and the jobs share an ID: at most one of them runs at a
// time. Each (group, ID) with a job running or waiting has a lock.
//
// A queued job found blocked by the lock's holder is parked on the lock,
// out of every order, holding no slot. It waits in a wait lane: the lock
// keeps one per lane its waiters come from, a lane of its own with the
// same heaps, so the waiters of one lane stay in that lane's order as they
// age. A wait lane is detached while the lock is held. When the holder
// ends, each wait lane is attached to its lane: the lane's first job is
// then the first of its own and of its attached wait lanes (lane.first),
// and the lane is ready if either has jobs. The waiters thus compete by
// the full order again, without being moved: one of them starts and takes
// the lock, which detaches the wait lanes again. For the urgent step, an
// attached wait lane with aged waiters is filed in its type's openWaits
// heap by its most urgent one, beside the type's aged heap.
//
// A holder's end and the next holder's start each cost O(L log n) for the
// L lanes the lock's waiters come from, whatever their number: with one
// client's thousand clones of one repository, L is 1.

type conflictKey struct {
	group string
	id    string
}

// conflictLock is the lock of one (group, ID).
type conflictLock struct {
	key    conflictKey
	holder *Job                // running; nil while the waiters compete
	waits  map[*lane]*waitLane // by the lane the waiters come from
}

// waitLane holds the waiters of one lock that come from one lane, in
// that lane's order. Its jobs are StateParked, filed in its heaps as in a
// lane; their uidx is their handle in aged.
type waitLane struct {
	lane                      // the heaps; lane.n counts the waiters
	lock    *conflictLock     //
	of      *lane             // the lane the waiters come from
	aged    iheap.Keyed[*Job] // the waiters past their grace period, in urgent order
	attIdx  int               // position in of.attached, -1 when detached
	openIdx int               // handle in typ.openWaits, -1 when not there
}

// lockOf returns the lock of j's (group, ID), or nil if j's type has no
// conflict group or the lock is not there. A pending job keeps no pointer
// to its lock, which would cost eight bytes on every queued job; a running
// one's is kept beside it in the running list.
func (e *Engine) lockOf(j *Job) *conflictLock {
	g := j.lane.typ.cfg.ConflictGroup
	if g == "" {
		return nil
	}
	return e.conflicts[conflictKey{g, j.id}]
}

// conflict returns the lock whose running holder blocks j, or nil.
func (e *Engine) conflict(j *Job) *conflictLock {
	if lk := e.lockOf(j); lk != nil && lk.holder != nil {
		return lk
	}
	return nil
}

// hold makes j, starting, the holder of its lock, detaching the lock's
// wait lanes, and returns the lock, or nil if j's type has no conflict
// group. O(L log n) for the L wait lanes.
func (e *Engine) hold(j *Job) *conflictLock {
	g := j.lane.typ.cfg.ConflictGroup
	if g == "" {
		return nil
	}
	k := conflictKey{g, j.id}
	lk := e.conflicts[k]
	if lk == nil {
		lk = &conflictLock{key: k} // waits is made for its first waiter
		e.conflicts[k] = lk
	}
	lk.holder = j
	for _, w := range lk.waits {
		e.detach(w)
	}
	return lk
}

// release ends the hold of a job that ended on lock lk (nil if it had
// none): the lock's waiters compete again, or the lock goes if none
// waits. O(L log n).
func (e *Engine) release(lk *conflictLock) {
	if lk == nil {
		return
	}
	lk.holder = nil
	if len(lk.waits) == 0 {
		delete(e.conflicts, lk.key)
		return
	}
	for _, w := range lk.waits {
		e.attach(w)
	}
}

// parkOnLock moves a queued job blocked by lk out of its lane.
func (e *Engine) parkOnLock(j *Job, lk *conflictLock, now int64) {
	e.hide(j)
	e.waitOn(j, lk, now)
}

// waitOn files a job that is in no order among lk's waiters, held: its
// wait lane is detached.
func (e *Engine) waitOn(j *Job, lk *conflictLock, now int64) {
	w := lk.waits[j.lane]
	if w == nil {
		if lk.waits == nil {
			lk.waits = map[*lane]*waitLane{}
		}
		l := j.lane
		w = &waitLane{lane: *newLane(e, l.typ, l.key, l.flow), lock: lk, of: l, attIdx: -1, openIdx: -1}
		w.aged = iheap.NewKeyed(jobSetUIdx)
		lk.waits[l] = w
	}
	j.state = StateParked
	e.fileWaiting(w, j, now)
}

// fileWaiting puts j in w's heaps as its phase at now calls for. A waiter
// counts as queued while its wait lane is attached, as parked otherwise.
func (e *Engine) fileWaiting(w *waitLane, j *Job, now int64) {
	w.insert(&e.aging, j, now)
	if e.aging.urgentOn() && e.aging.pastGrace(j.sub, now) {
		w.aged.Push(j.agedOrder(), j)
		e.refileOpen(w)
	}
	if w.attIdx >= 0 {
		w.of.nwaiting++
		e.nqueued++
		e.ready(w.of)
	} else {
		e.parkedConflict++
	}
}

// unfileWaiting takes j out of w's heaps.
func (e *Engine) unfileWaiting(w *waitLane, j *Job) {
	w.remove(j)
	if j.uidx >= 0 {
		w.aged.Remove(int(j.uidx))
		e.refileOpen(w)
	}
	if w.attIdx >= 0 {
		w.of.nwaiting--
		e.nqueued--
		if w.of.n+w.of.nwaiting == 0 {
			e.unready(w.of)
		}
	} else {
		e.parkedConflict--
	}
}

// unwait takes a waiter out of its lock (it starts, is cancelled, or is
// parked on its key's cap instead); the lock goes once nothing holds or
// waits on it.
func (e *Engine) unwait(j *Job) {
	lk := e.lockOf(j)
	w := lk.waits[j.lane]
	e.unfileWaiting(w, j)
	if w.n > 0 {
		return
	}
	if w.attIdx >= 0 {
		e.detach(w)
	}
	delete(lk.waits, j.lane)
	if lk.holder == nil && len(lk.waits) == 0 {
		delete(e.conflicts, lk.key)
	}
}

// regrace refiles a waiter whose grace period ended, as endGrace does a
// queued job.
func (e *Engine) regrace(j *Job, now int64) {
	w := e.lockOf(j).waits[j.lane]
	e.unfileWaiting(w, j)
	e.fileWaiting(w, j, now)
}

// attach makes w's waiters compete in their lane. O(log n).
func (e *Engine) attach(w *waitLane) {
	l := w.of
	w.attIdx = len(l.attached)
	l.attached = append(l.attached, w)
	l.nwaiting += w.n
	e.nqueued += w.n
	e.parkedConflict -= w.n
	e.ready(l)
	e.refileOpen(w)
}

// detach takes w's waiters out of their lane's sight. O(log n).
func (e *Engine) detach(w *waitLane) {
	l := w.of
	last := len(l.attached) - 1
	l.attached[w.attIdx] = l.attached[last]
	l.attached[w.attIdx].attIdx = w.attIdx
	l.attached[last] = nil
	l.attached = l.attached[:last]
	w.attIdx = -1
	l.nwaiting -= w.n
	e.nqueued -= w.n
	e.parkedConflict += w.n
	if l.n+l.nwaiting == 0 {
		e.unready(l)
	}
	e.refileOpen(w)
}

// refileOpen files w in its type's openWaits by its most urgent waiter
// while it is attached and has one, and takes it out otherwise.
func (e *Engine) refileOpen(w *waitLane) {
	ow := &w.typ.openWaits
	top, ok := w.aged.Top()
	switch want := ok && w.attIdx >= 0; {
	case want && w.openIdx < 0:
		ow.Push(top.agedOrder(), w)
	case want:
		ow.Fix(w.openIdx, top.agedOrder())
	case w.openIdx >= 0:
		ow.Remove(w.openIdx)
	}
}
