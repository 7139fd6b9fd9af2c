package decide

import (
	"cmp"
	"maps"
	"slices"

	"github.com/fairsched/fairsched/internal/engine"
)

// Leader is the Decider of the replica that leads: its engine decides for
// the whole cluster. Its own process's jobs it decides as Local does,
// each bound to this replica (a closure runs where it was submitted);
// the other replicas' jobs it holds as stand-ins, admitted from their
// messages (wire.go), each bound to its replica, and their grants and
// ends go back as messages. Every replica's capacity bounds what runs on
// it, this one's included.
//
// A term begins with Begin: the leader asks every live replica for its
// jobs (Resync) and grants nothing until each has answered (Hello) or
// was removed (declared dead): before that, a job running on a replica
// it has not heard from would count against no limit. A replica added
// later is asked alone, and until it answers only its own jobs wait.
type Leader struct {
	local *Local // the engine's decisions; its grants come to the Leader
	e     *engine.Engine
	g     Grantee // the run-time layer's
	// keeper is g, if it keeps the cluster's durable jobs (durable.go):
	// then this process's jobs are those, bound to no replica.
	keeper Keeper
	out    *Outbox
	name   string // this replica's
	// capacity is this replica's; it counts in the engine once the term
	// is ready (0 until then, so that nothing starts).
	capacity int
	term     uint64
	closing  bool         // StopAccepting: this process's jobs are refused
	times    engine.Times // this process's jobs' times, when it gives none
	// replicas are the other live replicas and their capacities;
	// awaiting, those whose Hello this term has not come. While Begin's
	// are awaited (blocking: Begin's replicas not heard from yet),
	// nothing is granted.
	replicas map[string]int
	awaiting map[string]bool
	blocking map[string]bool
	// asked is when each replica was last sent a Resync (Nudge).
	asked map[string]int64
	// incarnation is each replica's registration as last given
	// (AddReplica; 0: not known yet), and sync the number of the last
	// Hello from it (Msg.Sync), which every Grant and Ended to it carry.
	incarnation map[string]int64
	sync        map[string]uint64
	// types are the job types each replica has handlers for, from its
	// last Hello (durable.go, typesOf).
	types map[string][]string
	// reading are the replicas whose Hello is being read: until it is
	// whole, nothing starts on them (helloWhole).
	reading map[string]bool
	stand   map[standKey]*standIn
	byJob   map[*engine.Job]*standIn
	// held are the replicas' jobs that wait there for others (AskHeld),
	// by their keys: each counted against the queue's limits
	// (engine.Reserve) until released, given up, or forgotten.
	held map[standKey]string
	// valid, if set, reports whether the term may still decide: past
	// it, Receive takes nothing and Grant grants nothing (SetGuard).
	valid func() bool
}

// SetGuard makes the Leader take no message and grant nothing once valid
// reports false: its term could be over (its lease could lapse). valid is
// called with the lock held, at each Receive and Grant.
func (l *Leader) SetGuard(valid func() bool) { l.valid = valid }

// TagStandIn is the engine record's Tag of a stand-in: the run-time
// layer's own tags are below it.
const TagStandIn uint8 = 0xff

// standKey names another replica's job: the replica, and its number
// there.
type standKey struct {
	replica string
	seq     uint64
}

// standIn is the leader's record of another replica's job.
type standIn struct {
	j   engine.Job
	key standKey
}

// NewLeader returns the Decider of replica name, of capacity slots, which
// leads: e decides for the cluster, g is handed this process's grants and
// out carries the other replicas'. Nothing starts before Begin.
func NewLeader(name string, capacity int, e *engine.Engine, g Grantee, out *Outbox) *Leader {
	l := &Leader{e: e, g: g, out: out, name: name, capacity: capacity,
		replicas: make(map[string]int), awaiting: make(map[string]bool), asked: make(map[string]int64),
		incarnation: make(map[string]int64), sync: make(map[string]uint64), types: make(map[string][]string), reading: make(map[string]bool),
		stand: make(map[standKey]*standIn), byJob: make(map[*engine.Job]*standIn), held: make(map[standKey]string)}
	l.keeper, _ = g.(Keeper)
	l.local = NewLocal(e, l)
	if l.keeper == nil {
		l.times.Replica = name
	}
	e.SetReplica(name, 0, nil, 0) // known and full: the rule of replicas holds from the start
	return l
}

