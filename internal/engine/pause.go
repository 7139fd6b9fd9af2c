package engine

import (
	"cmp"
	"math"
	"slices"
)

// Pause (docs/design.md, Pause). A paused key or job type sets its waiting jobs
// aside, as a not-before time does (delay.go): out of every order and
// every fair-share account, so that for allocation the key counts as one
// with no work and its share goes to the others at once. Its running jobs
// finish. Resuming it brings its jobs back as if they joined the queue
// then, so that its flows re-enter fair share like idle ones, except that
// a job's aging clock has stood still while it was paused: its submission
// time moves on by the time it stood (Job.at keeps when that began).
//
// A paused job is in the pausedJobs of the key or type whose pause set it
// aside. When that one is resumed and the other is paused too, the job
// moves to the other's list; otherwise it joins the queue. Jobs resumed at
// one instant join in submission order, the order in which a pause set
// them aside, so that flows activate and idle in an order that does not
// depend on where the jobs were kept.
//
// Pausing finds the key's or type's waiting jobs through its lanes and
// the wait lanes that hold their jobs (lane.held), and resuming through
// its list: O(m log n) for m jobs, once. A job delayed or backing off
// when its key or type is paused stays delayed, and is set aside paused
// when its time comes; its aging clock, and that of a job waiting for
// its dependencies, stands still for the pause all the same, through its
// lane's paused time (lane.stoodAt).

// PauseKey pauses key name, whether the engine knows it yet or not. O(m
// log n) for its m waiting jobs. A paused key stays paused until
// ResumeKey, even if its record is forgotten while idle.
func (e *Engine) PauseKey(name string, now int64) { e.PauseKeySince(name, now, now) }

// PauseKeySince pauses key name as PauseKey does, its pause having begun
// at since, at or before now: a pause restored after a restart. The jobs
// restored (Times.Submitted) while it holds them have had their aging
// clocks stand still since then.
func (e *Engine) PauseKeySince(name string, since, now int64) {
	if e.keyPaused(name) {
		return
	}
	if e.pausedKeys == nil {
		e.pausedKeys = make(map[string]int64)
	}
	e.pausedKeys[name] = min(since, now)
	e.npausing++
	k := e.keys[name]
	if k == nil {
		return
	}
	checkpoint(k.lanes, now)
	k.paused = true
	e.setAsideAll(e.waitingOf(k.lanes), now)
	e.rebusy(k, ReasonRebalance, now) // its running jobs no longer count
}

// ResumeKey resumes key name. O(m log n) for its m paused jobs.
func (e *Engine) ResumeKey(name string, now int64) {
	if !e.keyPaused(name) {
		return
	}
	delete(e.pausedKeys, name)
	e.npausing--
	k := e.keys[name]
	if k == nil {
		return
	}
	checkpoint(k.lanes, now)
	k.paused = false
	e.resumeAll(&k.pausedJobs, now)
	e.rebusy(k, ReasonRebalance, now) // its running jobs count again
}

// PauseType pauses job type name and reports whether it is registered.
// O(m log n) for its m waiting jobs, plus the lanes of the type.
func (e *Engine) PauseType(name string, now int64) bool { return e.PauseTypeSince(name, now, now) }

// PauseTypeSince pauses job type name as PauseType does, its pause having
// begun at since, as PauseKeySince does a key.
func (e *Engine) PauseTypeSince(name string, since, now int64) bool {
	t := e.types[name]
	if t == nil {
		return false
	}
	if !t.paused {
		checkpoint(t.all, now)
		t.paused, t.pausedAt = true, min(since, now)
		e.npausing++
		for _, l := range t.all {
			l.key.pausedRunning += l.running
		}
		e.setAsideAll(e.waitingOf(t.all), now)
		e.rebusyAll(t.all, now) // keys whose only work was running jobs of t
	}
	return true
}

// ResumeType resumes job type name and reports whether it is registered.
// O(m log n) for its m paused jobs.
func (e *Engine) ResumeType(name string, now int64) bool {
	t := e.types[name]
	if t == nil {
		return false
	}
	if t.paused {
		checkpoint(t.all, now)
		t.paused = false
		e.npausing--
		for _, l := range t.all {
			l.key.pausedRunning -= l.running
		}
		e.resumeAll(&t.pausedJobs, now)
		e.rebusyAll(t.all, now)
	}
	return true
}

// rebusyAll brings the keys of the lanes in line with busy (rebusy).
func (e *Engine) rebusyAll(lanes []*lane, now int64) {
	for _, l := range lanes {
		e.rebusy(l.key, ReasonRebalance, now)
	}
}

