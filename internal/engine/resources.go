package engine

import (
	"slices"
	"strings"
)

// Named resources (docs/design.md, Named resources; a hard limit). A
// resource has a capacity in units; a job needs some units of some
// resources (its type's needs, or its own) and starts only when all are
// free. A job blocked by a resource is held by the resource's gate
// (gates.go), out of sight, like a job blocked by a conflict.
//
// No starvation by size: the first job by the order that finds a
// resource short of its units, and no resource it needs claimed by
// another, claims every resource it needs. From then on their free units
// are held for that job alone (never a slot) until it starts or leaves
// the queue: their gates are shut for every other job, which they hold as
// the dispatcher finds them. When a resource holding the claimant in its
// gate has the units it needs, the claimant goes back to its lane to
// compete (the gates stay shut); when it starts, its claims end and the
// gates open, their waiters competing as they are, and the next one short
// of units claims them again. A large job therefore waits at most for the
// jobs ahead of it in the order and for the units in use when it claimed
// to be released. Opening and shutting a gate cost O(L log n) for the L
// lanes its waiters come from, as a conflict lock's do. A change of a
// resource's capacity ends every claim of its claimant, which is looked
// at again, as are all the jobs the resource holds.
//
// A job that needs more units than a resource has (its capacity was
// lowered after it was accepted) claims nothing: it waits in the
// resource's tooBig gate, always shut, until the capacity changes, when
// every job the resource holds competes again: O(m log n), once.

// Need is some units of a named resource.
type Need struct {
	Resource string
	Units    int
}

// resource is one named resource's state.
type resource struct {
	name           string
	capacity, used int
	claimant       *Job // the job its free units are held for; nil: none
	gate           gate // shut while it has a claimant
	tooBig         gate // always shut: jobs that need more than the capacity
}

// need is a resolved Need.
type need struct {
	r     *resource
	units int
}

// SetResources configures the resources' capacities, before any job.
func (e *Engine) setResources(caps map[string]int) {
	for name, c := range caps {
		r := &resource{name: name, capacity: c}
		r.gate.res, r.tooBig.res = r, r
		r.tooBig.shut = true
		if e.resources == nil {
			e.resources = make(map[string]*resource)
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
// starting now: claimed by another job, or short of the units j needs
// (a capacity below them included), or nil.
func (e *Engine) blockingResource(j *Job) *resource {
	for _, n := range e.needsOf(j) {
		if c := n.r.claimant; c != nil && c != j || n.r.capacity-n.r.used < n.units {
			return n.r
		}
	}
	return nil
}

// resourceBlock returns the gate that holds j if a resource blocks it,
// or nil. A job that needs more than a capacity waits in that resource's
// tooBig gate, and one that needs a resource claimed by another waits in
// its gate, claiming nothing; otherwise, if one is short of its units, it
// claims every resource it needs and waits in the gate of the first short
// one. In order of resource name each time.
func (e *Engine) resourceBlock(j *Job) *gate {
	needs := e.needsOf(j)
	if n, ok := tooMuch(needs); ok {
		return &n.r.tooBig
	}
	for _, n := range needs {
		if c := n.r.claimant; c != nil && c != j {
			return &n.r.gate
		}
	}
	var first *gate
	for _, n := range needs {
		if r := n.r; r.capacity-r.used < n.units {
			first = &r.gate
			break
		}
	}
	if first == nil {
		return nil
	}
	for _, n := range needs { // every one: its free units go to no one else meanwhile
		if n.r.claimant == nil {
			n.r.claimant = j
			e.shut(&n.r.gate)
		}
	}
	return first
}

// takeUnits takes the units j needs as it starts, and ends its claims.
func (e *Engine) takeUnits(j *Job) {
	for _, n := range e.needsOf(j) {
		n.r.used += n.units
		if n.r.claimant == j {
			e.unclaim(n.r)
		}
	}
}

// unclaim ends r's claim: its gate opens, its waiters compete.
func (e *Engine) unclaim(r *resource) {
	r.claimant = nil
	e.open(&r.gate)
}

// dropClaims ends the claims of j, which leaves the queue: other jobs
// may start (Engine.unblocked).
func (e *Engine) dropClaims(j *Job) {
	for _, n := range e.needsOf(j) {
		if n.r.claimant == j {
			e.unclaim(n.r)
			e.unblocked = true
		}
	}
}

// releaseUnits gives back the units j held as its attempt ends, and puts
// back in its lane a claimant held by one of those resources that can
// now take its units.
func (e *Engine) releaseUnits(j *Job, now int64) {
	for _, n := range e.needsOf(j) {
		r := n.r
		r.used -= n.units
		if c := r.claimant; c != nil && c.state == StateParked && e.resHeld[c] == &r.gate && e.hasUnits(c, r) {
			e.unhold(c)
			e.show(c, now)
		}
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
		e.dropClaims(c)
		if c.state == StateParked {
			e.unhold(c)
			e.show(c, now)
		}
	}
	for _, g := range []*gate{&r.gate, &r.tooBig} {
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
