package fairsched

// Tests of priority aging and its starvation bound (docs/design.md,
// Aging): the +10 per 5 s timeline, the bound
//
//	GracePeriod + (UrgentThreshold - base)/Step*Interval
//
// plus one job's duration, under a stream of higher-priority work that
// never lets up; the ceiling; urgency against weights; hard limits under
// randomized load; the counters; configuration errors; and the rank a
// lane reads off a fixed-phase job's packed key.

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// agingSeed000 is the classic aging: +10 per 5 s waited, capped at 100.
var agingSeed000 = AgingConfig{Step: 10, Interval: 5 * time.Second, MaxEffective: 100}

// agingSeed000Timeline is that aging's table for a priority-0 job: effective
// priority by time waited.
var agingSeed000Timeline = []struct {
	wait time.Duration
	eff  int
}{
	{0, 0},
	{5 * time.Second, 10},
	{10 * time.Second, 20},
	{15 * time.Second, 30},
	{20 * time.Second, 40},
	{25 * time.Second, 50},
	{30 * time.Second, 60},
	{50 * time.Second, 100},
	{60 * time.Second, 100},
	{time.Hour, 100},
}

// TestAgingSeed000Timeline checks the +10 per 5 s timeline, both as
// arithmetic and as seen in Snapshot while a job waits behind a blocker on
// a scheduler running on a fake clock.
func TestAgingSeed000Timeline(t *testing.T) {
	t.Run("Effective", func(t *testing.T) {
		for _, row := range agingSeed000Timeline {
			assert.Equalf(t, row.eff, agingSeed000.Effective(0, row.wait), "effective priority after %v", row.wait)
		}
		// Time is continuous (the score does not wait for the next 5 s to
		// rise), the reported priority is rounded down, and the score
		// itself is not capped.
		assert.Equal(t, 0, agingSeed000.Effective(0, 499*time.Millisecond))
		assert.Equal(t, 9, agingSeed000.Effective(0, 4999*time.Millisecond))
		assert.Equal(t, 14, agingSeed000.Effective(0, 7*time.Second))
		assert.InDelta(t, 14.0, agingSeed000.Score(0, 7*time.Second), 1e-9)
		assert.InDelta(t, 120.0, agingSeed000.Score(0, time.Minute), 1e-9, "the score goes past the ceiling")
		assert.Equal(t, 100, agingSeed000.Effective(PriorityLowest, time.Minute), "PriorityLowest is priority 0")
		assert.Equal(t, 75, agingSeed000.Effective(50, 12500*time.Millisecond), "other bases rise at the same rate")
		assert.Equal(t, 0, AgingConfig{}.Effective(0, time.Hour), "no aging without a config")
	})

	t.Run("Snapshot", func(t *testing.T) {
		m := newSim(t, Config{MaxConcurrency: 1, Aging: agingSeed000})
		m.add("blocker", 0, Job{Key: "other"}, 2*time.Minute)
		m.add("background", 0, Job{Priority: PriorityLowest}, time.Second)
		for _, row := range agingSeed000Timeline[:9] {
			m.run(row.wait)
			info := agingInfo(t, m.s, "")
			assert.Falsef(t, info.Running, "at %v the job still waits behind the blocker", row.wait)
			assert.Equal(t, 0, info.BasePriority, "the base priority never changes")
			assert.Equalf(t, row.eff, info.EffectivePriority, "effective priority after %v", row.wait)
			assert.Equal(t, row.wait, info.Wait)
		}
	})
}

// agingInfo returns the Snapshot entry of the only job of key.
func agingInfo(t *testing.T, s *Scheduler, key string) JobInfo {
	t.Helper()
	var found []JobInfo
	for _, ji := range s.Snapshot() {
		if ji.Key == key {
			found = append(found, ji)
		}
	}
	require.Lenf(t, found, 1, "jobs of key %q in Snapshot", key)
	return found[0]
}

// agingJobPriority returns the Job.Priority that asks for base (0 in
// Job.Priority means the default).
func agingJobPriority(base int) int {
	if base == 0 {
		return PriorityLowest
	}
	return base
}

// agingCycle returns the n-th of a short cycle of durations, so that the
// slots free at different instants.
func agingCycle(n int, ds ...time.Duration) time.Duration { return ds[n%len(ds)] }

// agingFirstStartFrom returns the first job to start at or after from.
func agingFirstStartFrom(m *sim, from time.Duration) *simJob {
	var first *simJob
	for _, sj := range m.order {
		if sj.Start >= from && (first == nil || sj.Start < first.Start) {
			first = sj
		}
	}
	return first
}