// Begin begins term, in which the other live replicas are replicas (their
// capacities by name), at now: each is asked for its jobs, and nothing is
// granted until all have answered.
func (l *Leader) Begin(term uint64, replicas map[string]int, now int64) {
	l.term = term
	for _, name := range slices.Sorted(maps.Keys(replicas)) {
		l.replicas[name] = replicas[name]
		l.awaiting[name] = true
		l.resync(name, now)
	}
	l.blocking = make(map[string]bool, len(replicas))
	for name := range replicas {
		l.blocking[name] = true
	}
	if len(l.blocking) == 0 {
		l.ready(now)
	}
}

// ready makes this replica's capacity, and that of every replica heard
// from, count: the term's grants begin.
func (l *Leader) ready(now int64) {
	l.e.SetReplica(l.name, l.capacity, l.typesOf(l.name), now)
	for name, c := range l.replicas {
		if !l.awaiting[name] && !l.reading[name] {
			l.e.SetReplica(name, c, l.typesOf(name), now)
		}
	}
	if l.keeper != nil {
		l.keeper.Ready(now)
	}
	l.Grant(now)
}

// AddReplica adds replica name, of capacity slots, registered as its
// incarnation (a number that changes when it registers again: 0, not
// known), at now, and asks it for its jobs. A replica known already has
// its capacity changed; if it registered again since (it restarted under
// its name), its former self is removed first, its jobs lost.
func (l *Leader) AddReplica(name string, capacity int, incarnation int64, now int64) {
	if _, known := l.replicas[name]; known {
		if was := l.incarnation[name]; was == 0 || incarnation == 0 || was == incarnation {
			if incarnation != 0 {
				l.incarnation[name] = incarnation
			}
			l.replicas[name] = capacity
			if !l.awaiting[name] && len(l.blocking) == 0 {
				l.e.SetReplica(name, capacity, l.typesOf(name), now)
				l.Grant(now)
			}
			return
		}
		l.RemoveReplica(name, now)
	}
	l.replicas[name] = capacity
	l.incarnation[name] = incarnation
	l.awaiting[name] = true
	l.resync(name, now)
}

// resync asks replica name, at now, for its jobs.
func (l *Leader) resync(name string, now int64) {
	l.asked[name] = now
	l.out.Put(Msg{Kind: Resync, Term: l.term, Replica: name})
}

// Nudge asks again, at now, every replica that has not answered for its
// jobs though it was asked at least after ago: a Resync, or the Hello
// that answered it, may have been lost. Not sooner: a replica asked
// twice answers twice, and its second Hello makes it drop the durable
// attempts sent to it after the first (their Runs are older), which are
// lost.
func (l *Leader) Nudge(now, after int64) {
	for _, name := range slices.Sorted(maps.Keys(l.awaiting)) {
		if now-l.asked[name] >= after {
			l.resync(name, now)
		}
	}
}

// RemoveReplica removes replica name at now, declared dead: its jobs end,
// the running ones lost, and what they held is free.
func (l *Leader) RemoveReplica(name string, now int64) {
	if _, known := l.replicas[name]; !known {
		return
	}
	delete(l.replicas, name)
	delete(l.incarnation, name)
	delete(l.asked, name)
	delete(l.sync, name)
	delete(l.types, name)
	l.heard(name, now)
	l.e.RemoveReplica(name, now)
	l.forget(name, now)
	if l.keeper != nil {
		l.keeper.Runs(name, nil, now) // its durable attempts are lost
	}
	l.Grant(now)
}

// WaitingForCapacity returns how many jobs wait only because every
// replica that may run them runs its capacity: what another replica
// would start, as engine.WaitCountsAll counts them (not O(lanes)).
func (l *Leader) WaitingForCapacity() int { return l.e.WaitCountsAll()[engine.WhyReplicasFull] }

