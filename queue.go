package fairsched

import (
	"context"

	"github.com/fairsched/fairsched/internal/iheap"
)

// jobState is where a job is in its life. Every job moves forward through
// these states and ends exactly once.
type jobState uint8

const (
	stateNew     jobState = iota // being submitted
	stateQueued                  // visible in its lane
	stateParked                  // waiting on a blocker: a conflict or its key's cap
	stateRunning                 // holding a slot
	stateDone                    // ended: err is final
)

// Which of its lane's heaps a queued job is in.
const (
	inFixed  uint8 = iota // effective priority == base (in grace, or base >= ceiling)
	inRun                 // as inFixed, in the lane's sorted run (run.go)
	inRising              // aged, below the ceiling: ordered by the aged key A
	inCapped              // aged to the ceiling: FIFO among equals
)

// How a job was started, for charging and events.
type startKind uint8

const (
	startFair     startKind = iota // by fair share: charged to the key's clock
	startReserved                  // under the key's MinSlots: not charged
	startUrgent                    // aged past the urgent threshold: charged
)

// job is the scheduler's record of one unit of work, from submission to
// its end. A Handle is a job seen from outside.
type job struct {
	// Fixed at submission. Its type and key are its lane's.
	lane *lane
	id   string
	seq  uint64 // submission order, the final tie-break
	sub  int64  // submission time, µs since the scheduler's epoch
	fn   func(context.Context) error
	base uint8 // clamped priority
	sync bool  // RunSync: fn runs on the caller's goroutine

	// Guarded by Scheduler.mu. The small fields first, packed together.
	state    jobState
	heap     uint8 // stateQueued: which of the lane's run and heaps holds it
	kind     startKind
	guessed  bool      // its estimate was the type's default cost, not learned
	inGrace  bool      // has an entry in the grace queue, numbered graceAt
	idx      int32     // handle in a lane heap or its key's parked heap; position in the run, a slot's waiters or the running list
	uidx     int32     // handle in typ.aged, -1 when absent
	graceAt  int64     // inGrace: the number of its entry in the grace queue
	start    int64     // start time, µs
	estimate float64   // cost estimate at start, seconds
	est      *estimate // the learnt estimate it came from, if any
	weight   float64   // key weight at start
	slot     *conflictSlot
	err      error
	// wake is closed when a waiting RunSync job starts or ends (then
	// cleared), and when a Submit job ends (made on demand by Handle.Done).
	wake chan struct{}
	// ctx is the context fn receives. It is a separate object because fn
	// may keep it after returning, while a RunSync job's record is reused.
	// A Submit job's is made when it starts.
	ctx *jobContext
}

func jobSetIdx(j *job, i int)  { j.idx = int32(i) }
func jobSetUIdx(j *job, i int) { j.uidx = int32(i) }

// byAgedKey orders aged jobs by score, highest first, then oldest: the
// urgent order, and the order of rising jobs within a lane.
func byAgedKey(a, b *job) bool { return a.agedOrder().Less(b.agedOrder()) }

// The heaps of jobs keep each job's sort key inline (iheap.Keyed), so that
// sifting through a large queue does not dereference every job it passes.
// A fixed-phase job's key is its fixedOrder in Hi; an aged job's is its
// agedOrder; a capped job's is its submission number in Hi.

// fixedOrder packs "highest base priority, then oldest" into one word:
// (100-base) in the top byte, the submission number below (2^56 jobs).
// fixedRank takes it apart again.
func (j *job) fixedOrder() uint64 { return uint64(100-j.base)<<fixedSeqBits | j.seq }

const fixedSeqBits = 56

// agedOrder is the job's place in the urgent order: the aged key A,
// highest first (Hi holds it complemented), then the submission number.
func (j *job) agedOrder() iheap.Key { return iheap.Key{Hi: ^iheap.Int(j.agedKey()), Lo: j.seq} }

// agedKeyOf returns the aged key A from an agedOrder.
func agedKeyOf(k iheap.Key) int64 { return iheap.IntOf(^k.Hi) }

// agedKey returns the job's aged order key A (aging.go). It depends only
// on the base priority and submission time, so it is computed, not kept.
func (j *job) agedKey() int64 { return j.lane.s.aging.agedKey(int(j.base), j.sub) }

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
// jobs that arrive in order, the usual case, skip the heap: they queue in
// run, in O(1).
type lane struct {
	s      *Scheduler
	typ    *typeState
	key    *keyState
	flow   *flow
	run    sortedRun         // fixed jobs that arrived in order
	fixed  iheap.Keyed[*job] // the other fixed jobs, by fixedOrder
	rising iheap.Keyed[*job] // by agedOrder
	capped iheap.Keyed[*job] // by seq
	n      int               // queued jobs in the run and the three heaps
	tyIdx  int               // handle in typ.lanes, -1 when not ready
}

func newLane(s *Scheduler, t *typeState, k *keyState, f *flow) *lane {
	return &lane{
		s: s, typ: t, key: k, flow: f, tyIdx: -1,
		fixed:  iheap.NewKeyed(jobSetIdx),
		rising: iheap.NewKeyed(jobSetIdx),
		capped: iheap.NewKeyed(jobSetIdx),
	}
}

