package fairsched

import (
	"math"
	"sort"
	"time"

	"github.com/fairsched/fairsched/internal/iheap"
)

// counters are the scheduler's cumulative counts. Guarded by Scheduler.mu.
type counters struct {
	submitted, completed, failed, cancelled  uint64
	rejectedUnknownType                      uint64 // the other refusals are counted by type
	highCompleted, lowCompleted              uint64
	promotions, urgentStarts, reservedStarts uint64
	excess                                   uint64
	wait, duration                           histogram
	effective                                [11]uint64 // started jobs by effective priority / 10
}

// typeCounters are one job type's cumulative counts.
type typeCounters struct {
	started, completed, failed, cancelled uint64
	rejectedFull, rejectedClosed          uint64
}

// HistogramBuckets are the upper bounds, in seconds, of the queue-wait and
// job-duration histograms in Stats.
var HistogramBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800}

// Histogram is a cumulative histogram of durations in seconds: Counts[i]
// jobs took at most HistogramBuckets[i].
type Histogram struct {
	Count  uint64
	Sum    float64
	Counts []uint64
}

type histogram struct {
	count  uint64
	sum    float64
	counts [13]uint64 // not cumulative; len(HistogramBuckets)
}

func (h *histogram) observe(seconds float64) {
	h.count++
	h.sum += seconds
	for i, b := range HistogramBuckets {
		if seconds <= b {
			h.counts[i]++
			return
		}
	}
}

func (h *histogram) export() Histogram {
	out := Histogram{Count: h.count, Sum: h.sum, Counts: make([]uint64, len(HistogramBuckets))}
	var c uint64
	for i := range HistogramBuckets {
		c += h.counts[i]
		out.Counts[i] = c
	}
	return out
}

// Stats is a consistent view of the scheduler at one instant.
type Stats struct {
	Active int // running jobs
	Queued int // pending jobs, including those parked on a conflict or key cap
	Parked int // of Queued, those waiting on a conflict or their key's cap

	Submitted uint64 // jobs accepted; each ends exactly once
	Completed uint64 // ran and returned nil
	Failed    uint64 // ran and returned an error or panicked
	Cancelled uint64 // left without running: Handle.Cancel or the caller's context while queued, or Close (a running job that returns an error after its context was cancelled counts as Failed)
	Rejected  uint64 // submissions refused: queue full, closed, unknown type
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
	// Keys lists the configured keys and the MaxListedKeys busiest others,
	// sorted by name; OtherKeys sums up the rest of the keys with work.
	Keys      []KeyStats
	OtherKeys KeySummary
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
	Name      string
	Tier      Tier
	Limit     int
	Running   int
	Queued    int
	Started   uint64
	Completed uint64
	Failed    uint64
	Cancelled uint64
	Rejected  uint64 // refusals of jobs of this type: RejectedFull + RejectedClosed
	// RejectedFull counts refusals with ErrQueueFull: the queue or the
	// key's MaxPending was full. RejectedClosed counts refusals with
	// ErrClosed, after Shutdown or Close began.
	RejectedFull, RejectedClosed uint64
}

