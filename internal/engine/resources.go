package engine

import (
	"cmp"
	"math"
	"slices"
	"strings"
)

// Named resources (docs/design.md, Named resources; a hard limit). A
// resource has a capacity in units; a job needs some units of some
// resources (its type's needs, or its own) and starts only when all are
// free. A job blocked by a resource is held by one of the resource's
// gates (gates.go), out of sight, like a job blocked by a conflict.
//
// No starvation by size: the first job by the order that finds a
// resource short of its units, and no resource it needs claimed by
// another, claims every resource it needs, and waits alone in the short
// gate of the first one short. From then on their units are held for it
// (never a slot) until it starts or leaves the queue, but for backfill:
// a job behind it that needs one of them may take their free units if it
// fits in them and, by its cost estimate, ends by the claimant's start,
// the time the running jobs' estimated ends free the claimant's units
// (claimStart).
//
// The jobs that need a claimed resource are tried as the order reaches
// them, and each that backfills starts. One that does not (too long, or
// short of units) is skipped: it waits in the resource's skipped gate,
// always shut, and the jobs behind it are tried, up to lookahead
// (Config.BackfillLookahead) skipped jobs; the next that does not
// backfill stops the resource's backfill: it shuts the resource's gate
// and waits there, as does every later one. Both last until units of the
// resource are released or its claim ends (resumeBackfill): the skipped
// jobs go back to their lanes and the gate opens, and they are all tried
// again in order. The claim ends when the claimant starts or leaves, and
// a resource short again is claimed by the next job the order finds
// short. Opening and shutting a gate cost O(L log n) for the L lanes its
// waiters come from, as a conflict lock's do, and a skipped job costs
// O(log n) to hold and to put back, so trying the jobs costs O(log n)
// for each that starts, each skipped and one more, and a release
// O(lookahead log n), whatever the number of waiting jobs. doc.go
// derives the claimant's start, the bound on its wait, and why the
// skipped jobs need not be tried again before a release.
//
// A change of a resource's capacity ends every claim of its claimant,
// which is looked at again, as are all the jobs the resource holds. A job
// that needs more units than a resource has (its capacity was lowered
// after it was accepted) claims nothing: it waits in the resource's
// tooBig gate, always shut, until the capacity changes, when every job
// the resource holds competes again: O(m log n), once.

// Need is some units of a named resource.
type Need struct {
	Resource string
	Units    int
}

// resource is one named resource's state.
type resource struct {
	name           string
	capacity, used int
	claimant       *Job             // the job its units are held for; nil: none
	holders        map[*Job]holding // the running jobs that hold units of it
	gate           gate             // shut while its backfill is stopped, only while it has a claimant
	skipped        gate             // always shut: the jobs its backfill skipped, at most lookahead, only while it has a claimant
	short          gate             // always shut: its claimant, while it is short of the units it needs
	tooBig         gate             // always shut: jobs that need more than the capacity
}

// holding is the units of a resource a running job holds, and when it is
// expected to end: its start plus its cost estimate then, µs.
type holding struct {
	units int
	end   int64
}

// gates returns the resource's gates.
func (r *resource) gates() []*gate { return []*gate{&r.gate, &r.skipped, &r.short, &r.tooBig} }

// need is a resolved Need.
type need struct {
	r     *resource
	units int
}

// setResources configures the resources' capacities, before any job.
func (e *Engine) setResources(caps map[string]int) {
	for name, c := range caps {
		r := &resource{name: name, capacity: c, holders: map[*Job]holding{}}
		r.gate.res, r.skipped.res, r.short.res, r.tooBig.res = r, r, r, r
		r.skipped.shut, r.short.shut, r.tooBig.shut = true, true, true
		if e.resources == nil {
			e.resources = make(map[string]*resource)
			e.placing = true
		}
		e.resources[name] = r
	}
}

// resolveNeeds returns needs resolved against the resources, in order of
// name, or the name of one unknown.
func (e *Engine) resolveNeeds(needs []Need) ([]need, string) {
	out := make([]need, 0, len(needs))
	for _, n := range needs {
		r := e.resources[n.Resource]
		if r == nil {
			return nil, n.Resource
		}
		out = append(out, need{r, n.Units})
	}
	slices.SortFunc(out, func(a, b need) int { return strings.Compare(a.r.name, b.r.name) })
	return out, ""
}

// needsOf returns what j needs: its own needs, or its type's.
func (e *Engine) needsOf(j *Job) []need {
	if e.nown > 0 {
		if n, ok := e.ownNeeds[j]; ok {
			return n
		}
	}
	return j.lane.typ.needs
}

// tooMuch returns a need that exceeds its resource's capacity now, if any.
func tooMuch(needs []need) (need, bool) {
	for _, n := range needs {
		if n.units > n.r.capacity {
			return n, true
		}
	}
	return need{}, false
}