// insert places a queued job in the heap its phase at now calls for.
// O(log n).
func (l *lane) insert(p *agingParams, j *job, now int64) {
	switch {
	case !p.pastGrace(j.sub, now) || int64(j.base) >= p.maxEff:
		if key := j.fixedOrder(); l.run.accepts(key) {
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
func (l *lane) remove(j *job) {
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
func (l *lane) head(p *agingParams, now int64) (*job, rank) {
	if p.on {
		for {
			j, top, ok := l.rising.TopKey()
			if !ok || !p.reached(agedKeyOf(top), now, p.maxEff) {
				break
			}
			l.rising.Pop()
			j.heap = inCapped
			l.capped.Push(iheap.Key{Hi: j.seq}, j)
		}
	}
	var best *job
	var br rank
	consider := func(j *job, r rank) {
		if best == nil || r.before(br) {
			best, br = j, r
		}
	}
	if j, key, ok := l.run.front(); ok {
		consider(j, p.fixedRank(key))
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

// rank is a queued job's place within its key: its scaled effective
// priority at some instant, highest first, then its submission number.
type rank struct {
	eff int64
	seq uint64
}

func (a rank) before(b rank) bool { return a.eff > b.eff || (a.eff == b.eff && a.seq < b.seq) }

// fixedRank returns the rank of a fixed-phase job from its fixedOrder.
func (p *agingParams) fixedRank(key uint64) rank {
	base := int64(100 - key>>fixedSeqBits)
	if p.on {
		base *= p.interval
	}
	return rank{base, key & (1<<fixedSeqBits - 1)}
}

// graceQueue holds jobs in submission order from when they are queued
// until their grace period ends, so that the end of every job's grace is
// noticed in order, in O(1) per job. A job that ends before then clears its
// entry, found through the number it keeps, leaving a hole: the queue never
// holds an ended job, so no record outlives its job here. (A job that
// starts or is parked keeps its entry until it ends or its grace does.)
// Holes and entries at the front are dropped once they are more than half
// of the buffer; holes behind a live entry are compacted away once they
// are more than half of the entries. Both keep the buffer within a
// constant factor of the jobs in it: amortised O(1) per job.
//
// Entries are numbered in push order: buf[i] is entry base+i, and a job in
// the queue has inGrace set and graceAt its entry's number. Dropping the
// consumed front changes base, not the jobs; only compaction renumbers.
type graceQueue struct {
	buf   []*job // nil where a job left: a hole
	head  int    // buf[:head] is consumed
	base  int64  // the number of buf[0]
	holes int    // holes in buf[head:]
}

func (q *graceQueue) push(j *job) {
	j.inGrace, j.graceAt = true, q.base+int64(len(q.buf))
	q.buf = append(q.buf, j)
}

// popDue removes and returns the oldest entry if its grace period is over.
// It skips the holes at the front and drops the consumed front whether or
// not anything is due: when jobs end within their grace period while an
// older one waits, holes are all the front ever gets.
func (q *graceQueue) popDue(p *agingParams, now int64) *job {
	for q.head < len(q.buf) && q.buf[q.head] == nil {
		q.head++
		q.holes--
	}
	q.dropFront()
	if q.head == len(q.buf) {
		return nil
	}
	j := q.buf[q.head]
	if !p.pastGrace(j.sub, now) {
		return nil
	}
	q.buf[q.head] = nil
	q.head++
	j.inGrace = false
	return j
}

// dropFront drops the consumed front once it is all of the buffer or more
// than half of a large one. Amortised O(1): each entry is copied at most
// once per drop of a front at least as long as what is copied.
func (q *graceQueue) dropFront() {
	switch {
	case q.head == len(q.buf):
		q.base += int64(len(q.buf))
		q.buf, q.head = q.buf[:0], 0
	case q.head > 1024 && q.head*2 > len(q.buf):
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.base += int64(q.head)
		q.buf, q.head = q.buf[:n], 0
	}
}

// leave clears the entry of j, which is leaving the queue for good, if it
// has one. O(1), amortised.
func (q *graceQueue) leave(j *job) {
	if !j.inGrace {
		return
	}
	q.buf[j.graceAt-q.base] = nil
	j.inGrace = false
	q.holes++
	if q.holes > 64 && q.holes*2 > len(q.buf)-q.head {
		q.compact()
	}
}

// reset empties the queue.
func (q *graceQueue) reset() {
	for _, j := range q.buf[q.head:] {
		if j != nil {
			j.inGrace = false
		}
	}
	clear(q.buf)
	q.base += int64(len(q.buf))
	q.buf, q.head, q.holes = q.buf[:0], 0, 0
}

// compact drops the holes, keeping the order, and renumbers the entries
// left. O(n).
func (q *graceQueue) compact() {
	n := 0
	for _, j := range q.buf[q.head:] {
		if j != nil {
			q.buf[n], j.graceAt = j, q.base+int64(n)
			n++
		}
	}
	clear(q.buf[n:])
	q.buf, q.head, q.holes = q.buf[:n], 0, 0
}

// guessOf returns the part of j's charge that was a default-cost guess.
func (j *job) guessOf() float64 {
	if j.guessed {
		return j.estimate
	}
	return 0
}
