package engine

// Records of jobs decided elsewhere (doc.go, Jobs decided elsewhere).
// When one engine decides for many replicas, a replica that is not the
// leader still runs its own closures, and its run-time layer needs a job
// record for each, with the identity Enqueue gives (type, key, ID, tier,
// base priority, a sequence number unique in this engine, submission and
// start times), while every decision about it is the leader's, in
// another process. Hold makes such a record, a held record, and
// StartHeld, RequeueHeld and EndHeld follow what the leader decided:
//
//	Hold -> StateElsewhere -StartHeld-> StateRunning (flagElsewhere)
//	     -RequeueHeld-> StateElsewhere ... -EndHeld-> StateDone
//
// A held record is in no order, no gate and no count of this engine:
// not pending, running or set aside, charged to no flow, counted by no
// limit, no Summary figure and no Counters (the leader counts the job),
// and the Observer is not told of it. It is listed in Engine.elsewhere,
// so that Idle waits for it and Verify can check it; that list, not the
// lanes, is the only place the engine keeps it.
//
// Its lane gives it its type and key, and nothing else: the engine never
// reaches a lane from a held record but for the accessors. So a key that
// has nothing but held records is idle, offers its lanes to other keys
// (spare.go) and is forgotten after IdleTTL as any idle key is (a key
// made for a held record goes on the idle list at once); a record keeping
// a pointer to a lane that went to another key, or was let go, still
// reads its type from it (a lane serves one type), its key from Job.key,
// and nothing else reads it.
//
// A held record must not be given to Enqueue's life methods: Finish,
// Retry, Cancel or Raise (Next never returns one, as it is in no order),
// nor named in another job's Times.After. Retry and Cancel check, and
// panic; Finish, on the path of every job, does not, and would corrupt
// the running list. Raise changes nothing of a job not waiting here.

// Hold makes j, described by d, a held record at now: it gets its type
// and key (its lane), its ID, its base priority as Enqueue computes it, a
// sequence number from Enqueue's counter and the submission time now,
// and waits elsewhere (StateElsewhere) until StartHeld or EndHeld. It is
// refused only for an unknown type (RefusedUnknownType) and after
// StopAccepting (RefusedClosed), each counted as Enqueue counts it: no
// admission limit, gate or order applies to it. O(1), plus making its
// key and lane the first time they are seen, as Enqueue does.
func (e *Engine) Hold(j *Job, d *Desc, now int64) *Refusal {
	t, r := e.admitType(d.Type)
	if r != nil {
		return r
	}
	e.forget(now) // first: a key past its TTL comes back brand-new
	k := e.keyOrNew(d.Key)
	e.name(j, d, t, now)
	j.lane, j.key = e.laneOf(t, k, now), k
	if k.pending == 0 && k.running == 0 && k.aside == 0 {
		e.markIdle(k, now) // a record made here goes on the idle list; one idle stays as it was
	}
	j.state = StateElsewhere
	j.idx = int32(len(e.elsewhere))
	e.elsewhere = append(e.elsewhere, j)
	return nil
}

// StartHeld records that the leader granted held record j, waiting
// elsewhere, at now: j.Started() is now and j.Running() reports true,
// though no limit of this engine counts it. O(1).
func (e *Engine) StartHeld(j *Job, now int64) {
	if j.state != StateElsewhere {
		panic("engine: StartHeld of a job that is not a held record waiting")
	}
	j.state, j.at = StateRunning, now
	j.set(flagElsewhere, true)
}

// RequeueHeld records that held record j's attempt ended and the job
// waits elsewhere to run again (StateElsewhere). j.Started() keeps the
// start of the attempt that ended. O(1).
func (e *Engine) RequeueHeld(j *Job) {
	if !j.is(flagElsewhere) {
		panic("engine: RequeueHeld of a job that is not a held record running")
	}
	j.state = StateElsewhere
	j.set(flagElsewhere, false)
}

// EndHeld ends held record j, waiting or running elsewhere, with outcome
// o: it is StateDone, and Idle no longer waits for it. now is when it
// ended, as for Finish; nothing of a held record depends on it. O(1).
func (e *Engine) EndHeld(j *Job, o Outcome, now int64) {
	if !j.Elsewhere() {
		panic("engine: EndHeld of a job that is not a held record")
	}
	e.elsewhere = swapRemove(e.elsewhere, int(j.idx), jobSetIdx)
	j.state, j.heap = StateDone, uint8(o)
	j.set(flagElsewhere, false)
}

// Elsewhere reports whether j is a held record (Hold) not yet ended:
// waiting or running elsewhere.
func (j *Job) Elsewhere() bool { return j.state == StateElsewhere || j.is(flagElsewhere) }

// Elsewhere returns how many held records have not ended. O(1).
func (e *Engine) Elsewhere() int { return len(e.elsewhere) }

// verifyElsewhere checks the held records: each listed at its position,
// waiting or running elsewhere, and holding nothing of the engine's (no
// timers, dependencies, binding, placement, own needs; not adopted); and
// no job in the running list is one. A held record the caller dropped
// without EndHeld cannot be told from one that is still listed: the
// engine keeps no other trace of them to recount from.
func (e *Engine) verifyElsewhere() error {
	for i, j := range e.elsewhere {
		switch {
		case int(j.idx) != i:
			return errorf("held record %d listed at %d has index %d", j.seq, i, j.idx)
		case j.state != StateElsewhere && !(j.state == StateRunning && j.is(flagElsewhere)):
			return errorf("held record %d in state %d, running elsewhere %v", j.seq, j.state, j.is(flagElsewhere))
		case j.flags&^flagElsewhere != 0 || e.ownNeeds[j] != nil || j.lane == nil:
			return errorf("held record %d has flags %d, needs of its own %v", j.seq, uint8(j.flags), e.ownNeeds[j] != nil)
		}
	}
	for _, r := range e.running {
		if r.j.is(flagElsewhere) {
			return errorf("held record %d in the running list", r.j.seq)
		}
	}
	return nil
}
