package decide

import (
	"cmp"
	"maps"
	"slices"

	"github.com/fairsched/fairsched/internal/engine"
)

// Remote is the Decider of a replica that is not the leader: the
// decisions are the leader's, in another process, asked through messages
// (wire.go). Its engine keeps a record of each of the replica's jobs for
// their identity (engine.Hold), and answers what every replica answers
// alike from the configuration (the job types); the leader decides the
// rest. Its calls never wait: what they send goes to the Outbox, and the
// leader's answers come back through Receive, under the run-time layer's
// lock (its Deliver).
//
// A change of the configuration (Configure) it applies to its own engine,
// which refuses it or not as in one process, and puts in its
// ChangeOutbox: the replica's Node appends it to the cluster's log, and
// every replica and the leader apply the log in its order (Apply;
// change.go).
//
// What it does not carry yet, and answers from this replica alone: the
// disabled pairs, the queue's room checked before a batch is asked for
// (Room, Reserve: the leader checks it again, for the batch as a whole,
// BeginBatch), and the reads (Figures, Page, Snapshot, EstimateWait),
// which know only this replica's jobs. WouldStart is false: no grant
// comes in the call (TryRunSync asks the leader instead: AskNow).
type Remote struct {
	e   *engine.Engine
	own *Local // e as a Decider: for the reads and the configuration
	g   Grantee
	out *Outbox
	// changes holds the changes of the configuration applied here, for
	// the cluster's log.
	changes ChangeOutbox
	name    string // this replica's
	// term is the leader's as last heard: 0 until a leader asked for the
	// replica's jobs (Resync). Until then nothing is sent: the first
	// leader's Resync will have it all.
	term uint64
	jobs map[uint64]*remoteJob // admitted and not ended, by number
	// types are the job types this replica has handlers for (SetTypes),
	// which its Hello tells; runs the durable attempts it runs, by the
	// job's ID (durable.go).
	types []string
	runs  map[int64]remoteRun
	// dones are the Dones sent and not yet Recorded by a leader: each
	// Hello carries them again, as a Done sent when the leader's
	// connection broke is lost with it, and the leader would count a
	// completed attempt lost.
	dones  map[runKey]Msg
	pairs  Pairs
	fenced bool // grants are dropped (Fence)
	atOnce bool // the next Enqueue asks to start at once or not at all (AskNow)
	park   bool // the next Enqueue's job waits here for others (Park)
	parked int  // jobs that wait here for others, not released
	// batch, while batching, are the jobs enqueued since BeginBatch, to
	// be asked for at EndBatch.
	batch    []*remoteJob
	batching bool
	batches  uint64 // numbers the batches asked for before a leader was known
	// sync numbers the Hellos sent (Msg.Sync): a grant or an end decided
	// on what an earlier one said is dropped.
	sync uint64
	// What the replica's slots did: how many of its jobs run (granted,
	// not ended), and how long, since it began at began, it had at least
	// one running (busy) or none (idle), to since.
	running      int
	busy, idle   int64
	began, since int64
	counts       engine.Counters // of its jobs: submitted, and how they ended
}

// remoteJob is what a replica keeps of one of its jobs while the leader
// decides it: enough to ask for it again (Hello).
type remoteJob struct {
	j         *engine.Job
	d         engine.Desc
	needs     []engine.Need
	notBefore int64 // absolute, the replica's time; 0: none
	startBy   int64
	granted   bool
	atOnce    bool  // asked to start at once or not at all (AskNow)
	inBatch   bool  // enqueued in a batch not yet asked for (BeginBatch)
	parked    bool  // waits here for the jobs it runs after, until Release (Park)
	deadline  int64 // a parked job's start deadline, its type's StartTimeout's or its own; 0: none
	// fresh: never asked of a leader (enqueued before one was known), so
	// never admitted; the Hello that first tells of it asks for it after
	// its list (hello), with the jobs of its batch (batch, 0: none).
	fresh bool
	batch uint64
	// admission, if a caller waits for the leader's answer (Admission),
	// receives it: true, admitted; false, refused.
	admission chan bool
}

