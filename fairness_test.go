package fairsched

// Tests of weighted fair share between fairness keys, by learned cost
// (docs/design.md, Fair share and cost).
//
// Fairness is measured, not eyeballed, in the manner of the Kubernetes
// fair-queuing tests: every key is kept backlogged for a long stretch of
// virtual time (a closed loop: each job of a key that ends is replaced at
// once, so the key's queue never runs dry), and each key's share of the
// slot-seconds over a window after warm-up must be within 2% of its
// weighted max-min fair share, computed with Allocate.

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/fairsched/fairsched/internal/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fairTolerance is the relative error allowed between a measured share of
// slot time and the fair share (docs/design.md, Fair share and cost).
const fairTolerance = 0.02

// fairFeeder keeps fairness keys backlogged in a sim. A fed key starts
// with a backlog of queued jobs, and each of its jobs that ends is replaced
// at the same instant by a new one, so the number of its jobs queued or
// running stays constant.
type fairFeeder struct {
	m    *sim
	next func(key string, n int) (Job, time.Duration)
	fed  map[string]bool
	n    map[string]int
}

// fairFeed installs a feeder as the sim's onFinish hook. next returns the
// n-th job of a key and its duration; its Key is set by the feeder.
func fairFeed(m *sim, next func(key string, n int) (Job, time.Duration)) *fairFeeder {
	f := &fairFeeder{m: m, next: next, fed: map[string]bool{}, n: map[string]int{}}
	m.onFinish = func(sj *simJob) {
		if f.fed[sj.Job.Key] {
			f.add(sj.Job.Key, m.now)
		}
	}
	return f
}

// start begins feeding key at virtual time at, with a backlog of
// fairDepth(slots) jobs.
func (f *fairFeeder) start(key string, at time.Duration, slots int) {
	f.fed[key] = true
	for range fairDepth(slots) {
		f.add(key, at)
	}
}

// fairDepth is how many jobs a fed key keeps queued or running on a
// scheduler with the given slots. The sim submits the replacements of the
// jobs that end at one instant only after all of them have ended, so a key
// may run every slot and start as many jobs again within one instant
// before its replacements arrive: it needs more than twice the slots to
// stay backlogged throughout.
func fairDepth(slots int) int { return 2*slots + 2 }

// stop stops replacing key's jobs: it drains and goes idle.
func (f *fairFeeder) stop(key string) { f.fed[key] = false }

func (f *fairFeeder) add(key string, at time.Duration) {
	j, d := f.next(key, f.n[key])
	j.Key = key
	f.m.add(fmt.Sprintf("%s#%d", key, f.n[key]), at, j, d)
	f.n[key]++
}

// fairRepoDurations are the wall times of a key's five repositories, in
// units of a tenth of the mean job duration: the jobs of one key differ in
// cost, and the scheduler learns each repository's.
var fairRepoDurations = [...]time.Duration{5, 8, 10, 12, 15}

// fairRepoJobs returns a job generator for fairFeed: jobs of type typ that
// cycle over five repositories per key, whose durations average mean.
func fairRepoJobs(typ string, mean time.Duration) func(string, int) (Job, time.Duration) {
	return func(key string, n int) (Job, time.Duration) {
		r := n % len(fairRepoDurations)
		return Job{Type: typ, ID: fmt.Sprintf("%s/repo%d", key, r)}, fairRepoDurations[r] * mean / 10
	}
}

// fairMaxRepoDuration is the longest job fairRepoJobs(_, mean) makes.
func fairMaxRepoDuration(mean time.Duration) time.Duration {
	return slices.Max(fairRepoDurations[:]) * mean / 10
}

// fairShares returns each key's share of the capacity (slots times the
// window) that its jobs held within [from, to).
func fairShares(m *sim, slots int, keys []string, from, to time.Duration) map[string]float64 {
	capacity := float64(slots) * float64(to-from)
	out := make(map[string]float64, len(keys))
	for _, k := range keys {
		out[k] = float64(m.slotTime(k, from, to)) / capacity
	}
	return out
}

// fairExpected returns each key's weighted max-min fair share of the
// capacity, by Allocate.
func fairExpected(slots int, keys []string, demands []AllocationDemand) map[string]float64 {
	alloc := Allocate(slots, demands)
	out := make(map[string]float64, len(keys))
	for i, k := range keys {
		out[k] = alloc[i] / float64(slots)
	}
	return out
}

// fairAssertShares checks every key's measured share against its fair
// share, within fairTolerance of the latter, and logs both.
func fairAssertShares(t *testing.T, what string, got, want map[string]float64) {
	t.Helper()
	for _, k := range sortedKeys(want) {
		w, g := want[k], got[k]
		t.Logf("%s: key %q share %.4f, fair share %.4f (error %+.2f%%)", what, k, g, w, 100*(g-w)/w)
		assert.InDeltaf(t, w, g, fairTolerance*w, "%s: key %q holds %.4f of the slot time, its fair share is %.4f", what, k, g, w)
	}
}