// ReplicaNames returns the replicas the leader knows besides its own, by
// name.
func (l *Leader) ReplicaNames() []string { return slices.Sorted(maps.Keys(l.replicas)) }

// heard notes that replica name no longer holds the term's grants back.
func (l *Leader) heard(name string, now int64) {
	delete(l.awaiting, name)
	if l.blocking[name] {
		delete(l.blocking, name)
		if len(l.blocking) == 0 { // a replica added since Begin holds back only its own jobs
			l.ready(now)
		}
	}
}

// helloWhole notes that replica name's Hello was read whole, at now: the
// Keeper hears what it runs, its capacity counts again, and the term's
// grants may begin. Until then nothing starts on it, so that a job it
// asks for is not granted before the jobs its Hello says run there are
// counted.
func (l *Leader) helloWhole(runs *hellos, name string, now int64) {
	delete(l.reading, name)
	runs.end(l, name, now)
	if len(l.blocking) == 0 {
		l.e.SetReplica(name, l.replicas[name], l.typesOf(name), now)
	}
	l.heard(name, now)
}

// forget ends every stand-in of replica name at now, in order of their
// numbers.
func (l *Leader) forget(name string, now int64) {
	var ss []*standIn
	for k, s := range l.stand {
		if k.replica == name {
			ss = append(ss, s)
		}
	}
	slices.SortFunc(ss, func(a, b *standIn) int { return cmp.Compare(a.key.seq, b.key.seq) })
	for _, s := range ss {
		l.drop(s, now)
	}
	for k, key := range l.held {
		if k.replica == name {
			l.unhold(k, key)
		}
	}
}

// drop ends stand-in s at now, lost if it ran, and forgets it.
func (l *Leader) drop(s *standIn, now int64) {
	switch {
	case s.j.Running():
		l.e.Finish(&s.j, engine.NotRun, now)
	case s.j.Waiting():
		l.e.Cancel(&s.j, now)
	}
	l.unstand(s)
}

// unstand forgets stand-in s, ended.
func (l *Leader) unstand(s *standIn) {
	delete(l.stand, s.key)
	delete(l.byJob, &s.j)
}

// Receive applies the other replicas' messages at now, then grants what
// may start. A message of another term than the leader's is dropped: one
// sent before the replica heard of this term is in its Hello.
func (l *Leader) Receive(msgs []Msg, now int64) {
	if l.valid != nil && !l.valid() {
		return
	}
	var inHello map[string]int // the jobs of a Hello still to come, by replica
	var runs hellos            // the durable attempts of a Hello, for the Keeper
	refused := 0               // messages of a batch refused whole, still to pass over
	for i := range msgs {
		m := &msgs[i]
		if refused > 0 {
			refused--
			continue
		}
		if _, known := l.replicas[m.Replica]; !known {
			continue // removed, or not yet added: it will be asked
		}
		if m.Term != l.term {
			// Of an older term: sent before the replica heard of this one.
			// It is asked already (awaiting), and Nudge asks again if the
			// Resync or its Hello was lost; or its Hello of this term was
			// read, and this was on its way. Asked once more, it would
			// answer twice, its second Hello dropping the durable attempts
			// sent after the first.
			continue
		}
		k := standKey{m.Replica, m.Seq}
		restored, whole := false, false
		if (m.Kind == Ask || m.Kind == Running || m.Kind == Runs || m.Kind == Done) && inHello[m.Replica] > 0 {
			inHello[m.Replica]--
			restored = true
			if m.Kind == Runs || m.Kind == Done {
				runs.add(m)
			}
			whole = inHello[m.Replica] == 0
		}
		if m.Kind == Ask && m.Flags&AskAll != 0 && !restored && !l.awaiting[m.Replica] {
			if batch := msgs[i:min(i+m.N, len(msgs))]; l.refuseBatch(batch) {
				refused = len(batch) - 1
				continue
			}
		}
		if m.Kind == Hello {
			if inHello == nil {
				inHello = make(map[string]int)
			}
			inHello[m.Replica] = m.N
			whole = m.N == 0
		}
		l.take(m, k, restored, &runs, now)
		if whole { // its last job taken: the Hello is read
			l.helloWhole(&runs, m.Replica, now)
		}
	}
	l.catchUp(now)
	l.Grant(now)
}

