package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fairsched/fairsched/internal/decide"
	"github.com/fairsched/fairsched/internal/store"
)

// Config configures one replica's Node.
type Config struct {
	// Name is the replica's, unique in the cluster; Capacity the most
	// jobs it runs at once, at least 1.
	Name     string
	Capacity int
	// Fingerprint is the fingerprint of the configuration the replica
	// decides by (rt.Fingerprint): it is refused, at Start and when it
	// registers again, while a live replica has another (doc.go,
	// Configuration).
	Fingerprint string
	// Lease is the leader's lease and a replica's registration (doc.go,
	// Times); Grace how long a handler may take to return once its
	// context ended.
	Lease, Grace time.Duration
	Store        store.Cluster
	Logger       *slog.Logger
	// NewTerm returns the decisions of a term this replica leads, made as
	// it begins: a Leader named and sized as this replica, over an engine
	// configured as every replica's, sending on out, that takes nothing
	// and grants nothing once valid reports false; and, if jobs is not nil
	// (the term's view of the store's durable jobs), what keeps those for
	// the term (internal/rt's keeper).
	NewTerm func(jobs store.Store, out *decide.Outbox, valid func() bool) (Term, error)
	// OnLead, if set, is called with the term each time the replica
	// begins to lead, once its term has begun.
	OnLead func(term uint64)
	// OnChanges, if set, is called with the number of the last change of
	// the cluster's log applied, each time the replica applies some:
	// the leader's engine, while it leads, and the replica's have them.
	OnChanges func(applied int64)
	// Overflow, if set, is called by the leader when jobs have waited
	// for a replica's free slot, and for nothing else, for OverflowAfter
	// or longer, at most once every OverflowEvery, with how many wait so:
	// another replica would start them (overflow.go).
	Overflow                     func(ctx context.Context, waiting int) error
	OverflowAfter, OverflowEvery time.Duration
}

// Term is one term's decisions on the leader (Config.NewTerm).
type Term interface {
	// Leader is the term's Leader: its methods are called within Deliver.
	Leader() *decide.Leader
	// Deliver applies apply under the term's lock, at its instant: the
	// Leader's Grantee and clock timer share it.
	Deliver(apply func(now int64))
	// Abandon ends the term's decisions: nothing more is written to the
	// store, and what the term kept is dropped. Called once, with no lock
	// held.
	Abandon()
}

// Host is what the replica's run-time layer offers its Node.
type Host interface {
	// Deliver applies apply under the run-time layer's lock, at its
	// instant (rt.Runtime.Deliver).
	Deliver(apply func(now int64))
	// Lose cancels the run of every job granted to this replica: each
	// attempt fails with ErrLost. Called with no lock held.
	Lose()
}

// Node is one replica's part in the cluster. Start makes one; Stop ends
// it. It is safe for concurrent use.
type Node struct {
	// Set by Start, then read-only.
	cfg    Config
	remote *decide.Remote
	out    *decide.Outbox // the Remote's
	host   Host
	link   store.ClosingLink // the replica's, over the database
	log    *slog.Logger

	stop     chan struct{} // closed by Stop
	stopOnce sync.Once
	stopErr  error
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	fenceAt  *time.Timer // fires when the registration could lapse within Grace
	// epoch is when Start began; until, in ns since epoch, is when
	// fenceAt is due. A process woken past it (SIGSTOP, a long pause)
	// runs its goroutines in any order, the timer's maybe last: what it
	// receives checks the time too (guard).
	epoch time.Time
	until atomic.Int64
	// resign receives when a term must end (resigned): its lease was
	// refused, or could lapse within Grace.
	resign chan struct{}
	// appended receives when this replica appended changes of the
	// configuration to the cluster's log: the run loop applies the log
	// then, not a period later (changes.go).
	appended chan struct{}
	// applied is the number of the last change of the cluster's log
	// applied to the Remote. Start and the run loop only.
	applied int64

	mu       sync.Mutex
	lead     *leading   // while this replica leads
	resigned []*leading // terms to end, for the run loop
	// fenced: its runs were stopped and grants are dropped. It changes
	// only within the Host's Deliver, with the Remote's flag, so that a
	// fence and an unfence never cross.
	fenced atomic.Bool
}

