package engine

import "github.com/fairsched/fairsched/internal/iheap"

// The heaps of jobs keep each job's sort key inline (iheap.Keyed), so that
// sifting through a large queue does not dereference every job it passes.
// A fixed-phase job's key is its fixedOrder in Hi; an aged job's is its
// agedOrder; a capped job's is its submission number in Hi.

// fixedOrder packs "highest base priority, then oldest" into one word:
// (100-base) in the top byte, the submission number below (2^56 jobs).
// fixedRank takes it apart again.
func (j *Job) fixedOrder() uint64 { return uint64(100-j.base)<<fixedSeqBits | j.seq }

const fixedSeqBits = 56

// agedOrder is the job's place in the urgent order: the aged key A,
// highest first (Hi holds it complemented), then the submission number.
func (j *Job) agedOrder() iheap.Key { return iheap.Key{Hi: ^iheap.Int(j.agedKey()), Lo: j.seq} }

// agedKeyOf returns the aged key A from an agedOrder.
func agedKeyOf(k iheap.Key) int64 { return iheap.IntOf(^k.Hi) }

// agedKey returns the job's aged order key A (aging.go). It depends only
// on the base priority and submission time, so it is computed, not kept.
func (j *Job) agedKey() int64 { return j.lane.e.aging.agedKey(int(j.base), j.sub) }

// lane holds the queued jobs of one job type for one fairness key, in the
// order "highest effective priority, then earliest submission", with aging
// applied at the moment of asking (head).
//
// A job's effective priority is constant (its base) in its grace period and
// when its base is at or above the ceiling: those jobs are in fixed, by
// base. Aged jobs below the ceiling rise at the same rate, so among them the
// order is by A and never changes: they are in rising. Jobs aged to the
// ceiling tie and go in submission order: capped. Jobs move fixed -> rising
// -> capped as time passes, each move O(log n), each at most once. Fixed
// jobs that arrive in order, the usual case, skip the heaps: they queue in
// run, in O(1), and stay there in every phase, ranked by their phase at
// the moment of asking (sortedrun.go).
//
// An idle key offers its lanes to other keys of their types (spare.go).
// init sets every field: a field added here is set there too.
type lane struct {
	// What a dispatch reads, together: the lane's flow and counts, the
	// length of attached, then the run's front and the heaps' tops.
	typ      *typeState
	key      *keyState
	flow     *flow
	n        int // queued jobs in the run and the three heaps
	nwaiting int // jobs of the attached wait lanes
	tyIdx    int // handle in typ.lanes, -1 when not ready
	running  int // running jobs
	e        *Engine
	// attached are the wait lanes of free conflict locks whose waiters
	// come from this lane (conflict.go): they compete as if they were in
	// the lane.
	attached []*waitLane
	run      sortedRun         // jobs that arrived in order, in any phase
	fixed    iheap.Keyed[*Job] // the other fixed jobs, by fixedOrder
	rising   iheap.Keyed[*Job] // by agedOrder
	capped   iheap.Keyed[*Job] // by seq

	allIdx int // position in typ.all
	// held are all the wait lanes, attached or not, that hold jobs of
	// this lane (waitLane.heldIdx their positions): a pause finds the
	// jobs held by gates through them.
	held []*waitLane

	// The lane's paused time, the µs its key or its type was paused,
	// counted from when the lane was made (or from the value a restart
	// restored, stood.go): stood up to stoodFrom, and since stoodFrom
	// while it is paused (stoodAt). A waiting job's aging clock stands
	// still for it (docs/design.md, Aging): a job set aside with its
	// clock running (backing off, waiting for dependencies) keeps
	// stoodAt of when it left, in Job.at, and moves its submission time
	// on by what the lane stood meanwhile when it comes back. Only
	// differences of it mean anything.
	stood, stoodFrom int64
	stoodIdx         int // position in Engine.stoodLanes, -1: not there

	spareIdx int // position in typ.spare, -1: not there (spare.go)
}

// paused reports whether the lane's key or type is paused.
func (l *lane) paused() bool { return l.key.paused || l.typ.paused }

