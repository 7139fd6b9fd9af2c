package engine

// Jobs that wait for a time (docs/design.md, Delays and start deadlines). Two rules act at a time a
// job carries, and both go through the timeline:
//
//   - not-before: a job whose Times.NotBefore is later than its
//     submission is StateDelayed until then. A delayed job is outside
//     every order and every fair-share account: its flow is not active,
//     its key not busy, and it is counted apart (naside, keyState.aside)
//     so that admission limits still count it and its key is not
//     forgotten. When its time comes it joins the queue as if submitted
//     then: its aging clock starts at that instant.
//   - start deadline: a job not started by min(Times.StartBy, submission +
//     Type.StartTimeout) ends, Expired, at that instant, wherever it
//     waits: delayed, queued or held by a gate.
//
// A job with either has its timers in Engine.timed, made on its first
// timer and dropped when it starts or ends, so that a job without one
// carries nothing but its flagTimed bit, and the timeline holds at most
// two timers per such job: O(log t) each to add, fire or cancel.

// timerKind says what a job's timer does when it falls due.
type timerKind uint8

const (
	timerRelease  timerKind = iota + 1 // a delayed job joins the queue
	timerDeadline                      // a job not yet started expires
	timerGrace                         // a retried job's grace period ends (lateGrace)
)

// jobTimers are the timers of one job, and what they need to remember.
type jobTimers struct {
	release, deadline timer
	// grace ends the grace period of a job that rejoined the queue after a
	// failed attempt within it: the grace queue takes jobs in submission
	// order only (Engine.lateGrace).
	grace timer
	// deadlineAt is the job's start deadline, kept while it runs so that a
	// retry is bounded by it too; 0: none.
	deadlineAt int64
	// retry: the release is a retry's: the job keeps its aging clock.
	retry bool
}

// timersOf returns j's timers, making them on first use.
func (e *Engine) timersOf(j *Job) *jobTimers {
	if j.is(flagTimed) {
		return e.timed[j]
	}
	tm := &jobTimers{
		release:  timer{job: j, kind: timerRelease, idx: -1},
		deadline: timer{job: j, kind: timerDeadline, idx: -1},
		grace:    timer{job: j, kind: timerGrace, idx: -1},
	}
	if e.timed == nil {
		e.timed = make(map[*Job]*jobTimers)
	}
	e.timed[j] = tm
	j.set(flagTimed, true)
	return tm
}

// untime takes j's timers off the timeline and forgets them: j ended. A
// job that starts keeps them while it has a deadline, to bound its
// retries (pause). O(log t).
func (e *Engine) untime(j *Job) {
	e.pause(j)
	delete(e.timed, j)
	j.set(flagTimed, false)
}

// pause takes j's timers off the timeline: it started.
func (e *Engine) pause(j *Job) {
	tm := e.timed[j]
	e.timeline.cancel(&tm.release)
	e.timeline.cancel(&tm.deadline)
	e.lateGrace.cancel(&tm.grace)
}

// deadlineOf returns the start deadline of a job of type t with the
// deadline startBy (0: none) submitted at now, or 0 if it has none: the
// earlier of startBy and now + the type's StartTimeout.
func deadlineOf(t *typeState, startBy, now int64) int64 {
	dl := startBy
	if to := t.cfg.StartTimeout; to > 0 && (dl == 0 || now+to < dl) {
		dl = now + to
	}
	return dl
}

// setDeadline gives j a start deadline.
func (e *Engine) setDeadline(j *Job, at int64) {
	tm := e.timersOf(j)
	tm.deadlineAt = at
	e.timeline.add(&tm.deadline, at)
}

// delay files an accepted job that may not start before notBefore.
func (e *Engine) delay(j *Job, notBefore int64) {
	j.state = StateDelayed
	e.aside(j)
	e.timeline.add(&e.timersOf(j).release, notBefore)
}

// aside counts an accepted job set aside, out of every order: delayed or
// paused.
func (e *Engine) aside(j *Job) {
	e.naside++
	j.lane.key.aside++
	j.lane.typ.aside++
}

// unaside takes a job out of the count of those set aside.
func (e *Engine) unaside(j *Job) {
	e.naside--
	j.lane.key.aside--
	j.lane.typ.aside--
}

// unsetAside takes a delayed or paused job out of where it is kept.
func (e *Engine) unsetAside(j *Job) {
	switch j.state {
	case StatePaused:
		e.unpark(j)
	case StateBlocked:
		e.nblocked--
	}
	e.unaside(j)
}

