package fairsched

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/fairsched/fairsched/internal/refmodel"
)

// The differential test. internal/refmodel restates the order of docs/design.md
// (The order) as literally as possible: at every dispatch it sorts all
// pending jobs by their full key and starts the first admissible one. The
// engine reaches the same decisions through heaps, parking and
// incremental bookkeeping. Thousands of small random workloads are fed to
// both, event by event, in virtual time: arrivals (some together, in one
// SubmitMany), cancellations of queued and running jobs, finishes, and run-time key changes (SetKeyWeight,
// SetKey, ResetKeys). The engine is driven either inside a Scheduler, its
// jobs run by goroutines (TestDifferential), or alone, called directly
// (TestDifferentialEngine). After every event
//
//   - the engine's invariants hold (Verify),
//   - the hard limits hold, counted by the driver from what it saw start,
//   - both started the same jobs, in the same order, by the same step of
//     the order (urgent, reserved, fair),
//   - both hold the same virtual time for every flow and the same cost
//     estimate for every (type, ID), bit for bit,
//   - and, for some workloads, Stats agree with the driver's counts.
//
// Any failure is shrunk to a small workload and reported as Go source,
// with the events and both start sequences. The same generator and driver
// serve the fuzz targets (fuzz_test.go).
//
// The files: diff_workload_test.go generates workloads, diff_system_test.go
// drives a Scheduler or an engine, diff_runner_test.go replays a workload
// and checks it, diff_shrink_test.go shrinks a failing one,
// diff_print_test.go reports it, diff_regressions_test.go keeps the ones
// that once failed, and differential_test.go runs them.

// diffUnit is the granularity of workload times. Coarse units make
// simultaneous events, equal virtual times and exact aging thresholds
// common, which is where orderings go wrong.
const diffUnit = 100 * time.Millisecond

// diffWorkload is one randomized scenario: a configuration and the events
// to replay.
type diffWorkload struct {
	Cfg      Config
	Jobs     []diffJob
	Changes  []diffKeyChange
	Periodic *diffPeriodic // at most one
	// Replicas are set before the first event (the engine alone: the
	// Scheduler has none yet).
	Replicas []diffReplica
}

// diffReplica sets replica Name's capacity and the job types it has
// handlers for (nil: every type), or removes it if Remove.
type diffReplica struct {
	Name     string
	Capacity int
	Types    []string
	Remove   bool
}

// goString renders the replica as a Go expression of this package.
func (r diffReplica) goString() string {
	if r.Remove {
		return fmt.Sprintf("diffReplica{Name: %q, Remove: true}", r.Name)
	}
	return fmt.Sprintf("diffReplica{Name: %q, Capacity: %d, Types: %#v}", r.Name, r.Capacity, r.Types)
}

// hasReplicas reports whether the workload names a replica.
func (w *diffWorkload) hasReplicas() bool {
	return len(w.Replicas) > 0 || slices.ContainsFunc(w.Changes, func(c diffKeyChange) bool { return c.Replica != nil }) ||
		slices.ContainsFunc(w.Jobs, func(j diffJob) bool { return j.Replica != "" })
}

// diffPeriodic is a periodic job: scheduled at Start, an occurrence every
// Every from then, half a unit off the grid of the other events (so that
// nothing else happens at its instants but its own occurrences' ends),
// each running Dur; stopped at Stop. Occurrences join Jobs as they are
// submitted, numbered from len(Jobs).
type diffPeriodic struct {
	Job                     Job
	Start, Every, Dur, Stop time.Duration
}

// occurrence returns the time of the first occurrence after t.
func (p *diffPeriodic) occurrence(t time.Duration) time.Duration {
	k := max(1, (t-p.Start-diffUnit/2)/p.Every+1)
	return p.Start + k*p.Every + diffUnit/2
}

// Next makes a diffPeriodic a Schedule for a run that began at t0.
type diffSchedule struct {
	p  *diffPeriodic
	t0 time.Time
}