// remoteRun is a durable attempt a replica runs: its number, and when it
// started.
type remoteRun struct {
	attempt int
	started int64
}

// runKey names one attempt of a durable job: the job's ID, the attempt's
// number.
type runKey struct {
	id      int64
	attempt int
}

func compareRuns(a, b runKey) int {
	return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(a.attempt, b.attempt))
}

// NewRemote returns the Decider of replica name, which begins at now,
// sends what the leader must know to out and keeps its jobs' records in
// e, handing the leader's answers to g.
func NewRemote(name string, e *engine.Engine, g Grantee, out *Outbox, now int64) *Remote {
	return &Remote{e: e, own: NewLocal(e, g), g: g, out: out, name: name, jobs: make(map[uint64]*remoteJob),
		runs: make(map[int64]remoteRun), dones: make(map[runKey]Msg), began: now, since: now}
}

// SetTypes sets the job types this replica has handlers for, which the
// leader runs durable jobs of here, before the first Hello. Its Grantee
// must be a Runner if there are any.
func (r *Remote) SetTypes(types []string) {
	if _, ok := r.g.(Runner); !ok && len(types) > 0 {
		panic("decide: a replica with handlers needs a Grantee that runs them (Runner)")
	}
	r.types = types
}

// StopRuns says, at now, that this replica takes no more durable
// attempts: it shuts down. A Hello tells the leader, which places them
// on other replicas from then on; the attempts that run here go on, and
// one the leader sent before it heard is lost (run drops it, as of an
// older Hello).
func (r *Remote) StopRuns(now int64) {
	if len(r.types) == 0 {
		return
	}
	r.types = nil
	if r.term != 0 {
		r.hello(now)
	}
}

// run starts the durable attempt m says, if it is for this replica's
// current Hello and not fenced: the Runner runs it, and DurableDone
// reports its end.
func (r *Remote) run(m *Msg, now int64) {
	id := int64(m.Seq)
	if m.Term != r.term || m.Sync < r.sync || r.fenced {
		return // of an older term or Hello: the leader counts it lost; fenced: Unfence tells the leader
	}
	if run, running := r.runs[id]; running {
		if run.attempt != m.Attempt {
			// An earlier attempt still runs here, which the leader
			// counted lost (this replica was removed, and came back
			// before the attempt returned): this one is lost too, and
			// retried once the leader hears it.
			r.done(Msg{Kind: Done, Seq: m.Seq, Attempt: m.Attempt, Outcome: engine.Failed,
				Err: "an earlier attempt of the job still runs on this replica", Flags: DoneLost})
		}
		return // else sent twice: it runs already
	}
	r.runs[id] = remoteRun{attempt: m.Attempt, started: now}
	r.ran(1, now)
	r.g.(Runner).RunDurable(id, m.Attempt, m.Desc.Type, m.Args, now)
}

// DurableDone reports that attempt of durable job id ended at now, with
// outcome o (Completed, Failed), err and flags.
func (r *Remote) DurableDone(id int64, attempt int, o engine.Outcome, err string, flags DoneFlags, now int64) {
	if run, ok := r.runs[id]; ok && run.attempt == attempt {
		delete(r.runs, id)
		r.ran(-1, now)
	}
	r.done(Msg{Kind: Done, Seq: uint64(id), Attempt: attempt, Outcome: o, Err: err, Flags: flags})
}

// done sends the leader Done m, and keeps it until a leader has it
// (Recorded): each Hello until then carries it again.
func (r *Remote) done(m Msg) {
	m.Replica = r.name
	r.dones[runKey{int64(m.Seq), m.Attempt}] = m
	if r.term != 0 {
		m.Term = r.term
		r.out.Put(m)
	}
}

