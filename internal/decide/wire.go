package decide

import (
	"sync"

	"github.com/fairsched/fairsched/internal/engine"
)

// The messages between a replica's decisions (Remote) and the leader's
// (Leader), as data: what a database's module carries between processes
// (a Link). The protocol, for maintainers:
//
// A replica's closures live and die with its process, so the replica,
// not the database, is the record of them: it asks the leader for each
// one (Ask), reports each attempt's end (End, Retry) and each job it
// gives up on (Cancel), and the leader answers with grants (Grant) and
// with the jobs it ended without running (Ended: refused at admission,
// past a start deadline). Every message carries the leader's term its
// sender knows, and a receiver drops a message of an older term than its
// own. A new leader has none of the replicas' jobs: it starts its term
// by asking every live replica for them (Resync), and each answers with
// everything it has asked for and not seen end (one Hello, then an Ask
// for each job waiting and a Running for each job granted). The leader
// grants nothing, to anyone, until every live replica has answered or
// has been declared dead: until then it cannot know what runs, and a
// limit could be exceeded. The same exchange repairs a lost message: a
// Link that may have dropped messages (its connection to the database
// broke) says so (Lost), and the side it told asks for, or sends, the
// whole state again.
//
// Durable jobs are the database's, not a replica's: the leader keeps
// them (its Grantee, a Keeper), and runs each attempt on a replica that
// has its type's handler. It records the attempt's start, then sends the
// replica a Run (the job's ID, its attempt's number and its arguments);
// the replica runs the handler and reports the attempt's end (Done), and
// the leader records it, and answers Recorded. The replica keeps each
// Done until it is Recorded: a Done sent as a Link's connection broke is
// lost with it, and the attempt, though it ended, would count lost. A
// Hello lists the durable attempts the replica runs (a Runs each), the
// Dones not yet Recorded, again, and the types it has handlers for
// (Types). The leader hands a Hello's Dones to its Keeper with the Runs, and
// forgets any attempt it sent that replica that the Hello neither lists
// nor ends (a Run crossing a Hello carries an older Sync, and is
// dropped), as it does the attempts of a replica declared dead: each is
// lost. A Done a leader heard and had not recorded when its term ended
// is lost, as an attempt's end is when one process stops before it is
// written. One granted to the replica and not sent yet (its start was
// being recorded) is never sent: never begun, it is queued again, not
// counted as an attempt. So a
// replica is asked for a Hello only when the leader must have one: at
// Begin, when it is added, after a Link's loss, and again (Nudge) only a
// lease after it was asked without answering; never for a message of an
// older term, which was on its way before it heard the Resync. Asked
// twice, it would answer twice, and its second Hello would drop the Runs
// sent after the first: lost attempts, retried by policy.
//
// Messages from one sender arrive in the order sent; a batch sent
// together arrives together (a Link sends it in one transaction).

// MsgKind says what a message is.
type MsgKind uint8

// The messages. To the leader: Ask, Running, Hello, End, Retry, Cancel,
// Raise, Runs, Done. From the leader: Grant, Ended, Resync, Admitted,
// Run, Recorded.
const (
	// Ask: admit job Seq of the replica, described by Desc, Needs and
	// its times, and grant it to that replica. In a Hello, a job waiting.
	Ask MsgKind = iota + 1
	// Running: in a Hello, job Seq, described as an Ask, runs on the
	// replica: the leader counts it against every limit.
	Running
	// Hello: the replica's jobs follow, N of them (Ask, Running, then
	// Runs and Done), in the same batch; the leader forgets what it knew
	// of the replica's jobs before.
	Hello
	// End: job Seq's attempt ended, and with it the job, with Outcome.
	End
	// Retry: job Seq's attempt ended; it runs again, not before
	// NotBefore.
	Retry
	// Cancel: the replica gives up job Seq, granted or not.
	Cancel
	// Raise: job Seq's base priority is raised to Priority.
	Raise
	// Grant: job Seq may start.
	Grant
	// Ended: job Seq ended without running: Outcome Expired (past its
	// start deadline), or refused at admission (Refusal.Reason).
	Ended
	// Resync: the leader asks the replica for a Hello.
	Resync
	// Admitted: job Seq was admitted, and waits for its grant: the
	// caller that submitted it learns there is room for it.
	Admitted
	// Run: run attempt Attempt of durable job Seq (its ID in the
	// store), of type Desc.Type, with the arguments Args.
	Run
	// Done: the replica's run of attempt Attempt of durable job Seq
	// ended: Outcome Completed, or Failed with Err and Flags.
	Done
	// Runs: in a Hello, attempt Attempt of durable job Seq runs on the
	// replica, since Ran ago.
	Runs
	// Recorded: the leader has the Done of attempt Attempt of durable
	// job Seq: the replica need not send it again.
	Recorded

	lastKind = Recorded
)