// TestAgingStarvationBound: foreground jobs of priority 90 (or 10 below
// the threshold, if that is lower) arrive twice as fast as the slots serve
// them, forever (the excess is refused at the door by the key's pending
// limit, as a service answers 429), so every slot is always busy and a
// foreground job always waits. A background job of low priority still
// starts, as urgent, no later than MaxWait(base) after its arrival plus
// the time for one slot to free. The foreground jobs wait too briefly to
// turn urgent themselves. (Based at the threshold, they would be urgent
// from their submission: urgent work arriving faster than it is served,
// which no bound survives.)
//
// The pending limit matters: with an unbounded backlog the foreground jobs
// queued before the background one would wait long enough to turn urgent
// too, with higher scores, and urgent jobs go highest score first, so the
// background job would queue behind all of them. The bound is how long a
// job waits before it is urgent; it holds as a bound on the start when
// urgent work is not piling up.
func TestAgingStarvationBound(t *testing.T) {
	cases := []struct {
		name  string
		aging AgingConfig
		base  int
		bound time.Duration // MaxWait(base), worked out by hand
	}{
		{"one point per second from 0", AgingConfig{Interval: time.Second, Step: 1, UrgentThreshold: 100}, 0, 100 * time.Second},
		{"+10 per 5 s with grace and ceiling", AgingConfig{GracePeriod: 30 * time.Second, Interval: 5 * time.Second, Step: 10, MaxEffective: 80, UrgentThreshold: 100}, 20, 70 * time.Second},
		{"threshold above 100", AgingConfig{GracePeriod: 10 * time.Second, Interval: 2 * time.Second, Step: 5, UrgentThreshold: 150}, 50, 50 * time.Second},
		{"low threshold, long grace", AgingConfig{GracePeriod: time.Minute, Interval: 10 * time.Second, Step: 3, UrgentThreshold: 60}, 0, 260 * time.Second},
		{"steps not dividing the distance", AgingConfig{GracePeriod: 5 * time.Second, Interval: 7 * time.Second, Step: 3, UrgentThreshold: 100}, 0, 5*time.Second + 233333333334*time.Nanosecond},
		{"base near the threshold", AgingConfig{GracePeriod: 20 * time.Second, Interval: 30 * time.Second, Step: 10, UrgentThreshold: 80}, 75, 35 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			const slots, pendingLimit = 4, 5
			maxWait, ok := tc.aging.MaxWait(tc.base)
			require.True(t, ok)
			require.Equal(t, tc.bound, maxWait, "MaxWait")

			m := newSim(t, Config{
				MaxConcurrency: slots,
				Aging:          tc.aging,
				Types:          map[string]TypeConfig{"api": {Tier: Foreground}, "batch": {Tier: Background}},
				Keys:           map[string]KeyConfig{"api": {MaxPending: pendingLimit}},
			})
			n := 0
			highPriority := min(90, tc.aging.UrgentThreshold-10)
			high := func(at time.Duration) {
				m.add(fmt.Sprintf("api%d", n), at, Job{Type: "api", Key: "api", Priority: highPriority},
					agingCycle(n, time.Second, 1500*time.Millisecond, 2*time.Second, 2500*time.Millisecond, 3*time.Second))
				n++
			}
			const longest = 3 * time.Second
			for range slots + pendingLimit {
				high(0)
			}
			m.onFinish = func(sj *simJob) {
				if sj.Job.Key == "api" {
					high(m.now) // two arrivals per departure: one is refused
					high(m.now)
				}
			}
			arrive := 10*time.Second + 300*time.Millisecond
			low := m.add("starving", arrive, Job{Type: "batch", Key: "batch", Priority: agingJobPriority(tc.base)}, time.Second)
			urgentAt := arrive + maxWait
			m.run(urgentAt + 2*longest)

			require.True(t, low.started(), "the low-priority job never started")
			t.Logf("bound %v + one job (%v); waited %v", maxWait, longest, low.Wait())
			assert.GreaterOrEqual(t, low.Start, urgentAt, "the foreground stream held it back until it was urgent")
			assert.LessOrEqual(t, low.Start, urgentAt+longest, "it starts within the bound plus one job's duration")

			st := m.s.Stats()
			assert.EqualValues(t, 1, st.UrgentStarts, "only the starving job ever became urgent")
			assert.Positive(t, st.Rejected, "arrivals outpaced service")
			busy := fairRunningSeries(m, func(*simJob) bool { return true }, 0, low.Start, 100*time.Millisecond)
			for i, r := range busy {
				if !assert.Equalf(t, slots, r, "at %v every slot is busy", time.Duration(i)*100*time.Millisecond) {
					break
				}
			}
		})
	}
}