// fits reports whether j may take the units it needs now: each of its
// resources has them free, and is not claimed by another job.
func (e *Engine) fits(j *Job) bool { return e.blockingResource(j) == nil }

// blockingResource returns the first resource (by name) that keeps j from
// starting now, but for backfill: claimed by another job, or short of the
// units j needs (a capacity below them included), or nil.
func (e *Engine) blockingResource(j *Job) *resource {
	for _, n := range e.needsOf(j) {
		if c := n.r.claimant; c != nil && c != j || n.r.capacity-n.r.used < n.units {
			return n.r
		}
	}
	return nil
}

// resourceBlock returns the gate that holds j if a resource blocks it at
// now, or nil. A job that needs more than a capacity waits in that
// resource's tooBig gate. One that needs resources claimed by others
// waits in the gate of the first whose backfill is stopped; if none is,
// it backfills (nil), or else, on the first of them, it is skipped while
// fewer than lookahead jobs are, and otherwise stops its backfill and
// waits in its gate. Otherwise, if one is short of its units, it claims
// every resource it needs and waits in the short gate of the first short
// one. In order of resource name each time. O(lookahead) to count the
// skipped jobs, besides the claimants' starts (claimStart).
func (e *Engine) resourceBlock(j *Job, now int64) *gate {
	needs := e.needsOf(j)
	if n, ok := tooMuch(needs); ok {
		return &n.r.tooBig
	}
	var claimed *resource // the first resource another job claims
	for _, n := range needs {
		if c := n.r.claimant; c != nil && c != j {
			if n.r.gate.shut {
				return &n.r.gate
			}
			if claimed == nil {
				claimed = n.r
			}
		}
	}
	if claimed != nil {
		if e.backfills(j, needs, now) {
			return nil
		}
		if claimed.skipped.len() < e.cfg.BackfillLookahead {
			return &claimed.skipped // the jobs behind it are tried
		}
		e.shut(&claimed.gate) // until units of it are released
		return &claimed.gate
	}
	var first *gate
	for _, n := range needs {
		if r := n.r; r.capacity-r.used < n.units {
			first = &r.short
			break
		}
	}
	if first == nil {
		return nil
	}
	for _, n := range needs { // every one: its units go to no one else meanwhile, but for backfill
		if n.r.claimant == nil {
			n.r.claimant = j
		}
	}
	return first
}

// backfills reports whether j, which needs resources other jobs claim,
// may take the units it needs at now: every resource it needs has them
// free, and it ends, by its cost estimate, by the start of each job that
// claims one of them (claimStart).
func (e *Engine) backfills(j *Job, needs []need, now int64) bool {
	for _, n := range needs {
		if n.r.capacity-n.r.used < n.units {
			return false
		}
	}
	end := now + e.estimateOf(j)
	for _, n := range needs {
		if c := n.r.claimant; c != nil && c != j && end > e.claimStart(c) {
			return false
		}
	}
	return true
}

// estimateOf returns j's cost estimate in µs: the learnt cost of its
// (type, ID), or its type's default cost before one is learnt, the one
// fair share charges. O(1).
func (e *Engine) estimateOf(j *Job) int64 {
	t := j.lane.typ
	secs := t.cost
	if est := e.costs.lookup(t, j.id); est != nil {
		secs = est.seconds
	}
	return micros(secs)
}

// micros returns seconds in µs, rounded.
func micros(secs float64) int64 { return int64(math.Round(secs * 1e6)) }

// claimStart returns when claimant c could start by the estimates: the
// earliest time by which, each running job ending at its expected end,
// every resource c needs has the units c needs free; math.MinInt64 if they
// are free now. It is kept until the holders of one of those resources
// change. O(h log h) for the h running jobs that hold them, once per
// change: no more than the capacities' units, configured.
func (e *Engine) claimStart(c *Job) int64 {
	if at, ok := e.claimStarts[c]; ok {
		return at
	}
	at := int64(math.MinInt64)
	for _, n := range e.needsOf(c) {
		at = max(at, n.r.freeAt(n.units))
	}
	if e.claimStarts == nil {
		e.claimStarts = make(map[*Job]int64)
	}
	e.claimStarts[c] = at
	return at
}

// freeAt returns the earliest time by which units of r are free, each of
// its holders ending at its expected end; math.MinInt64 if they are free
// now.
func (r *resource) freeAt(units int) int64 {
	lack := units - (r.capacity - r.used)
	if lack <= 0 {
		return math.MinInt64
	}
	hs := make([]holding, 0, len(r.holders))
	for _, h := range r.holders {
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b holding) int { return cmp.Compare(a.end, b.end) })
	for _, h := range hs {
		if lack -= h.units; lack <= 0 {
			return h.end
		}
	}
	return math.MaxInt64 // more than the capacity: it claims nothing
}

