package rt

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
	"time"
)

// The disable policy (docs/design.md, Disable policy; failures, window and
// time disabled): a (type, ID) pair whose attempts keep failing is
// turned away for a while instead of failing again and again.

// DisablePolicy disables a (type, ID) pair after Failures failed attempts
// of jobs of that pair within Window (failures at times in (now − Window,
// now]): new submissions of the pair then fail at once with an error
// matching ErrDisabled, for For, or until Enable if For is 0. Jobs of the
// pair already queued or backing off are not touched, and their later
// failures count. The zero value never disables.
type DisablePolicy struct {
	Failures int
	Window   time.Duration
	For      time.Duration
}

// DisabledPair describes a disabled (type, ID) pair.
type DisabledPair struct {
	Type, ID string
	Since    time.Time
	Until    time.Time // the zero time: until Enable
}

// pairKey names a (type, ID) pair.
type pairKey struct{ typ, id string }

// disabling is what the scheduler keeps for the disable policies.
type disabling struct {
	policies map[string]DisablePolicy // by type, the types that have one
	failures map[pairKey][]int64      // recent failed attempts, µs, oldest first
	disabled map[pairKey]disabledSpan // the pairs disabled now
	swept    int                      // len(failures) after the last sweep
	kept     int                      // len(disabled) after its last sweep
	total    uint64                   // pairs disabled, ever
	refused  uint64                   // submissions refused with ErrDisabled
}

type disabledSpan struct{ since, until int64 } // until 0: until Enable

// noteFailureLocked counts a failed attempt, at now, of a job of t's
// (type, ID), and disables the pair if that makes Failures within Window.
func (s *Runtime) noteFailureLocked(t *task, now int64) {
	d := &s.disabling
	p, ok := d.policies[t.rec.Type()]
	if !ok || p.Failures == 0 {
		return
	}
	k := pairKey{t.rec.Type(), t.rec.ID()}
	window := p.Window.Microseconds()
	times := d.failures[k]
	for len(times) > 0 && times[0] <= now-window {
		times = times[1:]
	}
	times = append(times, now)
	if len(times) < p.Failures {
		d.failures[k] = times
		d.sweepLocked(now)
		return
	}
	delete(d.failures, k)
	span := disabledSpan{since: now}
	if p.For > 0 {
		span.until = now + p.For.Microseconds()
	}
	d.disableLocked(k, span, now)
	if s.events != nil {
		s.events.send(Event{Kind: EventDisabled, Time: s.timeOf(now), Seq: t.rec.Seq(), Type: k.typ, ID: k.id,
			Key: t.rec.Key(), Tier: Tier(t.rec.Tier())})
	}
}

// sweepLocked forgets the pairs whose failures are all out of their
// window, once the table has doubled since the last sweep: amortised O(1)
// per failure, and the table stays within twice the pairs that failed
// recently.
func (d *disabling) sweepLocked(now int64) {
	if len(d.failures) < 2*max(d.swept, 64) {
		return
	}
	for k, times := range d.failures {
		if times[len(times)-1] <= now-d.policies[k.typ].Window.Microseconds() {
			delete(d.failures, k)
		}
	}
	d.swept = len(d.failures)
}

// disableLocked disables the pair k for span, at now. A pair whose time
// is up is forgotten when it is next submitted, or by a sweep here once
// the table has doubled since the last: amortised O(1) per pair disabled,
// and the table stays within twice the pairs disabled now (at least 64),
// however many distinct pairs are disabled for a time and never seen
// again.
func (d *disabling) disableLocked(k pairKey, span disabledSpan, now int64) {
	if d.disabled == nil {
		d.disabled = make(map[pairKey]disabledSpan)
	}
	d.disabled[k] = span
	d.total++
	if len(d.disabled) < 2*max(d.kept, 64) {
		return
	}
	for k, span := range d.disabled {
		if span.until != 0 && span.until <= now {
			delete(d.disabled, k)
		}
	}
	d.kept = len(d.disabled)
}

// disabledLocked returns the error of a submission of job at now if its
// pair is disabled, and forgets a pair whose time is up.
func (s *Runtime) disabledLocked(job *Job, now int64) error {
	if len(s.disabling.disabled) == 0 {
		return nil // the common case, at once
	}
	k := pairKey{job.Type, job.ID}
	span, ok := s.disabling.disabled[k]
	switch {
	case !ok:
		return nil
	case span.until != 0 && span.until <= now:
		delete(s.disabling.disabled, k)
		return nil
	}
	s.disabling.refused++
	if span.until == 0 {
		return fmt.Errorf("%w: job type %q, ID %q, since %v, until enabled", ErrDisabled, k.typ, k.id,
			s.timeOf(span.since).Format(time.RFC3339))
	}
	return fmt.Errorf("%w: job type %q, ID %q, since %v, until %v", ErrDisabled, k.typ, k.id,
		s.timeOf(span.since).Format(time.RFC3339), s.timeOf(span.until).Format(time.RFC3339))
}

