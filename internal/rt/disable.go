package rt

import (
	"cmp"
	"fmt"
	"time"

	"github.com/fairsched/fairsched/internal/decide"
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

// disabling is the disable policy of every job type, as this process
// takes part in it: the types' rules, the failures it reports and the
// submissions it refuses. Which pairs are disabled is decided (the
// Decider's Failed, Disable and Enable; internal/decide, pairs.go), and
// read here in place (pairs). Guarded by Runtime.mu.
type disabling struct {
	tb       *timebase
	events   *eventSink               // nil: none
	policies map[string]DisablePolicy // by type, the types that have one
	dec      decide.Decider
	pairs    *decide.Pairs // the pairs disabled, as the decisions say
	refused  uint64        // submissions refused with ErrDisabled
}

// failed reports a failed attempt, at now, of a job of t's (type, ID) to
// the decisions, which disable the pair if that makes Failures within
// Window.
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
	rule := decide.DisableRule{Failures: p.Failures, Window: p.Window.Microseconds(), For: p.For.Microseconds(), Forever: p.For == 0}
	if _, disabled := d.dec.Failed(decide.Pair{Type: t.rec.Type(), ID: t.rec.ID()}, rule, now); disabled && d.events != nil {
		d.events.send(Event{Kind: EventDisabled, Time: d.tb.timeOf(now), Seq: t.rec.Seq(), Type: t.rec.Type(), ID: t.rec.ID(),
			Key: t.rec.Key(), Tier: Tier(t.rec.Tier())})
	}
}

// refuses returns the error of a submission of job at now if its pair
// is disabled.
func (d *disabling) refuses(job *Job, now int64) error {
	if !d.pairs.Any() {
		return nil // the common case, at once
	}
	span, ok := d.pairs.Lookup(decide.Pair{Type: job.Type, ID: job.ID}, now)
	if !ok {
		return nil
	}
	d.refused++
	if span.Until == 0 {
		return fmt.Errorf("%w: job type %q, ID %q, since %v, until enabled", ErrDisabled, job.Type, job.ID,
			d.tb.timeOf(span.Since).Format(time.RFC3339))
	}
	return fmt.Errorf("%w: job type %q, ID %q, since %v, until %v", ErrDisabled, job.Type, job.ID,
		d.tb.timeOf(span.Since).Format(time.RFC3339), d.tb.timeOf(span.Until).Format(time.RFC3339))
}

// pairSpan is a disabled pair and its time.
type pairSpan struct {
	k    decide.Pair
	span decide.Span
}

// before reports whether p's time is up before q's: the earlier until,
// an until before none (until Enable), then by type and ID.
func (p pairSpan) before(q pairSpan) bool {
	if p.span.Until != q.span.Until {
		return q.span.Until == 0 || (p.span.Until != 0 && p.span.Until < q.span.Until)
	}
	return cmp.Or(cmp.Compare(p.k.Type, q.k.Type), cmp.Compare(p.k.ID, q.k.ID)) < 0
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