// DoneFlags qualify a Done's failure, or an Ask.
type DoneFlags uint8

const (
	// DonePermanent: the handler said not to retry (a permanent error).
	DonePermanent DoneFlags = 1 << iota
	// DoneLost: the replica stopped the run, as it could not renew its
	// registration (the attempt is lost).
	DoneLost
	// DoneNotRun, with DoneLost: the replica never began the attempt (it
	// was shutting down when the Run came), so it does not count as one:
	// the job is queued again at once.
	DoneNotRun
	// AskAtOnce, of an Ask: grant the job in the answer, or end it
	// refused with RefusedWouldWait (a replica's TryRunSync); a job of a
	// Hello so asked is ended so, whatever it would do.
	AskAtOnce
	// AskAll, of an Ask: it heads a batch of N messages, itself
	// included, whose Asks are admitted all or none (SubmitMany): if the
	// queue's limits have no room for all of them, each is ended with the
	// refusal.
	AskAll
	// AskHeld, of an Ask: the job waits in its replica for the jobs it
	// runs after (Remote.Park). The leader admits it within the queue's
	// limits and counts it against them (engine.Reserve), and holds
	// nothing else for it until its release.
	AskHeld
	// AskAdmitted, of an Ask: the release of a job asked for with
	// AskHeld, whose jobs it runs after completed. The leader takes it as
	// one of a Hello's, keeping its submission time, in place of what it
	// counted; one it does not hold (refused, given up, or its replica's
	// Hello not read yet) it drops.
	AskAdmitted
)

// Msg is one message. Which fields mean something depends on Kind.
type Msg struct {
	Kind MsgKind
	// Term is the leader's term as the sender knows it.
	Term uint64
	// Replica is the replica that sent the message or that it is for.
	Replica string
	// Seq is the job: its number in the replica's engine.
	Seq uint64
	// Ask and Running: the job's description, and its times as
	// durations in µs, so that no two processes' clocks need agree (only
	// their rates): Age is how long ago, at the sending, the job was
	// submitted; NotBefore and StartBy are after its submission (0:
	// none). Running's Ran is how long ago it started. Retry's NotBefore
	// is after the sending.
	Desc      engine.Desc
	Needs     []engine.Need // nil: its type's
	Age       int64
	NotBefore int64
	StartBy   int64
	Ran       int64
	// Priority is Raise's new base priority; N is Hello's count of jobs,
	// and an AskAll's of its batch's messages. A refusal's Ended carries
	// the refusal's Limit in N, its Size in Priority, and its Key in
	// Desc.Key.
	Priority int
	N        int
	Outcome  engine.Outcome
	Refusal  engine.RefusalReason
	// Sync numbers a replica's Hellos, from 1; a Grant, an Ended or a
	// Run carries the number of the last Hello the leader had from the
	// replica when it sent it. A replica drops one of an older number:
	// it was decided on what a later Hello replaced, and the leader will
	// decide the job again (a grant crossing a Hello would otherwise run
	// a job the leader no longer counts).
	Sync uint64
	// Run, Done and Runs: the attempt's number (1 for the first); Run's
	// Args are the handler's arguments; Done's Err and Flags say how a
	// failed attempt failed.
	Attempt int
	Args    []byte
	Err     string
	Flags   DoneFlags
	// Types, in a Hello, are the job types the replica has handlers for:
	// the leader runs durable jobs of those types only there. nil: none.
	Types []string
}