// take applies m, one of a replica's messages of this term, at now;
// restored says it is one of the jobs of a Hello, whose durable attempts
// runs gathers.
func (l *Leader) take(m *Msg, k standKey, restored bool, runs *hellos, now int64) {
	switch m.Kind {
	case Hello:
		l.forget(m.Replica, now)
		l.sync[m.Replica] = m.Sync
		l.types[m.Replica] = m.Types
		if l.types[m.Replica] == nil {
			l.types[m.Replica] = []string{} // none: nil would be every type
		}
		runs.begin(l, m.Replica)
		// Its jobs are taken as they come, but nothing starts on it
		// until the Hello is whole (helloWhole).
		delete(l.awaiting, m.Replica)
		l.reading[m.Replica] = true
		if len(l.blocking) == 0 {
			l.e.SetReplica(m.Replica, 0, l.typesOf(m.Replica), now)
		}
	case Ask:
		if l.awaiting[m.Replica] || l.stand[k] != nil {
			return // its Hello will ask again; or asked twice
		}
		if key, ok := l.held[k]; ok {
			if m.Flags&AskHeld == 0 { // released: admitted when it was held
				l.unhold(k, key)
				l.admit(k, m, true, now)
			}
			return
		}
		switch {
		case m.Flags&AskAdmitted != 0 && !restored:
			// A release of a job not held: refused, or given up, and its
			// end on its way; or its replica forgotten, whose Hello asks
			// for it again.
		case m.Flags&AskHeld != 0:
			l.hold(k, m, restored)
		default:
			l.admit(k, m, restored, now)
		}
	case Running:
		if l.stand[k] == nil {
			l.adopt(k, m, now)
		}
	case End:
		if s := l.stand[k]; s != nil && s.j.Running() {
			l.e.Finish(&s.j, m.Outcome, now)
			l.unstand(s)
		}
	case Retry:
		if s := l.stand[k]; s != nil && s.j.Running() {
			l.e.Retry(&s.j, now+m.NotBefore, now)
		}
	case Cancel:
		if s := l.stand[k]; s != nil {
			l.drop(s, now)
		}
		if key, ok := l.held[k]; ok {
			l.unhold(k, key)
		}
	case Raise:
		if s := l.stand[k]; s != nil && s.j.Waiting() {
			l.e.Raise(&s.j, m.Priority, now)
		}
	case Done:
		// One of a Hello's the Keeper hears with its Runs.
		if l.keeper != nil && !restored {
			l.keeper.Done(m.Replica, m, now)
		}
		l.out.Put(Msg{Kind: Recorded, Term: l.term, Replica: m.Replica, Seq: m.Seq, Attempt: m.Attempt})
	}
}

// catchUp applies what fell due by now before anything is granted: a
// start deadline that passed ends its job, which must not start (a job
// asked for again past its deadline, or a timer late). The leader's own
// process's jobs that expire go to its Grantee.
func (l *Leader) catchUp(now int64) {
	if due, ok := l.e.NextDue(); !ok || due > now {
		return
	}
	for _, j := range l.Due(now) {
		l.g.Ended(j, engine.Expired, nil, now)
	}
}

// Lost says messages from the replicas may have been missed: each is
// asked again for its jobs, and its answer replaces what was known.
func (l *Leader) Lost(now int64) {
	for _, name := range slices.Sorted(maps.Keys(l.replicas)) {
		l.resync(name, now)
	}
}