// Start registers the replica and starts its part: its link, its
// heartbeats, and its campaigns for the lease. remote is the replica's
// Decider, which sends on out, and host its run-time layer.
func Start(ctx context.Context, cfg Config, remote *decide.Remote, out *decide.Outbox, host Host) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	n := &Node{cfg: cfg, remote: remote, out: out, host: host, log: cfg.Logger,
		stop: make(chan struct{}), resign: make(chan struct{}, 1), appended: make(chan struct{}, 1), epoch: time.Now()}
	n.until.Store(int64(cfg.Lease - cfg.Grace)) // nothing is granted before it registers
	start := time.Now()
	if err := cfg.Store.Register(ctx, cfg.Name, cfg.Capacity, cfg.Fingerprint, cfg.Lease); err != nil {
		return nil, err
	}
	n.renewed(start)
	// The changes made at run time so far, before the replica takes part:
	// from its start, it has the cluster's configuration.
	recs, err := cfg.Store.Changes(ctx, cfg.Fingerprint, 0)
	if err != nil {
		_ = cfg.Store.Deregister(ctx, cfg.Name)
		return nil, fmt.Errorf("fairsched: reading the cluster's changes of the configuration: %w", err)
	}
	n.applyChanges(recs, nil)
	link, err := cfg.Store.ReplicaLink(ctx, cfg.Name, guard{n, decide.ReceiverOf(remote, host.Deliver)})
	if err != nil {
		_ = cfg.Store.Deregister(ctx, cfg.Name)
		return nil, err
	}
	n.link = link
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.fenceAt = time.AfterFunc(n.fenceDelay(start), n.fence)
	n.wg.Add(3)
	go func() {
		defer n.wg.Done()
		out.Pump(upLink{n}, n.stop)
	}()
	go n.appendChanges()
	go n.run()
	return n, nil
}

// Stop ends the replica's part: it appends the changes of the
// configuration it has not appended yet (one try), stops leading (giving
// the lease up), stops sending and deregisters. The run-time layer has ended its jobs
// first (Close). Calls after the first return its error.
func (n *Node) Stop(ctx context.Context) error {
	n.stopOnce.Do(func() {
		close(n.stop)
		n.cancel()
		n.wg.Wait()
		n.fenceAt.Stop() // after the loop: a heartbeat in flight resets it
		n.stopLeading(true)
		n.link.Close()
		n.stopErr = n.cfg.Store.Deregister(ctx, n.cfg.Name)
	})
	return n.stopErr
}

// Leading reports whether this replica leads, and in which term.
func (n *Node) Leading() (uint64, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.lead == nil {
		return 0, false
	}
	return n.lead.ship.Term(), true
}

// Term returns the decisions of the term this replica leads, and whether
// it leads.
func (n *Node) Term() (Term, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.lead == nil {
		return nil, false
	}
	return n.lead.term, true
}

// every is how often the replica heartbeats and the leader renews.
func (n *Node) every() time.Duration { return n.cfg.Lease / 5 }

// fenceDelay returns how long after now the replica fences itself, given
// a registration renewed by a call that started at start.
func (n *Node) fenceDelay(start time.Time) time.Duration {
	return time.Until(start.Add(n.cfg.Lease - n.cfg.Grace))
}

// run heartbeats, campaigns and, while leading, renews and sweeps, and
// applies the changes of the configuration, every Lease/5, and campaigns
// every Lease/10 while it does not lead, until Stop.
func (n *Node) run() {
	defer n.wg.Done()
	tick := time.NewTicker(n.every() / 2)
	defer tick.Stop()
	for half := 0; ; half++ {
		switch {
		case half%2 == 0:
			n.heartbeat()
			n.leadership()
			n.syncChanges()
		case !n.leads():
			// Between two periods, a replica that does not lead campaigns
			// again: a lapsed lease is taken within Lease/10 of its lapse,
			// and a dead leader replaced within Lease plus that.
			n.leadership()
		}
		if !n.wait(tick) {
			return
		}
	}
}

// leads reports whether this replica leads now.
func (n *Node) leads() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lead != nil
}

// wait waits for the next period, or for a term to end, and applies the
// cluster's log of changes meanwhile whenever this replica appended to
// it. It reports false once the Node stops.
func (n *Node) wait(tick *time.Ticker) bool {
	for {
		select {
		case <-n.stop:
			return false
		case <-n.resign:
			n.mu.Lock()
			ls := n.resigned
			n.resigned = nil
			n.mu.Unlock()
			for _, l := range ls {
				n.stopTerm(l)
			}
			return true
		case <-n.appended:
			n.syncChanges()
		case <-tick.C:
			return true
		}
	}
}

// call runs one call to the store under a timeout of one period.
func (n *Node) call(f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(n.ctx, n.every())
	defer cancel()
	return f(ctx)
}

