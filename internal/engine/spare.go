package engine

import "slices"

// Spare lanes. A key that goes idle keeps its lanes, so that when it gets
// work again, as a key serving one request at a time does at every
// request, its lane is there. But it offers them to other keys: each
// lane goes on its type's spare list (markIdle), and a key that needs a
// lane of that type takes the one at the end of the list (laneOf),
// usually offered by the key that went idle last, whose records are the
// likeliest in the cache.
//
// With many keys and few busy at once (10,000 keys, 1,000 jobs queued),
// a key's lane, its first flow and the lists holding them took about a
// kilobyte, kept for IdleTTL after the key's last job: tens of megabytes
// that every dispatch's cache misses, and the collector's marking, went
// through. Taking the spare lanes of keys gone idle keeps the lanes in
// use about as many as the keys with work, and making one allocates
// nothing.
//
// A type offers no more spare lanes than it has lanes in use, plus
// spareLanes: a lane offered past that is let go (releaseLane), so
// that a burst of keys that drained does not keep a lane for each. An
// idle key's lanes are therefore all spare, or gone; a lane taken or let
// go leaves its key with its flows and their virtual times, and a lane
// made for it again starts its paused time from then (stood.go): no job
// set aside keeps one, as the key is idle.
//
// A job that ended, or a held record (held.go), keeps a pointer to its
// lane after it went to another key: it reads its type and engine from
// it, which a lane keeps, and its key from Job.key.

// spareLanes is how many spare lanes a type offers beyond its lanes in
// use.
const spareLanes = 64

// offerLanes offers the lanes of k, which has gone idle, to other keys:
// each goes on its type's spare list, or is let go if the list is full.
// O(lanes of k).
func (e *Engine) offerLanes(k *keyState) {
	for i := len(k.lanes) - 1; i >= 0; i-- { // releaseLane takes k.lanes[i] out
		if l := k.lanes[i]; l.spareIdx < 0 && !l.typ.offer(l) {
			e.releaseLane(l)
		}
	}
}

// offer puts l on t's spare list and reports true, or reports false if
// the list is full: as long as the lanes in use, plus spareLanes.
func (t *typeState) offer(l *lane) bool {
	if 2*len(t.spare) >= len(t.all)+spareLanes {
		return false
	}
	l.spareIdx = len(t.spare)
	t.spare = append(t.spare, l)
	return true
}

// unspare takes l off t's spare list: its key has work again, or lets
// it go. O(1).
func (t *typeState) unspare(l *lane) {
	last := len(t.spare) - 1
	if i := l.spareIdx; i != last { // usually last: the key went idle last
		m := t.spare[last]
		t.spare[i], m.spareIdx = m, i
	}
	t.spare[last] = nil
	t.spare = t.spare[:last]
	l.spareIdx = -1
}

// takeSpare takes the spare lane at the end of t's list from its key,
// for another key, or returns nil if there is none. The lane keeps its place
// in t.all; laneOf makes it the new key's. O(lanes and tiers of the key
// it came from).
func (e *Engine) takeSpare(t *typeState) *lane {
	n := len(t.spare)
	if n == 0 {
		return nil
	}
	l := t.spare[n-1]
	t.unspare(l)
	e.detachLane(l)
	return l
}

// releaseLane lets go of l, an idle key's lane: it leaves its key and
// its type. O(lanes and tiers of its key).
func (e *Engine) releaseLane(l *lane) {
	t := l.typ
	if l.spareIdx >= 0 {
		t.unspare(l)
	}
	e.detachLane(l)
	t.all = swapRemove(t.all, l.allIdx, func(x *lane, i int) { x.allIdx = i })
}

// detachLane takes l, empty, out of its key's and flow's lists and of
// the lanes whose paused time is kept.
func (e *Engine) detachLane(l *lane) {
	k, f := l.key, l.flow
	i, last := slices.Index(k.lanes, l), len(k.lanes)-1
	k.lanes[i], k.laneTypes[i] = k.lanes[last], k.laneTypes[last]
	k.lanes[last], k.laneTypes[last] = nil, nil
	k.lanes, k.laneTypes = k.lanes[:last], k.laneTypes[:last]
	i, last = slices.Index(f.lanes, l), len(f.lanes)-1
	f.lanes[i], f.lanes[last] = f.lanes[last], nil
	f.lanes = f.lanes[:last]
	e.dropStood(l)
}