// TestAgingCeilingHoldsUntilUrgent: the ceiling keeps an aged job behind
// fresh critical work of its own key until it turns urgent; then it starts
// at the first free slot. Without the ceiling (MaxEffective 100) it ties
// with the fresh jobs at 100 and, being older, goes first as soon as it
// gets there.
func TestAgingCeilingHoldsUntilUrgent(t *testing.T) {
	const base = 20
	for _, tc := range []struct {
		name      string
		ceiling   int
		startFrom time.Duration // wait after which it goes first
		urgent    bool
	}{
		// 10 s grace, then +5 per 2 s: urgent (120) after 10 + 100/5*2 s.
		{"ceiling 80", 80, 50 * time.Second, true},
		// Effective 100 after 10 + 80/5*2 s: ties with the fresh jobs.
		{"ceiling 100", 100, 42 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			aging := AgingConfig{GracePeriod: 10 * time.Second, Interval: 2 * time.Second, Step: 5, MaxEffective: tc.ceiling, UrgentThreshold: 120}
			m := newSim(t, Config{MaxConcurrency: 1, Aging: aging})
			n := 0
			critical := func(at time.Duration) {
				m.add(fmt.Sprintf("critical%d", n), at, Job{Priority: PriorityCritical},
					agingCycle(n, time.Second, 1500*time.Millisecond, 2*time.Second))
				n++
			}
			const longest = 2 * time.Second
			for range 4 {
				critical(0)
			}
			m.onFinish = func(sj *simJob) {
				if sj.Job.Priority == PriorityCritical {
					critical(m.now)
				}
			}
			arrive := 5*time.Second + 300*time.Millisecond
			aged := m.add("aged", arrive, Job{Priority: base}, time.Second)
			goesFirst := arrive + tc.startFrom

			if tc.urgent {
				m.run(goesFirst - time.Second)
				var info JobInfo
				for _, ji := range m.s.Snapshot() {
					if ji.BasePriority == base {
						info = ji
					}
				}
				require.Equal(t, arrive, info.Submitted.Sub(m.t0), "the aged job is in the Snapshot")
				require.False(t, info.Running)
				assert.Equal(t, tc.ceiling, info.EffectivePriority, "aged up to the ceiling, below the fresh jobs' 100")
				assert.False(t, info.Urgent, "not yet urgent")
			}
			m.run(goesFirst + 2*longest)

			require.True(t, aged.started())
			t.Logf("aged job waited %v; goes first after %v", aged.Wait(), tc.startFrom)
			assert.GreaterOrEqual(t, aged.Start, goesFirst, "fresh critical jobs went first until then")
			assert.LessOrEqual(t, aged.Start, goesFirst+longest, "then it took the first free slot")
			assert.Same(t, aged, agingFirstStartFrom(m, goesFirst), "no fresh job started between its turn and its start")
			wantUrgent := uint64(0)
			if tc.urgent {
				wantUrgent = 1
			}
			assert.Equal(t, wantUrgent, m.s.Stats().UrgentStarts)
		})
	}
}

