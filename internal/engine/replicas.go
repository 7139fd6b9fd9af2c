package engine

import (
	"slices"
	"strings"
)

// Replicas: capacity and packing (doc.go, Replicas). Many
// processes may run one scheduler's jobs, one engine deciding for all of
// them; each process is a replica with a capacity, the most jobs it runs
// at once, and the job types it has handlers for. The rule, once a
// replica was ever set (SetReplica; before that, none of this applies and
// a job's replica is ignored):
//
//   - a job bound to a replica (Times.Replica: a closure runs where it was
//     submitted) may run only on that one, whatever its types; any other
//     job may run on any replica whose types include its type;
//   - it starts only if a replica it may run on is known (set, not
//     removed) and runs fewer jobs than its capacity, and then runs on
//     the first such replica by name (packing: the first replicas fill
//     up, so that surplus ones go idle); Job.Replica says which;
//   - a replica's count is every job placed on it until that job's
//     attempt ends, bound or not; a removed replica's running jobs keep
//     counting (they still hold every limit while a failover settles),
//     and jobs bound to a removed or unknown replica wait.
//
// Replica capacity is one more gate (gates.go), of the kind that holds
// jobs: a job that the order reaches and that has no free replica is held,
// in the gate of what it may run on, out of every order, and the jobs
// behind it are looked at as for any gate (no head-of-line blocking):
//
//   - the jobs bound to a replica are held in that replica's gate (a
//     record is kept for a name bound but not known, while it holds jobs
//     or counts running ones);
//   - the other jobs of a type are held in the type's replica gate
//     (typeState.rgate).
//
// A gate is shut when a job is held in it, by the order, which found that
// every replica the gate's jobs may run on has no free slot: the same for
// all of them, since they are bound to the same replica or are of the same
// type. So a shut gate's replicas are all full (Verify checks it). A job
// held is found again when a slot frees on one of them: when a replica
// goes from full to having a free slot (a job placed on it ends, or
// SetReplica raises its capacity, gives it types or makes it known), its
// own gate and the replica gates of the types it serves open, and their
// jobs compete as they are, as a conflict lock's do when it opens; the
// first of them the order reaches that finds no free slot again shuts its
// gate again, with every job in it, and the search goes on. A slot that
// frees on a replica that was not full opens nothing: no shut gate has
// it among its replicas.
//
// Costs, for r known replicas (few: a cluster's processes) and T job
// types: whether a job has a free replica, and which is first, O(r) by
// name, looked at as the order reaches a job that passes every other
// hard limit; holding a job O(log n), as for any gate; a slot freeing on
// a full replica O(T + G·L log n) for the G gates it opens (its own and
// its types') and the L lanes their jobs come from, however many jobs
// those are; SetReplica O(r + T + G·L log n), RemoveReplica O(r). With no
// replica ever set, a job pays a test in Enqueue (its Times.Replica) and
// one as it ends (a flag, with its timers'), and pick one more; start,
// the end of an attempt and the admission of a lone job test a flag they
// share with named resources (Engine.placing).

// replica is one replica's record.
type replica struct {
	name     string
	capacity int
	types    map[string]bool // the job types it has handlers for; nil: every type
	known    bool            // set, and not removed since
	running  int             // jobs placed on it whose attempt has not ended
	idx      int             // position in Engine.replicas while known
	gate     gate            // holds the jobs bound to it that the order found with no slot there
}

// free reports whether the replica is known and has a free slot.
func (r *replica) free() bool { return r.known && r.running < r.capacity }

// serves reports whether the replica has a handler for jobs of type t.
func (r *replica) serves(t *typeState) bool { return r.types == nil || r.types[t.name] }

// SetReplica makes replica name known, with capacity (the most jobs it
// runs at once, >= 0) and the job types it has handlers for (nil: every
// type), or changes them; its running jobs keep counting. From the first
// call on, every job runs on a replica (replicas.go). It reports false,
// changing nothing, for the name "", which means no replica: a job bound
// to none, or placed on none. The caller dispatches after it: jobs may
// start. O(r + T + G·L log n).
func (e *Engine) SetReplica(name string, capacity int, types []string, now int64) bool {
	if name == "" {
		return false
	}
	e.replicated, e.placing = true, true
	r := e.replicaRecord(name)
	if !r.known {
		r.known = true
		i, _ := slices.BinarySearchFunc(e.replicas, name, func(x *replica, n string) int { return strings.Compare(x.name, n) })
		e.replicas = slices.Insert(e.replicas, i, r)
		for k := i; k < len(e.replicas); k++ {
			e.replicas[k].idx = k
		}
	}
	r.capacity = capacity
	r.types = nil
	if types != nil {
		r.types = make(map[string]bool, len(types))
		for _, t := range types {
			r.types[t] = true
		}
	}
	if r.free() {
		e.replicaFreed(r)
	}
	return true
}