func (s diffSchedule) Next(t time.Time) time.Time { return s.t0.Add(s.p.occurrence(t.Sub(s.t0))) }

// diffJob is one job of a workload, named j<index> in reports.
type diffJob struct {
	Job      Job
	At, Dur  time.Duration
	CancelAt time.Duration // < 0: never; a running job cancelled ends at once
	// Delay and StartWithin set Job.NotBefore and Job.StartBy to At plus
	// them; 0: not set.
	Delay, StartWithin time.Duration
	// Fails is how many of its attempts fail: each is retried if its
	// type's RetryPolicy allows another attempt, and ends the job if not.
	Fails int
	// After are the jobs it runs after, by index: jobs that arrive before
	// it (those refused are left out).
	After []int
	// Batch, if not 0, submits the job with the other jobs of the same
	// Batch and At, in one SubmitMany, in workload order, as the first of
	// them arrives. A job's After names no job of its own batch.
	Batch int
	// Replica binds the job to that replica (the engine alone).
	Replica string
}

// diffKeyChange is a run-time change of the keys' configuration:
// ResetKeys if Reset, else ResetKey if ResetKey, else SetKey if Set is not
// nil, else SetKeyWeight.
type diffKeyChange struct {
	At       time.Duration
	Key      string
	Weight   float64
	Set      *KeyConfig
	Reset    bool
	ResetKey bool
	Limit    *diffLimit // a change of the global, a tier's or a type's limit instead
	Pause    *diffPause // a pause or resume of Key, or of a type, instead
	Resource *diffResource
	Replica  *diffReplica // a replica set or removed, instead
}

// diffResource sets a resource's capacity to N.
type diffResource struct {
	Name string
	N    int
}

// diffPause pauses Key, or the type Type if it is set, or resumes it.
type diffPause struct {
	Type   *string
	Resume bool
}

// goString renders the pause as a Go expression of this package.
func (p diffPause) goString() string {
	if p.Type != nil {
		return fmt.Sprintf("&diffPause{Type: ptr(%q), Resume: %v}", *p.Type, p.Resume)
	}
	return fmt.Sprintf("&diffPause{Resume: %v}", p.Resume)
}

// diffLimit sets a type's limit if Type is set, else a tier's if Tier is,
// else MaxConcurrency, to N.
type diffLimit struct {
	Type *string
	Tier *Tier
	N    int
}

// goString renders the change as a Go expression of this package.
func (c diffLimit) goString() string {
	switch {
	case c.Type != nil:
		return fmt.Sprintf("&diffLimit{Type: ptr(%q), N: %d}", *c.Type, c.N)
	case c.Tier != nil:
		return fmt.Sprintf("&diffLimit{Tier: ptr(Tier(%d)), N: %d}", *c.Tier, c.N)
	}
	return fmt.Sprintf("&diffLimit{N: %d}", c.N)
}

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }

func (c diffLimit) String() string {
	switch {
	case c.Type != nil:
		return fmt.Sprintf("SetTypeLimit(%q, %d)", *c.Type, c.N)
	case c.Tier != nil:
		return fmt.Sprintf("SetTierLimit(%d, %d)", *c.Tier, c.N)
	}
	return fmt.Sprintf("SetMaxConcurrency(%d)", c.N)
}

// diffSource supplies the generator's choices: a seeded PRNG for the
// differential test, the fuzzer's bytes for the fuzz targets. Choice 0 is
// always the simplest, so an exhausted fuzz input yields a plain workload.
type diffSource interface {
	intn(n int) int // in [0, n)
}

type diffRandSource struct{ r *rand.Rand }

func (s diffRandSource) intn(n int) int { return s.r.IntN(n) }

// diffByteSource reads one byte per choice (two for choices over 256) and
// answers 0 once the input is used up.
type diffByteSource struct{ b []byte }