// TestAgingUrgentBeatsWeights: a job of a low-weight key that is far ahead
// of its share (it just held a slot for ten minutes) would wait hours for
// the weight-100 key to catch up; once urgent it starts at the first free
// slot, before the heavy key's next job.
func TestAgingUrgentBeatsWeights(t *testing.T) {
	const slots = 2
	aging := AgingConfig{Interval: time.Second, Step: 2, UrgentThreshold: 100} // priority 50 urgent after 25 s
	m := newSim(t, Config{
		MaxConcurrency: slots,
		Aging:          aging,
		Keys:           map[string]KeyConfig{"heavy": {Weight: 100}, "light": {Weight: 1}},
	})
	n := 0
	heavy := func(at time.Duration) {
		m.add(fmt.Sprintf("heavy%d", n), at, Job{ID: "h", Key: "heavy"}, agingCycle(n, time.Second, 2*time.Second, 1500*time.Millisecond))
		n++
	}
	const longest = 2 * time.Second
	for range 5 {
		heavy(0)
	}
	m.onFinish = func(sj *simJob) {
		if sj.Job.Key == "heavy" {
			heavy(m.now)
		}
	}
	m.add("light-long", 0, Job{ID: "l", Key: "light"}, 10*time.Minute)
	arrive := 10*time.Minute + 5*time.Second + 300*time.Millisecond
	job := m.add("light-next", arrive, Job{ID: "l", Key: "light"}, 5*time.Second)
	m.run(arrive)

	// Fair share alone would hold the light key back: it is ahead of the
	// heavy key by hundreds of seconds of virtual time, which the heavy
	// key, at weight 100 on two slots, takes hours to catch up.
	vLight := fairKeyStats(t, m.s, "light").VirtualTime[Background]
	vHeavy := fairKeyStats(t, m.s, "heavy").VirtualTime[Background]
	t.Logf("virtual times at arrival: light %.1f, heavy %.1f", vLight, vHeavy)
	require.Greater(t, vLight-vHeavy, 500.0)

	maxWait, _ := aging.MaxWait(PriorityNormal)
	urgentAt := arrive + maxWait
	m.run(urgentAt + 2*longest)
	require.True(t, job.started())
	t.Logf("light job waited %v (urgent after %v)", job.Wait(), maxWait)
	assert.GreaterOrEqual(t, job.Start, urgentAt, "weights held it back until it was urgent")
	assert.LessOrEqual(t, job.Start, urgentAt+longest)
	assert.Same(t, job, agingFirstStartFrom(m, urgentAt), "it started before the heavy key's next job")
	assert.EqualValues(t, 1, m.s.Stats().UrgentStarts)
}

// TestAgingUrgentAtOnce: a job based at or above UrgentThreshold is urgent
// from its submission, its grace period notwithstanding. Submitted behind
// a backlog of a higher tier, it takes the next slot that frees, as
// urgent, where tiers alone would put it after the whole backlog, and
// waiting out its grace period after a minute of it.
func TestAgingUrgentAtOnce(t *testing.T) {
	aging := AgingConfig{GracePeriod: time.Minute, Interval: time.Second, Step: 1, UrgentThreshold: 90}
	m := newSim(t, Config{
		MaxConcurrency: 1,
		Aging:          aging,
		Types:          map[string]TypeConfig{"web": {Tier: Foreground}},
	})
	for i := range 100 {
		m.add(fmt.Sprintf("web%d", i), 0, Job{Type: "web", Key: "busy"}, time.Second)
	}
	arrive := 10*time.Second + 300*time.Millisecond
	critical := m.add("critical", arrive, Job{Key: "ops", Priority: PriorityCritical}, time.Second)
	m.run(arrive)
	info := agingInfo(t, m.s, "ops")
	assert.True(t, info.Urgent, "urgent at its submission, in its grace period")
	assert.Equal(t, PriorityCritical, info.EffectivePriority)

	m.run(30 * time.Second) // the backlog turns urgent at 100 s
	require.True(t, critical.started())
	assert.Equal(t, 11*time.Second, critical.Start, "it took the next slot that freed")
	assert.Same(t, critical, agingFirstStartFrom(m, arrive), "before the backlog's next job")
	assert.EqualValues(t, 1, m.s.Stats().UrgentStarts)
	wait, ok := aging.MaxWait(PriorityCritical)
	assert.True(t, ok)
	assert.Zero(t, wait, "it waits for nothing but a slot")
}