// KeyStats describes one fairness key.
type KeyStats struct {
	Key        string
	Configured bool
	Weight     float64
	MinSlots   int
	Limit      int
	Running    int
	Queued     int
	// Allocation is the key's entitlement: its weighted max-min fair share
	// of the slots among the keys that have work, after reservations and
	// caps, as if each of them could use its share. It changes when keys
	// start or stop having work, or are reconfigured.
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
// O(t log t + k + b log b) time, for t types, k keys remembered and b keys
// with work.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &s.counters
	st := Stats{
		Active: s.nrunning, Queued: s.npending, Parked: s.parkedConflict + s.parkedKey,
		Submitted: c.submitted, Completed: c.completed, Failed: c.failed,
		Cancelled: c.cancelled, Rejected: c.rejectedUnknownType, RejectedUnknownType: c.rejectedUnknownType,
		HighPriorityCompleted: c.highCompleted, LowPriorityCompleted: c.lowCompleted,
		AgingPromotions: c.promotions, UrgentStarts: c.urgentStarts,
		ReservedStarts: c.reservedStarts, ExcessRedistributed: c.excess,
		QueueWait: c.wait.export(), JobDuration: c.duration.export(),
		EffectiveAtStart: c.effective,
		EventsDropped:    s.events.droppedCount(),
		KeysTracked:      len(s.keys), KeysForgotten: s.keysForgotten,
		CostEstimates: s.costs.len(), CostsForgotten: s.costs.forgotten,
	}
	for _, t := range s.tiers {
		ts := TierStats{Tier: t.level, Limit: t.limit, Running: t.running}
		for _, ty := range t.types {
			ts.Queued += ty.pending
		}
		st.Tiers = append(st.Tiers, ts)
	}
	for _, name := range sortedKeys(s.types) {
		t := s.types[name]
		st.Types = append(st.Types, TypeStats{
			Name: name, Tier: t.cfg.Tier, Limit: t.cfg.MaxConcurrency,
			Running: t.running, Queued: t.pending,
			Started: t.stats.started, Completed: t.stats.completed, Failed: t.stats.failed,
			Cancelled: t.stats.cancelled, Rejected: t.stats.rejectedFull + t.stats.rejectedClosed,
			RejectedFull: t.stats.rejectedFull, RejectedClosed: t.stats.rejectedClosed,
		})
		st.Rejected += t.stats.rejectedFull + t.stats.rejectedClosed
	}
	alloc := s.allocationsLocked()
	var others []*keyState
	for _, k := range s.keys {
		if k.configured {
			st.Keys = append(st.Keys, keyStats(k, alloc[k]))
		} else if k.running+k.pending > 0 {
			others = append(others, k)
		}
	}
	sort.Slice(others, func(i, j int) bool {
		a, b := others[i], others[j]
		if a.running+a.pending != b.running+b.pending {
			return a.running+a.pending > b.running+b.pending
		}
		return a.name < b.name
	})
	for i, k := range others {
		if i < MaxListedKeys {
			st.Keys = append(st.Keys, keyStats(k, alloc[k]))
			continue
		}
		st.OtherKeys.Keys++
		st.OtherKeys.Running += k.running
		st.OtherKeys.Queued += k.pending
	}
	sort.Slice(st.Keys, func(i, j int) bool { return st.Keys[i].Key < st.Keys[j].Key })
	return st
}

func keyStats(k *keyState, alloc float64) KeyStats {
	ks := KeyStats{
		Key: k.name, Configured: k.configured, Weight: k.cfg.Weight, MinSlots: k.cfg.MinSlots,
		Limit: k.cfg.MaxConcurrency, Running: k.running, Queued: k.pending,
		Allocation: alloc, VirtualTime: make(map[Tier]float64, len(k.flows)),
	}
	if alloc > 0 {
		ks.Utilisation = float64(k.running) / alloc
	}
	for _, f := range k.flows {
		ks.VirtualTime[f.tier.level] = f.v
	}
	return ks
}

