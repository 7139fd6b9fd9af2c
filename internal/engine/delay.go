package engine

// Jobs that wait for a time (SPEC section 10). Two rules act at a time a
// job carries, and both go through the timeline:
//
//   - not-before: a job whose Times.NotBefore is later than its
//     submission is StateDelayed until then. A delayed job is outside
//     every order and every fair-share account: its flow is not active,
//     its key not busy, and it is counted apart (ndelayed, keyState.delayed)
//     so that admission limits still count it and its key is not
//     forgotten. When its time comes it joins the queue as if submitted
//     then: its aging clock starts at that instant.
//   - start deadline: a job not started by min(Times.StartBy, submission +
//     Type.StartTimeout) ends, Expired, at that instant, wherever it
//     waits: delayed, queued or held by a gate.
//
// A job with either has its timers in Engine.timed, made on its first
// timer and dropped when it starts or ends, so that a job without one
// carries nothing but the Job.timed flag, and the timeline holds at most
// two timers per such job: O(log t) each to add, fire or cancel.

// timerKind says what a job's timer does when it falls due.
type timerKind uint8

const (
	timerRelease  timerKind = iota + 1 // a delayed job joins the queue
	timerDeadline                      // a job not yet started expires
)

// jobTimers are the timers of one job.
type jobTimers struct {
	release, deadline timer
}

// timersOf returns j's timers, making them on first use.
func (e *Engine) timersOf(j *Job) *jobTimers {
	if j.timed {
		return e.timed[j]
	}
	tm := &jobTimers{
		release:  timer{job: j, kind: timerRelease, idx: -1},
		deadline: timer{job: j, kind: timerDeadline, idx: -1},
	}
	if e.timed == nil {
		e.timed = make(map[*Job]*jobTimers)
	}
	e.timed[j] = tm
	j.timed = true
	return tm
}

// untime takes j's timers off the timeline and forgets them: j started or
// ended. O(log t).
func (e *Engine) untime(j *Job) {
	tm := e.timed[j]
	e.timeline.cancel(&tm.release)
	e.timeline.cancel(&tm.deadline)
	delete(e.timed, j)
	j.timed = false
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

// delay files an accepted job that may not start before notBefore.
func (e *Engine) delay(j *Job, notBefore int64) {
	j.state = StateDelayed
	e.ndelayed++
	j.lane.key.delayed++
	j.lane.typ.delayed++
	e.timeline.add(&e.timersOf(j).release, notBefore)
}

// undelay takes a delayed job out of the delayed count.
func (e *Engine) undelay(j *Job) {
	e.ndelayed--
	j.lane.key.delayed--
	j.lane.typ.delayed--
}

// Due applies what has fallen due by now, in order of time and then of
// filing: delayed jobs join the queue, and jobs past their start deadline
// end, Expired. It returns the expired jobs, valid until the next call,
// for the caller to end; then the caller should dispatch (Next), since
// jobs may have become startable, and set its clock timer at NextDue.
// O(d log n) for d timers due.
func (e *Engine) Due(now int64) []*Job {
	e.expired = e.expired[:0]
	for {
		t := e.timeline.popDue(now)
		if t == nil {
			return e.expired
		}
		switch t.kind {
		case timerRelease:
			e.undelay(t.job)
			e.join(t.job, now)
			e.queue(t.job, now)
		case timerDeadline:
			e.expire(t.job, now)
			e.expired = append(e.expired, t.job)
		}
	}
}

// expire ends a job that has not started by its deadline.
func (e *Engine) expire(j *Job, now int64) {
	e.untime(j)
	e.counters.Expired++
	j.lane.typ.stats.expired++
	if j.state == StateDelayed {
		e.undelay(j)
		if e.obs != nil {
			e.obs.Expired(j, now)
		}
		e.endDelayed(j, now)
		return
	}
	e.leaveQueue(j)
	if e.obs != nil {
		e.obs.Expired(j, now)
	}
	e.end(j, Expired, now)
}

// endDelayed ends a job that never joined the queue: nothing but its
// key's idleness has to follow.
func (e *Engine) endDelayed(j *Job, now int64) {
	j.state = StateDone
	if k := j.lane.key; k.pending == 0 && k.running == 0 && k.delayed == 0 {
		e.markIdle(k, now)
	}
}