// TestAgingRandomizedHardLimits: under random overload with caps on the
// scheduler, a tier, types and keys, a reservation, conflict groups and
// aggressive aging (jobs turn urgent within seconds), no hard limit is ever
// broken. The sim checks the scheduler's own invariants after every step;
// this test also checks the limits independently from the record of
// starts and ends, and that every job ends exactly once.
func TestAgingRandomizedHardLimits(t *testing.T) {
	cfg := Config{
		MaxConcurrency: 6,
		TierLimits:     map[Tier]int{Background: 3},
		Types: map[string]TypeConfig{
			"clone":    {Tier: Foreground, MaxConcurrency: 4, ConflictGroup: "git"},
			"repack":   {Tier: Background, MaxConcurrency: 2, ConflictGroup: "git"},
			"snapshot": {Tier: Background},
		},
		Keys: map[string]KeyConfig{
			"k0": {Weight: 3, MaxConcurrency: 2},
			"k1": {MinSlots: 1, MaxConcurrency: 3},
		},
		DefaultKey: KeyConfig{MaxConcurrency: 2},
		Aging:      AgingConfig{GracePeriod: 2 * time.Second, Interval: time.Second, Step: 10, MaxEffective: 90, UrgentThreshold: 100},
	}
	types := sortedKeys(cfg.Types)
	for seed := range uint64(4) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x5eed))
			m := newSim(t, cfg)
			const jobs = 300
			at := time.Duration(0)
			for i := range jobs {
				at += time.Duration(rng.IntN(1000)) * time.Millisecond
				m.add(fmt.Sprintf("j%d", i), at, Job{
					Type:     types[rng.IntN(len(types))],
					ID:       fmt.Sprintf("r%d", rng.IntN(4)),
					Key:      fmt.Sprintf("k%d", rng.IntN(5)),
					Priority: rng.IntN(102) - 1,
				}, time.Duration(1+rng.IntN(20))*500*time.Millisecond)
			}
			m.run(time.Hour)

			for _, sj := range m.jobs {
				require.Truef(t, sj.started() && sj.ended(), "job %s: start %v end %v", sj.Name, sj.Start, sj.End)
				require.NoErrorf(t, sj.Err, "job %s", sj.Name)
			}
			agingCheckLimits(t, m, cfg)
			st := m.s.Stats()
			assert.EqualValues(t, jobs, st.Submitted)
			assert.EqualValues(t, jobs, st.Completed)
			t.Logf("urgent starts %d, aging promotions %d, reserved starts %d, most running %d",
				st.UrgentStarts, st.AgingPromotions, st.ReservedStarts, m.maxRunning)
			assert.Positive(t, st.UrgentStarts, "the load made jobs urgent")
			assert.Equal(t, cfg.MaxConcurrency, m.maxRunning, "the load filled every slot")
		})
	}
}

// agingCheckLimits checks the hard limits of docs/design.md over the sim's
// record: at every start, the running jobs fit the global, tier, type and
// key caps, and no two jobs of one conflict group and ID overlap.
func agingCheckLimits(t *testing.T, m *sim, cfg Config) {
	t.Helper()
	jobs := append([]*simJob(nil), m.order...)
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].Start < jobs[j].Start })
	keyCap := func(k string) int { return configOfKey(cfg, k).MaxConcurrency }
	for _, sj := range jobs {
		at := sj.Start
		var total int
		tiers, types, keys := map[Tier]int{}, map[string]int{}, map[string]int{}
		for _, o := range jobs {
			if o.Start > at {
				break
			}
			if o.End <= at {
				continue
			}
			total++
			tiers[cfg.Types[o.Job.Type].Tier]++
			types[o.Job.Type]++
			keys[o.Job.Key]++
			if g := cfg.Types[o.Job.Type].ConflictGroup; o != sj && g != "" && g == cfg.Types[sj.Job.Type].ConflictGroup && o.Job.ID == sj.Job.ID {
				t.Fatalf("at %v %s (%s %s) started while %s (%s %s) ran: conflict", at, sj.Name, sj.Job.Type, sj.Job.ID, o.Name, o.Job.Type, o.Job.ID)
			}
		}
		require.LessOrEqualf(t, total, cfg.MaxConcurrency, "at %v: running jobs", at)
		for tier, n := range tiers {
			if c := cfg.TierLimits[tier]; c > 0 {
				require.LessOrEqualf(t, n, c, "at %v: tier %d", at, tier)
			}
		}
		for ty, n := range types {
			if c := cfg.Types[ty].MaxConcurrency; c > 0 {
				require.LessOrEqualf(t, n, c, "at %v: type %q", at, ty)
			}
		}
		for k, n := range keys {
			if c := keyCap(k); c > 0 {
				require.LessOrEqualf(t, n, c, "at %v: key %q", at, k)
			}
		}
	}
}

