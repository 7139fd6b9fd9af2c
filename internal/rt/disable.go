package rt

import (
	"cmp"
	"fmt"
	"time"
)

// The disable policy (docs/design.md, Disable policy; failures, window and
// time disabled): a (type, ID) pair whose attempts keep failing is
// turned away for a while instead of failing again and again.

// DisablePolicy is the run-time layer's side of the API's DisablePolicy, which documents
// it.
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

// disabling is the disable policy of every job type: what it keeps, and
// its decisions as attempts fail and jobs are submitted. Guarded by
// Runtime.mu.
type disabling struct {
	tb       *timebase
	events   *eventSink               // nil: none
	policies map[string]DisablePolicy // by type, the types that have one
	failures map[pairKey][]int64      // recent failed attempts, µs, oldest first
	disabled map[pairKey]disabledSpan // the pairs disabled now
	swept    int                      // len(failures) after the last sweep
	kept     int                      // len(disabled) after its last sweep
	total    uint64                   // pairs disabled, ever
	refused  uint64                   // submissions refused with ErrDisabled
}

type disabledSpan struct{ since, until int64 } // until 0: until Enable

// failed counts a failed attempt, at now, of a job of t's (type, ID),
// and disables the pair if that makes Failures within Window.
func (d *disabling) failed(t *task, now int64) {
	if d.policies == nil {
		return // no type has a policy: the common case, inlined
	}
	d.count(t, now)
}

func (d *disabling) count(t *task, now int64) {
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
	if d.events != nil {
		d.events.send(Event{Kind: EventDisabled, Time: d.tb.timeOf(now), Seq: t.rec.Seq(), Type: k.typ, ID: k.id,
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

// refuses returns the error of a submission of job at now if its pair
// is disabled, and forgets a pair whose time is up.
func (d *disabling) refuses(job *Job, now int64) error {
	if len(d.disabled) == 0 {
		return nil // the common case, at once
	}
	k := pairKey{job.Type, job.ID}
	span, ok := d.disabled[k]
	switch {
	case !ok:
		return nil
	case span.until != 0 && span.until <= now:
		delete(d.disabled, k)
		return nil
	}
	d.refused++
	if span.until == 0 {
		return fmt.Errorf("%w: job type %q, ID %q, since %v, until enabled", ErrDisabled, k.typ, k.id,
			d.tb.timeOf(span.since).Format(time.RFC3339))
	}
	return fmt.Errorf("%w: job type %q, ID %q, since %v, until %v", ErrDisabled, k.typ, k.id,
		d.tb.timeOf(span.since).Format(time.RFC3339), d.tb.timeOf(span.until).Format(time.RFC3339))
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