func (s *diffByteSource) intn(n int) int {
	if n <= 1 || len(s.b) == 0 {
		return 0
	}
	v := int(s.b[0])
	s.b = s.b[1:]
	if n > 256 && len(s.b) > 0 {
		v = v<<8 | int(s.b[0])
		s.b = s.b[1:]
	}
	return v % n
}

// diffChance is true with probability num/den; false on a zero choice.
func diffChance(src diffSource, num, den int) bool { return src.intn(den) >= den-num }

func diffPick[T any](src diffSource, options ...T) T { return options[src.intn(len(options))] }

func diffUnits(n int) time.Duration { return time.Duration(n) * diffUnit }

// diffGenerate builds a workload of at most maxJobs jobs: 1 to 3 tiers,
// up to 3 job types besides the default one (tiers, caps, conflict groups,
// default costs and priorities), up to 5 keys (weights, reservations, caps,
// pending limits), optional queue limit, aging and cost settings, then jobs
// with priorities, arrival times, durations and cancellations, and key
// changes. With forget, IdleTTL is a few units, so that idle keys and cost
// estimates are forgotten during the run; otherwise it is an hour, longer
// than any workload.
func diffGenerate(src diffSource, maxJobs int, forget bool) *diffWorkload {
	cfg := Config{IdleTTL: time.Hour}
	cfg.MaxConcurrency = diffPick(src, 2, 1, 3, 4, 0, 6)

	ntiers := 1 + src.intn(3)
	for t := range ntiers {
		if diffChance(src, 1, 3) {
			if cfg.TierLimits == nil {
				cfg.TierLimits = map[Tier]int{}
			}
			cfg.TierLimits[Tier(t)] = 1 + src.intn(3)
		}
	}

	var resources []string
	if diffChance(src, 1, 2) {
		cfg.Resources = map[string]int{"r0": 1 + src.intn(4)}
		resources = append(resources, "r0")
		if diffChance(src, 1, 2) {
			cfg.Resources["r1"] = 1 + src.intn(3)
			resources = append(resources, "r1")
		}
	}
	// Shaped for backfill: most jobs need r0, some all of it, which they
	// claim, and the others one unit, which may use the units held.
	backfill := resources != nil && diffChance(src, 2, 3)
	if backfill { // room for more than one job on r0, and slots for them
		cfg.Resources["r0"] = 3 + src.intn(4)
		cfg.MaxConcurrency = diffPick(src, 6, 0, 8)
		// How many jobs that may not use the units held backfill looks
		// past: small ones, so that it stops too.
		cfg.BackfillLookahead = diffPick(src, 0, 1, 2, -1, 3)
	}
	// needs returns some units of some resources, within their capacities.
	needs := func() map[string]int {
		n := map[string]int{}
		for _, r := range resources {
			if diffChance(src, 2, 3) {
				n[r] = 1 + src.intn(cfg.Resources[r])
			}
		}
		return n
	}

	types := []string{""}
	for i := range src.intn(4) {
		tc := TypeConfig{Tier: Tier(src.intn(ntiers))}
		if resources != nil && diffChance(src, 1, 2) {
			tc.Needs = needs()
		}
		if diffChance(src, 1, 3) {
			tc.MaxConcurrency = 1 + src.intn(3)
		}
		if diffChance(src, 1, 2) {
			tc.ConflictGroup = diffPick(src, "g0", "g1")
		}
		if diffChance(src, 1, 2) {
			tc.DefaultCost = diffUnits(1 + src.intn(30))
		}
		if diffChance(src, 1, 2) {
			tc.DefaultPriority = diffPick(src, 10, -1, 50, 80, 100, 120, 30, 75)
		}
		if diffChance(src, 1, 5) {
			tc.StartTimeout = diffUnits(1 + src.intn(15))
		}
		if diffChance(src, 1, 3) {
			tc.Disable = DisablePolicy{Failures: 1 + src.intn(2), Window: diffUnits(2 + src.intn(20))}
			if diffChance(src, 2, 3) {
				tc.Disable.For = diffUnits(1 + src.intn(10))
			}
		}
		if diffChance(src, 1, 5) {
			tc.Rate = diffRate(src)
		}
		if diffChance(src, 1, 4) {
			tc.Duplicates = diffPick(src, Supersede, JoinQueued, JoinRunning)
		}
		if diffChance(src, 1, 3) {
			tc.Retry = RetryPolicy{Attempts: 2 + src.intn(2), Backoff: diffUnits(1 + src.intn(4))}
			if diffChance(src, 1, 3) {
				tc.Retry.MaxBackoff = diffUnits(2 + src.intn(4))
			}
		}
		if cfg.Types == nil {
			cfg.Types = map[string]TypeConfig{}
		}
		name := fmt.Sprintf("t%d", i)
		cfg.Types[name] = tc
		types = append(types, name)
	}
	// A long type in the highest tier: its jobs come first in the order
	// and, by their estimate, often do not end before the job the units
	// are held for could start, while shorter ones behind them do, so
	// that backfill looks past them.
	long := backfill && diffChance(src, 1, 2)
	if long {
		if cfg.Types == nil {
			cfg.Types = map[string]TypeConfig{}
		}
		cfg.Types["tl"] = TypeConfig{Tier: Tier(ntiers - 1), DefaultCost: diffUnits(25 + src.intn(20)), Needs: map[string]int{"r0": 1}}
		types = append(types, "tl")
	}
	if diffChance(src, 1, 5) { // the default type configured too
		if cfg.Types == nil {
			cfg.Types = map[string]TypeConfig{}
		}
		tc := TypeConfig{Tier: Tier(src.intn(ntiers))}
		if diffChance(src, 1, 2) {
			tc.MaxConcurrency = 1 + src.intn(3)
		}
		if diffChance(src, 1, 2) {
			tc.ConflictGroup = "g0"
		}
		cfg.Types[""] = tc
	}

	keys := []string{"", "a", "b", "c", "d"}[:1+src.intn(5)]
	budget := cfg.MaxConcurrency
	if budget == 0 {
		budget = 3
	}
	for _, k := range keys {
		if !diffChance(src, 2, 3) {
			continue
		}
		kc := KeyConfig{Weight: diffPick(src, 0, 1, 2, 0.5, 3, 1.5)}
		if budget > 0 && diffChance(src, 1, 2) {
			kc.MinSlots = 1 + src.intn(min(budget, 2))
			budget -= kc.MinSlots
		}
		if diffChance(src, 1, 3) {
			kc.MaxConcurrency = max(kc.MinSlots, 1) + src.intn(3)
		}
		if diffChance(src, 1, 5) {
			kc.MaxPending = 1 + src.intn(4)
		}
		if diffChance(src, 1, 5) {
			kc.Rate = diffRate(src)
		}
		if cfg.Keys == nil {
			cfg.Keys = map[string]KeyConfig{}
		}
		cfg.Keys[k] = kc
	}
	// Jobs may also use a key that is never configured.
	keys = append(keys, "z")
	if diffChance(src, 1, 3) {
		cfg.DefaultKey.Weight = diffPick(src, 1, 2, 0.5)
	}
	if diffChance(src, 1, 4) {
		cfg.DefaultKey.MaxConcurrency = 1 + src.intn(3)
	}
	if diffChance(src, 1, 6) {
		cfg.DefaultKey.MaxPending = 1 + src.intn(5)
	}
	if diffChance(src, 1, 8) {
		cfg.DefaultKey.Rate = diffRate(src)
	}
	if diffChance(src, 1, 6) {
		cfg.MaxQueue = 2 + src.intn(15)
	}
	if diffChance(src, 1, 2) {
		// Round steps and thresholds make scores hit the ceiling and the
		// urgent threshold exactly at event times, where >= and > differ.
		cfg.Aging = AgingConfig{
			GracePeriod: diffUnits(src.intn(6)),
			Interval:    diffUnits(1 + src.intn(5)),
			Step:        diffPick(src, 10, 5, 20, 3, 25, 40),
		}
		if diffChance(src, 1, 2) {
			cfg.Aging.MaxEffective = diffPick(src, 80, 60, 90, 100, 45, 73)
		}
		if diffChance(src, 2, 3) {
			// At or below 100, jobs based at or above the threshold are
			// urgent from their submission, in their grace period.
			cfg.Aging.UrgentThreshold = diffPick(src, 100, 60, 70, 120, 150, 85, 200, 101)
		}
	}
	cfg.CostAlpha = diffPick(src, 0, 0.5, 1, 0.1)
	cfg.DefaultCost = diffPick(src, 0, diffUnits(5), diffUnits(20), diffUnits(1))
	if forget {
		cfg.IdleTTL = diffUnits(3 + src.intn(20))
	}

	w := &diffWorkload{Cfg: cfg}
	span := diffPick(src, 0, 10, 40, 20)
	for range 1 + src.intn(maxJobs) {
		j := diffJob{
			Job: Job{
				Type: types[src.intn(len(types))],
				ID:   diffPick(src, "", "x", "y", "z"),
				Key:  keys[src.intn(len(keys))],
			},
			At:       diffUnits(src.intn(span + 1)),
			Dur:      diffUnits(1 + src.intn(20)),
			CancelAt: -1,
		}
		if diffChance(src, 1, 2) {
			j.Job.Priority = diffPick(src, 10, -1, 50, 80, 100, 120, 20, 90, 1)
		}
		if j.Job.Type == "tl" { // long, as its estimate says
			j.Dur = diffUnits(20 + src.intn(20))
		}
		if diffChance(src, 1, 8) {
			j.CancelAt = j.At + diffUnits(src.intn(10))
		}
		if diffChance(src, 1, 6) {
			j.Delay = diffUnits(1 + src.intn(10))
		}
		if diffChance(src, 1, 6) {
			j.StartWithin = diffUnits(1 + src.intn(15)) // at or before Delay: refused
		}
		if diffChance(src, 1, 4) {
			j.Fails = 1 + src.intn(3)
		}
		switch {
		case resources != nil && diffChance(src, 1, 6):
			j.Job.Needs = needs() // perhaps none, in place of its type's
		case backfill && diffChance(src, 2, 3):
			j.Job.Needs = map[string]int{"r0": diffPick(src, 1, 1, 1, cfg.Resources["r0"], 2)}
		}
		w.Jobs = append(w.Jobs, j)
	}
	if diffChance(src, 1, 3) {
		// Dependencies, on jobs that arrive before: chains, fans and
		// diamonds, some of whose jobs fail, are cancelled or expire.
		for i := range w.Jobs {
			if i == 0 || !diffChance(src, 1, 3) {
				continue
			}
			for range 1 + src.intn(2) {
				k := src.intn(i)
				if w.Jobs[k].At <= w.Jobs[i].At && !slices.Contains(w.Jobs[i].After, k) {
					w.Jobs[i].After = append(w.Jobs[i].After, k)
				}
			}
		}
	}
	if diffChance(src, 1, 4) {
		// Batches: runs of jobs submitted together (SubmitMany), at the
		// earliest time of the run (so that every job after one of them
		// still arrives after it), and after no job of the run nor any
		// that arrives later.
		for b := range 1 + src.intn(3) {
			first, n := src.intn(len(w.Jobs)), 2+src.intn(4)
			end := first
			at := w.Jobs[first].At
			for ; end < min(first+n, len(w.Jobs)) && w.Jobs[end].Batch == 0; end++ {
				at = min(at, w.Jobs[end].At)
			}
			for k := first; k < end; k++ {
				w.Jobs[k].Batch, w.Jobs[k].At = b+1, at
				w.Jobs[k].After = slices.DeleteFunc(slices.Clone(w.Jobs[k].After), func(a int) bool { return a >= first || w.Jobs[a].At > at })
			}
		}
	}
	if diffChance(src, 1, 4) {
		w.Periodic = &diffPeriodic{
			Job:   Job{ID: "p", Key: keys[src.intn(len(keys))], Priority: diffPick(src, 0, 80, 20)},
			Start: diffUnits(src.intn(span + 1)), Every: diffUnits(1 + src.intn(6)),
			Dur: diffUnits(1 + src.intn(8)),
		}
		w.Periodic.Stop = w.Periodic.Start + diffUnits(src.intn(40)) // a run must end
	}
	if diffChance(src, 1, 3) {
		for range 1 + src.intn(4) {
			c := diffKeyChange{At: diffUnits(src.intn(span + 1)), Key: keys[src.intn(len(keys))]}
			choices := 9
			if resources != nil {
				choices = 10
			}
			switch src.intn(choices) {
			case 0, 1, 2:
				c.Weight = diffPick(src, 2, 0.5, 1, 3, 4)
			case 3, 4:
				c.Set = &KeyConfig{Weight: diffPick(src, 0, 1, 2, 0.5, 3)}
				if diffChance(src, 1, 2) {
					c.Set.MinSlots = 1 + src.intn(2)
				}
				if diffChance(src, 1, 2) {
					c.Set.MaxConcurrency = max(c.Set.MinSlots, 1) + src.intn(2)
				}
				if diffChance(src, 1, 4) {
					c.Set.MaxPending = 1 + src.intn(3)
				}
				if diffChance(src, 1, 3) {
					c.Set.Rate = diffRate(src)
				}
			case 5:
				c.Reset = true
			case 6:
				c.ResetKey = true
			case 9:
				c.Resource = &diffResource{Name: resources[src.intn(len(resources))], N: src.intn(5)}
			default:
				l := &diffLimit{N: src.intn(4)}
				switch src.intn(3) {
				case 0:
					l.N = diffPick(src, 0, 1, 2, 3, 4, 6)
				case 1:
					tier := Tier(src.intn(ntiers))
					l.Tier = &tier
				default:
					name := types[src.intn(len(types))]
					l.Type = &name
				}
				c.Limit = l
			}
			w.Changes = append(w.Changes, c)
		}
	}
	if diffChance(src, 1, 4) {
		// Pauses, each resumed later or not.
		for range 1 + src.intn(2) {
			p := diffKeyChange{At: diffUnits(src.intn(span + 1)), Key: keys[src.intn(len(keys))], Pause: &diffPause{}}
			if diffChance(src, 1, 3) {
				p.Pause.Type = ptr(types[src.intn(len(types))])
			}
			w.Changes = append(w.Changes, p)
			if diffChance(src, 3, 4) {
				r := p
				r.At += diffUnits(src.intn(15))
				r.Pause = &diffPause{Type: p.Pause.Type, Resume: true}
				w.Changes = append(w.Changes, r)
			}
		}
	}
	return w
}