// countLocked returns how many pairs are disabled at now.
func (d *disabling) countLocked(now int64) int {
	n := 0
	for _, span := range d.disabled {
		if span.until == 0 || span.until > now {
			n++
		}
	}
	return n
}

// Enable enables the (type, ID) pair again, if it was disabled, and
// forgets its recent failures.
func (s *Runtime) Enable(typ, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := pairKey{typ, id}
	delete(s.disabling.disabled, k)
	delete(s.disabling.failures, k)
}

// Disable disables the (type, ID) pair by hand, as its type's
// DisablePolicy would: new submissions of the pair fail at once with an
// error matching ErrDisabled, for d from now, or until Enable if d is 0;
// a negative d is an error, as a negative DisablePolicy.For is. As the
// policy does, it forgets the pair's recent failures, counts in
// Stats.DisabledTotal and sends an EventDisabled (with no job: Seq 0, Key
// empty). Jobs of the pair already queued, backing off or running are
// not touched. Disabling a disabled pair again replaces its time. The type
// need not have a DisablePolicy; it must be registered (else the error
// wraps ErrUnknownType). O(1).
func (s *Runtime) Disable(typ, id string, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tier, ok := s.eng.TypeTier(typ)
	if !ok {
		return errUnknownType(typ)
	}
	now := s.nowLocked()
	span := disabledSpan{since: now}
	if d > 0 {
		span.until = now + max(d.Microseconds(), 1)
	}
	k := pairKey{typ, id}
	delete(s.disabling.failures, k)
	s.disabling.disableLocked(k, span, now)
	if s.events != nil {
		s.events.send(Event{Kind: EventDisabled, Time: s.timeOf(now), Type: typ, ID: id, Tier: Tier(tier)})
	}
	return nil
}

// Disabled lists the (type, ID) pairs disabled now, by type then ID.
// O(p log p) for p pairs, sorted after the lock is released: the lock is
// held O(p). Where there may be many, DisabledSoonest lists a bounded
// number.
func (s *Runtime) Disabled() []DisabledPair {
	s.mu.Lock()
	now := s.nowLocked()
	var spans []pairSpan
	for k, span := range s.disabling.disabled {
		if span.until == 0 || span.until > now {
			spans = append(spans, pairSpan{k, span})
		}
	}
	s.mu.Unlock()
	out := s.pairsOf(spans)
	slices.SortFunc(out, func(a, b DisabledPair) int { return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.ID, b.ID)) })
	return out
}

// DisabledSoonest lists at most n of the pairs disabled now, those whose
// time is up soonest first, then those disabled until Enable (by type,
// then ID, among equals), and returns how many pairs are disabled in all.
// It is for a page that shows a few of what may be many: O(p log n) for p
// pairs, with the lock held for the selection of n, never a sort of all
// p.
func (s *Runtime) DisabledSoonest(n int) (pairs []DisabledPair, total int) {
	if n <= 0 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return nil, s.disabling.countLocked(s.nowLocked())
	}
	s.mu.Lock()
	now := s.nowLocked()
	var top pairHeap // the n soonest so far, the latest at the root
	for k, span := range s.disabling.disabled {
		if span.until != 0 && span.until <= now {
			continue
		}
		total++
		ps := pairSpan{k, span}
		switch {
		case len(top) < n:
			heap.Push(&top, ps)
		case ps.before(top[0]):
			top[0] = ps
			heap.Fix(&top, 0)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(top, func(a, b pairSpan) int {
		if a.before(b) {
			return -1
		}
		return 1
	})
	return s.pairsOf(top), total
}

// pairSpan is a disabled pair and its time.
type pairSpan struct {
	k    pairKey
	span disabledSpan
}

// before reports whether p's time is up before q's: the earlier until,
// an until before none (until Enable), then by type and ID.
func (p pairSpan) before(q pairSpan) bool {
	if p.span.until != q.span.until {
		return q.span.until == 0 || (p.span.until != 0 && p.span.until < q.span.until)
	}
	return cmp.Or(cmp.Compare(p.k.typ, q.k.typ), cmp.Compare(p.k.id, q.k.id)) < 0
}

// pairHeap is a heap of disabled pairs with the one whose time is up
// last at the root.
type pairHeap []pairSpan

func (h pairHeap) Len() int           { return len(h) }
func (h pairHeap) Less(i, j int) bool { return h[j].before(h[i]) }
func (h pairHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *pairHeap) Push(x any)        { *h = append(*h, x.(pairSpan)) }
func (h *pairHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	*h = old[:len(old)-1]
	return p
}

// pairsOf describes spans as DisabledPairs. timeOf reads fields set by
// New only: it needs no lock.
func (s *Runtime) pairsOf(spans []pairSpan) []DisabledPair {
	if len(spans) == 0 {
		return nil
	}
	out := make([]DisabledPair, len(spans))
	for i, p := range spans {
		out[i] = DisabledPair{Type: p.k.typ, ID: p.k.id, Since: s.timeOf(p.span.since)}
		if p.span.until != 0 {
			out[i].Until = s.timeOf(p.span.until)
		}
	}
	return out
}