// RemoveReplica forgets replica name and reports whether it was known:
// no job starts on it from now, and the jobs bound to it wait; those
// running on it count until their attempt ends. O(r).
func (e *Engine) RemoveReplica(name string, now int64) bool {
	r := e.replicaByName[name]
	if r == nil || !r.known {
		return false
	}
	r.known = false
	e.replicas = slices.Delete(e.replicas, r.idx, r.idx+1)
	for k := r.idx; k < len(e.replicas); k++ {
		e.replicas[k].idx = k
	}
	r.idx = -1
	e.dropReplicaIfUnused(r)
	return true
}

// ReplicaInfo describes one replica: known, or removed with jobs still
// running on it.
type ReplicaInfo struct {
	Name              string
	Capacity, Running int
	Types             []string // sorted; nil: every type
	Known             bool
}

// Replicas describes the replicas, by name. O(r log r).
func (e *Engine) Replicas() []ReplicaInfo {
	out := make([]ReplicaInfo, 0, len(e.replicaByName))
	for _, name := range sortedNames(e.replicaByName) {
		r := e.replicaByName[name]
		if !r.known && r.running == 0 {
			continue // kept only for the jobs bound to it
		}
		ri := ReplicaInfo{Name: name, Capacity: r.capacity, Running: r.running, Known: r.known}
		if r.types != nil {
			ri.Types = sortedNames(r.types)
		}
		out = append(out, ri)
	}
	return out
}

// Replica returns the replica the job runs on, while it runs, or "": no
// replica was known when it started, or it does not run.
func (j *Job) Replica() string {
	if !j.is(flagPlaced) {
		return ""
	}
	return j.lane.e.placedOn[j].name
}

// BoundReplica returns the replica the job is bound to (Times.Replica), or
// "", until it ends.
func (j *Job) BoundReplica() string {
	if !j.is(flagBound) {
		return ""
	}
	return j.lane.e.boundTo[j]
}

// replicaRecord returns the record of replica name, making it.
func (e *Engine) replicaRecord(name string) *replica {
	if r := e.replicaByName[name]; r != nil {
		return r
	}
	r := &replica{name: name, idx: -1}
	r.gate.rep = r
	if e.replicaByName == nil {
		e.replicaByName = make(map[string]*replica)
	}
	e.replicaByName[name] = r
	return r
}

// dropReplicaIfUnused forgets the record of a replica not known once it
// counts no running job and holds none.
func (e *Engine) dropReplicaIfUnused(r *replica) {
	if !r.known && r.running == 0 && len(r.gate.waits) == 0 {
		delete(e.replicaByName, r.name)
	}
}

// bind binds j, being enqueued, to replica name.
func (e *Engine) bind(j *Job, name string) {
	if e.boundTo == nil {
		e.boundTo = make(map[*Job]string)
	}
	e.boundTo[j] = name
	j.set(flagBound, true)
}

// unbind forgets j's binding: it ended.
func (e *Engine) unbind(j *Job) {
	delete(e.boundTo, j)
	j.set(flagBound, false)
}

// replicaFor returns the first replica by name that j may run on and
// that has a free slot, or nil. O(r).
func (e *Engine) replicaFor(j *Job) *replica {
	if j.is(flagBound) {
		if r := e.replicaByName[e.boundTo[j]]; r != nil && r.free() {
			return r
		}
		return nil
	}
	t := j.lane.typ
	for _, r := range e.replicas {
		if r.running < r.capacity && r.serves(t) {
			return r
		}
	}
	return nil
}

// replicaGate returns the gate that holds j when it has no free replica:
// its replica's, or its type's.
func (e *Engine) replicaGate(j *Job) *gate {
	if j.is(flagBound) {
		return &e.replicaRecord(e.boundTo[j]).gate
	}
	return &j.lane.typ.rgate
}

// holdForReplica holds j, which the order reached and which has no free
// replica, in its replica gate, and shuts the gate: every job it holds
// may run on the same replicas, all full. O(log n + L log n) if it shuts.
func (e *Engine) holdForReplica(j *Job, now int64) {
	g := e.replicaGate(j)
	if !g.shut {
		e.shut(g)
	}
	if j.state == StateParked && j.held == heldByReplica {
		return // in g already: shutting it took j out of sight
	}
	e.hold(j, g, heldByReplica, now)
}