// fairBacklogged is the AllocationDemand of a key that always has more
// work than slots.
func fairBacklogged(weight float64, minSlots, limit int) AllocationDemand {
	return AllocationDemand{Weight: weight, MinSlots: minSlots, Limit: limit, Demand: math.MaxInt32}
}

// fairRunningSeries samples how many jobs that match ran at each instant
// from, from+step, ... before to (a job runs over [Start, End), as in
// sim.runningAt), in one sweep over the sorted starts and ends.
func fairRunningSeries(m *sim, match func(*simJob) bool, from, to, step time.Duration) []int {
	var starts, ends []time.Duration
	for _, sj := range m.jobs {
		if match(sj) && sj.started() {
			starts = append(starts, sj.Start)
			if sj.ended() {
				ends = append(ends, sj.End)
			}
		}
	}
	slices.Sort(starts)
	slices.Sort(ends)
	var out []int
	i, j := 0, 0
	for at := from; at < to; at += step {
		for i < len(starts) && starts[i] <= at {
			i++
		}
		for j < len(ends) && ends[j] <= at {
			j++
		}
		out = append(out, i-j)
	}
	return out
}

// fairOfKey matches the jobs of key.
func fairOfKey(key string) func(*simJob) bool {
	return func(sj *simJob) bool { return sj.Job.Key == key }
}

// fairMaxRunning returns the most jobs of key running at once within
// [from, to). The count only rises when a job starts, so it is enough to
// look at start instants.
func fairMaxRunning(m *sim, key string, from, to time.Duration) int {
	most := 0
	for _, sj := range m.jobs {
		if sj.Job.Key == key && sj.started() && sj.Start >= from && sj.Start < to {
			most = max(most, m.runningAt(key, sj.Start))
		}
	}
	return most
}

// fairStartedIn counts the jobs of key that started within [from, to).
func fairStartedIn(m *sim, key string, from, to time.Duration) int {
	n := 0
	for _, sj := range m.jobs {
		if sj.Job.Key == key && sj.started() && sj.Start >= from && sj.Start < to {
			n++
		}
	}
	return n
}

// fairFirstStarts returns the keys of the first n jobs started at or after
// from, in start order.
func fairFirstStarts(m *sim, from time.Duration, n int) []string {
	var out []string
	for _, sj := range m.order {
		if sj.Start >= from && len(out) < n {
			out = append(out, sj.Job.Key)
		}
	}
	return out
}

// fairCount counts the occurrences of key in keys.
func fairCount(keys []string, key string) int {
	n := 0
	for _, k := range keys {
		if k == key {
			n++
		}
	}
	return n
}

// TestFairShareEqualWeights: three backlogged keys of equal weight on six
// slots each hold a third of the slot time.
func TestFairShareEqualWeights(t *testing.T) {
	const slots = 6
	keys := []string{"a", "b", "c"}
	m := newSim(t, Config{MaxConcurrency: slots, Types: map[string]TypeConfig{"sync": {DefaultCost: 10 * time.Second}}})
	f := fairFeed(m, fairRepoJobs("sync", 10*time.Second))
	for _, k := range keys {
		f.start(k, 0, slots)
	}
	m.run(35 * time.Minute)

	got := fairShares(m, slots, keys, 5*time.Minute, 35*time.Minute)
	want := fairExpected(slots, keys, []AllocationDemand{fairBacklogged(1, 0, 0), fairBacklogged(1, 0, 0), fairBacklogged(1, 0, 0)})
	fairAssertShares(t, "equal weights", got, want)
}

// TestFairShareWeighted: weights 3:1 on six slots share the slot time
// 4.5 : 1.5, whatever the jobs' individual costs.
func TestFairShareWeighted(t *testing.T) {
	const slots = 6
	keys := []string{"prod", "backup"}
	m := newSim(t, Config{
		MaxConcurrency: slots,
		Types:          map[string]TypeConfig{"sync": {DefaultCost: 10 * time.Second}},
		Keys:           map[string]KeyConfig{"prod": {Weight: 3}, "backup": {Weight: 1}},
	})
	f := fairFeed(m, fairRepoJobs("sync", 10*time.Second))
	for _, k := range keys {
		f.start(k, 0, slots)
	}
	m.run(35 * time.Minute)

	got := fairShares(m, slots, keys, 5*time.Minute, 35*time.Minute)
	want := fairExpected(slots, keys, []AllocationDemand{fairBacklogged(3, 0, 0), fairBacklogged(1, 0, 0)})
	require.InDelta(t, 0.75, want["prod"], 1e-9, "Allocate gives weights 3:1 three quarters")
	fairAssertShares(t, "weights 3:1", got, want)
}