// diffRate returns a rate limit: some rates make tokens fall due off the
// grid of workload times.
func diffRate(src diffSource) RateLimit {
	return RateLimit{PerSecond: diffPick(src, 1, 2, 5, 10, 3, 0.5, 1.5), Burst: diffPick(src, 0, 1, 2, 3)}
}

// job returns the job as submitted by a run that began at t0.
func (j diffJob) job(t0 time.Time) Job {
	d := j.Job
	if j.Delay > 0 {
		d.NotBefore = t0.Add(j.At + j.Delay)
	}
	if j.StartWithin > 0 {
		d.StartBy = t0.Add(j.At + j.StartWithin)
	}
	return d
}

// refJob returns the job as submitted to the reference model, its times
// in µs of the run.
func (j diffJob) refJob() refmodel.Job {
	d := refmodel.Job{Type: j.Job.Type, ID: j.Job.ID, Key: j.Job.Key, Priority: j.Job.Priority, Needs: j.Job.Needs, Replica: j.Replica}
	if j.Delay > 0 {
		d.NotBefore = (j.At + j.Delay).Microseconds()
	}
	if j.StartWithin > 0 {
		d.StartBy = (j.At + j.StartWithin).Microseconds()
	}
	return d
}

// diffRefConfig translates a Config into the reference model's terms.
func diffRefConfig(c Config) refmodel.Config {
	r := refmodel.Config{
		MaxConcurrency: c.MaxConcurrency,
		MaxQueue:       c.MaxQueue,
		TierLimits:     map[int]int{},
		Types:          map[string]refmodel.Type{},
		Keys:           map[string]refmodel.Key{},
		DefaultKey:     diffRefKey(c.DefaultKey),
		Aging:          refmodel.Aging(c.Aging),
		CostAlpha:      c.CostAlpha,
		DefaultCost:    c.DefaultCost,
		IdleTTL:        c.IdleTTL,
		Resources:      maps.Clone(c.Resources),

		BackfillLookahead: c.BackfillLookahead,
	}
	for t, n := range c.TierLimits {
		r.TierLimits[int(t)] = n
	}
	for name, tc := range c.Types {
		r.Types[name] = refmodel.Type{
			Tier: int(tc.Tier), MaxConcurrency: tc.MaxConcurrency, ConflictGroup: tc.ConflictGroup,
			DefaultCost: tc.DefaultCost, DefaultPriority: tc.DefaultPriority, StartTimeout: tc.StartTimeout,
			Disable: refmodel.Disable(tc.Disable), Rate: refmodel.Rate(tc.Rate), Needs: tc.Needs,
		}
	}
	for name, kc := range c.Keys {
		r.Keys[name] = diffRefKey(kc)
	}
	return r
}