// TestAgingStats: the aging counters in a small scenario worked out by
// hand. One slot; 10 s grace, then +10 per 5 s; ceiling 90; urgent at 100.
//
//	job     base  arrives  starts  effective at start
//	block   50    0 s      0 s     50: nothing queued, starts at once
//	old     20    0 s      60 s    90 (score 120): urgent; without urgency
//	                                "top" (95) would have gone first
//	top     95    58 s     70 s    95: base above the ceiling, score 99 < 100
//	mid     50    50 s     80 s    90 (score 90): aged to the ceiling
//	late    50    85 s     90 s    50: still in its grace period
//
// So two starts were promoted (old, mid), one of them urgent (old).
func TestAgingStats(t *testing.T) {
	m := newSim(t, Config{MaxConcurrency: 1, Aging: AgingConfig{
		GracePeriod: 10 * time.Second, Interval: 5 * time.Second, Step: 10, MaxEffective: 90, UrgentThreshold: 100,
	}})
	m.add("block", 0, Job{Priority: 50}, 60*time.Second)
	m.add("old", 0, Job{Priority: 20}, 10*time.Second)
	m.add("mid", 50*time.Second, Job{Priority: 50}, 10*time.Second)
	m.add("top", 58*time.Second, Job{Priority: 95}, 10*time.Second)
	m.add("late", 85*time.Second, Job{Priority: 50}, 10*time.Second)
	m.run(5 * time.Minute)

	assert.Equal(t, []string{"block", "old", "top", "mid", "late"}, m.startOrder())
	for name, at := range map[string]time.Duration{"block": 0, "old": 60 * time.Second, "top": 70 * time.Second, "mid": 80 * time.Second, "late": 90 * time.Second} {
		assert.Equalf(t, at, m.job(name).Start, "start of %s", name)
	}
	st := m.s.Stats()
	assert.EqualValues(t, 2, st.AgingPromotions, "old and mid started above their base")
	assert.EqualValues(t, 1, st.UrgentStarts, "old started as urgent")
	assert.EqualValues(t, 5, st.Completed)
	assert.EqualValues(t, 1, st.LowPriorityCompleted, "old: base 20")
	assert.EqualValues(t, 1, st.HighPriorityCompleted, "top: base 95")
	want := [11]uint64{5: 2, 9: 3} // block and late at 50; old, mid at 90 and top at 95
	assert.Equal(t, want, st.EffectiveAtStart)
}

// TestAgingConfigValidation: New rejects a bad AgingConfig with an error
// that says in plain English what is wrong.
func TestAgingConfigValidation(t *testing.T) {
	const s5 = 5 * time.Second
	bad := []struct {
		aging AgingConfig
		says  string
	}{
		{AgingConfig{Step: 10}, "Aging.Step is set but Interval is 0; set both to age, or neither"},
		{AgingConfig{Interval: s5}, "Aging.Interval is set but Step is 0; set both to age, or neither"},
		{AgingConfig{Step: 101, Interval: s5}, "Aging.Step is 101; it must be between 1 and 100"},
		{AgingConfig{Step: -1, Interval: s5}, "Aging.Step is -1; it must be between 1 and 100"},
		{AgingConfig{Step: 10, Interval: -s5}, "Aging.Interval is -5s; it must be at least 1µs"},
		{AgingConfig{Step: 10, Interval: s5, GracePeriod: -time.Second}, "Aging.GracePeriod is -1s; it must not be negative"},
		{AgingConfig{Step: 10, Interval: s5, MaxEffective: 101}, "Aging.MaxEffective is 101; it must be between 1 and 100 (0 means 100)"},
		{AgingConfig{Step: 10, Interval: s5, MaxEffective: -1}, "Aging.MaxEffective is -1"},
		{AgingConfig{Step: 10, Interval: s5, UrgentThreshold: -5}, "Aging.UrgentThreshold is -5; it must be between 1 and 10000 (0 means never urgent)"},
		{AgingConfig{GracePeriod: time.Minute}, "Aging.is partly set but Step and Interval are 0, so nothing would age"},
		{AgingConfig{MaxEffective: 80, UrgentThreshold: 100}, "partly set"},
	}
	for _, tc := range bad {
		s, err := New(Config{Aging: tc.aging})
		if !assert.Errorf(t, err, "New accepted %+v", tc.aging) {
			s.Close()
			continue
		}
		assert.Nil(t, s)
		assert.Containsf(t, err.Error(), tc.says, "error for %+v", tc.aging)
		assert.Containsf(t, err.Error(), "fairsched: ", "error for %+v names the package", tc.aging)
	}

	good := []AgingConfig{
		{},
		agingSeed000,
		{Step: 1, Interval: time.Microsecond},
		{Step: 100, Interval: time.Hour, GracePeriod: time.Hour, MaxEffective: 1, UrgentThreshold: 10000},
	}
	for _, a := range good {
		s, err := New(Config{Aging: a})
		if assert.NoErrorf(t, err, "New(%+v)", a) {
			s.Close()
		}
	}

	_, ok := agingSeed000.MaxWait(0)
	assert.False(t, ok, "without an urgent threshold no job is ever urgent: no bound")
	_, ok = AgingConfig{UrgentThreshold: 100}.MaxWait(0)
	assert.False(t, ok, "without aging no bound")
}