// TestFairShareByCostNotJobCount is cost-awareness: a client
// whose clones take 60 s and one whose clones take 5 s, equally weighted,
// hold equal slot time, so the cheap client runs about twelve times as
// many jobs. Each client clones one repository, whose cost the scheduler
// learns from the type's default.
func TestFairShareByCostNotJobCount(t *testing.T) {
	const slots = 4
	keys := []string{"linux-client", "git-client"}
	m := newSim(t, Config{MaxConcurrency: slots, Types: map[string]TypeConfig{"clone": {Tier: Foreground, DefaultCost: 10 * time.Second}}})
	f := fairFeed(m, func(key string, n int) (Job, time.Duration) {
		if key == "linux-client" {
			return Job{Type: "clone", ID: "github.com/torvalds/linux"}, 60 * time.Second
		}
		return Job{Type: "clone", ID: "github.com/git/git"}, 5 * time.Second
	})
	for _, k := range keys {
		f.start(k, 0, slots)
	}
	const from, to = 15 * time.Minute, 75 * time.Minute
	m.run(to)

	got := fairShares(m, slots, keys, from, to)
	want := fairExpected(slots, keys, []AllocationDemand{fairBacklogged(1, 0, 0), fairBacklogged(1, 0, 0)})
	fairAssertShares(t, "60 s vs 5 s jobs", got, want)

	expensive, cheap := fairStartedIn(m, "linux-client", from, to), fairStartedIn(m, "git-client", from, to)
	ratio := float64(cheap) / float64(expensive)
	t.Logf("jobs started in the window: 60 s client %d, 5 s client %d, ratio %.2f", expensive, cheap, ratio)
	assert.InDelta(t, 12, ratio, 12*0.06, "equal slot time means the 5 s client runs ~12x the jobs of the 60 s client")
}

// TestFairShareIdleKeyReturns: a key that comes back after an hour idle
// gets its share back at once, within one job duration, but no burst
// beyond it: it neither banked credit while idle nor was penalised. The
// key is either still remembered (its old, low virtual time must be lifted
// to the tier's minimum) or forgotten after IdleTTL (it starts afresh at
// that minimum); both must behave the same.
func TestFairShareIdleKeyReturns(t *testing.T) {
	for _, tc := range []struct {
		name string
		ttl  time.Duration
	}{
		{"remembered", 3 * time.Hour},
		{"forgotten", 10 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const slots = 6
			const mean = time.Minute
			maxDur := fairMaxRepoDuration(mean)
			m := newSim(t, Config{MaxConcurrency: slots, IdleTTL: tc.ttl, Types: map[string]TypeConfig{"sync": {DefaultCost: mean}}})
			f := fairFeed(m, fairRepoJobs("sync", mean))
			f.start("steady", 0, slots)
			f.start("returning", 0, slots)
			m.run(20 * time.Minute)
			f.stop("returning")

			// An hour later (off the minute, so that it does not coincide
			// with job ends), "returning" comes back with a backlog.
			back := 20*time.Minute + time.Hour + 7*time.Second
			m.run(back - time.Second)
			require.Zero(t, m.runningAt("returning", back-time.Second), "the key drained and was idle for the hour")
			require.Equal(t, slots, m.runningAt("steady", back-time.Second), "the other key used every slot meanwhile")
			f.start("returning", back, slots)
			m.run(back + 30*time.Minute)

			const share = slots / 2
			reached := time.Duration(-1)
			for _, sj := range m.order { // in start order
				if sj.Job.Key == "returning" && sj.Start >= back && m.runningAt("returning", sj.Start) >= share {
					reached = sj.Start
					break
				}
			}
			require.GreaterOrEqual(t, reached, back, "the returning key never reached its share of %d slots", share)
			t.Logf("returning key reached %d slots %v after its return (one job lasts at most %v)", share, reached-back, maxDur)
			assert.LessOrEqual(t, reached-back, maxDur, "the returning key gets its share within one job duration")

			most := fairMaxRunning(m, "returning", back, back+30*time.Minute)
			t.Logf("returning key ran at most %d jobs at once (share %d)", most, share)
			assert.LessOrEqual(t, most, share+1, "no burst beyond the share: the key banked no credit while idle")

			keys := []string{"steady", "returning"}
			got := fairShares(m, slots, keys, back+5*time.Minute, back+30*time.Minute)
			want := fairExpected(slots, keys, []AllocationDemand{fairBacklogged(1, 0, 0), fairBacklogged(1, 0, 0)})
			fairAssertShares(t, "after the return", got, want)
		})
	}
}