// takeUnits takes the units j needs as it starts at now, and ends its
// claims.
func (e *Engine) takeUnits(j *Job, now int64) {
	needs := e.needsOf(j)
	if len(needs) == 0 {
		return
	}
	end := now + e.estimateOf(j)
	for _, n := range needs {
		r := n.r
		r.used += n.units
		r.holders[j] = holding{n.units, end}
		if r.claimant == j {
			e.unclaim(r, now)
		} else if r.claimant != nil {
			delete(e.claimStarts, r.claimant)
		}
	}
}

// unclaim ends r's claim: its backfill's waiters compete.
func (e *Engine) unclaim(r *resource, now int64) {
	delete(e.claimStarts, r.claimant)
	r.claimant = nil
	e.resumeBackfill(r, now)
}

// dropClaims ends the claims of j, which leaves the queue at now: other
// jobs may start (Engine.unblocked).
func (e *Engine) dropClaims(j *Job, now int64) {
	for _, n := range e.needsOf(j) {
		if n.r.claimant == j {
			e.unclaim(n.r, now)
			e.unblocked = true
		}
	}
}

// releaseUnits gives back the units j held as its attempt ends. A claimed
// resource's backfill resumes, and its claimant, if the resource held it
// short and now has its units, goes back to its lane.
func (e *Engine) releaseUnits(j *Job, now int64) {
	for _, n := range e.needsOf(j) {
		r := n.r
		r.used -= n.units
		delete(r.holders, j)
		c := r.claimant
		if c == nil {
			continue
		}
		delete(e.claimStarts, c)
		e.resumeBackfill(r, now)
		if c.state == StateParked && e.resHeld[c] == &r.short && e.hasUnits(c, r) {
			e.unhold(c)
			e.show(c, now)
		}
	}
}

// resumeBackfill has every job r's backfill set aside compete again, as
// units of r are released or its claim ends: its skipped jobs go back to
// their lanes, by sequence number, and its gate opens if it is shut.
// O(lookahead log n + L log n) for the L lanes the gate's jobs come from.
func (e *Engine) resumeBackfill(r *resource, now int64) {
	if len(r.skipped.waits) > 0 {
		skipped := appendHeld(nil, &r.skipped)
		slices.SortFunc(skipped, bySeq)
		for _, j := range skipped {
			e.unhold(j)
			e.show(j, now)
		}
	}
	if r.gate.shut {
		e.open(&r.gate)
	}
}

// hasUnits reports whether r has the units j needs of it free.
func (e *Engine) hasUnits(j *Job, r *resource) bool {
	for _, n := range e.needsOf(j) {
		if n.r == r {
			return r.capacity-r.used >= n.units
		}
	}
	return true
}

// SetResource changes the capacity of resource name and reports whether
// it is configured. Its claimant's claims end, and the claimant and every
// job the resource holds compete again.
// O(m log n) for the m jobs it holds.
func (e *Engine) SetResource(name string, capacity int, now int64) bool {
	r := e.resources[name]
	if r == nil {
		return false
	}
	r.capacity = capacity
	if c := r.claimant; c != nil {
		// Every claim of its claimant ends: it is looked at again, as a
		// job that has claimed nothing, where it stands in the order.
		e.dropClaims(c, now)
		if c.state == StateParked {
			e.unhold(c)
			e.show(c, now)
		}
	}
	for _, g := range r.gates() {
		var held []*Job
		for _, w := range g.waits {
			held = appendLane(held, &w.lane)
		}
		slices.SortFunc(held, bySeq)
		for _, j := range held {
			e.unhold(j)
			e.show(j, now)
		}
	}
	return true
}

// Resources returns each resource's capacity and units in use.
func (e *Engine) Resources() map[string][2]int {
	out := make(map[string][2]int, len(e.resources))
	for name, r := range e.resources {
		out[name] = [2]int{r.capacity, r.used}
	}
	return out
}

// forgetNeeds drops the needs of its own of j, which ended.
// OwnNeeds returns the units of resources j needs in place of its type's,
// while it is pending or running, and whether it has needs of its own
// (none, if the list is empty). O(needs).
func (e *Engine) OwnNeeds(j *Job) ([]Need, bool) {
	own, ok := e.ownNeeds[j]
	if !ok {
		return nil, false
	}
	out := make([]Need, len(own))
	for i, n := range own {
		out[i] = Need{Resource: n.r.name, Units: n.units}
	}
	return out, true
}

func (e *Engine) forgetNeeds(j *Job) {
	if _, ok := e.ownNeeds[j]; ok {
		delete(e.ownNeeds, j)
		e.nown--
	}
}
