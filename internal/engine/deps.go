package engine

import "slices"

// Dependencies (docs/design.md, Dependencies): a job may run after other jobs. It waits
// for them set aside, StateBlocked, like a delayed job (delay.go): out of
// every order and fair-share account, holding nothing, counted by the
// admission limits. Its aging clock runs meanwhile: a dependency is a gate,
// and gates do not stop it. When the last of its dependencies completes it
// joins the queue (or, if its key or type is paused, waits paused); if one
// of them ends any other way (failed for good, cancelled, expired, or
// itself failed by one of its own), the job ends without running,
// DependencyFailed, and so do the jobs that run after it, down the chain.
//
// The graph lives in a side table, Engine.deps, so that a job without
// dependencies or dependants carries only its flagLinked bit. Each edge
// is listed by both ends, the dependant's after and the dependency's
// dependants, and knows its place in the latter, so that a dependant that
// ends first (cancelled, expired) unlinks itself in O(its dependencies).
// Dependants released or failed at one instant go in order of their
// sequence numbers: O(d log d) for d dependants, once.
//
// A job can only name jobs enqueued before it, so the graph has no cycle.

// edge says that dependant runs after dep.
type edge struct {
	dep, dependant *Job
	idx            int // position in the dep's node.dependants
}

// depNode is a linked job's place in the graph.
type depNode struct {
	after      []*edge // the dependencies it still waits for
	dependants []*edge // the jobs that wait for it
}

// Unrun is a job that ended without running because Dep, a job it runs
// after, did not complete.
type Unrun struct {
	Job, Dep *Job
}

// nodeOf returns j's node, making it on first use.
func (e *Engine) nodeOf(j *Job) *depNode {
	if j.is(flagLinked) {
		return e.deps[j]
	}
	n := &depNode{}
	if e.deps == nil {
		e.deps = make(map[*Job]*depNode)
	}
	e.deps[j] = n
	j.set(flagLinked, true)
	return n
}

// link makes j, being enqueued, run after the jobs of after that have not
// ended; those that ended and completed are resolved already. It returns
// one that ended any other way, if there is one: j fails at once.
func (e *Engine) link(j *Job, after []*Job) (failed *Job) {
	for _, d := range after {
		if d.state == StateDone {
			if d.Outcome() != Completed && failed == nil {
				failed = d
			}
			continue
		}
		n := e.nodeOf(d)
		ed := &edge{dep: d, dependant: j, idx: len(n.dependants)}
		n.dependants = append(n.dependants, ed)
		jn := e.nodeOf(j)
		jn.after = append(jn.after, ed)
	}
	return failed
}

// waitsForDeps reports whether j has a dependency that has not ended.
func (e *Engine) waitsForDeps(j *Job) bool { return j.is(flagLinked) && len(e.deps[j].after) > 0 }

// block sets aside a job that waits for its dependencies, or, with none
// left, one that is about to fail by one.
func (e *Engine) block(j *Job) {
	j.state = StateBlocked
	e.nblocked++
}

// resolve settles the graph around j, which ended with o (and is
// linked): j stops waiting
// for its own dependencies, and the jobs that run after it go on (o is
// Completed) or end without running, and theirs after them. The caller
// has already ended j. O(e log e) for the e edges settled.
func (e *Engine) resolve(j *Job, o Outcome, now int64) {
	type failure struct{ job, dep *Job }
	var failing []failure
	for j != nil {
		// A job failed by a dependency may have lost its node already: the
		// dependant that failed before it was its last.
		var deps []*edge
		if n := e.deps[j]; n != nil {
			for _, ed := range n.after { // it ended first: cancelled, expired, or failed by another
				e.unlinkDependant(ed)
			}
			deps = n.dependants
			delete(e.deps, j)
			j.set(flagLinked, false)
		}
		slices.SortFunc(deps, func(a, b *edge) int { return bySeq(a.dependant, b.dependant) })
		for _, ed := range deps {
			d := ed.dependant
			dn := e.deps[d]
			removeEdge(&dn.after, ed)
			switch {
			case o != Completed:
				failing = append(failing, failure{d, j})
				continue
			case len(dn.after) == 0 && d.state == StateBlocked:
				e.unblock(d, now)
			}
			if len(dn.after)+len(dn.dependants) == 0 {
				delete(e.deps, d)
				d.set(flagLinked, false)
			}
		}
		// Fail the next dependant that has not ended yet (one may be
		// listed twice, by two of its dependencies that failed).
		j = nil
		for len(failing) > 0 && j == nil {
			f := failing[0]
			failing = failing[1:]
			if f.job.state != StateDone {
				e.failDependant(f.job, f.dep, now)
				j, o = f.job, DependencyFailed
			}
		}
	}
}

// unlinkDependant takes edge ed out of its dependency's dependants, and
// the dependency out of the graph if nothing is left of it there.
func (e *Engine) unlinkDependant(ed *edge) {
	n := e.deps[ed.dep]
	n.dependants = swapRemove(n.dependants, ed.idx, func(x *edge, i int) { x.idx = i })
	if len(n.dependants) == 0 && len(n.after) == 0 {
		delete(e.deps, ed.dep)
		ed.dep.set(flagLinked, false)
	}
}

// removeEdge takes ed out of a dependant's after list.
func removeEdge(list *[]*edge, ed *edge) {
	i := slices.Index(*list, ed)
	*list = slices.Delete(*list, i, i+1)
}

// unblock moves on a job whose last dependency completed: it waits paused
// if its key or type is, or joins the queue, its aging clock as it ran.
func (e *Engine) unblock(j *Job, now int64) {
	e.nblocked--
	e.catchUpClock(j, now)
	if j.paused() {
		e.park(j, now)
		return
	}
	e.unaside(j)
	e.rejoin(j, now)
}

// failDependant ends j, which has not started, because dep did not
// complete: it ends without running, and the caller learns of it through
// TakeUnrun.
func (e *Engine) failDependant(j, dep *Job, now int64) {
	switch j.state {
	case StateQueued, StateParked: // cannot be: a job with dependencies left is set aside
		panic("engine: a job waiting for a dependency is queued")
	}
	e.unsetAside(j)
	e.counters.DependencyFailed++
	j.lane.typ.stats.dependencyFailed++
	if e.obs != nil {
		e.obs.DependencyFailed(j, dep, now)
	}
	e.unrun = append(e.unrun, Unrun{j, dep})
	e.closeAside(j, DependencyFailed, now) // its own dependants are the caller's
}

// TakeUnrun returns the jobs that ended without running because a job
// they run after did not complete, since the last call, in the order they
// ended: a job after the dependency that failed it. The caller ends them;
// each record stays valid until then. O(1).
func (e *Engine) TakeUnrun() []Unrun {
	out := e.unrun
	e.unrun = nil
	return out
}

// HasUnrun reports whether TakeUnrun has something to return.
func (e *Engine) HasUnrun() bool { return len(e.unrun) > 0 }

// FirstDependency returns the earliest submitted job that waiting job j
// still waits for, or nil.
func (e *Engine) FirstDependency(j *Job) *Job {
	if !j.is(flagLinked) {
		return nil
	}
	var first *Job
	for _, ed := range e.deps[j].after {
		if first == nil || ed.dep.seq < first.seq {
			first = ed.dep
		}
	}
	return first
}