// TestFairShareSmallClientNotStarvedByFlood is the denial of
// service: one client submits 1,000 clones at once, another then needs
// just two. The second client's clones start at the first slots that free
// after they arrive, within one job duration, rather than behind the
// flood.
func TestFairShareSmallClientNotStarvedByFlood(t *testing.T) {
	const slots = 8
	const dur = 10 * time.Second
	m := newSim(t, Config{MaxConcurrency: slots, Types: map[string]TypeConfig{
		"sync-clone": {Tier: Foreground, ConflictGroup: "git", DefaultCost: dur},
	}})
	for i := range 1000 {
		m.add(fmt.Sprintf("flood%d", i), 0, Job{Type: "sync-clone", ID: fmt.Sprintf("repo%d", i), Key: "10.0.0.1"}, dur)
	}
	arrive := 35 * time.Second
	m.add("small1", arrive, Job{Type: "sync-clone", ID: "small1", Key: "10.0.0.2"}, dur)
	m.add("small2", arrive, Job{Type: "sync-clone", ID: "small2", Key: "10.0.0.2"}, dur)
	m.run(2 * time.Minute)

	ahead := 0 // flood jobs still queued when the small client arrived
	for _, sj := range m.jobs {
		if sj.Job.Key == "10.0.0.1" && (!sj.started() || sj.Start > arrive) {
			ahead++
		}
	}
	for _, name := range []string{"small1", "small2"} {
		j := m.job(name)
		require.Truef(t, j.started(), "%s never started", name)
		t.Logf("%s arrived at %v behind %d queued jobs, started after %v", name, arrive, ahead, j.Wait())
		assert.LessOrEqualf(t, j.Wait(), dur, "%s must start within one job duration of arrival", name)
	}
	assert.Equal(t, slots, m.maxRunning, "the flood kept every slot busy")
}

// TestFairShareSeed001SixteenSlots is the slot allocation of docs/design.md, Fair share and cost: 16
// slots, group A weight 3 capped at 12, group B weight 1 capped at 6 with 2
// slots reserved.
func TestFairShareSeed001SixteenSlots(t *testing.T) {
	const slots = 16
	const dur = 10 * time.Second
	cfg := func() Config {
		return Config{
			MaxConcurrency: slots,
			Types:          map[string]TypeConfig{"sync": {DefaultCost: dur}},
			Keys: map[string]KeyConfig{
				"s3://prod":      {Weight: 3, MaxConcurrency: 12},
				"s3://b2-backup": {Weight: 1, MaxConcurrency: 6, MinSlots: 2},
			},
		}
	}
	jobs := func(key string, n int) (Job, time.Duration) { return Job{Type: "sync", ID: key}, dur }

	// Both backlogged: B gets its 2 reserved slots plus a quarter of the
	// other 14 (3.5), A three quarters (10.5); neither reaches its cap.
	// The counts alternate around those means.
	t.Run("steady state", func(t *testing.T) {
		m := newSim(t, cfg())
		f := fairFeed(m, jobs)
		f.start("s3://prod", 0, slots)
		f.start("s3://b2-backup", 0, slots)
		const from, to = 2 * time.Minute, 15 * time.Minute
		m.run(to)

		const step = 500 * time.Millisecond
		as := fairRunningSeries(m, fairOfKey("s3://prod"), from, to, step)
		bs := fairRunningSeries(m, fairOfKey("s3://b2-backup"), from, to, step)
		for i, a := range as {
			b := bs[i]
			if !assert.Truef(t, a >= 10 && a <= 11 && b >= 5 && b <= 6 && a+b == slots,
				"at %v A runs %d and B %d; the fair share is A 10-11, B 5-6, all 16 busy", from+time.Duration(i)*step, a, b) {
				break
			}
		}
		t.Logf("sampled every %v over %v..%v: A ran %d..%d, B ran %d..%d", step, from, to, slices.Min(as), slices.Max(as), slices.Min(bs), slices.Max(bs))

		keys := []string{"s3://prod", "s3://b2-backup"}
		want := fairExpected(slots, keys, []AllocationDemand{fairBacklogged(3, 0, 12), fairBacklogged(1, 2, 6)})
		require.InDelta(t, 10.5/16, want["s3://prod"], 1e-9)
		fairAssertShares(t, "16 slots", fairShares(m, slots, keys, from, to), want)
		assert.LessOrEqual(t, fairMaxRunning(m, "s3://prod", 0, to), 12, "A's cap")
		assert.LessOrEqual(t, fairMaxRunning(m, "s3://b2-backup", 0, to), 6, "B's cap")
	})

	// B has only 3 jobs: its unused share goes to A, but only up to A's
	// cap of 12, so one slot stays idle (A would get 13, is capped
	// at 12: 1 slot idle).
	t.Run("B has three jobs", func(t *testing.T) {
		m := newSim(t, cfg())
		f := fairFeed(m, jobs)
		for i := range 3 {
			m.add(fmt.Sprintf("b%d", i), 0, Job{Type: "sync", ID: fmt.Sprintf("b%d", i), Key: "s3://b2-backup"}, 5*time.Minute)
		}
		f.start("s3://prod", 0, slots)
		m.run(150 * time.Second)
		st := m.s.Stats()
		assert.Equal(t, slots-1, st.Running, "exactly one slot idle")
		assert.Positive(t, st.Queued, "A has work queued, held back by its cap alone")
		// Allocations are entitlements (B's 2 reserved, the other 14 split
		// 3:1); utilisation shows A using the share B leaves idle.
		for _, ks := range st.Keys {
			want := map[string]float64{"s3://prod": 10.5, "s3://b2-backup": 5.5}[ks.Key]
			running := map[string]int{"s3://prod": 12, "s3://b2-backup": 3}[ks.Key]
			assert.InDeltaf(t, want, ks.Allocation, 1e-9, "Stats allocation of %q", ks.Key)
			assert.Equalf(t, running, ks.Running, "running of %q", ks.Key)
			assert.InDeltaf(t, float64(running)/want, ks.Utilisation, 1e-9, "utilisation of %q", ks.Key)
		}
		m.run(290 * time.Second)

		const from, to, step = time.Second, 290 * time.Second, 500 * time.Millisecond
		as := fairRunningSeries(m, fairOfKey("s3://prod"), from, to, step)
		bs := fairRunningSeries(m, fairOfKey("s3://b2-backup"), from, to, step)
		for i, a := range as {
			if b := bs[i]; !assert.Truef(t, a == 12 && b == 3, "at %v A runs %d and B %d; want A at its cap of 12, B 3, one slot idle", from+time.Duration(i)*step, a, b) {
				break
			}
		}
		assert.Equal(t, slots-1, m.maxRunning, "the 16th slot never ran anything")
	})
}