// TypePausedJobs returns how many jobs type name's pause holds (not
// counting those its keys' pauses hold). O(1).
func (e *Engine) TypePausedJobs(name string) int {
	if t := e.types[name]; t != nil {
		return len(t.pausedJobs)
	}
	return 0
}

// KeyPaused and TypePaused report whether a key or a type is paused.
func (e *Engine) KeyPaused(name string) bool { return e.keyPaused(name) }
func (e *Engine) TypePaused(name string) bool {
	t := e.types[name]
	return t != nil && t.paused
}

func (e *Engine) keyPaused(name string) bool {
	_, ok := e.pausedKeys[name]
	return ok
}

// KeyPausedSince and TypePausedSince return when the pause of a paused
// key or type began.
func (e *Engine) KeyPausedSince(name string) int64 { return e.pausedKeys[name] }
func (e *Engine) TypePausedSince(name string) int64 {
	if t := e.types[name]; t != nil && t.paused {
		return t.pausedAt
	}
	return 0
}

// pausedSince returns when the pauses that hold j's lane began: the
// earliest of its key's and its type's.
func (e *Engine) pausedSince(l *lane) int64 {
	since := int64(math.MaxInt64)
	if l.key.paused {
		since = e.pausedKeys[l.key.name]
	}
	if l.typ.paused {
		since = min(since, l.typ.pausedAt)
	}
	return since
}

// restoredStood returns how long the aging clock of j, restored at now
// with tm (tm.Submitted) and held by a pause, has stood before now: since
// the pause began, or since its clock started or its last attempt ended
// if that was later.
func (e *Engine) restoredStood(j *Job, tm *Times, now int64) int64 {
	if !j.lane.paused() {
		return 0
	}
	from := max(j.sub, e.pausedSince(j.lane))
	if tm.Ran {
		from = max(from, tm.AttemptEnded)
	}
	return max(0, now-from)
}

// PausedTypes returns the paused job types, sorted. O(types).
func (e *Engine) PausedTypes() []string {
	var out []string
	for name, t := range e.types {
		if t.paused {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// PausedKeys returns the names of the paused keys, sorted.
func (e *Engine) PausedKeys() []string { return sortedNames(e.pausedKeys) }

// paused reports whether j's key or type is paused.
func (j *Job) paused() bool { return j.lane.key.paused || j.lane.typ.paused }

// waitingOf returns the queued and held jobs of the lanes, in submission
// order.
func (e *Engine) waitingOf(lanes []*lane) []*Job {
	var out []*Job
	for _, l := range lanes {
		out = appendLane(out, l)
		for _, w := range l.held {
			out = appendLane(out, &w.lane)
		}
	}
	slices.SortFunc(out, bySeq)
	return out
}

// setAsideAll sets aside the waiting jobs js, in their order.
func (e *Engine) setAsideAll(js []*Job, now int64) {
	for _, j := range js {
		e.leaveQueue(j, now)
		if j.is(flagTimed) {
			e.lateGrace.cancel(&e.timed[j].grace)
		}
		e.aside(j)
		e.settle(j, now) // while j.at may still number its grace entry
		e.park(j, now)
	}
}

func bySeq(a, b *Job) int { return cmp.Compare(a.seq, b.seq) }

// What pause set a paused job aside, in Job.held: the key's or the type's.
const (
	pausedByKey uint8 = iota + 1
	pausedByType
)

// park files a job set aside in the paused list of its key if that is
// paused, else of its type; its aging clock stands still from at.
func (e *Engine) park(j *Job, at int64) {
	list, by := &j.lane.typ.pausedJobs, pausedByType
	if j.lane.key.paused {
		list, by = &j.lane.key.pausedJobs, pausedByKey
	}
	j.state, j.at, j.held = StatePaused, at, by
	e.npaused++
	j.idx = int32(len(*list))
	*list = append(*list, j)
}

// unpark takes a paused job out of its list.
func (e *Engine) unpark(j *Job) {
	list := &j.lane.typ.pausedJobs
	if j.held == pausedByKey {
		list = &j.lane.key.pausedJobs
	}
	j.held = 0
	*list = swapRemove(*list, int(j.idx), jobSetIdx)
	e.npaused--
}

// resumeAll brings back the jobs of a paused list whose key and type are
// no longer paused, in submission order, and moves the others to the
// list of what still pauses them.
func (e *Engine) resumeAll(list *[]*Job, now int64) {
	js := *list
	*list = nil
	e.npaused -= len(js)
	slices.SortFunc(js, bySeq)
	for _, j := range js {
		if j.paused() {
			e.park(j, j.at)
			continue
		}
		if now != j.at {
			j.sub += now - j.at // the aging clock stood still
			e.clockMoved(j)
		}
		j.held = 0
		e.unaside(j)
		e.rejoin(j, now)
	}
}
