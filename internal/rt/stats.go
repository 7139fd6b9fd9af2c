package rt

import (
	"maps"
	"slices"

	"github.com/fairsched/fairsched/internal/engine"
)

// Stats is what the API's Stats is made from: the engine's counts and
// the run-time layer's, read under one lock, so that they agree.
type Stats struct {
	Engine         engine.Summary
	Tiers          []engine.TierInfo
	Types          []engine.TypeInfo
	Keys           []engine.KeyInfo
	OtherKeys      engine.KeySummary
	PausedKeys     []string
	MaxConcurrency int
	MaxQueue       int
	Resources      map[string][2]int // capacity, units in use
	// Waiting counts the jobs not started by what holds them, the jobs
	// of a type with no handler here at WhyNoHandler.
	Waiting [engine.NumReasons]int

	Superseded, Joins               uint64
	Dead                            int
	DeadTotal, SkippedOccurrences   uint64
	Disabled                        int
	DisabledTotal, DisabledRefusals uint64
	EventsDropped                   uint64
	// Replica is a replica's own part (Config.Cluster); nil otherwise.
	Replica *ReplicaStats
	// Cluster is, on the replica that leads, its term's Stats: the
	// cluster's jobs as the leader decides them; nil otherwise.
	Cluster *Stats
}

// ReplicaStats are a replica's own figures; Busy and Idle in µs.
type ReplicaStats struct {
	Name              string
	Leader            bool
	Term              uint64
	Capacity, Running int
	Busy, Idle        int64
}

// Stats returns the scheduler's counts. It takes the lock for
// O(t log t + k + b log b + l) time, for t types, k keys remembered, b
// keys with work and l lanes (key and type pairs) with work.
func (s *Runtime) Stats(maxKeys int) Stats {
	cluster := s.clusterStats(maxKeys) // the term's lock, before this one's: never both
	s.mu.Lock()
	defer s.mu.Unlock()
	var orphans []string // held as paused, told apart: WhyNoHandler
	if s.durable != nil {
		orphans = slices.Collect(maps.Keys(s.durable.orphans))
	}
	f := s.decider().Figures(maxKeys, orphans)
	st := Stats{
		Engine: f.Summary, Tiers: f.Tiers, Types: f.Types, Keys: f.Keys, OtherKeys: f.OtherKeys,
		PausedKeys: f.PausedKeys, MaxConcurrency: f.MaxConcurrency, MaxQueue: s.cfg.Engine.MaxQueue, Resources: f.Resources,
		Superseded: s.dups.superseded, Joins: s.dups.joins,
		Dead: len(s.dead.list), DeadTotal: s.dead.total, SkippedOccurrences: s.skippedOccurrences,
		Disabled: s.disabling.pairs.Count(s.nowLocked()), DisabledTotal: s.disabling.pairs.Total,
		DisabledRefusals: s.disabling.refused,
		EventsDropped:    s.events.droppedCount(),
	}
	copy(st.Waiting[:], f.Waiting[:])
	if s.node != nil {
		running, busy, idle := s.remote.Usage(s.nowLocked())
		term, leader := s.node.Leading()
		st.Replica = &ReplicaStats{Name: s.cfg.Cluster.Name, Leader: leader, Term: term,
			Capacity: s.cfg.Cluster.Capacity, Running: running, Busy: busy, Idle: idle}
	}
	st.Cluster = cluster
	for _, n := range f.TypePaused {
		st.Waiting[engine.WhyPaused] -= n
		st.Waiting[WhyNoHandler] += n
	}
	return st
}

// clusterStats returns the Stats of the term this replica leads, if it
// leads: the keeper's, which decides every replica's jobs and keeps the
// durable ones.
func (s *Runtime) clusterStats(maxKeys int) *Stats {
	if s.node == nil {
		return nil
	}
	t, ok := s.node.Term()
	if !ok {
		return nil
	}
	k, ok := t.(keeperTerm)
	if !ok {
		return nil
	}
	st := k.s.Stats(maxKeys)
	return &st
}
