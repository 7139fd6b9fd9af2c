package rt

import (
	"context"
	"maps"
	"slices"

	"github.com/fairsched/fairsched/internal/cluster"
	"github.com/fairsched/fairsched/internal/decide"
	"github.com/fairsched/fairsched/internal/engine"
)

// New returns a Scheduler configured by cfg, or an error naming every
// problem with cfg.
func New(cfg Config) (_ *Runtime, err error) {
	s := &Runtime{cfg: cfg, timebase: newTimebase(cfg.Clock), done: make(chan struct{})}
	defer func() {
		if err != nil { // nothing is left running: the event hook's goroutine ends
			_ = s.closeEvents(context.Background())
		}
	}()
	s.retries.tb = &s.timebase
	s.disabling.tb = &s.timebase
	var obs engine.Observer
	if cfg.OnEvent != nil {
		s.events = newEventSink(cfg.OnEvent, cfg.EventBuffer, cfg.Logger, cfg.Signals)
		obs = (*observer)(s)
	}
	s.disabling.events = s.events
	s.dead = newDeadJobs(cfg.DeadJobs, &s.timebase, s.events)
	s.eng = engine.New(cfg.Engine, obs)
	s.inProc = decide.NewLocal(s.eng, (*grantee)(s))
	switch {
	case cfg.keeper != nil:
		s.keeper = &keeper{reported: make(map[int64]reportedRun), early: make(map[int64]decide.Msg),
			runs: make(map[int64]*remoteRun)}
		s.keeper.leader = decide.NewLeader(cfg.keeper.name, cfg.keeper.capacity, s.eng, (*keeperGrantee)(s), cfg.keeper.out)
		s.keeper.leader.SetGuard(cfg.keeper.valid)
		s.dec = s.keeper.leader
	case cfg.Cluster != nil:
		s.outbox = new(decide.Outbox)
		s.remote = decide.NewRemote(cfg.Cluster.Name, s.eng, (*grantee)(s), s.outbox, s.nowLocked())
		s.dec = s.remote
	case cfg.Decider != nil:
		s.dec = cfg.Decider(s.eng, (*grantee)(s), s.Deliver)
		s.remote, _ = s.dec.(*decide.Remote) // a replica's, in one process (the tests' cluster)
	}
	s.disabling.dec = s.decider()
	s.disabling.pairs = s.disabling.dec.Pairs()
	s.eng.Owner = s
	if _, ok := cfg.Types[""]; !ok {
		s.noteRetriesLocked("", TypeConfig{})
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Types)) {
		if err := s.registerLocked(name, cfg.Types[name]); err != nil {
			return nil, err
		}
	}
	switch {
	case cfg.Store != nil && s.keeper != nil:
		if err := s.openKeeperStore(); err != nil {
			return nil, err
		}
	case cfg.Store != nil && s.remote != nil: // a replica's, or one in a test's cluster
		if err := s.openReplicaStore(); err != nil {
			return nil, err
		}
	case cfg.Store != nil:
		if err := s.openStore(); err != nil {
			return nil, err
		}
	}
	if cfg.Cluster != nil {
		if err := s.join(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// join starts the scheduler's part in its cluster. The leader's engine,
// made as each term begins with its keeper (newTerm), is configured as
// this one was at New: the same limits, and the job types of
// Config.Types. Their fingerprint, with
// the types' policies and the lease, is the replica's: it is refused if a
// live replica has another (store.ErrConfigMismatch), and New fails.
func (s *Runtime) join() error {
	c := *s.cfg.Cluster
	c.Fingerprint = Fingerprint(s.cfg.Engine, s.cfg.Types, c.Lease)
	c.NewTerm = s.newTerm
	n, err := cluster.Start(context.Background(), c, s.remote, s.outbox, s)
	if err != nil {
		return err
	}
	s.node = n
	var l lapser = n
	s.lapse.Store(&l)
	return nil
}
