package rt

import (
	"maps"
	"slices"

	"github.com/fairsched/fairsched/internal/decide"
	"github.com/fairsched/fairsched/internal/engine"
)

// New returns a Scheduler configured by cfg, or an error naming every
// problem with cfg.
func New(cfg Config) (*Runtime, error) {
	s := &Runtime{cfg: cfg, timebase: newTimebase(cfg.Clock), done: make(chan struct{})}
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
	if cfg.Decider != nil {
		s.dec = cfg.Decider(s.eng, (*grantee)(s), s.Deliver)
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
	if cfg.Store != nil {
		if err := s.openStore(); err != nil {
			return nil, err
		}
	}
	return s, nil
}