// stoodAt returns the lane's paused time up to now.
func (l *lane) stoodAt(now int64) int64 {
	if l.paused() {
		return l.stood + now - l.stoodFrom
	}
	return l.stood
}

// checkpoint brings the lanes' paused time up to now, before their key or
// type is paused or resumed.
func checkpoint(lanes []*lane, now int64) {
	for _, l := range lanes {
		l.stood, l.stoodFrom = l.stoodAt(now), now
		l.e.keepStood(l)
	}
}

// setAsideSub returns the submission time of j, set aside with its aging
// clock running since its lane's paused time was j.at, moved on by what
// the lane stood since, up to now.
func (j *Job) setAsideSub(now int64) int64 { return j.sub + j.lane.stoodAt(now) - j.at }

// catchUpClock moves j's submission time on as it leaves its aside state
// at now (setAsideSub), and tells ClockMoved, moved or not: its clock no
// longer runs aside.
func (e *Engine) catchUpClock(j *Job, now int64) {
	j.sub = j.setAsideSub(now)
	e.clockMoved(j)
}

// clockMoved tells ClockMoved of j.
func (e *Engine) clockMoved(j *Job) {
	if e.ClockMoved != nil {
		e.ClockMoved(j)
	}
}

// first returns the lane's first job at now and its rank, or nil: the
// first of its own jobs and of its attached wait lanes' (usually none).
func (l *lane) first(p *agingParams, now int64) (*Job, rank) {
	if len(l.attached) == 0 {
		return l.head(p, now)
	}
	return l.firstOfAll(p, now)
}

func (l *lane) firstOfAll(p *agingParams, now int64) (*Job, rank) {
	best, br := l.head(p, now)
	for _, w := range l.attached {
		if j, r := w.head(p, now); j != nil && (best == nil || r.before(br)) {
			best, br = j, r
		}
	}
	return best, br
}

func newLane(e *Engine, t *typeState, k *keyState, f *flow, now int64) *lane {
	l := new(lane)
	l.init(e, t, k, f, now)
	return l
}

// init makes l, new or a spare lane taken from another key (spare.go),
// an empty lane of t for k in f, setting every field but allIdx, which
// is laneOf's. A spare lane is of t already, and its e and typ are not
// written again: a Handle reads them through its job's record without
// the lock (Job.Engine), also after the job ended and its lane went to
// another key. Its run, heaps and lists are empty, and keep their arrays
// when they are small: the heaps' are (they shrink as they empty), the
// others' are let go past 64 entries.
func (l *lane) init(e *Engine, t *typeState, k *keyState, f *flow, now int64) {
	if l.e == nil {
		l.e, l.typ = e, t
		l.fixed, l.rising, l.capped = iheap.NewKeyed(jobSetIdx), iheap.NewKeyed(jobSetIdx), iheap.NewKeyed(jobSetIdx)
	} else {
		l.fixed.Reset()
		l.rising.Reset()
		l.capped.Reset()
	}
	l.key, l.flow = k, f
	l.run = sortedRun{buf: emptied(l.run.buf)}
	l.n, l.running, l.tyIdx = 0, 0, -1 // a spare lane keeps its place in typ.all
	l.attached, l.nwaiting, l.held = emptied(l.attached), 0, emptied(l.held)
	l.stood, l.stoodFrom, l.stoodIdx = now, now, -1
	l.spareIdx = -1
}

// emptied returns s, an empty list of a spare lane, for reuse, or nil
// past 64 entries' capacity. What leaves a lane's lists is zeroed as it
// leaves (sortedRun.remove, swapRemove), so the array holds nothing.
func emptied[T any](s []T) []T {
	if cap(s) > 64 {
		return nil
	}
	return s[:0]
}

