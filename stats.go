package fairsched

import (
	"maps"
	"slices"
	"time"

	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/rt"
)

// Histogram is a cumulative histogram of durations in seconds: Counts[i]
// jobs took at most Buckets[i] seconds. Each Stats gives histograms of
// their own: changing one changes nothing else.
type Histogram struct {
	Count   uint64
	Sum     float64
	Buckets []float64 // upper bounds, seconds, increasing
	Counts  []uint64
}

// histogramOf turns the engine's histogram into a cumulative one.
func histogramOf(h engine.Histogram) Histogram {
	out := Histogram{Count: h.Count, Sum: h.Sum, Buckets: append([]float64(nil), engine.Buckets[:]...), Counts: make([]uint64, len(h.Counts))}
	var c uint64
	for i, n := range h.Counts {
		c += n
		out.Counts[i] = c
	}
	return out
}

// Stats is a consistent view of the scheduler at one instant.
type Stats struct {
	// MaxConcurrency and MaxQueue are the limits in force (0: none):
	// Config's, or SetMaxConcurrency's.
	MaxConcurrency, MaxQueue int

	Running int // running jobs
	Queued  int // jobs not started, including those parked or delayed
	Parked  int // of Queued, those waiting on a conflict or their key's cap
	Delayed int // of Queued, those waiting for their NotBefore time
	Paused  int // of Queued, those whose key or type is paused
	// PausedKeys are the keys paused (PauseKey), by name, whether they
	// have jobs or not.
	PausedKeys []string
	// Resources are the named resources, by name.
	Resources []ResourceStats
	// Waiting counts the jobs not started by what holds them; the counts
	// add up to Queued, and reasons with no job are left out. A queued job
	// whose conflict holder started after it queued counts as WaitTurn
	// until the dispatcher reaches it (Snapshot names the conflict at
	// once).
	Waiting map[WaitReason]int

	Submitted uint64 // jobs accepted; each ends exactly once
	Completed uint64 // ran and returned nil
	Failed    uint64 // ran and returned an error or panicked
	Cancelled uint64 // left without running: Handle.Cancel or the caller's context while queued, or Close (a running job that returns an error after its context was cancelled counts as Failed)
	Expired   uint64 // not started by their start deadline
	// Joins counts the submissions that joined a job of their type and ID
	// instead of making one (DuplicatePolicy JoinQueued, JoinRunning).
	Joins uint64
	// Superseded counts, of Cancelled, the jobs replaced by a newer
	// submission of their type and ID (DuplicatePolicy Supersede).
	Superseded uint64
	// DependencyFailed counts the jobs that ended without running because
	// a job they run after did not complete.
	DependencyFailed uint64
	Retries          uint64 // failed attempts that were retried (not counted in Failed)
	Dead             int    // dead jobs kept (DeadJobs)
	DeadTotal        uint64 // jobs that died, kept or not
	// SkippedOccurrences counts the occurrences of periodic jobs that were
	// not submitted: their predecessor had not ended, or the queue was full.
	SkippedOccurrences uint64
	// Disabled is the (type, ID) pairs disabled now (see Scheduler.Disabled);
	// DisabledTotal how many times a pair was disabled; DisabledRefusals
	// the submissions refused with ErrDisabled.
	Disabled                        int
	DisabledTotal, DisabledRefusals uint64
	Rejected                        uint64 // submissions refused: queue full, closed, unknown type
	// RejectedUnknownType counts the refusals with ErrUnknownType, which
	// belong to no type's counts.
	RejectedUnknownType uint64

	HighPriorityCompleted uint64 // completed with base priority >= 75
	LowPriorityCompleted  uint64 // completed with base priority < 25
	AgingPromotions       uint64 // jobs that started above their base priority, or as urgent
	UrgentStarts          uint64 // jobs started as urgent
	ReservedStarts        uint64 // jobs started under their key's MinSlots
	ExcessRedistributed   uint64 // starts beyond the key's allocation, from capacity others left idle

	QueueWait   Histogram // submission to start
	JobDuration Histogram // start to end
	// EffectiveAtStart counts started jobs by effective priority: [i] is
	// priorities 10*i .. 10*i+9 (and [10] is 100).
	EffectiveAtStart [11]uint64

	EventsDropped  uint64 // events not delivered because OnEvent fell behind
	KeysTracked    int    // fairness keys remembered
	KeysForgotten  uint64 // idle keys forgotten after IdleTTL
	CostEstimates  int    // (type, ID) estimates remembered
	CostsForgotten uint64

	Tiers []TierStats // highest tier first
	Types []TypeStats // by name
	// Keys lists the configured keys, the paused ones the scheduler has
	// seen, and the MaxListedKeys busiest others, sorted by name; OtherKeys
	// sums up the rest of the keys with work.
	Keys      []KeyStats
	OtherKeys KeySummary

	// Replica is the replica's own part, if the scheduler is one of
	// several (Config.Replica); nil otherwise. The figures above are then
	// the replica's own jobs': the Submit and RunSync jobs submitted on
	// it, and the durable attempts it runs.
	Replica *ReplicaStats
	// Cluster, on the replica that leads, is the whole cluster's figures,
	// as the leader decides: every replica's Submit and RunSync jobs, and
	// every durable job, queued or running wherever it runs, with the
	// dead ones. It is nil on the other replicas, and on a scheduler that
	// is not one; its own Replica and Cluster are nil. Summing the
	// replicas' own figures counts each job once, where it was submitted
	// or runs, and durable jobs waiting nowhere: read them here.
	Cluster *Stats
}

