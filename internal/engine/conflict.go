package engine

import "slices"

// Conflict groups. Two jobs conflict when their types share a non-empty
// conflict group and the jobs share an ID: at most one of them runs at a
// time. Each (group, ID) with a job running or waiting has a lock, a gate
// (gates.go): shut while a job holding it runs, open while its waiters
// compete. A queued job that finds the lock shut is held by it, out of
// sight, holding no slot; when the holder ends the lock opens and its
// waiters compete as they are, and the next holder's start shuts it again.
// A holder's end and the next start thus cost O(L log n) for the L lanes
// the waiters come from, however many they are: with one client's
// thousand clones of one repository, L is 1.
//
// The order never starts a job whose lock is held, but Adopt starts a job
// whatever holds it (adopt.go): a new leader may learn of two jobs of one
// (group, ID) running, granted by leaders that disagreed. The lock then
// has more than one holder, and stays shut until the last of them ends;
// the normal path pays one branch for it as a job starts and one as it
// ends.

type conflictKey struct {
	group string
	id    string
}

// conflictLock is the lock of one (group, ID).
type conflictLock struct {
	gate
	key    conflictKey
	holder *Job // running; nil while the waiters compete
	// more are its other running holders, adopted while it was held:
	// almost always none.
	more []*Job
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

// acquire makes j, starting, the holder of its lock, which shuts it, and
// returns the lock, or nil if j's type has no conflict group. A job
// adopted while the lock is held becomes one more holder.
func (e *Engine) acquire(j *Job) *conflictLock {
	g := j.lane.typ.cfg.ConflictGroup
	if g == "" {
		return nil
	}
	k := conflictKey{g, j.id}
	lk := e.conflicts[k]
	if lk == nil {
		lk = e.newLock(k)
		e.conflicts[k] = lk
	}
	if lk.holder != nil { // only Adopt starts a job whose lock is held
		lk.more = append(lk.more, j)
		return lk
	}
	lk.holder = j
	e.shut(&lk.gate)
	return lk
}

// release ends the hold of job j, whose attempt ended, on lock lk (nil if
// it had none): the lock opens, or goes if no job waits on it, unless
// another holder still runs.
func (e *Engine) release(lk *conflictLock, j *Job) {
	if lk == nil {
		return
	}
	if len(lk.more) > 0 {
		lk.drop(j)
		return
	}
	lk.holder = nil
	if len(lk.waits) == 0 {
		delete(e.conflicts, lk.key)
		e.spareLock = lk
		return
	}
	e.open(&lk.gate)
}

// newLock returns a lock of k: the last lock let go (release,
// dropLockIfUnused) if none was made since, else a new one. With a
// conflict group most starts make a lock and most ends let one go: made
// new each time, the locks would be an allocation a job, which the
// collector pays for by going through the whole queue more often. A lock
// let go holds no job, waiting or running (stop drops the running entry
// before it releases), so nothing refers to it any more.
func (e *Engine) newLock(k conflictKey) *conflictLock {
	lk := e.spareLock
	if lk == nil {
		return &conflictLock{key: k}
	}
	e.spareLock = nil
	*lk = conflictLock{gate: gate{waits: lk.waits}, key: k, more: lk.more[:0]}
	return lk
}

// dropLockIfUnused forgets j's lock once nothing holds or waits on it.
func (e *Engine) dropLockIfUnused(j *Job) {
	if lk := e.lockOf(j); lk != nil && lk.holder == nil && len(lk.waits) == 0 {
		delete(e.conflicts, lk.key)
		e.spareLock = lk
	}
}

// drop takes j out of the holders of lk, which has more than one: the
// lock stays held, by another. O(holders).
func (lk *conflictLock) drop(j *Job) {
	last := len(lk.more) - 1
	if lk.holder == j {
		lk.holder = lk.more[last]
	} else {
		lk.more[slices.Index(lk.more, j)] = lk.more[last]
	}
	lk.more[last] = nil
	lk.more = lk.more[:last]
}