// TestFairShareCapNeverExceeded: a key whose weight would earn it most of
// the slots is held to its cap at every instant, and what it cannot use is
// shared among the others (work conservation).
func TestFairShareCapNeverExceeded(t *testing.T) {
	const slots = 8
	keys := []string{"big", "a", "b"}
	m := newSim(t, Config{
		MaxConcurrency: slots,
		Types:          map[string]TypeConfig{"sync": {DefaultCost: 10 * time.Second}},
		Keys:           map[string]KeyConfig{"big": {Weight: 10, MaxConcurrency: 2}},
	})
	f := fairFeed(m, fairRepoJobs("sync", 10*time.Second))
	for _, k := range keys {
		f.start(k, 0, slots)
	}
	m.run(35 * time.Minute)

	most := fairMaxRunning(m, "big", 0, 35*time.Minute)
	t.Logf("big ran at most %d jobs at once (cap 2)", most)
	assert.Equal(t, 2, most, "the capped key runs up to its cap and never beyond")
	want := fairExpected(slots, keys, []AllocationDemand{fairBacklogged(10, 0, 2), fairBacklogged(1, 0, 0), fairBacklogged(1, 0, 0)})
	require.InDelta(t, 3.0/8, want["a"], 1e-9, "Allocate gives the capped key's excess to the others")
	fairAssertShares(t, "cap 2 at weight 10", fairShares(m, slots, keys, 5*time.Minute, 35*time.Minute), want)
}

// TestFairShareRuntimeWeightChange: SetKeyWeight applies from the next
// dispatch, so shares move to the new ratio within one job duration; and
// ResetKeys returns every key to equal weights.
func TestFairShareRuntimeWeightChange(t *testing.T) {
	const slots = 8
	const mean = 10 * time.Second
	settle := fairMaxRepoDuration(mean) // every running job has ended and been replaced
	keys := []string{"prod", "backup"}
	m := newSim(t, Config{MaxConcurrency: slots, Types: map[string]TypeConfig{"sync": {DefaultCost: mean}}})
	f := fairFeed(m, fairRepoJobs("sync", mean))
	for _, k := range keys {
		f.start(k, 0, slots)
	}
	equal := fairExpected(slots, keys, []AllocationDemand{fairBacklogged(1, 0, 0), fairBacklogged(1, 0, 0)})

	const change, reset, end = 15 * time.Minute, 30 * time.Minute, 45 * time.Minute
	m.run(change)
	fairAssertShares(t, "before the change", fairShares(m, slots, keys, 2*time.Minute, change), equal)

	require.NoError(t, m.s.SetKeyWeight("prod", 3))
	m.collect()
	m.run(reset)
	// The new weight counts from the very next start: 3 of every 4.
	next := fairFirstStarts(m, change, 12)
	t.Logf("first starts after the change: %v", next)
	assert.InDelta(t, 9, fairCount(next, "prod"), 1, "prod's share of the next 12 starts")
	weighted := fairExpected(slots, keys, []AllocationDemand{fairBacklogged(3, 0, 0), fairBacklogged(1, 0, 0)})
	fairAssertShares(t, "after SetKeyWeight(prod, 3)", fairShares(m, slots, keys, change+settle, reset), weighted)

	m.s.ResetKeys()
	m.collect()
	m.run(end)
	next = fairFirstStarts(m, reset, 12)
	t.Logf("first starts after the reset: %v", next)
	assert.InDelta(t, 6, fairCount(next, "prod"), 1, "prod's share of the next 12 starts")
	fairAssertShares(t, "after ResetKeys", fairShares(m, slots, keys, reset+settle, end), equal)
	for _, ks := range m.s.Stats().Keys {
		assert.Equalf(t, 1.0, ks.Weight, "key %q is back to the default weight", ks.Key)
	}
}