// MaxListedKeys bounds how many unconfigured keys Stats lists by name.
const MaxListedKeys = 32

// TierStats describes one tier.
type TierStats struct {
	Tier    Tier
	Limit   int // 0: no cap
	Running int
	Queued  int
}

// TypeStats describes one job type.
type TypeStats struct {
	Name           string
	Tier           Tier
	MaxConcurrency int // its TypeConfig's cap; 0: no cap
	Running        int
	Queued         int
	Started        uint64
	Completed      uint64
	Failed         uint64
	Cancelled      uint64
	Expired        uint64 // not started by their start deadline
	// DependencyFailed: ended without running, a job they run after did
	// not complete.
	DependencyFailed uint64
	Retries          uint64 // failed attempts that were retried
	Paused           bool   // PauseType
	Rejected         uint64 // refusals of jobs of this type: RejectedFull + RejectedClosed
	// RejectedFull counts refusals with ErrQueueFull: the queue or the
	// key's MaxPending was full. RejectedClosed counts refusals with
	// ErrClosed, after Shutdown or Close began.
	RejectedFull, RejectedClosed uint64
}

// KeyStats describes one fairness key.
type KeyStats struct {
	Key            string
	Configured     bool
	Weight         float64
	MinSlots       int
	MaxConcurrency int // the key's cap; 0: no cap
	Running        int
	Queued         int
	Paused         bool // PauseKey
	// Allocation is the key's entitlement: its weighted max-min fair share
	// of the slots among the keys that have work, after reservations and
	// caps, as if each of them could use its share. A paused key has no
	// work, nor has one whose only work is of paused types, though their
	// running jobs finish. It changes when keys start or stop having work
	// (a pause or a resume among them), or are reconfigured.
	Allocation float64
	// Utilisation is Running / Allocation (0 when nothing is allocated):
	// below 1 the key leaves part of its share to others, above 1 it uses
	// capacity others left idle.
	Utilisation float64
	// VirtualTime is the key's virtual time in each tier it has used.
	VirtualTime map[Tier]float64
}

// KeySummary sums up keys not listed individually.
type KeySummary struct {
	Keys    int
	Running int
	Queued  int
}

// Stats returns the scheduler's statistics. It takes the lock for
// O(t log t + k + b log b + r + h) time, for t types, k keys remembered, b
// keys with work, r running jobs, and h the key and type pairs and the
// groups of jobs that a key's limit, a conflict or a resource holds.
func (s *Scheduler) Stats() Stats {
	r := s.rt.Stats(MaxListedKeys)
	st := statsOf(&r)
	if r.Cluster != nil {
		c := statsOf(r.Cluster)
		st.Cluster = &c
	}
	return st
}