// Due applies what has fallen due by now, in order of time, then of the
// jobs' sequence numbers: delayed jobs join the queue, their aging clocks
// started at their NotBefore, and jobs past their start deadline end,
// Expired. The caller must call it before anything else at a time past
// NextDue, so that jobs join the grace queue in the order of their aging
// clocks. It returns the expired jobs, valid until the next call,
// for the caller to end; then the caller should dispatch (Next), since
// jobs may have become startable, and set its clock timer at NextDue.
// O(d log n) for d timers due.
func (e *Engine) Due(now int64) []*Job {
	e.expired = e.expired[:0]
	if e.rated {
		e.openRates(now)
	}
	for {
		t := e.timeline.popDue(now)
		if t == nil {
			return e.expired
		}
		switch t.kind {
		case timerRelease:
			j := t.job
			if e.waitsForDeps(j) {
				e.timed[j].retry = false // a retried job's dependencies completed: never here
				j.sub = t.at             // its aging clock starts at its NotBefore
				j.at = j.lane.stoodAt(t.at)
				e.block(j)
				continue
			}
			if j.paused() {
				// Its aging clock stands from its release, and stood
				// before it, if it ran, while its lane was paused.
				if tm := e.timed[j]; tm.retry {
					tm.retry = false
					e.catchUpClock(j, t.at)
				} else {
					j.sub = t.at
				}
				e.park(j, t.at)
				continue
			}
			e.unaside(j)
			if tm := e.timed[j]; tm.retry {
				tm.retry = false
				e.catchUpClock(j, now)
				e.rejoin(j, now)
			} else {
				e.join(j, t.at, now) // its aging clock starts at its NotBefore
				e.queue(j, now)
			}
		case timerDeadline:
			e.expire(t.job, now)
			e.expired = append(e.expired, t.job)
		}
	}
}

// Retry ends the failed attempt of running job j at now and puts the job
// back, delayed until notBefore (its backoff): it holds nothing while it
// waits, keeps its sequence number and its aging clock, and is bounded by
// its start deadline, if it has one, which may expire it first. O(log n).
func (e *Engine) Retry(j *Job, notBefore, now int64) {
	if j.Elsewhere() {
		panic("engine: Retry of a held record: RequeueHeld puts it back")
	}
	e.stop(j, Failed, now)
	j.set(flagAdopted, false) // the order starts its next attempt
	e.counters.Retries++
	j.lane.typ.stats.retries++
	if e.obs != nil {
		e.obs.Retrying(j, notBefore, now)
	}
	j.est = nil
	e.delay(j, notBefore) // first: its key is not idle
	tm := e.timed[j]
	tm.retry = true
	if tm.deadlineAt > 0 {
		e.timeline.add(&tm.deadline, tm.deadlineAt) // if past, due at once
	}
	e.settle(j, now)
	j.at = j.lane.stoodAt(now) // its aging clock runs, but stands while its lane is paused
}

// rejoin brings a retried job back into the queue. Its grace period, if
// it has not ended, ends by a timer of its own: the grace queue keeps jobs
// in submission order only.
func (e *Engine) rejoin(j *Job, now int64) {
	e.join(j, j.sub, now) // the aging clock runs from the first submission
	e.requeue(j, now)
}

// requeue shows a joined job whose aging clock started before now to the
// dispatcher: a retried job, or one restored from a store.
func (e *Engine) requeue(j *Job, now int64) {
	e.show(j, now)
	if e.aging.on && e.aging.grace > 0 && !e.aging.pastGrace(j.sub, now) {
		e.lateGrace.add(&e.timersOf(j).grace, j.sub+e.aging.grace)
	}
}

// endLateGrace ends the grace periods due by now of retried jobs, as
// endGrace does the grace queue's.
func (e *Engine) endLateGrace(now int64) {
	for t := e.lateGrace.popDue(now); t != nil; t = e.lateGrace.popDue(now) {
		e.endGraceOf(t.job, now)
	}
}

// expire ends a job that has not started by its deadline.
func (e *Engine) expire(j *Job, now int64) {
	e.untime(j)
	e.counters.Expired++
	j.lane.typ.stats.expired++
	if j.aside() {
		e.unsetAside(j)
		if e.obs != nil {
			e.obs.Expired(j, now)
		}
		e.endAside(j, Expired, now)
	} else {
		e.leaveQueue(j, now)
		if e.obs != nil {
			e.obs.Expired(j, now)
		}
		e.end(j, Expired, now)
	}
}

// endAside ends a job set aside, which is in no order, with o: nothing
// but its key's idleness, and the jobs that run after it, have to follow.
func (e *Engine) endAside(j *Job, o Outcome, now int64) {
	e.closeAside(j, o, now)
	if j.is(flagLinked) {
		e.resolve(j, o, now)
	}
}

// closeAside ends a job set aside, as endAside does, but for the jobs
// that run after it: resolve, which calls it, takes care of them.
func (e *Engine) closeAside(j *Job, o Outcome, now int64) {
	j.state, j.heap = StateDone, uint8(o)
	if e.nown > 0 {
		e.forgetNeeds(j)
	}
	if j.is(flagTimed) {
		e.untime(j)
	}
	if j.is(flagBound) {
		e.unbind(j)
	}
	if k := j.lane.key; k.pending == 0 && k.running == 0 && k.aside == 0 {
		e.markIdle(k, now)
	}
}