// TestFairShareValidation: weights must be positive and reservations must
// fit in MaxConcurrency, both at New and at run time; a rejected change
// changes nothing.
func TestFairShareValidation(t *testing.T) {
	t.Run("weight", func(t *testing.T) {
		_, err := New(Config{Keys: map[string]KeyConfig{"a": {Weight: -1}}})
		require.Error(t, err)
		assert.Contains(t, err.Error(), `Keys["a"].Weight is -1`)
		_, err = New(Config{DefaultKey: KeyConfig{Weight: -0.5}})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "DefaultKey.Weight")

		s, err := New(Config{MaxConcurrency: 4, Keys: map[string]KeyConfig{"a": {Weight: 2}}})
		require.NoError(t, err)
		defer s.Close()
		for _, w := range []float64{0, -1, math.NaN(), math.Inf(1)} {
			err := s.SetKeyWeight("a", w)
			require.Errorf(t, err, "SetKeyWeight(a, %v)", w)
			assert.Contains(t, err.Error(), "must be positive")
		}
		require.ErrorContains(t, s.SetKeyWeight("a", 1e-310), "must be at least")
		require.Error(t, s.SetKey("a", KeyConfig{Weight: -3}))
		assert.Equal(t, 2.0, fairKeyStats(t, s, "a").Weight, "rejected changes leave the weight as it was")
		require.NoError(t, s.SetKeyWeight("a", 0.5))
		assert.Equal(t, 0.5, fairKeyStats(t, s, "a").Weight)
	})

	t.Run("reservations", func(t *testing.T) {
		_, err := New(Config{MaxConcurrency: 5, Keys: map[string]KeyConfig{"a": {MinSlots: 3}, "b": {MinSlots: 3}}})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "MinSlots add up to 6, more than MaxConcurrency 5")
		_, err = New(Config{MaxConcurrency: 5, DefaultKey: KeyConfig{MinSlots: 1}})
		require.Error(t, err, "the default key may not reserve: unknown keys are unbounded in number")

		s, err := New(Config{MaxConcurrency: 4, Keys: map[string]KeyConfig{"a": {MinSlots: 3}}})
		require.NoError(t, err)
		defer s.Close()
		err = s.SetKey("b", KeyConfig{MinSlots: 2})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "add up to 5, more than MaxConcurrency 4")
		for _, ks := range s.Stats().Keys {
			assert.NotEqual(t, "b", ks.Key, "the rejected key was not configured")
		}
		require.NoError(t, s.SetKey("b", KeyConfig{MinSlots: 1}), "3 + 1 fits in 4")
		require.NoError(t, s.SetKey("a", KeyConfig{MinSlots: 2}), "a key's new reservation replaces its old one")
		require.NoError(t, s.SetKey("b", KeyConfig{MinSlots: 2}))
		assert.Equal(t, 2, fairKeyStats(t, s, "b").MinSlots)
	})
}

// fairKeyStats returns the Stats entry of key.
func fairKeyStats(t *testing.T, s *Scheduler, key string) KeyStats {
	t.Helper()
	for _, ks := range s.Stats().Keys {
		if ks.Key == key {
			return ks
		}
	}
	t.Fatalf("key %q not in Stats", key)
	return KeyStats{}
}

// TestFairSharePerKeyPendingLimit: with a per-key pending limit, one
// client's flood is refused with ErrQueueFull once it has MaxPending jobs
// queued, while another client's submissions are accepted as usual.
func TestFairSharePerKeyPendingLimit(t *testing.T) {
	m := newSim(t, Config{MaxConcurrency: 1, DefaultKey: KeyConfig{MaxPending: 5}})
	m.add("blocker", 0, Job{Key: "admin"}, time.Minute)
	m.run(0)
	noop := func(context.Context) error { return nil }

	var rejected []error
	for range 20 {
		if _, err := m.s.Submit(context.Background(), Job{Key: "flood"}, noop); err != nil {
			rejected = append(rejected, err)
		}
	}
	require.Len(t, rejected, 15, "the first 5 are queued, the other 15 refused")
	for _, err := range rejected {
		require.ErrorIs(t, err, ErrQueueFull)
		var qf *QueueFullError
		require.ErrorAs(t, err, &qf)
		// Its wait: half of the blocker's default second left, then the
		// flood's five queued jobs (one second each, none observed yet).
		assert.Equal(t, QueueFullError{KeyLimit: true, Key: "flood", Limit: 5, Size: 5, Wait: 5500 * time.Millisecond}, *qf)
	}
	st := m.s.Stats()
	assert.Equal(t, 5, st.Queued, "refused submissions changed nothing")
	assert.EqualValues(t, 15, st.Rejected)

	for i := range 5 {
		_, err := m.s.Submit(context.Background(), Job{Key: "other"}, noop)
		require.NoErrorf(t, err, "the other client's job %d", i)
	}
	_, err := m.s.Submit(context.Background(), Job{Key: "other"}, noop)
	var qf *QueueFullError
	require.ErrorAs(t, err, &qf, "the other client has its own limit")
	assert.Equal(t, "other", qf.Key)
	assert.Equal(t, 10, m.s.Stats().Queued)
	m.run(2 * time.Minute) // the blocker ends; the queued no-ops run
}