// Unrecorded returns how many Dones this replica sent that no leader has
// Recorded yet.
func (r *Remote) Unrecorded() int { return len(r.dones) }

// Usage returns, at now, how many of the replica's jobs run, and how
// long, in µs since it began, it ran at least one (busy) and none (idle):
// the replica's own figures, which no other replica counts.
func (r *Remote) Usage(now int64) (running int, busy, idle int64) {
	busy, idle = r.busy, r.idle
	if r.running > 0 {
		busy += now - r.since
	} else {
		idle += now - r.since
	}
	return r.running, busy, idle
}

// ran counts delta more jobs running at now.
func (r *Remote) ran(delta int, now int64) {
	switch was := r.running; {
	case was == 0 && delta > 0:
		r.idle += now - r.since
		r.since = now
	case was > 0 && was+delta == 0:
		r.busy += now - r.since
		r.since = now
	}
	r.running += delta
}

// Enqueue asks the leader for j; it is never granted in the call. The
// leader's refusal, if any, comes later (Grantee.Ended). Dependencies
// between jobs (tm.After) are not carried to a leader: the run-time layer
// holds a job that waits for others here (Park) until they complete, and
// tm.After is ignored.
func (r *Remote) Enqueue(j *engine.Job, d engine.Desc, tm *engine.Times, now int64) (bool, *engine.Refusal) {
	atOnce, park := r.atOnce, r.park
	r.atOnce, r.park = false, false
	if ref := r.e.Hold(j, &d, now); ref != nil {
		return false, ref
	}
	rj := &remoteJob{j: j, d: d, atOnce: atOnce, fresh: true}
	if tm != nil {
		rj.needs, rj.notBefore, rj.startBy = tm.Needs, tm.NotBefore, tm.StartBy
	}
	r.jobs[j.Seq()] = rj
	r.counts.Submitted++
	if park {
		rj.parked = true
		rj.deadline = r.e.DeadlineOf(d.Type, rj.startBy, j.Submitted())
		r.parked++
	}
	switch {
	case r.batching:
		rj.inBatch = true
		r.batch = append(r.batch, rj)
	case r.term != 0:
		r.out.Put(r.ask(Ask, rj, now))
		rj.fresh = false
	}
	return false, nil
}

// BeginBatch makes the Enqueues that follow, until EndBatch, one batch
// (SubmitMany): they are asked for together, and the leader admits them
// all or none, now or, if no leader is known yet, after the first one's
// Resync (hello). The caller holds what guards the Remote throughout.
func (r *Remote) BeginBatch() { r.batching = true }

// EndBatch asks the leader, at now, for the jobs enqueued since
// BeginBatch, in one batch of messages that the leader admits all or
// none (AskAll). Without a leader yet, the first one's Resync asks for
// them so (hello). The caller waits for the answer to one of them
// (Admission): the others' is the same.
func (r *Remote) EndBatch(now int64) {
	r.batching = false
	if r.term != 0 && len(r.batch) > 0 {
		msgs := make([]Msg, 0, len(r.batch))
		for _, rj := range r.batch {
			if r.jobs[rj.j.Seq()] != rj {
				continue // ended already (a job it runs after had failed): never asked for
			}
			msgs = append(msgs, r.ask(Ask, rj, now))
			rj.fresh = false
		}
		if len(msgs) > 0 {
			msgs[0].Flags |= AskAll
			msgs[0].N = len(msgs)
			r.out.PutAll(msgs...)
		}
	}
	r.batches++
	for _, rj := range r.batch {
		rj.inBatch = false
		if rj.fresh {
			rj.batch = r.batches
		}
	}
	clear(r.batch)
	r.batch = r.batch[:0]
}

// Park makes the next Enqueue, called before the caller lets go of what
// guards the Remote, a job that waits here for the jobs it runs after,
// until they complete (Release) or one does not (Unrun): the leader is
// asked to admit it and count it against the queue's limits, and to hold
// nothing else for it (AskHeld). Its start deadline is this replica's to
// apply meanwhile (Due).
func (r *Remote) Park() { r.park = true }