// hold admits another replica's job k, asked by m, which waits there for
// the jobs it runs after (AskHeld): it counts against the queue's limits
// until released (an Ask without AskHeld), given up or forgotten. A job
// asked for again (restored: in a Hello) is not refused: it was admitted
// once.
func (l *Leader) hold(k standKey, m *Msg, restored bool) {
	perKey := map[string]int{m.Desc.Key: 1}
	if r := l.e.Room(1, perKey); r != nil && !restored {
		l.out.Put(refusedMsg(l.term, k.replica, k.seq, r, l.sync[k.replica]))
		return
	}
	l.e.Reserve(1, perKey)
	l.held[k] = m.Desc.Key
	l.out.Put(Msg{Kind: Admitted, Term: l.term, Replica: k.replica, Seq: k.seq, Sync: l.sync[k.replica]})
}

// unhold gives back what the held job k, of key, counted.
func (l *Leader) unhold(k standKey, key string) {
	l.e.Unreserve(1, map[string]int{key: 1})
	delete(l.held, k)
}

// admit admits another replica's job k, asked by m at now. A job asked
// for again (restored: in a Hello), or held until now (AskHeld), keeps
// its submission time, and no admission limit refuses it: it was admitted
// once.
func (l *Leader) admit(k standKey, m *Msg, restored bool, now int64) {
	atOnce := m.Flags&AskAtOnce != 0
	wouldWait := func() {
		l.out.Put(refusedMsg(l.term, k.replica, k.seq, &engine.Refusal{Reason: engine.RefusedWouldWait}, l.sync[k.replica]))
	}
	if atOnce && (restored || len(l.blocking) > 0 || !l.e.WouldStartOn(&m.Desc, m.Needs, k.replica, now)) {
		wouldWait()
		return
	}
	s := &standIn{key: k}
	s.j.Tag = TagStandIn
	sub := now - m.Age
	tm := engine.Times{Replica: k.replica, Needs: m.Needs}
	if restored {
		tm.Submitted = max(sub, 1)
	}
	if m.NotBefore > 0 {
		tm.NotBefore = sub + m.NotBefore
	}
	if m.StartBy > 0 {
		tm.StartBy = sub + m.StartBy
	}
	if r := l.e.Enqueue(&s.j, &m.Desc, &tm, now); r != nil {
		l.out.Put(refusedMsg(l.term, k.replica, k.seq, r, l.sync[k.replica]))
		return
	}
	l.stand[k], l.byJob[&s.j] = s, s
	if s.j.Running() {
		l.Granted(&s.j)
		return
	}
	if atOnce {
		// Queued behind jobs that limits hold back: a dispatch starts it,
		// as in one process, and hands its grant over (Granted).
		if l.Grant(now); s.j.Running() {
			return
		}
		// Its replica is full: it would wait.
		l.drop(s, now)
		wouldWait()
		return
	}
	l.out.Put(Msg{Kind: Admitted, Term: l.term, Replica: k.replica, Seq: k.seq, Sync: l.sync[k.replica]})
}

// refuseBatch ends every Ask of batch, a replica's batch of messages
// headed by an AskAll, refused, and reports true, if the queue's limits
// have no room for all of its jobs at once; else it reports false, and
// its jobs are admitted one by one, none of them refused by those
// limits (nothing else is admitted between them).
func (l *Leader) refuseBatch(batch []Msg) bool {
	perKey := make(map[string]int, 1)
	n := 0
	for i := range batch {
		if m := &batch[i]; m.Kind == Ask && l.stand[standKey{m.Replica, m.Seq}] == nil {
			perKey[m.Desc.Key]++
			n++
		}
	}
	r := l.e.Room(n, perKey)
	if r == nil {
		return false
	}
	for i := range batch {
		if m := &batch[i]; m.Kind == Ask {
			l.out.Put(refusedMsg(l.term, m.Replica, m.Seq, r, l.sync[m.Replica]))
		}
	}
	return true
}

// refusedMsg returns the Ended that tells replica that its job seq was
// refused with r, in term, as of its Hello numbered sync.
func refusedMsg(term uint64, replica string, seq uint64, r *engine.Refusal, sync uint64) Msg {
	return Msg{Kind: Ended, Term: term, Replica: replica, Seq: seq, Refusal: r.Reason, Sync: sync,
		N: r.Limit, Priority: r.Size, Desc: engine.Desc{Key: r.Key}}
}