// TestEmptyKeyIgnoresDefaultKey: DefaultKey, meant for clients, does not
// bound the service's own keyless work: the empty key has the zero
// KeyConfig unless Keys[""] is set, and ResetKey returns it there.
func TestEmptyKeyIgnoresDefaultKey(t *testing.T) {
	clients := KeyConfig{MaxConcurrency: 1, MaxPending: 2}
	m := newSim(t, Config{MaxConcurrency: 4, DefaultKey: clients})
	var keyless, client []*simJob
	for i := range 10 {
		keyless = append(keyless, m.add(fmt.Sprintf("own%d", i), 0, Job{}, time.Minute))
	}
	for i := range 3 {
		client = append(client, m.add(fmt.Sprintf("client%d", i), 0, Job{Key: "client"}, time.Minute))
	}
	m.run(0)
	for _, sj := range keyless {
		require.NoErrorf(t, sj.Err, "%s: DefaultKey.MaxPending does not bound keyless work", sj.Name)
	}
	assert.Equal(t, 4, m.runningAt("", 0), "nor does DefaultKey.MaxConcurrency cap it")
	require.NoError(t, client[1].Err)
	var qf *QueueFullError
	require.ErrorAs(t, client[2].Err, &qf, "a client still has DefaultKey's limit")
	// Its wait: the client's two queued seconds through its cap of 1.
	assert.Equal(t, QueueFullError{KeyLimit: true, Key: "client", Limit: 2, Size: 2, Wait: 2 * time.Second}, *qf)

	m.s.ResetKey("")
	_, err := m.s.Submit(context.Background(), Job{}, func(context.Context) error { return nil })
	require.NoError(t, err, "ResetKey returns the empty key to the zero KeyConfig, not DefaultKey")
	m.run(10 * time.Minute)

	own := newSim(t, Config{MaxConcurrency: 1, DefaultKey: KeyConfig{MaxPending: 100}, Keys: map[string]KeyConfig{"": {MaxPending: 1}}})
	for i := range 3 {
		keyless[i] = own.add(fmt.Sprintf("own%d", i), 0, Job{}, time.Minute)
	}
	own.run(0)
	require.NoError(t, keyless[1].Err)
	require.ErrorAs(t, keyless[2].Err, &qf, "Keys[\"\"] configures the empty key")
	assert.Equal(t, QueueFullError{KeyLimit: true, Key: "", Limit: 1, Size: 1, Wait: 1500 * time.Millisecond}, *qf)
	own.run(10 * time.Minute)
}

// TestCostLearningEMA: a (type, ID)'s estimated cost starts at the type's
// DefaultCost and follows an exponential moving average with alpha 0.3 of
// the observed wall time: 10 s, observed 20 s, gives 13 s, then 15.1 s.
// The estimate is what a start charges to the key's virtual time, so it
// is read there (weight 1: one slot-second is one unit).
func TestCostLearningEMA(t *testing.T) {
	m := newSim(t, Config{
		MaxConcurrency: 1,
		Types: map[string]TypeConfig{
			"clone":  {DefaultCost: 10 * time.Second},
			"verify": {DefaultCost: 2 * time.Second},
		},
		Keys: map[string]KeyConfig{"dev": {}}, // configured: listed in Stats even when idle
	})
	vt := func() float64 { return fairKeyStats(t, m.s, "dev").VirtualTime[Background] }
	linux := Job{Type: "clone", ID: "linux", Key: "dev"}
	m.add("clone1", 0, linux, 20*time.Second)
	m.add("clone2", 30*time.Second, linux, 20*time.Second)
	m.add("clone3", 60*time.Second, linux, 20*time.Second)
	m.add("git", 90*time.Second, Job{Type: "clone", ID: "git", Key: "dev"}, 20*time.Second)
	m.add("verify", 120*time.Second, Job{Type: "verify", ID: "linux", Key: "dev"}, 20*time.Second)

	// Each step: the time to look, and the virtual time then. A start
	// charges the estimate; an end corrects the charge to the wall time.
	steps := []struct {
		at   time.Duration
		want float64
		why  string
	}{
		{0, 10, "first clone of linux charged the type's DefaultCost, 10 s"},
		{25 * time.Second, 20, "corrected to the 20 s observed"},
		{30 * time.Second, 20 + 13, "second clone charged 0.3*20 + 0.7*10 = 13 s"},
		{55 * time.Second, 40, "corrected to 20 s"},
		{60 * time.Second, 40 + 15.1, "third clone charged 0.3*20 + 0.7*13 = 15.1 s"},
		{85 * time.Second, 60, "corrected to 20 s"},
		{90 * time.Second, 60 + 10, "another ID of the type has no observation: DefaultCost"},
		{120 * time.Second, 80 + 2, "another type with the same ID: its own DefaultCost"},
	}
	for _, st := range steps {
		m.run(st.at)
		assert.InDeltaf(t, st.want, vt(), 1e-6, "at %v: %s", st.at, st.why)
	}
	m.run(150 * time.Second)
	assert.Equal(t, 3, m.s.Stats().CostEstimates, "one estimate per (type, ID) observed")
}