// statsOf returns the API's Stats of the run-time layer's r, Cluster
// aside.
func statsOf(r *rt.Stats) Stats {
	e := r.Engine
	st := Stats{
		Running: e.Running, Queued: e.Pending + e.Delayed + e.Paused + e.Blocked, Parked: e.Parked, Delayed: e.Delayed, Paused: e.Paused,
		Submitted: e.Submitted, Completed: e.Completed, Failed: e.Failed,
		Cancelled: e.Cancelled, Expired: e.Expired, DependencyFailed: e.DependencyFailed, Retries: e.Retries,
		Rejected: e.RejectedUnknownType, RejectedUnknownType: e.RejectedUnknownType,
		Superseded: r.Superseded, Joins: r.Joins,
		Dead: r.Dead, DeadTotal: r.DeadTotal, SkippedOccurrences: r.SkippedOccurrences,
		Disabled: r.Disabled, DisabledTotal: r.DisabledTotal, DisabledRefusals: r.DisabledRefusals,
		HighPriorityCompleted: e.HighCompleted, LowPriorityCompleted: e.LowCompleted,
		AgingPromotions: e.Promotions, UrgentStarts: e.UrgentStarts,
		ReservedStarts: e.ReservedStarts, ExcessRedistributed: e.Excess,
		QueueWait: histogramOf(e.Wait), JobDuration: histogramOf(e.Duration),
		EffectiveAtStart: e.Effective,
		EventsDropped:    r.EventsDropped,
		KeysTracked:      e.KeysTracked, KeysForgotten: e.KeysForgotten,
		CostEstimates: e.Estimates, CostsForgotten: e.Forgot,
		PausedKeys:     r.PausedKeys,
		MaxConcurrency: r.MaxConcurrency, MaxQueue: r.MaxQueue,
		Waiting:   map[WaitReason]int{},
		Resources: make([]ResourceStats, 0, len(r.Resources)),
	}
	for why, n := range r.Waiting {
		if n > 0 {
			st.Waiting[WaitReason(why)] = n
		}
	}
	if p := r.Replica; p != nil {
		st.Replica = &ReplicaStats{Name: p.Name, Leader: p.Leader, Term: p.Term, Capacity: p.Capacity, Running: p.Running,
			Busy: time.Duration(p.Busy) * time.Microsecond, Idle: time.Duration(p.Idle) * time.Microsecond}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Resources)) {
		st.Resources = append(st.Resources, ResourceStats{Name: name, Capacity: r.Resources[name][0], InUse: r.Resources[name][1]})
	}
	for _, t := range r.Tiers {
		st.Tiers = append(st.Tiers, TierStats{Tier: Tier(t.Tier), Limit: t.Limit, Running: t.Running, Queued: t.Queued})
	}
	for _, t := range r.Types {
		st.Types = append(st.Types, TypeStats{
			Name: t.Name, Tier: Tier(t.Tier), MaxConcurrency: t.Limit, Running: t.Running, Queued: t.Queued,
			Started: t.Started, Completed: t.Completed, Failed: t.Failed, Cancelled: t.Cancelled, Expired: t.Expired, DependencyFailed: t.DependencyFailed, Retries: t.Retries,
			Rejected: t.RejectedFull + t.RejectedClosed, RejectedFull: t.RejectedFull, RejectedClosed: t.RejectedClosed,
			Paused: t.Paused,
		})
		st.Rejected += t.RejectedFull + t.RejectedClosed
	}
	for _, k := range r.Keys {
		ks := KeyStats{
			Key: k.Key, Configured: k.Configured, Weight: k.Cfg.Weight, MinSlots: k.Cfg.MinSlots,
			MaxConcurrency: k.Cfg.MaxConcurrency, Running: k.Running, Queued: k.Queued, Paused: k.Paused,
			Allocation: k.Allocation, VirtualTime: make(map[Tier]float64, len(k.VirtualTime)),
		}
		if k.Allocation > 0 {
			ks.Utilisation = float64(k.Running) / k.Allocation
		}
		for t, v := range k.VirtualTime {
			ks.VirtualTime[Tier(t)] = v
		}
		st.Keys = append(st.Keys, ks)
	}
	st.OtherKeys = KeySummary(r.OtherKeys)
	return st
}

// AllocationDemand is one key's input to Allocate.
type AllocationDemand struct {
	Weight   float64
	MinSlots int
	Limit    int // 0: no cap
	Demand   int // jobs running or queued
}

// Allocate computes weighted max-min fair allocations of capacity slots
// (0: unlimited, every key gets its demand) between keys, the way the
// dispatcher shares them in the long run: each key first gets its
// reservation (up to its demand), then the rest is water-filled by weight:
// every key gets weight*λ more, for the largest λ that fits, except keys
// that reach their cap or demand first, whose excess goes to the others.
// The result may be fractional: a key alternating between 10 and 11 slots
// has an allocation of 10.5. O(k log k) for k keys.
func Allocate(capacity int, keys []AllocationDemand) []float64 {
	demands := make([]engine.Demand, len(keys))
	for i, k := range keys {
		demands[i] = engine.Demand(k)
	}
	return engine.Allocate(capacity, demands)
}