// Link carries messages between processes: a replica's to the leader,
// the leader's each to the replica its Replica names. Send must not
// block on I/O: it hands the batch over, and the Link delivers it, in
// order and whole, to the receiving process's Receiver. A leader's Link
// sends only while its term is the database's (fenced, as its writes).
type Link interface {
	Send(msgs []Msg)
}

// Receiver is handed what a Link delivers. Receive is called with one
// batch at a time, in the order sent. Lost says that messages may have
// been dropped (the Link's connection broke and was made again): the
// receiver asks for, or sends, the whole state again.
type Receiver interface {
	Receive(msgs []Msg)
	Lost()
}

// Outbox holds the messages a decider sends, taken with the run-time
// layer's lock held, until a goroutine of its owner's sends them: a
// decider never waits for I/O under the lock. It is safe for concurrent
// use; the zero value is ready.
type Outbox struct {
	mu      sync.Mutex
	msgs    []Msg
	pending chan struct{} // receives once when msgs becomes non-empty
}

// Put adds m, and signals Pending if the outbox was empty.
func (o *Outbox) Put(m Msg) { o.PutAll(m) }

// PutAll adds msgs at once: a Take takes all of them or none, so that
// they are sent in one batch. It signals Pending if the outbox was empty.
func (o *Outbox) PutAll(msgs ...Msg) {
	o.mu.Lock()
	if o.pending == nil {
		o.pending = make(chan struct{}, 1)
	}
	was := len(o.msgs)
	o.msgs = append(o.msgs, msgs...)
	if was == 0 && len(o.msgs) > 0 {
		select {
		case o.pending <- struct{}{}:
		default:
		}
	}
	o.mu.Unlock()
}

// Pending returns a channel that receives when messages wait.
func (o *Outbox) Pending() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.pending == nil {
		o.pending = make(chan struct{}, 1)
	}
	return o.pending
}

// Take returns the messages held, in the order put, and holds none.
func (o *Outbox) Take() []Msg {
	o.mu.Lock()
	defer o.mu.Unlock()
	msgs := o.msgs
	o.msgs = nil
	return msgs
}

// Pump sends over link what out holds, from the calling goroutine, as it
// comes, until stop is closed; what is held then is sent before it
// returns.
func (o *Outbox) Pump(link Link, stop <-chan struct{}) {
	pending := o.Pending()
	for {
		select {
		case <-pending:
			if msgs := o.Take(); len(msgs) > 0 {
				link.Send(msgs)
			}
		case <-stop:
			if msgs := o.Take(); len(msgs) > 0 {
				link.Send(msgs)
			}
			return
		}
	}
}

// Receiving is a decider that takes messages (Leader, Remote), at the
// run-time layer's instant.
type Receiving interface {
	Receive(msgs []Msg, now int64)
	Lost(now int64)
}

// ReceiverOf returns the Receiver that hands what a Link delivers to d,
// through deliver (the run-time layer's Deliver: under its lock, at its
// instant).
func ReceiverOf(d Receiving, deliver func(apply func(now int64))) Receiver {
	return receiver{d, deliver}
}

type receiver struct {
	d       Receiving
	deliver func(func(int64))
}

func (r receiver) Receive(msgs []Msg) { r.deliver(func(now int64) { r.d.Receive(msgs, now) }) }
func (r receiver) Lost()              { r.deliver(r.d.Lost) }