// adopt counts another replica's job k, running there as m says, against
// every limit from now.
func (l *Leader) adopt(k standKey, m *Msg, now int64) {
	s := &standIn{key: k}
	s.j.Tag = TagStandIn
	sub := now - m.Age
	tm := engine.Times{Replica: k.replica, Needs: m.Needs, Submitted: max(sub, 1)}
	if m.StartBy > 0 {
		tm.StartBy = sub + m.StartBy // bounds its retries
	}
	if r := l.e.Adopt(&s.j, &m.Desc, &tm, max(now-m.Ran, 1), now); r != nil {
		return // a type this leader does not know: nothing here to count it by
	}
	l.stand[k], l.byJob[&s.j] = s, s
}

// Granted hands a grant over: a stand-in's to its replica, a job of this
// process's to the run-time layer.
func (l *Leader) Granted(j *engine.Job) {
	if j.Tag != TagStandIn {
		l.g.Granted(j)
		return
	}
	s := l.byJob[j]
	l.out.Put(Msg{Kind: Grant, Term: l.term, Replica: s.key.replica, Seq: s.key.seq, Sync: l.sync[s.key.replica]})
}

// Ended is never called: the engine's decisions end nothing through the
// Grantee.
func (l *Leader) Ended(j *engine.Job, o engine.Outcome, r *engine.Refusal, now int64) {
	l.g.Ended(j, o, r, now)
}

// Enqueue admits a job of this process: a closure, bound to this
// replica; or, if the Grantee is a Keeper, a durable job, bound to none.
func (l *Leader) Enqueue(j *engine.Job, d engine.Desc, tm *engine.Times, now int64) (bool, *engine.Refusal) {
	if l.closing {
		return false, &engine.Refusal{Reason: engine.RefusedClosed}
	}
	switch {
	case tm == nil:
		tm = &l.times
	case l.keeper == nil:
		tm.Replica = l.name
	}
	return l.local.Enqueue(j, d, tm, now)
}

// Grant grants what may start at now, once the term is ready.
func (l *Leader) Grant(now int64) {
	if len(l.blocking) == 0 && (l.valid == nil || l.valid()) {
		l.local.Grant(now)
	}
}

// Finish, Retry, Cancel and Raise are the engine's, for this process's
// jobs.
func (l *Leader) Finish(j *engine.Job, o engine.Outcome, now int64) { l.local.Finish(j, o, now) }
func (l *Leader) Retry(j *engine.Job, notBefore, now int64)         { l.local.Retry(j, notBefore, now) }
func (l *Leader) Cancel(j *engine.Job, now int64) bool              { return l.local.Cancel(j, now) }
func (l *Leader) Raise(j *engine.Job, p int, now int64)             { l.local.Raise(j, p, now) }

// NextDue is the engine's: the cluster's jobs' times.
func (l *Leader) NextDue() (int64, bool) { return l.local.NextDue() }

// Due applies what fell due by now: the stand-ins past their start
// deadline end on their replica; this process's are returned.
func (l *Leader) Due(now int64) []*engine.Job {
	expired := l.local.Due(now)
	own := expired[:0]
	for _, j := range expired {
		if j.Tag != TagStandIn {
			own = append(own, j)
			continue
		}
		s := l.byJob[j]
		l.out.Put(Msg{Kind: Ended, Term: l.term, Replica: s.key.replica, Seq: s.key.seq, Outcome: engine.Expired,
			Sync: l.sync[s.key.replica]})
		l.unstand(s)
	}
	return own
}

// Apply applies c, read from the cluster's log of changes, at now, and
// reports whether the engine took it: what fell due is applied first, so
// that a limit's state is as of now, and what the change lets start is
// granted. Every leader applies the whole log, in its order, to the
// engine it begins its term with (internal/cluster), so a change made on
// any replica holds across a failover.
func (l *Leader) Apply(c Change, now int64) bool {
	l.catchUp(now)
	ok := l.local.Configure(c, now)
	l.Grant(now)
	return ok
}

