package decide

// The disabled pairs. A (job type, ID) pair whose attempts keep failing is
// disabled for a while: its submissions are refused instead of failing
// again. Which pairs are disabled is the scheduler's, not one process's:
// a pair that failed on one replica is refused on all of them. So the
// decisions count the failures and disable the pairs (Decider.Failed,
// Disable, Enable), and every process refuses submissions by the
// Decider's Pairs: the decisions' own in this process, or a copy a
// leader's notices keep up to date elsewhere. That check is on every
// submission's path, so it reads a map in place, never a call through
// the interface.

// Pair names a (job type, ID) pair.
type Pair struct{ Type, ID string }

// Span is the time a pair is disabled, in the engine's µs: from Since,
// until Until, or until it is enabled if Until is 0.
type Span struct{ Since, Until int64 }

// over reports whether s's time is up at now.
func (s Span) over(now int64) bool { return s.Until != 0 && s.Until <= now }

// DisableRule is a job type's disable policy, in µs: Failures failed
// attempts within Window disable a pair for For, or until it is enabled
// if Forever. Failures 0 disables nothing. For is whole µs, so a policy
// of less than one disables a pair for none: it counts as disabled, and
// is not refused.
type DisableRule struct {
	Failures    int
	Window, For int64
	Forever     bool
}

// Pairs is what the disable policy keeps: the recent failures of each
// pair, and the pairs disabled. Its zero value holds none. Not safe for
// concurrent use: the run-time layer's lock guards it.
//
// Both tables are swept once they double since their last sweep:
// amortised O(1) per failure or pair disabled, and each stays within
// twice what is live (at least 64 entries), however many distinct pairs
// fail once, or are disabled for a time, and are never seen again.
type Pairs struct {
	failures map[Pair][]int64 // recent failed attempts, µs, oldest first
	windows  map[string]int64 // each type's window, as its last failure gave it
	disabled map[Pair]Span    // the pairs disabled, some perhaps over
	swept    int              // len(failures) after the last sweep
	kept     int              // len(disabled) after its last sweep
	// Total counts the pairs disabled, ever.
	Total uint64
}

// Any reports whether a pair may be disabled: false is the common case,
// one comparison that inlines. O(1).
func (p *Pairs) Any() bool { return len(p.disabled) > 0 }

// Lookup returns k's span if k is disabled at now, and forgets k if its
// time is up. O(1).
func (p *Pairs) Lookup(k Pair, now int64) (Span, bool) {
	span, ok := p.disabled[k]
	if ok && span.over(now) {
		delete(p.disabled, k)
		return Span{}, false
	}
	return span, ok
}

// Failed counts a failed attempt of pair k at now, under its type's rule
// r, and disables k if that makes r.Failures within r.Window: it returns
// k's span and true then. O(r.Failures), amortised.
func (p *Pairs) Failed(k Pair, r DisableRule, now int64) (Span, bool) {
	if r.Failures <= 0 {
		return Span{}, false
	}
	if p.failures == nil {
		p.failures, p.windows = make(map[Pair][]int64), make(map[string]int64)
	}
	p.windows[k.Type] = r.Window
	times := p.failures[k]
	for len(times) > 0 && times[0] <= now-r.Window {
		times = times[1:]
	}
	times = append(times, now)
	if len(times) < r.Failures {
		p.failures[k] = times
		p.sweepFailures(now)
		return Span{}, false
	}
	span := Span{Since: now}
	if !r.Forever {
		span.Until = now + r.For
	}
	p.Disable(k, span, now)
	return span, true
}

// Disable disables k for span, at now, and forgets its recent failures.
func (p *Pairs) Disable(k Pair, span Span, now int64) {
	delete(p.failures, k)
	if p.disabled == nil {
		p.disabled = make(map[Pair]Span)
	}
	p.disabled[k] = span
	p.Total++
	if len(p.disabled) < 2*max(p.kept, 64) {
		return
	}
	for k, span := range p.disabled {
		if span.over(now) {
			delete(p.disabled, k)
		}
	}
	p.kept = len(p.disabled)
}

// Enable enables k again, if it was disabled, and forgets its recent
// failures.
func (p *Pairs) Enable(k Pair) {
	delete(p.disabled, k)
	delete(p.failures, k)
}

// Each calls f with every pair disabled at now, in no order. O(pairs).
func (p *Pairs) Each(now int64, f func(Pair, Span)) {
	for k, span := range p.disabled {
		if !span.over(now) {
			f(k, span)
		}
	}
}

// Count returns how many pairs are disabled at now. O(pairs).
func (p *Pairs) Count(now int64) int {
	n := 0
	p.Each(now, func(Pair, Span) { n++ })
	return n
}

// Tracked returns the sizes of the two tables, swept or not: for tests
// of their bounds.
func (p *Pairs) Tracked() (failing, disabled int) { return len(p.failures), len(p.disabled) }

// sweepFailures forgets the pairs whose failures are all out of their
// window, once the table has doubled since the last sweep.
func (p *Pairs) sweepFailures(now int64) {
	if len(p.failures) < 2*max(p.swept, 64) {
		return
	}
	for k, times := range p.failures {
		if times[len(times)-1] <= now-p.windows[k.Type] {
			delete(p.failures, k)
		}
	}
	p.swept = len(p.failures)
}