// insert places a queued job in the heap its phase at now calls for.
// O(log n).
func (l *lane) insert(p *agingParams, j *Job, now int64) {
	switch {
	case !p.pastGrace(j.sub, now) || int64(j.base) >= p.maxEff:
		if key := j.fixedOrder(); l.run.accepts(key, j.sub) {
			l.run.push(key, j)
		} else {
			j.heap = inFixed
			l.fixed.Push(iheap.Key{Hi: key}, j)
		}
	case p.reached(p.agedKey(int(j.base), j.sub), now, p.maxEff):
		j.heap = inCapped
		l.capped.Push(iheap.Key{Hi: j.seq}, j)
	default:
		j.heap = inRising
		l.rising.Push(j.agedOrder(), j)
	}
	l.n++
}

// remove takes a queued job out of the lane. O(log n).
func (l *lane) remove(j *Job) {
	switch j.heap {
	case inFixed:
		l.fixed.Remove(int(j.idx))
	case inRun:
		l.run.remove(j)
	case inRising:
		l.rising.Remove(int(j.idx))
	case inCapped:
		l.capped.Remove(int(j.idx))
	}
	l.n--
}

// head returns the lane's first job at now and its rank, or nil. It first
// moves rising jobs that reached the ceiling to capped: amortised
// O(log n). The candidates are ranked by the keys their run or heap keeps
// inline, so of the (cold, in a long queue) job records only the winner's
// is touched, by the caller.
func (l *lane) head(p *agingParams, now int64) (*Job, rank) {
	if p.on { // checked here too: with aging off, head pays no call
		l.settle(p, now)
	}
	var best *Job
	var br rank
	consider := func(j *Job, r rank) {
		if best == nil || r.before(br) {
			best, br = j, r
		}
	}
	if j, e, ok := l.run.front(); ok {
		r := p.fixedRank(e.key) // runRank's, inlined for the front in its grace period
		if p.pastGrace(e.sub, now) {
			r = p.runRank(e.key, e.sub, now)
		}
		consider(j, r)
	}
	if j, key, ok := l.fixed.TopKey(); ok {
		consider(j, p.fixedRank(key.Hi))
	}
	if p.on {
		if j, key, ok := l.rising.TopKey(); ok {
			consider(j, rank{p.agedScore(agedKeyOf(key), now), key.Lo})
		}
		if j, key, ok := l.capped.TopKey(); ok {
			consider(j, rank{p.maxEff * p.interval, key.Hi})
		}
	}
	return best, br
}

// settle moves the rising jobs that reached the ceiling at now to capped:
// head does so first, and the queue's walk without ranking the heads.
func (l *lane) settle(p *agingParams, now int64) {
	if !p.on {
		return
	}
	for {
		j, top, ok := l.rising.TopKey()
		if !ok || !p.reached(agedKeyOf(top), now, p.maxEff) {
			return
		}
		l.rising.Pop()
		j.heap = inCapped
		l.capped.Push(iheap.Key{Hi: j.seq}, j)
	}
}

// rank is a queued job's place within its key: its scaled effective
// priority at some instant, highest first, then its submission number.
type rank struct {
	eff int64
	seq uint64
}

func (a rank) before(b rank) bool { return a.eff > b.eff || (a.eff == b.eff && a.seq < b.seq) }

// runRank returns the rank at now of a job of a sorted run, from its
// fixedOrder and its sub, in the phase it is in then: its base in its
// grace period, or for ever when it is based at or above the ceiling; its
// aged score after, up to the ceiling, where it ranks as the capped do.
func (p *agingParams) runRank(key uint64, sub, now int64) rank {
	r := p.fixedRank(key)
	if !p.pastGrace(sub, now) || r.eff >= p.maxEff*p.interval {
		return r
	}
	a := p.agedKey(int(100-key>>fixedSeqBits), sub)
	if p.reached(a, now, p.maxEff) {
		return rank{p.maxEff * p.interval, r.seq}
	}
	return rank{p.agedScore(a, now), r.seq}
}

// fixedRank returns the rank of a fixed-phase job from its fixedOrder.
func (p *agingParams) fixedRank(key uint64) rank {
	base := int64(100 - key>>fixedSeqBits)
	if p.on {
		base *= p.interval
	}
	return rank{base, key & (1<<fixedSeqBits - 1)}
}
