package engine

import "github.com/fairsched/fairsched/internal/iheap"

// The timeline: what falls due at a time. A gate that opens at a time (a
// not-before time, a retry's backoff, a rate limit's next token) or a rule
// that acts at one (a start deadline) puts a timer on the timeline, and
// the caller, which owns the clock, keeps one clock timer set at NextDue
// and calls Due when it fires. All timers are in one heap by due time, so
// adding, cancelling and taking the next one cost O(log t) for t timers,
// and a caller never needs more than one clock timer however many jobs
// wait for a time.

// timer is one thing falling due at a time. What it does when it falls
// due is its kind's; kinds come with the gates and rules that need them.
// It is 24 bytes.
type timer struct {
	at   int64 // µs
	job  *Job  // the job it acts on
	idx  int32 // handle in timeline.heap, -1 when not on the timeline
	kind timerKind
}

// timeline holds the timers in order of their time, then of their job's
// sequence number, then of their kind: an order that does not depend on
// when a timer was set, so that the reference model can state it.
type timeline struct {
	heap iheap.Keyed[*timer]
}

func newTimeline() timeline {
	return timeline{heap: iheap.NewKeyed(func(t *timer, i int) { t.idx = int32(i) })}
}

// add puts t on the timeline at at, or moves it there if it is on it
// already. O(log t).
func (tl *timeline) add(t *timer, at int64) {
	t.at = at
	key := iheap.Key{Hi: iheap.Int(at), Lo: t.job.seq<<2 | uint64(t.kind)}
	if t.idx >= 0 {
		tl.heap.Fix(int(t.idx), key)
		return
	}
	tl.heap.Push(key, t)
}

// cancel takes t off the timeline, if it is on it. O(log t).
func (tl *timeline) cancel(t *timer) {
	if t.idx >= 0 {
		tl.heap.Remove(int(t.idx))
	}
}

// next returns the time of the earliest timer, if there is one. O(1).
func (tl *timeline) next() (int64, bool) {
	t, ok := tl.heap.Top()
	if !ok {
		return 0, false
	}
	return t.at, true
}

// popDue takes the earliest timer off the timeline and returns it if it
// is due at now, or returns nil. O(log t).
func (tl *timeline) popDue(now int64) *timer {
	if t, ok := tl.heap.Top(); ok && t.at <= now {
		return tl.heap.Pop()
	}
	return nil
}

// NextDue returns the earliest time at which something falls due in the
// engine, if anything will: the caller should call Due then. O(1).
// A rate limit's next token counts too (ratelimit.go).
func (e *Engine) NextDue() (int64, bool) {
	at, ok := e.timeline.next()
	if e.rated {
		if _, top, has := e.rateline.TopKey(); has && (!ok || iheap.IntOf(top.Hi) < at) {
			at, ok = iheap.IntOf(top.Hi), true
		}
	}
	return at, ok
}

// MayBeDue reports whether anything waits for a time: NextDue has one to
// give. O(1), and inlined: a caller that catches up on what fell due at
// every call spares itself NextDue when nothing waits.
func (e *Engine) MayBeDue() bool { return e.timeline.heap.Len() > 0 || e.rated && e.rateline.Len() > 0 }