// heartbeat renews the replica's registration, or registers it again if
// it was declared dead or lapsed (ErrReplicaDead), or is not registered
// (its runs stopped first).
func (n *Node) heartbeat() {
	start := time.Now()
	err := n.call(func(ctx context.Context) error { return n.cfg.Store.Heartbeat(ctx, n.cfg.Name) })
	if errors.Is(err, store.ErrReplicaDead) || errors.Is(err, store.ErrNotRegistered) {
		n.fence()
		start = time.Now()
		err = n.call(func(ctx context.Context) error {
			return n.cfg.Store.Register(ctx, n.cfg.Name, n.cfg.Capacity, n.cfg.Fingerprint, n.cfg.Lease)
		})
	}
	switch {
	case err == nil:
	case errors.Is(err, store.ErrConfigMismatch):
		n.log.Error("fairsched: a replica out of the cluster cannot register again: it stays out while a live replica has another configuration",
			"replica", n.cfg.Name, "err", err)
		return
	default:
		if n.ctx.Err() == nil {
			n.log.Warn("fairsched: a replica's heartbeat failed", "replica", n.cfg.Name, "err", err)
		}
		return
	}
	n.renewed(start)
	n.fenceAt.Reset(n.fenceDelay(start))
	if n.fenced.Load() {
		n.host.Deliver(func(now int64) {
			if n.fenced.Swap(false) {
				n.remote.Unfence(now)
			}
		})
	}
}

// renewed notes the registration renewed by a call that started at
// start.
func (n *Node) renewed(start time.Time) {
	n.until.Store(int64(start.Sub(n.epoch) + n.cfg.Lease - n.cfg.Grace))
}

// lapsed reports whether the registration could lapse within Grace:
// fenceAt is due, whether or not it has fired.
func (n *Node) lapsed() bool { return time.Since(n.epoch) >= time.Duration(n.until.Load()) }

// Lapsed reports whether this replica's registration could have lapsed
// (within Grace), and if so fences it first, as fenceAt does when it
// fires: every run of the replica stops. The run-time layer asks it just
// before a granted job begins, for a process woken past the lapse
// (SIGSTOP, a long pause) whose goroutines run in any order, the timer's
// maybe last: a job granted before the pause would otherwise begin where
// the leader, having declared the replica dead, no longer counts it.
func (n *Node) Lapsed() bool {
	if !n.lapsed() {
		return false
	}
	n.fence()
	return true
}

// guard is the replica's Receiver: past the time its registration could
// lapse within Grace, the replica fences itself before it takes what it
// receives, so the grants in it are dropped even if fenceAt's goroutine
// has not run yet.
type guard struct {
	n *Node
	r decide.Receiver
}

func (g guard) Receive(msgs []decide.Msg) {
	g.n.Lapsed() // fences it, if so
	g.r.Receive(msgs)
}

func (g guard) Lost() { g.r.Lost() }

// fence stops the replica's runs, once per lapse: its registration could
// lapse within Grace, or has. A leader that cannot heartbeat stops
// leading too.
func (n *Node) fence() {
	fenced := false
	n.host.Deliver(func(int64) {
		if !n.fenced.Swap(true) {
			n.remote.Fence()
			fenced = true
		}
	})
	if !fenced {
		return
	}
	n.log.Warn("fairsched: a replica stops its runs: it could not renew its registration", "replica", n.cfg.Name)
	n.host.Lose()
	n.mu.Lock()
	l := n.lead
	n.mu.Unlock()
	if l != nil {
		l.lapse()
	}
}

// leadership campaigns for the lease, or, while leading, renews it and
// keeps the leader's replicas up to date with the registry.
func (n *Node) leadership() {
	n.mu.Lock()
	l, fenced := n.lead, n.fenced.Load()
	n.mu.Unlock()
	if l == nil {
		if fenced {
			return
		}
		start := time.Now()
		var ship store.Leadership
		err := n.call(func(ctx context.Context) (err error) {
			ship, err = n.cfg.Store.Campaign(ctx, n.cfg.Name, n.cfg.Lease)
			return err
		})
		if err != nil || ship == nil {
			return
		}
		if err := n.startLeading(ship, start); err != nil && n.ctx.Err() == nil {
			n.log.Warn("fairsched: a replica could not begin to lead", "replica", n.cfg.Name, "err", err)
		}
		return
	}
	start := time.Now()
	err := n.call(l.ship.Renew)
	switch {
	case errors.Is(err, store.ErrFenced):
		n.stopTerm(l)
		return
	case err == nil:
		l.renewed(start)
	}
	var dead []string
	if err := n.call(func(ctx context.Context) (err error) {
		dead, err = l.ship.Sweep(ctx, n.cfg.Lease)
		return err
	}); err != nil {
		return
	}
	var recs []store.ReplicaRecord
	if err := n.call(func(ctx context.Context) (err error) {
		recs, err = n.cfg.Store.Replicas(ctx)
		return err
	}); err != nil {
		return
	}
	l.update(recs, dead)
	if n.cfg.Overflow != nil {
		l.checkOverflow()
	}
}