// TestCostAndIdleKeyTTLEviction: thousands of ephemeral fairness keys
// (client addresses), each running one job, leave no trace once IdleTTL
// has passed: the next submission forgets the idle keys and the unused
// cost estimates, so memory stays bounded.
func TestCostAndIdleKeyTTLEviction(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 20_000 // the same bound at a fifth of the keys, for quick runs
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	s, err := New(Config{IdleTTL: time.Minute, Clock: clk})
	require.NoError(t, err)
	defer s.Close()
	// The scheduler may keep a few keys for good (the empty key): count
	// from what a fresh one tracks.
	base := s.Stats().KeysTracked
	noop := func(context.Context) error { return nil }
	run := func(key, id string) {
		require.NoError(t, s.RunSync(context.Background(), Job{ID: id, Key: key}, noop))
	}
	for i := range n {
		run(fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255), fmt.Sprintf("repo-%d", i))
	}
	st := s.Stats()
	require.Equal(t, base+n, st.KeysTracked, "idle keys are remembered until their TTL passes")
	require.Equal(t, n, st.CostEstimates)

	clk.Advance(59 * time.Second)
	run("probe-1", "probe-1")
	st = s.Stats()
	assert.Equal(t, base+n+1, st.KeysTracked, "59 s is within the TTL: nothing forgotten")
	assert.Equal(t, n+1, st.CostEstimates)

	clk.Advance(2 * time.Second)
	run("probe-2", "probe-2")
	st = s.Stats()
	t.Logf("after the TTL: %d keys and %d estimates tracked; %d keys and %d estimates forgotten",
		st.KeysTracked, st.CostEstimates, st.KeysForgotten, st.CostsForgotten)
	assert.LessOrEqual(t, st.KeysTracked, base+2, "only the probes' keys are left")
	assert.LessOrEqual(t, st.CostEstimates, 2, "only the probes' estimates are left")
	assert.EqualValues(t, n, st.KeysForgotten)
	assert.EqualValues(t, n, st.CostsForgotten)
}

// A key submitting again after exactly its TTL comes back as one record,
// brand-new, not as a forgotten one that keeps its old virtual time.
func TestFairShareKeyReturnsAfterTTL(t *testing.T) {
	m := newSim(t, Config{MaxConcurrency: 1, IdleTTL: time.Minute})
	m.add("old", 0, Job{Key: "k"}, 10*time.Minute) // k uses 600 slot-seconds
	m.add("x", 0, Job{Key: "other"}, time.Second)
	m.run(10*time.Minute + time.Second)
	m.add("back", 11*time.Minute+time.Second, Job{Key: "k"}, time.Hour)
	m.run(11*time.Minute + time.Second)
	ks := fairKeyStats(t, m.s, "k")
	require.Equal(t, 1, ks.Running, "the job runs under the key's filed record")
	require.Less(t, ks.VirtualTime[Background], 600.0, "forgotten: it did not keep its old virtual time")
}

// ResetKey returns one key to DefaultKey and leaves the others as they
// are.
func TestResetKey(t *testing.T) {
	s := newTestScheduler(t, Config{MaxConcurrency: 4, Keys: map[string]KeyConfig{"a": {Weight: 3}, "b": {Weight: 2}}})
	s.ResetKey("a")
	s.ResetKey("nobody") // unknown: stays unknown
	st := s.Stats()
	var a, b *KeyStats
	for i := range st.Keys {
		switch st.Keys[i].Key {
		case "a":
			a = &st.Keys[i]
		case "b":
			b = &st.Keys[i]
		case "nobody":
			t.Fatal("ResetKey made a key it did not know")
		}
	}
	require.Nil(t, a, "an unconfigured idle key is not listed")
	require.NotNil(t, b)
	require.True(t, b.Configured)
	require.Equal(t, 2.0, b.Weight)
}
