package decide

// Durable jobs across replicas (wire.go says the messages). The leader's
// own jobs, when its Grantee is a Keeper, are the cluster's durable jobs:
// bound to no replica, each is placed by the engine on the first replica,
// by name, with a free slot and a handler for its type (the Types of its
// Hello), and the Keeper runs its attempt there (Run). The Leader tells
// the Keeper what it hears of them: the attempts' ends (Done), and which
// attempts each replica runs (its Hello, or none once it is removed), so
// that an attempt sent to a replica that does not list it is lost.

// Keeper is the Grantee of a Leader whose own jobs are the cluster's
// durable jobs (internal/rt keeps them, on the leader, from the store).
// Its methods are called as a Grantee's are, with the lock held.
type Keeper interface {
	Grantee
	// Done reports that replica's run of the attempt m names (m.Seq, the
	// job's ID; m.Attempt) ended: m.Outcome, m.Err and m.Flags say how.
	Done(replica string, m *Msg, now int64)
	// Runs reports the attempts replica runs, by job ID (its Hello's
	// Runs: Attempt and Ran of each), and the attempts whose ends it sent
	// again, as no leader had Recorded them (its Hello's Dones: as Done
	// says, the attempt's end maybe heard before); or, nil, none: it was
	// removed. Every other attempt sent to it, not Done, is lost; one
	// granted to it whose Run the Keeper has not sent yet, the replica
	// still there, was never begun.
	Runs(replica string, runs map[int64]Msg, now int64)
	// Ready reports that the term's grants begin: every replica asked at
	// Begin answered, or was removed. The Keeper's jobs are admitted
	// from then (they may run on any of them).
	Ready(now int64)
}

// Runner is a replica's run-time layer as the Remote's Grantee, when it
// runs durable attempts: RunDurable starts attempt of durable job id, of
// type typ, with args, at now; the Remote is told its end (DurableDone).
type Runner interface {
	RunDurable(id int64, attempt int, typ string, args []byte, now int64)
}

// RunMsg returns the Run to replica, stamped with the term and the Sync
// of its last Hello as of now: the Keeper takes it when the engine grants
// a job, and fills in the job (Seq, Attempt, Desc.Type, Args) before it
// sends it (Send), perhaps after the Sync has moved on: then the replica
// drops it, and the Keeper has heard (Runs) that the attempt is lost.
func (l *Leader) RunMsg(replica string) Msg {
	return Msg{Kind: Run, Term: l.term, Replica: replica, Sync: l.sync[replica]}
}

// Send sends m to its replica. Safe without the lock.
func (l *Leader) Send(m Msg) { l.out.Put(m) }

// hellos gathers the Runs of the Hellos of one batch, by replica, until
// each is whole; then the Keeper hears them.
type hellos struct {
	runs map[string]map[int64]Msg
}

// begin starts the gathering of replica's Hello.
func (h *hellos) begin(l *Leader, replica string) {
	if l.keeper == nil {
		return
	}
	if h.runs == nil {
		h.runs = make(map[string]map[int64]Msg)
	}
	h.runs[replica] = make(map[int64]Msg)
}

// add adds m, one of replica's Hello's Runs or Dones. A job's Runs
// stands over its Done: a replica sends no Done of a job one of whose
// attempts it runs.
func (h *hellos) add(m *Msg) {
	runs := h.runs[m.Replica]
	if runs == nil {
		return
	}
	if had, ok := runs[int64(m.Seq)]; ok && had.Kind == Runs {
		return
	}
	runs[int64(m.Seq)] = *m
}

// end tells the Keeper replica's Hello, whole.
func (h *hellos) end(l *Leader, replica string, now int64) {
	runs, ok := h.runs[replica]
	if !ok {
		return
	}
	delete(h.runs, replica)
	l.keeper.Runs(replica, runs, now)
}

// typesOf returns the job types replica runs durable jobs of, as the
// engine takes them: those of its Hello, none before; every type for
// this process's replica when the Leader keeps no durable jobs (its own
// jobs are closures, bound to it).
func (l *Leader) typesOf(replica string) []string {
	if t, ok := l.types[replica]; ok {
		return t
	}
	if l.keeper == nil {
		return nil
	}
	return []string{}
}