// startLeading begins a term with ship, won by a call that started at
// start.
func (n *Node) startLeading(ship store.Leadership, start time.Time) error {
	// Sweep first: a replica whose registration lapsed (the leader that
	// died, likely) would hold the term's first grant until it answered.
	var recs []store.ReplicaRecord
	if err := n.call(func(ctx context.Context) (err error) {
		if _, err = ship.Sweep(ctx, n.cfg.Lease); err != nil {
			return err
		}
		recs, err = n.cfg.Store.Replicas(ctx)
		return err
	}); err != nil {
		n.stepDown(ship)
		return err
	}
	l, err := newLeading(n, ship)
	if err != nil {
		n.stepDown(ship)
		return err
	}
	l.setUntil(start) // the lease holds from the campaign's start: the log may be applied
	// Every change made at run time, on any replica, in the log's order,
	// before the term begins: the leader decides by the cluster's
	// configuration as it is, not as it was at New.
	var changes []store.ChangeRecord
	if err := n.call(func(ctx context.Context) (err error) {
		changes, err = n.cfg.Store.Changes(ctx, n.cfg.Fingerprint, 0)
		return err
	}); err != nil {
		l.end()
		n.stepDown(ship)
		return err
	}
	n.applyChanges(changes, l)
	var link store.ClosingLink
	if err := n.call(func(ctx context.Context) (err error) {
		link, err = ship.Link(ctx, l, l.lapse)
		return err
	}); err != nil {
		l.end()
		n.stepDown(ship)
		return err
	}
	l.mu.Lock()
	l.link = link
	l.mu.Unlock()
	live := map[string]int{n.cfg.Name: n.cfg.Capacity}
	for _, r := range recs {
		if r.Live {
			live[r.Name] = r.Capacity
		}
	}
	n.mu.Lock()
	n.lead = l
	n.mu.Unlock()
	l.begin(live, start)
	n.log.Info("fairsched: a replica leads", "replica", n.cfg.Name, "term", ship.Term())
	if n.cfg.OnLead != nil {
		n.cfg.OnLead(ship.Term())
	}
	return nil
}

// resignTerm asks the run loop to end term l (its lease was refused, or
// could lapse within Grace); a term that has ended already is left be.
func (n *Node) resignTerm(l *leading) {
	n.mu.Lock()
	n.resigned = append(n.resigned, l)
	n.mu.Unlock()
	select {
	case n.resign <- struct{}{}:
	default: // the loop will read what is resigned
	}
}

// stopTerm ends term l if it is still this replica's.
func (n *Node) stopTerm(l *leading) {
	n.mu.Lock()
	current := n.lead == l
	n.mu.Unlock()
	if current {
		n.stopLeading(false)
	}
}

// stopLeading ends this replica's term, if it leads: the leader's engine
// and link are dropped; with resign, the lease is given up at once.
func (n *Node) stopLeading(resign bool) {
	n.mu.Lock()
	l := n.lead
	n.lead = nil
	n.mu.Unlock()
	if l == nil {
		return
	}
	l.end()
	if resign {
		n.stepDown(l.ship)
	}
	n.log.Info("fairsched: a replica stops leading", "replica", n.cfg.Name, "term", l.ship.Term())
}

// stepDown gives ship's lease up, at once.
func (n *Node) stepDown(ship store.Leadership) {
	ctx, cancel := context.WithTimeout(context.Background(), n.every())
	defer cancel()
	if err := ship.StepDown(ctx); err != nil && !errors.Is(err, store.ErrFenced) {
		n.log.Warn("fairsched: a leader could not give its lease up", "replica", n.cfg.Name, "err", err)
	}
}

// upLink sends what the replica's Remote sends the leader: within the
// process while it leads, else over the database.
type upLink struct{ n *Node }

func (u upLink) Send(msgs []decide.Msg) {
	u.n.mu.Lock()
	l := u.n.lead
	u.n.mu.Unlock()
	for len(msgs) > 0 { // by runs of one term: a batch may straddle a new one
		k := 1
		for k < len(msgs) && msgs[k].Term == msgs[0].Term {
			k++
		}
		if run := msgs[:k:k]; l != nil && l.current(run[0].Term) {
			l.Receive(run)
		} else {
			u.n.link.Send(run) // to the leader of the term they are of, elsewhere
		}
		msgs = msgs[k:]
	}
}
