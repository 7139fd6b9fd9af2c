package engine

// Jobs adopted running (doc.go, Jobs decided elsewhere). A new leader
// learns from the replicas which jobs the leader before it granted and
// that still run there, and a leader rebuilding from a durable store
// finds attempts still running; either way the job runs already, and no
// limit of this engine can hold it back. Adopt admits it and starts it at
// once, whatever holds: it counts against every limit from then on, as
// a job the order started does, and may leave the engine above one (the
// global limit, a tier's, type's or key's cap, a resource's units, a
// replica's capacity) until enough jobs end. The order already copes
// with that, as it does when SetMaxConcurrency, SetTierLimit,
// SetTypeLimit or SetKey lower a limit under the jobs running: each
// limit is a test of running >= limit, so it starts nothing that limit
// holds until the jobs running fall below it (a key's cap is shut at
// once, as after any start, and opens only below its cap; a replica's
// gate opens only as a slot frees on it, from full; a resource's units
// are free only once the holders release more than the excess).
//
// What an adopted job takes, and what it does not:
//
//   - its slot, its tier's, type's and key's counts, and its conflict
//     lock, even one another job holds (conflict.go: the lock stays shut
//     until the last holder ends);
//   - the units of the resources it needs, even past a capacity (a
//     claimant's expected start may then rise, and the jobs its backfill
//     skipped wait for the next release, as they always do);
//   - a place on its replica (Times.Replica), full or not known, where it
//     counts until its attempt ends; bound to none, it takes the first
//     replica with a free slot that serves its type, or none if none has
//     one (so it may run on no replica the engine knows, as the jobs
//     running when the first replica was set do);
//   - its key's fair-share clock is charged its estimate as a Fair start
//     is, or, if its key is below its reservation (MinSlots), it is a
//     Reserved start and takes that reservation, as the order would have;
//     never Urgent;
//   - no rate-limit token: the leader that granted it took one then, and
//     a bucket may not go below empty;
//   - no admission limit (MaxQueue, MaxPending) refuses it, as none does
//     a job restored (Times.Submitted); only an unknown type, a closing
//     engine, an unknown resource or more units than one has do;
//   - Times.NotBefore and Times.After are ignored: it runs, so whatever
//     it waited for is behind it. Its start deadline is kept, to bound
//     its retries, as a started job's is.
//
// Its start time is when it started, not now: its attempt's duration, the
// cost learnt at its end and the correction of its charge count from
// there. The order's start (lifecycle.go, start) is run for it at that
// time: of what start does, only the start time, the expected end of the
// units it holds and the record of the start read the time, and an
// adopted job has no claim and no place in any queue, so nothing is
// filed at a time past. flagAdopted marks it until its attempt ends, for
// what start does otherwise for it (no token, its replica) and for
// Verify (it may share its conflict lock).

// Adopt admits j, described by d with the times tm (nil: none), at now,
// and starts it as already running since started (a time not after now;
// a later one is taken as now): see above for what it takes and what it
// ignores. Its submission time is tm.Submitted, or started if that is 0
// or later. It is refused only as a restored job is by Enqueue: unknown
// type, StopAccepting, an unknown resource or more units than one has;
// and it is counted and told to the Observer as a job enqueued and
// started is: Submitted at now, Started at started. j.Adopted() reports
// true until its attempt ends. It frees nothing, so the caller need not
// dispatch after it. O(log n) as Enqueue, plus O(r) for r replicas.
func (e *Engine) Adopt(j *Job, d *Desc, tm *Times, started, now int64) *Refusal {
	if tm == nil {
		tm = &noTimes
	}
	t, r := e.admitType(d.Type)
	if r != nil {
		return r
	}
	var own []need
	if (e.resources != nil || len(tm.Needs) > 0) && (tm.Needs != nil || t.needs != nil) {
		if own, r = e.checkNeeds(t, tm.Needs); r != nil {
			return r
		}
	}
	started = min(started, now)
	sub := started
	if tm.Submitted != 0 {
		sub = min(tm.Submitted, started)
	}
	e.forget(now) // first: a key past its TTL comes back brand-new
	k := e.keyOrNew(d.Key)
	e.unmarkIdle(k)
	e.name(j, d, t, sub)
	j.lane, j.key = e.laneOf(t, k, now), k
	if tm.Replica != "" {
		e.bind(j, tm.Replica)
	}
	if own != nil {
		e.keepNeeds(j, own)
	}
	j.set(flagAdopted, true)
	e.counters.Submitted++
	if e.obs != nil {
		e.obs.Submitted(j, now)
	}
	e.join(j, sub, now)
	how := Fair
	if k.belowReservation() {
		how = Reserved
	}
	e.start(j, how, started)
	if deadline := deadlineOf(t, tm.StartBy, sub); deadline > 0 {
		e.timersOf(j).deadlineAt = deadline // to bound its retries
	}
	return nil
}

// AdoptOn is Adopt for a job bound to no replica that runs on replica on
// (a durable job a replica reports running): it is placed there, full or
// not known, and not bound to it, so that a later attempt goes wherever
// the order places it. With on "" it is Adopt. O(Adopt).
func (e *Engine) AdoptOn(j *Job, d *Desc, tm *Times, on string, started, now int64) *Refusal {
	e.adoptOn = on
	defer func() { e.adoptOn = "" }()
	return e.Adopt(j, d, tm, started, now)
}

// Adopted reports whether the job's attempt was adopted running (Adopt)
// rather than started by the order: from Adopt until the attempt ends.
func (j *Job) Adopted() bool { return j.is(flagAdopted) }