// Release tells the leader, at now, that j, enqueued after Park, may run:
// the jobs it runs after completed. The leader takes it as admitted when
// it was held, keeping its submission time (AskAdmitted). Never asked for
// yet (no leader known), it is asked for as any other by the first
// Hello.
func (r *Remote) Release(j *engine.Job, now int64) {
	rj := r.jobs[j.Seq()]
	if rj == nil || !rj.parked {
		return
	}
	rj.parked = false
	r.parked--
	if r.term != 0 && !rj.fresh {
		m := r.ask(Ask, rj, now)
		m.Flags |= AskAdmitted
		r.out.Put(m)
	}
}

// Parked reports whether j waits here for the jobs it runs after (Park),
// not released yet.
func (r *Remote) Parked(j *engine.Job) bool {
	rj := r.jobs[j.Seq()]
	return rj != nil && rj.parked
}

// AskNow makes the next Enqueue, called before the caller lets go of
// what guards the Remote, ask the leader to start its job at once or not
// at all (TryRunSync): the leader grants it in its answer, or ends it
// refused with RefusedWouldWait, as it does a job so asked that a Hello
// carries (a failover came between). The caller waits for the answer
// (Admission).
func (r *Remote) AskNow() { r.atOnce = true }

// ask returns the message that describes rj at now: an Ask, or a
// Running for a Hello.
func (r *Remote) ask(kind MsgKind, rj *remoteJob, now int64) Msg {
	sub := rj.j.Submitted()
	m := Msg{Kind: kind, Term: r.term, Replica: r.name, Seq: rj.j.Seq(), Desc: rj.d, Needs: rj.needs, Age: now - sub}
	if rj.notBefore > sub {
		m.NotBefore = rj.notBefore - sub
	}
	if rj.startBy > 0 {
		m.StartBy = max(rj.startBy-sub, 1)
	}
	if kind == Running {
		m.Ran = now - rj.j.Started()
	}
	if kind == Ask && rj.atOnce {
		m.Flags = AskAtOnce
	}
	if kind == Ask && rj.parked {
		m.Flags |= AskHeld
	}
	return m
}

// Receive applies the leader's messages at now: grants, jobs it ended,
// and its requests for this replica's jobs. A message of an older term
// than the newest heard is dropped.
func (r *Remote) Receive(msgs []Msg, now int64) {
	for i := range msgs {
		m := &msgs[i]
		if m.Term < r.term || m.Replica != r.name {
			continue
		}
		switch m.Kind {
		case Resync:
			r.term = m.Term
			r.hello(now)
		case Admitted:
			if rj := r.jobs[m.Seq]; rj != nil && m.Term == r.term {
				rj.answer(true)
			}
		case Grant:
			rj := r.jobs[m.Seq]
			if rj == nil && m.Term == r.term && m.Sync >= r.sync {
				// Given up here first: the Cancel is on its way, or lost
				// with a message that crossed this one. Another frees the
				// slot for sure.
				r.out.Put(Msg{Kind: Cancel, Term: r.term, Replica: r.name, Seq: m.Seq})
				continue
			}
			if m.Term != r.term || m.Sync < r.sync || rj == nil || rj.granted || r.fenced {
				continue // of an older term or Hello: decided again; fenced: Unfence tells the leader
			}
			rj.answer(true)
			rj.granted = true
			r.ran(1, now)
			r.e.StartHeld(rj.j, now)
			r.g.Granted(rj.j)
		case Ended:
			rj := r.jobs[m.Seq]
			if m.Term != r.term || m.Sync < r.sync || rj == nil || rj.granted {
				continue
			}
			delete(r.jobs, m.Seq)
			if rj.parked {
				r.parked--
			}
			var ref *engine.Refusal
			if m.Refusal != engine.Accepted {
				ref = &engine.Refusal{Reason: m.Refusal, Limit: m.N, Size: m.Priority, Key: m.Desc.Key}
			}
			o := m.Outcome
			if o == 0 {
				o = engine.NotRun
			}
			switch {
			case o == engine.Expired:
				r.counts.Expired++
			case ref == nil:
				r.counts.Cancelled++
			default: // never admitted, as a refusal in one process
				r.counts.Submitted--
				if ref.Reason != engine.RefusedWouldWait { // a TryRunSync that would wait is no refusal
					r.e.Rejected(rj.d.Type, ref.Reason == engine.RefusedClosed, 1)
				}
			}
			rj.answer(ref == nil)
			r.e.EndHeld(rj.j, o, now)
			r.g.Ended(rj.j, o, ref, now)
		case Run:
			r.run(m, now)
		case Recorded:
			if m.Term == r.term {
				delete(r.dones, runKey{int64(m.Seq), m.Attempt})
			}
		}
	}
}