// place puts j, starting, on the first free replica it may run on. A job
// adopted running (adopt.go) goes where it runs: on the replica AdoptOn
// names, or else, if it has no free one, on its own replica, full or not
// known, or, bound to none, on none.
func (e *Engine) place(j *Job) {
	var r *replica
	if j.is(flagAdopted) && e.adoptOn != "" {
		r = e.replicaRecord(e.adoptOn)
	} else if r = e.replicaFor(j); r == nil && j.is(flagAdopted) {
		if !j.is(flagBound) {
			return
		}
		r = e.replicaRecord(e.boundTo[j])
	}
	r.running++
	if e.placedOn == nil {
		e.placedOn = make(map[*Job]*replica)
	}
	e.placedOn[j] = r
	j.set(flagPlaced, true)
}

// unplace frees j's slot on its replica, as its attempt ends: if the
// replica was full, the jobs that may run on it compete again.
func (e *Engine) unplace(j *Job) {
	r := e.placedOn[j]
	delete(e.placedOn, j)
	j.set(flagPlaced, false)
	r.running--
	switch {
	case r.free() && r.running == r.capacity-1:
		e.replicaFreed(r)
	case !r.known:
		e.dropReplicaIfUnused(r)
	}
}

// replicaFreed opens the gates of the jobs that may run on r, which has a
// free slot: its own and those of the types it serves. O(T + G·L log n).
func (e *Engine) replicaFreed(r *replica) {
	if r.gate.shut {
		e.open(&r.gate)
	}
	for _, tr := range e.tiers {
		for _, t := range tr.types {
			if t.rgate.shut && r.serves(t) {
				e.open(&t.rgate)
			}
		}
	}
}

// replicaWhy returns why j waits for a replica: none it may run on is
// known, or every one is full; WhyTurn if one has a free slot. O(r).
func (e *Engine) replicaWhy(j *Job) Why {
	if j.is(flagBound) {
		return e.boundWhy(e.replicaByName[e.boundTo[j]])
	}
	return e.typeReplicaWhy(j.lane.typ)
}

// boundWhy returns why a job bound to r (nil: not known) waits.
func (e *Engine) boundWhy(r *replica) Why {
	switch {
	case r == nil || !r.known:
		return WhyNoReplica
	case r.running >= r.capacity:
		return WhyReplicasFull
	}
	return WhyTurn
}

// typeReplicaWhy returns why a job of type t, bound to no replica, waits.
func (e *Engine) typeReplicaWhy(t *typeState) Why {
	why := WhyNoReplica
	for _, r := range e.replicas {
		if r.serves(t) {
			if r.running < r.capacity {
				return WhyTurn
			}
			why = WhyReplicasFull
		}
	}
	return why
}

// replicaGates returns the replica gates that may hold jobs: the types'
// and the replicas'. O(T + records).
func (e *Engine) replicaGates() []*gate {
	var out []*gate
	for _, tr := range e.tiers {
		for _, t := range tr.types {
			out = append(out, &t.rgate)
		}
	}
	for _, name := range sortedNames(e.replicaByName) {
		out = append(out, &e.replicaByName[name].gate)
	}
	return out
}

// wouldHaveReplica reports whether a job of type t bound to replica
// bound ("": none) would find a free replica: WouldStart's question. O(r).
func (e *Engine) wouldHaveReplica(bound string, t *typeState) bool {
	if bound != "" {
		r := e.replicaByName[bound]
		return r != nil && r.free()
	}
	for _, r := range e.replicas {
		if r.running < r.capacity && r.serves(t) {
			return true
		}
	}
	return false
}

// replicaCapacity returns the slots of the replicas a job of type t
// bound to replica bound ("": none) may run on, and what their running jobs
// have left by t's typical duration: EstimateWait's limit. O(r).
func (e *Engine) replicaCapacity(bound string, t *typeState) (slots int, left float64) {
	add := func(r *replica) {
		slots += r.capacity
		left += float64(r.running) * t.typical / 2
	}
	if bound != "" {
		if r := e.replicaByName[bound]; r != nil && r.known {
			add(r)
		}
		return slots, left
	}
	for _, r := range e.replicas {
		if r.serves(t) {
			add(r)
		}
	}
	return slots, left
}