// allocationsLocked returns each busy key's allocation: its entitlement to
// slots as a key with work, whatever the length of its queue. It changes
// when keys start or stop having work or are reconfigured; a key using
// more than its allocation is using capacity others left idle.
// O(b log b) in the busy keys b; keys without work are not looked at.
func (s *Scheduler) allocationsLocked() map[*keyState]float64 {
	demands := make([]AllocationDemand, len(s.busy))
	for i, k := range s.busy {
		d := k.running + k.pending
		if s.cfg.MaxConcurrency > 0 {
			d = s.cfg.MaxConcurrency // able to use any share
		}
		demands[i] = AllocationDemand{Weight: k.cfg.Weight, MinSlots: k.cfg.MinSlots, Limit: k.cfg.MaxConcurrency, Demand: d}
	}
	out := make(map[*keyState]float64, len(s.busy))
	for i, a := range Allocate(s.cfg.MaxConcurrency, demands) {
		out[s.busy[i]] = a
	}
	return out
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
	out := make([]float64, len(keys))
	room := make([]float64, len(keys)) // what each key can still take
	for i, k := range keys {
		limit := float64(k.Demand)
		if k.Limit > 0 && float64(k.Limit) < limit {
			limit = float64(k.Limit)
		}
		if capacity <= 0 {
			out[i] = limit
			continue
		}
		out[i] = math.Min(float64(k.MinSlots), limit)
		room[i] = limit - out[i]
	}
	if capacity <= 0 {
		return out
	}
	left := float64(capacity)
	var weight float64
	order := make([]int, 0, len(keys))
	for i, k := range keys {
		left -= out[i]
		if room[i] > 0 && k.Weight > 0 {
			order = append(order, i)
			weight += k.Weight
		}
	}
	// Keys that saturate first are those with the least room per weight.
	sort.Slice(order, func(a, b int) bool {
		i, j := order[a], order[b]
		return room[i]/keys[i].Weight < room[j]/keys[j].Weight
	})
	for n, i := range order {
		if left <= 0 {
			break
		}
		w := keys[i].Weight
		if share := left * w / weight; room[i] <= share {
			out[i] += room[i]
			left -= room[i]
			weight -= w
			continue
		}
		// Nobody from here on saturates: share the rest by weight.
		for _, j := range order[n:] {
			out[j] += left * keys[j].Weight / weight
		}
		break
	}
	return out
}

// JobInfo describes a pending or running job in a Snapshot.
type JobInfo struct {
	Seq               uint64 // submission order
	Type, ID, Key     string
	Tier              Tier
	BasePriority      int
	EffectivePriority int
	Urgent            bool
	Running           bool
	Parked            bool          // waiting on a conflict or its key's cap
	Wait              time.Duration // submission to start, or to now if pending
	Submitted         time.Time
}

// Snapshot lists every pending and running job, running first, then in
// submission order. It takes the lock for O(n log n) time: for debugging
// and admin pages, not for hot paths.
func (s *Scheduler) Snapshot() []JobInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	var out []JobInfo
	for _, j := range s.running {
		out = append(out, s.infoLocked(j, now))
	}
	for _, k := range s.keys {
		for _, l := range k.lanes {
			l.run.each(func(j *job, _ uint64) { out = append(out, s.infoLocked(j, now)) })
			out = appendInfoLocked(s, out, &l.fixed, now)
			out = appendInfoLocked(s, out, &l.rising, now)
			out = appendInfoLocked(s, out, &l.capped, now)
		}
		out = appendInfoLocked(s, out, &k.parked, now)
	}
	for _, sl := range s.conflicts {
		for _, j := range sl.waiters {
			out = append(out, s.infoLocked(j, now))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Running != out[j].Running {
			return out[i].Running
		}
		return out[i].Seq < out[j].Seq
	})
	return out
}

// appendInfoLocked appends the jobs of h, in no particular order.
func appendInfoLocked(s *Scheduler, out []JobInfo, h *iheap.Keyed[*job], now int64) []JobInfo {
	for i := 0; i < h.Len(); i++ {
		j, _ := h.At(i)
		out = append(out, s.infoLocked(j, now))
	}
	return out
}

func (s *Scheduler) infoLocked(j *job, now int64) JobInfo {
	ji := JobInfo{
		Seq: j.seq, Type: j.lane.typ.name, ID: j.id, Key: j.lane.key.name, Tier: j.lane.typ.cfg.Tier,
		BasePriority: int(j.base), Running: j.state == stateRunning, Parked: j.state == stateParked,
		Submitted: s.epoch.Add(time.Duration(j.sub) * time.Microsecond),
	}
	at := now
	if ji.Running {
		at = j.start
		ji.Urgent = j.kind == startUrgent
	} else {
		ji.Urgent = s.aging.isUrgent(int(j.base), j.sub, now)
	}
	ji.EffectivePriority = s.aging.effective(int(j.base), j.sub, at)
	ji.Wait = time.Duration(at-j.sub) * time.Microsecond
	return ji
}