// diffRefKey returns the reference model's mirror of a key configuration.
func diffRefKey(kc KeyConfig) refmodel.Key {
	return refmodel.Key{Weight: kc.Weight, MinSlots: kc.MinSlots, MaxConcurrency: kc.MaxConcurrency,
		MaxPending: kc.MaxPending, Rate: refmodel.Rate(kc.Rate)}
}

// diffAddReplicas adds replicas to w, for the engine alone, with
// probability 2/3: one to three, of random capacities (0 among them) and
// types, set before the first event, jobs bound to them (and to one never
// set), and replicas set, changed and removed during the run.
func diffAddReplicas(src diffSource, w *diffWorkload) {
	if !diffChance(src, 2, 3) {
		return
	}
	names := []string{"p0", "p1", "p2"}[:1+src.intn(3)]
	types := []string{""}
	for _, name := range slices.Sorted(maps.Keys(w.Cfg.Types)) {
		if name != "" {
			types = append(types, name)
		}
	}
	replica := func(name string) diffReplica {
		r := diffReplica{Name: name, Capacity: diffPick(src, 1, 2, 1, 3, 0)}
		if diffChance(src, 1, 2) {
			r.Types = []string{}
			for _, t := range types {
				if diffChance(src, 2, 3) {
					r.Types = append(r.Types, t)
				}
			}
		}
		return r
	}
	for _, name := range names {
		if diffChance(src, 3, 4) {
			w.Replicas = append(w.Replicas, replica(name))
		}
	}
	span := time.Duration(0)
	for i := range w.Jobs {
		span = max(span, w.Jobs[i].At)
		if diffChance(src, 1, 4) {
			w.Jobs[i].Replica = diffPick(src, append(names, "p9")...)
		}
	}
	for range src.intn(5) {
		c := diffKeyChange{At: diffUnits(src.intn(int(span/diffUnit) + 2))}
		name := diffPick(src, names...)
		if diffChance(src, 1, 3) {
			c.Replica = &diffReplica{Name: name, Remove: true}
		} else {
			r := replica(name)
			c.Replica = &r
		}
		w.Changes = append(w.Changes, c)
	}
}