// Lost says the leader's messages may have been missed: the replica
// sends its whole state again, which the leader takes in place of what
// it knew.
func (r *Remote) Lost(now int64) {
	if r.term != 0 {
		r.hello(now)
	}
}

// hello sends the leader every job of the replica not ended, in order of
// their numbers, in one batch: the waiting ones to ask for again, the
// granted ones running; then the durable attempts it runs, by job ID,
// and the Dones no leader has Recorded, by job ID and attempt. Grants,
// ends and runs the leader decided before it has this Hello are dropped
// when they come (Msg.Sync).
func (r *Remote) hello(now int64) {
	seqs := make([]uint64, 0, len(r.jobs))
	for seq := range r.jobs {
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	ids := make([]int64, 0, len(r.runs))
	for id := range r.runs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	r.sync++
	msgs := make([]Msg, 1, 1+len(seqs)+len(ids))
	var fresh []Msg // asked for after the Hello's list, as new
	for _, seq := range seqs {
		rj := r.jobs[seq]
		switch {
		case rj.granted:
			msgs = append(msgs, r.ask(Running, rj, now))
		case rj.fresh:
			// Never admitted: the leader admits it as it would have when
			// it was enqueued, within the queue's limits, its batch's
			// jobs (consecutive numbers) all or none.
			m := r.ask(Ask, rj, now)
			if n := len(fresh); rj.batch != 0 && (n == 0 || r.jobs[fresh[n-1].Seq].batch != rj.batch) {
				m.Flags |= AskAll
			}
			fresh = append(fresh, m)
		default:
			msgs = append(msgs, r.ask(Ask, rj, now))
		}
	}
	for i := range fresh { // each batch's size, on its first Ask
		if fresh[i].Flags&AskAll != 0 {
			b := r.jobs[fresh[i].Seq].batch
			for fresh[i].N = 1; i+fresh[i].N < len(fresh) && r.jobs[fresh[i+fresh[i].N].Seq].batch == b; fresh[i].N++ {
			}
		}
	}
	for i := range fresh {
		rj := r.jobs[fresh[i].Seq]
		rj.fresh, rj.batch = false, 0
	}
	for _, id := range ids {
		run := r.runs[id]
		msgs = append(msgs, Msg{Kind: Runs, Term: r.term, Replica: r.name, Seq: uint64(id), Attempt: run.attempt, Ran: now - run.started})
	}
	for _, k := range slices.SortedFunc(maps.Keys(r.dones), compareRuns) {
		if _, ok := r.runs[k.id]; ok {
			// Another attempt of the job runs here, which the Hello
			// lists: the leader counted this one ended already, or
			// counts it lost.
			delete(r.dones, k)
			continue
		}
		m := r.dones[k]
		m.Term = r.term
		msgs = append(msgs, m)
	}
	msgs[0] = Msg{Kind: Hello, Term: r.term, Replica: r.name, N: len(msgs) - 1, Sync: r.sync, Types: r.types}
	r.out.PutAll(append(msgs, fresh...)...) // one batch: the leader takes a Hello whole
}

// send sends the leader a message about job j, if a leader is known.
func (r *Remote) send(kind MsgKind, j *engine.Job, m Msg) {
	if r.term == 0 {
		return
	}
	m.Kind, m.Term, m.Replica, m.Seq = kind, r.term, r.name, j.Seq()
	r.out.Put(m)
}

// Grant does nothing: the leader grants.
func (r *Remote) Grant(int64) {}

// Finish reports j's end.
func (r *Remote) Finish(j *engine.Job, o engine.Outcome, now int64) {
	delete(r.jobs, j.Seq())
	r.ran(-1, now)
	switch o {
	case engine.Completed:
		r.counts.Completed++
	case engine.Failed:
		r.counts.Failed++
	default:
		r.counts.Cancelled++
	}
	r.e.EndHeld(j, o, now)
	r.send(End, j, Msg{Outcome: o})
}

// Retry reports j's attempt's end; j asks again, not before notBefore.
func (r *Remote) Retry(j *engine.Job, notBefore, now int64) {
	rj := r.jobs[j.Seq()]
	rj.granted = false
	rj.notBefore = notBefore
	r.ran(-1, now)
	r.counts.Retries++
	r.e.RequeueHeld(j)
	r.send(Retry, j, Msg{NotBefore: max(notBefore-now, 0)})
}

// Cancel gives j up, granted by the leader or not: a grant that comes
// after is dropped, and the leader frees what it held.
func (r *Remote) Cancel(j *engine.Job, now int64) bool {
	r.counts.Cancelled++
	r.end(j, engine.NotRun, now)
	return false
}

// Raise asks the leader to raise j's base priority to p.
func (r *Remote) Raise(j *engine.Job, p int, now int64) {
	if rj := r.jobs[j.Seq()]; rj != nil && p > rj.d.Priority {
		rj.d.Priority = p
		if !rj.inBatch { // else its Ask, to come, carries it
			r.send(Raise, j, Msg{Priority: p})
		}
	}
}

// NextDue reports the earliest start deadline of the jobs that wait here
// for others (Park): the leader keeps the others' times. O(jobs) while
// any waits.
func (r *Remote) NextDue() (int64, bool) {
	due, ok := int64(0), false
	if r.parked > 0 {
		for _, rj := range r.jobs {
			if rj.parked && rj.deadline > 0 && (!ok || rj.deadline < due) {
				due, ok = rj.deadline, true
			}
		}
	}
	return due, ok
}

// Unrun ends j, enqueued after Park and not released, at now: a job it
// runs after did not complete, and it never runs.
func (r *Remote) Unrun(j *engine.Job, now int64) {
	r.counts.DependencyFailed++
	r.end(j, engine.DependencyFailed, now)
}

// end ends j, not granted or granted, with outcome o at now, given up
// here: a grant that comes after is dropped, and the leader frees what
// it held or counted.
func (r *Remote) end(j *engine.Job, o engine.Outcome, now int64) {
	if rj := r.jobs[j.Seq()]; rj != nil {
		if rj.granted {
			r.ran(-1, now)
		}
		if rj.parked {
			r.parked--
		}
		rj.answer(true) // not refused: the caller who waits has the job's end
	}
	delete(r.jobs, j.Seq())
	r.e.EndHeld(j, o, now)
	r.send(Cancel, j, Msg{})
}

// Due ends the jobs that wait here for others (Park) whose start
// deadline is not after now, expired, and returns them, in order of their
// numbers.
func (r *Remote) Due(now int64) []*engine.Job {
	if r.parked == 0 {
		return nil
	}
	var due []*engine.Job
	for _, rj := range r.jobs {
		if rj.parked && rj.deadline > 0 && rj.deadline <= now {
			due = append(due, rj.j)
		}
	}
	slices.SortFunc(due, func(a, b *engine.Job) int { return cmp.Compare(a.Seq(), b.Seq()) })
	for _, j := range due {
		r.counts.Expired++
		r.end(j, engine.Expired, now)
	}
	return due
}

// Failed counts a failure of k on this replica.
func (r *Remote) Failed(k Pair, rule DisableRule, now int64) (Span, bool) {
	return r.pairs.Failed(k, rule, now)
}

// Disable disables k on this replica.
func (r *Remote) Disable(k Pair, span Span, now int64) { r.pairs.Disable(k, span, now) }

// Enable enables k on this replica.
func (r *Remote) Enable(k Pair) { r.pairs.Enable(k) }

// Pairs returns this replica's disabled pairs.
func (r *Remote) Pairs() *Pairs { return &r.pairs }

// Configure applies c to this replica's engine and, if it took it, puts
// it in the ChangeOutbox, for the cluster's log: the leader applies it
// from there (Leader.Apply), as every replica does (Apply).
func (r *Remote) Configure(c Change, now int64) bool {
	if !r.own.Configure(c, now) {
		return false
	}
	r.changes.Put(c)
	return true
}

// Apply applies c, read from the cluster's log, to this replica's engine
// at now, and reports whether the engine took it. A change this replica
// made is applied again, which changes nothing, unless a change made
// elsewhere came between the two in the log.
func (r *Remote) Apply(c Change, now int64) bool { return r.own.Configure(c, now) }

// Changes returns the outbox of the changes Configure applied: its
// Node appends them to the cluster's log. Safe without the lock.
func (r *Remote) Changes() *ChangeOutbox { return &r.changes }

// Room, Reserve and Unreserve are this replica's engine's, which holds
// none of the cluster's jobs.
func (r *Remote) Room(n int, perKey map[string]int) *engine.Refusal { return r.e.Room(n, perKey) }
func (r *Remote) Reserve(n int, perKey map[string]int)              { r.e.Reserve(n, perKey) }
func (r *Remote) Unreserve(n int, perKey map[string]int)            { r.e.Unreserve(n, perKey) }

// Rejected and RejectedUnknownType count on this replica's engine.
func (r *Remote) Rejected(name string, closed bool, n int) { r.e.Rejected(name, closed, n) }
func (r *Remote) RejectedUnknownType()                     { r.e.RejectedUnknownType() }

// The job types are the configuration's, the same on every replica.
func (r *Remote) RegisterType(name string, c engine.Type) error { return r.e.RegisterType(name, c) }
func (r *Remote) TypeTier(name string) (int, bool)              { return r.e.TypeTier(name) }
func (r *Remote) BasePriority(d engine.Desc) (int, bool)        { return r.e.BasePriority(&d) }
func (r *Remote) DeadlineOf(name string, startBy, submitted int64) int64 {
	return r.e.DeadlineOf(name, startBy, submitted)
}
func (r *Remote) NeedsRefusal(name string, needs []engine.Need) *engine.Refusal {
	return r.e.NeedsRefusal(name, needs)
}
func (r *Remote) Reserved(name string, minSlots int) (int, int, int) {
	return r.e.ReservedWith(name, minSlots), r.e.ReservedTotal(), r.e.MaxConcurrency()
}

// Find returns this replica's job numbered seq, not ended.
func (r *Remote) Find(seq uint64) *engine.Job {
	if rj := r.jobs[seq]; rj != nil {
		return rj.j
	}
	return nil
}

// Each calls f with this replica's jobs not ended, in order of their
// numbers, listed before the first call (f may end them).
func (r *Remote) Each(f func(j *engine.Job, granted bool)) {
	rjs := make([]*remoteJob, 0, len(r.jobs))
	for _, rj := range r.jobs {
		rjs = append(rjs, rj)
	}
	slices.SortFunc(rjs, func(a, b *remoteJob) int { return cmp.Compare(a.j.Seq(), b.j.Seq()) })
	for _, rj := range rjs {
		f(rj.j, rj.granted) // f ends jobs, never grants one: the flags stand
	}
}

// FindRunning returns the first granted job, by number, that match
// reports true for, and its base priority (the leader knows its
// effective one).
func (r *Remote) FindRunning(match func(*engine.Job) bool) (*engine.Job, int) {
	var found *engine.Job
	for _, rj := range r.jobs {
		if rj.granted && match(rj.j) && (found == nil || rj.j.Seq() < found.Seq()) {
			found = rj.j
		}
	}
	if found == nil {
		return nil, 0
	}
	return found, found.Base()
}

// Admission returns a channel that receives the leader's answer to j,
// waiting: true once it is admitted (or granted, or ends without being
// refused), false if the leader refused it (Grantee.Ended has ended it).
// A caller that must know whether there was room for j (Submit) waits
// on it without the lock.
func (r *Remote) Admission(j *engine.Job) <-chan bool {
	rj := r.jobs[j.Seq()]
	if rj == nil {
		ch := make(chan bool, 1)
		ch <- true // ended already, and not by a refusal: that would have answered
		return ch
	}
	if rj.admission == nil {
		rj.admission = make(chan bool, 1)
	}
	return rj.admission
}

// answer gives a caller waiting for rj's admission the answer, once.
func (rj *remoteJob) answer(admitted bool) {
	if rj.admission != nil {
		rj.admission <- admitted
		rj.admission = nil
	}
}

// OwnNeeds returns the needs j, of this replica and not ended, was
// asked for with in place of its type's, and whether it was.
func (r *Remote) OwnNeeds(j *engine.Job) ([]engine.Need, bool) {
	if rj := r.jobs[j.Seq()]; rj != nil && rj.needs != nil {
		return rj.needs, true
	}
	return nil, false
}

// Idle reports whether this replica has no job not ended, and runs no
// durable attempt.
func (r *Remote) Idle() bool { return len(r.jobs) == 0 && len(r.runs) == 0 }

// StopAccepting refuses this replica's later jobs.
func (r *Remote) StopAccepting() { r.e.StopAccepting() }

// Figures are this replica's: its jobs running and waiting, and how its
// jobs ended; why they wait, and the keys' and types' figures, are the
// leader's (all its waiting jobs count as waiting their turn).
func (r *Remote) Figures(maxKeys int, pausedOf []string) Figures {
	f := r.own.Figures(maxKeys, pausedOf)
	unknown := f.Summary.RejectedUnknownType
	f.Summary.Counters = r.counts
	f.Summary.RejectedUnknownType = unknown
	f.Summary.Running, f.Summary.Pending = r.running, len(r.jobs)-(r.running-len(r.runs)) // running: its granted jobs and durable attempts
	f.Waiting[engine.WhyTurn] += f.Summary.Pending - r.parked
	f.Waiting[engine.WhyDependency] += r.parked // held here until the jobs they run after end (Park)
	return f
}

// Page, Snapshot and EstimateWait read this replica's engine.
func (r *Remote) Page(l *Listing, offset, limit int, now int64) { r.own.Page(l, offset, limit, now) }
func (r *Remote) Snapshot(l *Listing, now int64)                { r.own.Snapshot(l, now) }
func (r *Remote) EstimateWait(d engine.Desc, now int64) (int64, bool) {
	return r.e.EstimateWait(&d, now)
}

// WouldStart is false: no grant comes within the call.
func (r *Remote) WouldStart(engine.Desc, []engine.Need, int64) bool { return false }

var _ Decider = (*Remote)(nil)

// Fence drops the leader's grants from now on: the replica stopped its
// runs, as it could not renew its registration (internal/cluster).
func (r *Remote) Fence() { r.fenced = true }

// Unfence takes grants again, at now, and sends the leader the whole
// state, which replaces what it knew: a grant dropped meanwhile is asked
// for again.
func (r *Remote) Unfence(now int64) {
	if r.fenced {
		r.fenced = false
		r.Lost(now)
	}
}