// The disabled pairs, the configuration, a batch's admission and the job
// types are the engine's, as in one process. Configure is the leader's
// process's call to change its engine directly; in a cluster, changes
// reach the leader's engine through the log (Apply).
func (l *Leader) Failed(k Pair, r DisableRule, now int64) (Span, bool) {
	return l.local.Failed(k, r, now)
}
func (l *Leader) Disable(k Pair, span Span, now int64)              { l.local.Disable(k, span, now) }
func (l *Leader) Enable(k Pair)                                     { l.local.Enable(k) }
func (l *Leader) Pairs() *Pairs                                     { return l.local.Pairs() }
func (l *Leader) Configure(c Change, now int64) bool                { return l.local.Configure(c, now) }
func (l *Leader) Room(n int, perKey map[string]int) *engine.Refusal { return l.local.Room(n, perKey) }
func (l *Leader) Reserve(n int, perKey map[string]int)              { l.local.Reserve(n, perKey) }
func (l *Leader) Unreserve(n int, perKey map[string]int)            { l.local.Unreserve(n, perKey) }
func (l *Leader) Rejected(name string, closed bool, n int)          { l.local.Rejected(name, closed, n) }
func (l *Leader) RejectedUnknownType()                              { l.local.RejectedUnknownType() }
func (l *Leader) RegisterType(name string, c engine.Type) error     { return l.local.RegisterType(name, c) }
func (l *Leader) TypeTier(name string) (int, bool)                  { return l.local.TypeTier(name) }
func (l *Leader) BasePriority(d engine.Desc) (int, bool)            { return l.local.BasePriority(d) }
func (l *Leader) DeadlineOf(name string, startBy, submitted int64) int64 {
	return l.local.DeadlineOf(name, startBy, submitted)
}
func (l *Leader) NeedsRefusal(name string, needs []engine.Need) *engine.Refusal {
	return l.local.NeedsRefusal(name, needs)
}
func (l *Leader) Reserved(name string, minSlots int) (int, int, int) {
	return l.local.Reserved(name, minSlots)
}

// Find returns this process's job numbered seq, not ended.
func (l *Leader) Find(seq uint64) *engine.Job {
	if j := l.local.Find(seq); j != nil && j.Tag != TagStandIn {
		return j
	}
	return nil
}

// Each calls f with this process's jobs not ended.
func (l *Leader) Each(f func(j *engine.Job, granted bool)) {
	l.local.Each(func(j *engine.Job, granted bool) {
		if j.Tag != TagStandIn {
			f(j, granted)
		}
	})
}

// FindRunning returns the first running job of this process that match
// reports true for, and the effective priority it started at.
func (l *Leader) FindRunning(match func(*engine.Job) bool) (*engine.Job, int) {
	return l.local.FindRunning(func(j *engine.Job) bool { return j.Tag != TagStandIn && match(j) })
}

// Idle reports whether this process has no job not ended.
func (l *Leader) Idle() bool {
	s := l.e.Summary()
	return s.Running+s.Pending+s.Delayed+s.Paused+s.Blocked == len(l.stand)
}

// StopAccepting refuses this process's later jobs; the other replicas'
// are still admitted.
func (l *Leader) StopAccepting() { l.closing = true }

// The reads are the engine's: the cluster's.
func (l *Leader) Figures(maxKeys int, pausedOf []string) Figures {
	return l.local.Figures(maxKeys, pausedOf)
}
func (l *Leader) Page(li *Listing, offset, limit int, now int64) {
	l.local.Page(li, offset, limit, now)
}
func (l *Leader) Snapshot(li *Listing, now int64) { l.local.Snapshot(li, now) }
func (l *Leader) EstimateWait(d engine.Desc, now int64) (int64, bool) {
	return l.local.EstimateWait(d, now)
}
func (l *Leader) WouldStart(d engine.Desc, needs []engine.Need, now int64) bool {
	return len(l.blocking) == 0 && l.local.WouldStart(d, needs, now)
}

var (
	_ Decider = (*Leader)(nil)
	_ Grantee = (*Leader)(nil)
)
