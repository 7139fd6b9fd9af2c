package engine

// endGrace moves the queued jobs whose grace period ended into the
// aged orders. Amortised O(log n) per job.
func (e *Engine) endGrace(now int64) {
	for {
		j := e.grace.popDue(&e.aging, now)
		if j == nil {
			return
		}
		switch {
		case j.state == StateQueued:
			e.hide(j)
			e.show(j, now)
		case j.heap != onKey: // waiting on a conflict lock
			e.regrace(j, now)
		} // a job parked on its key's cap is aged already
	}
}

// show makes a job visible: in its lane, its type's aged order, and
// its lane ready.
func (e *Engine) show(j *Job, now int64) {
	j.state = StateQueued
	l := j.lane
	l.insert(&e.aging, j, now)
	if e.aging.urgentOn() && e.aging.pastGrace(j.sub, now) {
		l.typ.aged.Push(j.agedOrder(), j)
	}
	e.nqueued++
	e.ready(l)
}

// hide takes a visible job out of its lane and aged order.
func (e *Engine) hide(j *Job) {
	l := j.lane
	l.remove(j)
	if j.uidx >= 0 {
		l.typ.aged.Remove(int(j.uidx))
	}
	e.nqueued--
	if l.n+l.nwaiting == 0 {
		e.unready(l)
	}
}

// unpark returns a job parked on its key's cap to the queue. (Conflict
// waiters compete from their wait lanes when their lock is free.)
func (e *Engine) unpark(j *Job, now int64) {
	e.unparkKey(j)
	e.show(j, now)
}

func (e *Engine) unparkKey(j *Job) {
	k := j.lane.key
	top, _ := k.parked.Top()
	k.parked.Remove(int(j.idx))
	e.parkedKey--
	if k.kpIdx >= 0 {
		if k.parked.Len() == 0 {
			e.keyParked.Remove(k.kpIdx)
		} else if top == j {
			next, _ := k.parked.Top()
			e.keyParked.Fix(k.kpIdx, next.agedOrder())
		}
	}
}

// start gives j a slot.
func (e *Engine) start(j *Job, how Kind, now int64) {
	l := j.lane
	k, f, t := l.key, l.flow, l.typ
	switch {
	case j.state == StateQueued:
		e.hide(j)
	case j.state != StateParked: // new: a lone job starting at once
	case j.heap == onKey:
		e.unparkKey(j)
	default: // from an attached wait lane
		e.unwait(j)
	}
	e.grace.leave(j) // before at becomes its start time
	j.state, j.at, j.kind = StateRunning, now, how
	e.npending--
	k.pending--
	f.pending--
	t.pending--
	e.nrunning++
	t.running++
	t.tier.running++
	k.running++
	f.running++
	j.idx = int32(len(e.running))
	e.running = append(e.running, runningJob{j, e.hold(j)})
	if k.atCap() && !k.capped {
		e.capKey(k)
	}
	if how == Reserved {
		k.reserved++
	} else {
		j.est = e.costs.lookup(t, j.id)
		j.estimate, j.guessed = t.cost, j.est == nil
		if !j.guessed {
			j.estimate = j.est.seconds
		}
		j.weight = k.cfg.Weight
		e.charge(f, j.estimate, j.guessOf(), j.weight)
	}
	e.recordStart(j, now)
}

// finish ends a running job. With NotRun its function did not run (its
// caller gave up as it started), so no cost is learnt.
func (e *Engine) finish(j *Job, o Outcome, now int64) {
	l := j.lane
	k, f, t := l.key, l.flow, l.typ
	lk := e.running[j.idx].lock
	last := len(e.running) - 1
	e.running[j.idx] = e.running[last]
	e.running[j.idx].j.idx = j.idx
	e.running[last] = runningJob{}
	e.running = e.running[:last]
	e.nrunning--
	t.running--
	t.tier.running--
	k.running--
	f.running--
	e.release(lk)
	if k.capped && !k.atCap() {
		e.uncapKey(k)
	}
	dur := float64(now-j.at) / 1e6
	if j.kind == Reserved {
		k.reserved--
	} else {
		// Correct the charge from the estimate to the slot time used.
		e.charge(f, dur-j.estimate, -j.guessOf(), j.weight)
	}
	if o != NotRun {
		e.costs.observe(t, j.id, j.est, dur, now)
	}
	e.recordFinish(j, o, now)
	e.end(j, o, now)
}

// end moves j to its final state and settles what it leaves behind.
func (e *Engine) end(j *Job, o Outcome, now int64) {
	f, k := j.lane.flow, j.lane.key
	j.state, j.est = StateDone, nil // the caller may keep the record long after
	if e.npending == 0 {
		e.grace.reset() // nothing waits
	} else {
		e.grace.leave(j)
	}
	if f.pending == 0 && f.running == 0 && f.actIdx >= 0 {
		e.deactivate(f)
	}
	if k.pending == 0 && k.running == 0 {
		e.removeBusy(k)
		e.markIdle(k, now)
		e.emitAllocation(k, ReasonKeyDrained, now)
	}
}

// removeQueued takes a job that has not started out of the queue and
// ends it (cancelled, or the scheduler closed).
func (e *Engine) removeQueued(j *Job, now int64) {
	switch {
	case j.state == StateQueued:
		e.hide(j)
	case j.heap == onKey:
		e.unparkKey(j)
	default:
		e.unwait(j)
	}
	e.npending--
	j.lane.key.pending--
	j.lane.flow.pending--
	j.lane.typ.pending--
	e.recordCancel(j, now)
	e.end(j, NotRun, now)
}
