package cluster

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/fairsched/fairsched/internal/decide"
	"github.com/fairsched/fairsched/internal/store"
)

// leading is one term of this replica as the leader: its decisions (a
// Term, from Config.NewTerm: the Leader over an engine of its own for the
// cluster, with its lock and clock timer), and the leader's link. The
// engine's times are the Term's, µs of this process's clock: the messages
// carry durations, never instants.
type leading struct {
	// Set by newLeading, then read-only.
	n      *Node
	ship   store.Leadership
	term   Term
	leader *decide.Leader
	epoch  time.Time
	stopAt *time.Timer // fires when the lease could lapse within Grace
	// until, in ns since epoch, is when stopAt is due: past it nothing
	// is applied, whether or not stopAt has fired (a process woken past
	// it runs its goroutines in any order, the timer's maybe last).
	until  atomic.Int64
	stop   chan struct{} // closed by end: the pump stops
	pumped chan struct{}
	out    decide.Outbox
	// applied is the number of the last change of the cluster's log
	// applied to the engine. The Node's run loop only.
	applied int64
	// over: lapse or end was called; nothing is applied any more.
	over    atomic.Bool
	endOnce sync.Once

	mu sync.Mutex
	// Guarded by mu.
	link  store.ClosingLink
	spill overflow // when the overflow hook is due
}

// newLeading makes the term won by ship; it fails if its decisions
// cannot be made (the store's durable jobs could not be read).
func newLeading(n *Node, ship store.Leadership) (*leading, error) {
	l := &leading{n: n, ship: ship, epoch: time.Now(), stop: make(chan struct{}), pumped: make(chan struct{}),
		spill: overflow{after: n.cfg.OverflowAfter, every: n.cfg.OverflowEvery}}
	close(l.pumped) // until begin starts the pump
	term, err := n.cfg.NewTerm(ship.Jobs(), &l.out, l.valid)
	if err != nil {
		return nil, err
	}
	l.term, l.leader = term, term.Leader()
	return l, nil
}

// begin begins the term, won by a call that started at start, with the
// live replicas' capacities.
func (l *leading) begin(live map[string]int, start time.Time) {
	l.setUntil(start)
	l.stopAt = time.AfterFunc(l.n.fenceDelay(start), l.lapse)
	l.pumped = make(chan struct{})
	go func() {
		defer close(l.pumped)
		l.out.Pump(downLink{l}, l.stop)
	}()
	others := make(map[string]int, len(live))
	for name, c := range live {
		others[name] = c
	}
	l.do(func(now int64) { l.leader.Begin(l.ship.Term(), others, now) })
}

// lapse ends what the term may do when its lease could lapse within
// Grace: nothing is applied or granted from then on, even before the
// Node drops the term.
func (l *leading) lapse() {
	l.over.Store(true)
	l.n.resignTerm(l)
}

// current reports whether the term may still decide, in term.
func (l *leading) current(term uint64) bool {
	return !l.over.Load() && l.ship.Term() == term
}

// valid reports whether the term may still decide now: the Leader's
// guard, asked at each message and grant, so that a process woken past
// until grants nothing, whether or not stopAt has run.
func (l *leading) valid() bool {
	return !l.over.Load() && time.Since(l.epoch) < time.Duration(l.until.Load())
}

// renewed notes a renewal of the lease by a call that started at start.
func (l *leading) renewed(start time.Time) {
	l.setUntil(start)
	l.stopAt.Reset(l.n.fenceDelay(start))
}

// setUntil notes the lease renewed by a call that started at start.
func (l *leading) setUntil(start time.Time) {
	l.until.Store(int64(start.Sub(l.epoch) + l.n.cfg.Lease - l.n.cfg.Grace))
}

// do applies f to the leader at the Term's instant, under its lock; past
// until, it applies nothing, and the term lapses.
func (l *leading) do(f func(now int64)) {
	if !l.over.Load() && time.Since(l.epoch) >= time.Duration(l.until.Load()) {
		l.lapse()
		return
	}
	l.term.Deliver(func(now int64) {
		if !l.over.Load() {
			f(now)
		}
	})
}

// Receive and Lost take the replicas' messages (decide.Receiver).
func (l *leading) Receive(msgs []decide.Msg) { l.do(func(now int64) { l.leader.Receive(msgs, now) }) }
func (l *leading) Lost()                     { l.do(l.leader.Lost) }

// apply applies the changes of cs after the last it applied, in order,
// to the leader's engine: every one, from the log's start, before the
// term begins. A change the engine refuses changed nothing, and is
// logged, as one this process cannot read.
func (l *leading) apply(cs []logged) {
	var refused []logged
	l.do(func(now int64) {
		for _, c := range cs {
			if c.seq <= l.applied {
				continue
			}
			if c.ok && !l.leader.Apply(c.c, now) {
				refused = append(refused, c)
			}
			l.applied = c.seq
		}
	})
	for _, c := range refused {
		l.n.log.Warn("fairsched: the leader's engine refused a change of the configuration from the cluster's log",
			"replica", l.n.cfg.Name, "term", l.ship.Term(), "seq", c.seq, "change", c.c)
	}
}

// update brings the leader's replicas up to the registry's: those swept
// dead and those no longer live are removed (their jobs lost), new ones
// added, capacities changed.
func (l *leading) update(recs []store.ReplicaRecord, dead []string) {
	l.do(func(now int64) {
		self := l.n.cfg.Name
		for _, name := range dead {
			if name != self {
				l.leader.RemoveReplica(name, now)
			}
		}
		live := make(map[string]bool, len(recs))
		for _, r := range recs {
			if r.Name != self && r.Live {
				live[r.Name] = true
				l.leader.AddReplica(r.Name, r.Capacity, r.Incarnation, now)
			}
		}
		for _, name := range l.leader.ReplicaNames() {
			if name != self && !live[name] {
				l.leader.RemoveReplica(name, now) // declared dead, or gone
			}
		}
		l.leader.Nudge(now, int64(l.n.cfg.Lease/time.Microsecond)) // a Resync, or its Hello, may have been lost
	})
}

// end ends the term: nothing more is applied or sent, and its
// decisions are abandoned. Calls after the first do nothing.
func (l *leading) end() {
	l.endOnce.Do(func() {
		l.over.Store(true)
		if l.stopAt != nil {
			l.stopAt.Stop()
		}
		l.term.Abandon()
		close(l.stop)
		<-l.pumped
		l.mu.Lock()
		link := l.link
		l.mu.Unlock()
		if link != nil {
			link.Close()
		}
	})
}

// downLink sends what the Leader sends: to this process's replica within
// the process, to the others over the database.
type downLink struct{ l *leading }

func (d downLink) Send(msgs []decide.Msg) {
	n := d.l.n
	self := n.cfg.Name
	for len(msgs) > 0 {
		here := msgs[0].Replica == self
		k := 1
		for k < len(msgs) && (msgs[k].Replica == self) == here {
			k++
		}
		batch := msgs[:k:k]
		if here {
			n.Lapsed() // fences it, if so: as guard does for what comes over the database
			n.host.Deliver(func(now int64) { n.remote.Receive(batch, now) })
		} else {
			d.l.mu.Lock()
			link := d.l.link
			d.l.mu.Unlock()
			link.Send(batch)
		}
		msgs = msgs[k:]
	}
}
