package fairsched

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairsched/fairsched/internal/clock"
	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/rt"
)

// Benchmarks. Names are stable so that results compare across commits:
//
//	go test -run '^$' -bench . -benchtime 1s ./ | tee new.txt
//	benchstat old.txt new.txt
//
// The public-API benchmarks (RunSync, Submit) measure everything a caller
// pays, goroutines included. Aging, HOL and Scale drive the dispatcher
// directly under its lock, one submission and one dispatch per operation,
// to measure how its cost grows with the queue.

func noop(context.Context) error { return nil }

// BenchmarkRunSync measures a no-op RunSync from one caller
// (uncontended), and from GOMAXPROCS callers at once (parallel, with
// b.RunParallel), where ns/op is wall time over all callers' operations,
// so 1e9/ns/op is the decisions per second the scheduler makes. -cpu sets
// GOMAXPROCS, so a sweep of it shows how that rate scales with cores
// (docs/performance.md, Many cores):
//
//	go test -run '^$' -bench 'RunSync/parallel' -cpu 1,2,4,8,16 -count 3 .
//
// Above the machine's core count the threads share cores: the sweep then
// shows a lock holder descheduled by the system, not more parallelism.
// The scheduler has a slot for every caller, so that no caller waits in
// the queue at any -cpu.
func BenchmarkRunSync(b *testing.B) {
	b.Run("uncontended", func(b *testing.B) {
		s := benchScheduler(b, Config{MaxConcurrency: 16, Clock: clock.Real{}})
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := s.RunSync(ctx, Job{}, noop); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		s := benchScheduler(b, Config{MaxConcurrency: max(16, runtime.GOMAXPROCS(0)), Clock: clock.Real{}})
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := s.RunSync(ctx, Job{}, noop); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

func BenchmarkSubmit(b *testing.B) {
	b.Run("burst-10k", func(b *testing.B) {
		const burst = 10000
		s := benchScheduler(b, Config{MaxConcurrency: 16, Clock: clock.Real{}})
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			var left atomic.Int64
			left.Store(burst)
			done := make(chan struct{})
			fn := func(context.Context) error {
				if left.Add(-1) == 0 {
					close(done)
				}
				return nil
			}
			for k := 0; k < burst; k++ {
				if _, err := s.Submit(context.Background(), Job{}, fn); err != nil {
					b.Fatal(err)
				}
			}
			<-done
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*burst), "ns/job")
	})
	// The same 10,000 jobs submitted as one batch (SubmitMany): one
	// decision for the burst.
	b.Run("many-10k", func(b *testing.B) {
		const burst = 10000
		s := benchScheduler(b, Config{MaxConcurrency: 16, Clock: clock.Real{}})
		var left atomic.Int64
		var done chan struct{} // written before each batch, read by its jobs
		fn := func(context.Context) error {
			if left.Add(-1) == 0 {
				close(done)
			}
			return nil
		}
		jobs := make([]SubmitParams, burst)
		for k := range jobs {
			jobs[k].Fn = fn
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			left.Store(burst)
			done = make(chan struct{})
			if _, err := s.SubmitMany(context.Background(), jobs); err != nil {
				b.Fatal(err)
			}
			<-done
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*burst), "ns/job")
	})
}

// BenchmarkLockHold measures how long the scheduler's lock is held per
// job, the part of a decision no second core can share. While the
// benchmark runs, a sampler asks at random instants whether the lock is
// held (TryLock), about 30,000 times a second; the share of samples that
// find it held, times the elapsed time, is the time it was held.
// lock-ns/op or lock-ns/job is that per job, lock-share the share of the
// time. The sampler runs on a second core (GOMAXPROCS 2 or more), a few
// percent of its time.
//
// runsync: one caller's no-op RunSync, as RunSync/uncontended; its ns/op
// beside that benchmark's is what the sampler costs the caller.
//
// submit-10k, many-10k: the bursts of Submit/burst-10k and
// Submit/many-10k, 10,000 no-op jobs through 16 slots, submitted one by
// one or as one batch, except that the jobs wait until all are
// submitted, so that the lock's holder is known in each phase.
// admit-lock-ns/job is the hold while the jobs are submitted (16 start,
// the others queue); the rest of lock-ns/job is the workers', as each job
// ends and the next starts.
func BenchmarkLockHold(b *testing.B) {
	b.Run("runsync", func(b *testing.B) {
		s := benchScheduler(b, Config{MaxConcurrency: 16, Clock: clock.Real{}})
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		ls := startLockSampler(b, s)
		for i := 0; i < b.N; i++ {
			if err := s.RunSync(ctx, Job{}, noop); err != nil {
				b.Fatal(err)
			}
		}
		ls.report(b, b.N, "op")
	})
	burst := func(b *testing.B, submit func(s *Scheduler, fn func(context.Context) error)) {
		const n = 10000
		s := benchScheduler(b, Config{MaxConcurrency: 16, Clock: clock.Real{}})
		var left atomic.Int64
		var gate, done chan struct{} // made before each burst, read by its jobs
		fn := func(context.Context) error {
			<-gate
			if left.Add(-1) == 0 {
				close(done)
			}
			return nil
		}
		b.ReportAllocs()
		b.ResetTimer()
		ls := startLockSampler(b, s)
		for i := 0; i < b.N; i++ {
			left.Store(n)
			gate, done = make(chan struct{}), make(chan struct{})
			ls.admitting.Store(true)
			submit(s, fn)
			ls.admitting.Store(false)
			close(gate)
			<-done
		}
		ls.report(b, b.N*n, "job")
	}
	b.Run("submit-10k", func(b *testing.B) {
		burst(b, func(s *Scheduler, fn func(context.Context) error) {
			for range 10000 {
				if _, err := s.Submit(context.Background(), Job{}, fn); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("many-10k", func(b *testing.B) {
		jobs := make([]SubmitParams, 10000)
		burst(b, func(s *Scheduler, fn func(context.Context) error) {
			for k := range jobs {
				jobs[k].Fn = fn
			}
			if _, err := s.SubmitMany(context.Background(), jobs); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// lockSampler samples whether a scheduler's lock is held, on a goroutine
// of its own, from startLockSampler until report.
type lockSampler struct {
	s         *Scheduler
	start     time.Time
	admitting atomic.Bool // set by the benchmark while it submits: held samples then count as admission's
	stop      atomic.Bool
	done      chan struct{}
	// written by the sampler, read after done
	samples, held, heldAdmitting int64
}

// startLockSampler starts sampling s's lock. It skips b with GOMAXPROCS 1
// (-cpu sets it for each sub-benchmark, not for their parent): the
// sampler would take turns with what it measures.
func startLockSampler(b *testing.B, s *Scheduler) *lockSampler {
	if runtime.GOMAXPROCS(0) < 2 {
		b.Skip("the sampler needs a second core: GOMAXPROCS 2 or more")
	}
	ls := &lockSampler{s: s, start: time.Now(), done: make(chan struct{})}
	go func() {
		defer close(ls.done)
		r := rand.New(rand.NewPCG(31, 5))
		for !ls.stop.Load() {
			// A run of samples a random 0.5-2.5 µs apart, spun, so that
			// they fall at every point of the measured loop; then a
			// millisecond's sleep, so that the sampler takes a few
			// percent of a core, not a core.
			for range 32 {
				admitting := ls.admitting.Load()
				ls.samples++
				if !s.rt.TryLock() {
					ls.held++
					if admitting {
						ls.heldAdmitting++
					}
				}
				until := time.Now().Add(time.Duration(500 + r.IntN(2000)))
				for time.Now().Before(until) {
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return ls
}

// report stops the sampler and reports the lock's hold per unit (n of
// them in the timed loop) and its share of the time.
func (ls *lockSampler) report(b *testing.B, n int, unit string) {
	elapsed := time.Since(ls.start)
	b.StopTimer()
	ls.stop.Store(true)
	<-ls.done
	if ls.samples < 100 {
		return // a run too short to sample: the framework's probe of b.N
	}
	share := float64(ls.held) / float64(ls.samples)
	b.ReportMetric(share*float64(elapsed.Nanoseconds())/float64(n), "lock-ns/"+unit)
	b.ReportMetric(share, "lock-share")
	if unit == "job" {
		b.ReportMetric(float64(ls.heldAdmitting)/float64(ls.samples)*float64(elapsed.Nanoseconds())/float64(n), "admit-lock-ns/job")
	}
}

// BenchmarkRetry measures one attempt of jobs that fail twice, then
// succeed, 16 slots, with the system clock: each failed attempt goes back
// to the engine for a backoff of a microsecond and starts again through
// the scheduler's timer. ns/op is per attempt; beside it, Submit/burst-10k
// is the same without failures.
func BenchmarkRetry(b *testing.B) {
	b.Run("fail-twice", func(b *testing.B) {
		s := benchScheduler(b, Config{MaxConcurrency: 16, Clock: clock.Real{}, DeadJobs: -1,
			Types: map[string]TypeConfig{"flaky": {Retry: RetryPolicy{Attempts: 3, Backoff: time.Microsecond}}}})
		fn := func(ctx context.Context) error {
			if Attempt(ctx) < 3 {
				return errBenchAttempt
			}
			return nil
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i += 3 {
			if _, err := s.Submit(context.Background(), Job{Type: "flaky"}, fn); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.WaitIdle(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if st := s.Stats(); st.Failed != 0 || st.Retries != 2*st.Completed {
			b.Fatalf("%d completed, %d retries, %d failed", st.Completed, st.Retries, st.Failed)
		}
	})
}

var errBenchAttempt = errors.New("attempt failed")

// BenchmarkHOL measures the time to start one admissible job while n queued
// jobs are blocked by a conflict on one ID: it must not grow with n.
func BenchmarkHOL(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, gate := range []string{"paused", "rate", "dependency", "resource"} {
			b.Run(fmt.Sprintf("%s-%s", gate, count(n)), func(b *testing.B) { benchGateHOL(b, gate, n) })
		}
	}
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("conflict-%s", count(n)), func(b *testing.B) {
			s := benchScheduler(b, Config{
				MaxConcurrency: 16,
				Types:          map[string]TypeConfig{"git": {ConflictGroup: "git"}},
			})
			d := newBenchDriver(b, s)
			d.submit(Job{Type: "git", ID: "hot"}) // the holder
			d.dispatch()
			for i := 0; i < n; i++ {
				d.submit(Job{Type: "git", ID: "hot", Key: "flood"})
			}
			d.dispatch() // parks the flood once
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				d.submit(Job{Type: "git", ID: "other", Key: "polite"})
				if started := d.dispatch(); started != 1 {
					b.Fatalf("started %d jobs, want 1", started)
				}
				d.finishOldest(1) // the holder stays: it is the only older one
			}
		})
	}
}

// benchGateHOL is BenchmarkHOL with n jobs held by a gate (docs/design.md,
// The job's life): a paused key, a rate limit out of tokens, a dependency that runs,
// or a resource held by a running job. Each operation submits one job that
// nothing holds and starts it: in time flat in n.
func benchGateHOL(b *testing.B, gate string, n int) {
	cfg := Config{MaxConcurrency: 16}
	flood := Job{Key: "flood"}
	switch gate {
	case "rate":
		cfg.Keys = map[string]KeyConfig{"flood": {Rate: RateLimit{PerSecond: 1e-3}}}
	case "resource":
		cfg.Resources = map[string]int{"gpu": 1}
		cfg.Types = map[string]TypeConfig{"train": {Needs: map[string]int{"gpu": 1}}}
		flood.Type = "train"
	}
	s := benchScheduler(b, cfg)
	d := newBenchDriver(b, s)
	d.submit(flood) // the holder: it takes the token, the resource, or is the dependency
	d.dispatch()
	switch gate {
	case "paused":
		s.PauseKey("flood")
	case "dependency":
		flood.After = []Handle{{rt.OwnHandle(d.started[0])}}
	}
	for range n {
		d.submit(flood)
	}
	d.dispatch() // holds the flood once
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		before := len(d.started)
		d.submit(Job{Key: "polite"}) // starts at once if the flood is set aside
		d.dispatch()
		if started := len(d.started) - before; started != 1 {
			b.Fatalf("started %d jobs, want 1", started)
		}
		d.finishOldest(1) // the holder stays: it is the only older one
	}
}

// BenchmarkJoin measures a Submit that joins the waiting job of its type
// and ID (DuplicatePolicy JoinQueued), which 1,000 submissions joined
// already: one joiner more, its priority compared, nothing queued.
func BenchmarkJoin(b *testing.B) {
	s := benchScheduler(b, Config{MaxConcurrency: 1, Types: map[string]TypeConfig{"fetch": {Duplicates: JoinQueued}}})
	hold := make(chan struct{})
	b.Cleanup(func() { close(hold) }) // before Close, registered earlier, waits for the job
	if _, err := s.Submit(context.Background(), Job{}, func(context.Context) error { <-hold; return nil }); err != nil {
		b.Fatal(err)
	}
	fetch := Job{Type: "fetch", ID: "page"}
	for range 1001 {
		if _, err := s.Submit(context.Background(), fetch, noop); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Submit(context.Background(), fetch, noop); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if st := s.Stats(); st.Joins != uint64(1000+b.N) || st.Queued != 1 {
		b.Fatalf("%d joins, %d queued", st.Joins, st.Queued)
	}
}

// BenchmarkConflictDrain measures the start of each job while n others
// wait on the same conflict ID (one client starting a thousand
// clones of one repository): the holder ends, the next waiter starts, and
// one more arrives to keep n waiting. Target: waiting-10k within
// 2x of waiting-1k.
func BenchmarkConflictDrain(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run("waiting-"+count(n), func(b *testing.B) {
			s := benchScheduler(b, Config{
				MaxConcurrency: 16,
				Types:          map[string]TypeConfig{"clone": {Tier: Foreground, ConflictGroup: "git"}},
			})
			d := newBenchDriver(b, s)
			clone := Job{Type: "clone", ID: "linux", Key: "client"}
			for i := 0; i <= n; i++ { // a holder and n waiters
				d.submit(clone)
			}
			d.dispatch()
			op := func() {
				d.clk.Advance(time.Millisecond)
				if started := d.finishThenDispatch(0); started != 1 {
					b.Fatalf("started %d jobs, want the next waiter", started)
				}
				d.submit(clone)
			}
			op()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				op()
			}
		})
	}
}

// BenchmarkAging measures one submission plus one dispatch with 100,000
// jobs of mixed priorities queued, with aging on and off. Each job waits
// about five grace periods, so every one ages before it starts.
func BenchmarkAging(b *testing.B) {
	for _, on := range []bool{true, false} {
		name := "queued-100k"
		if !on {
			name = "queued-100k-off"
		}
		b.Run(name, func(b *testing.B) {
			cfg := Config{MaxConcurrency: 16}
			if on {
				cfg.Aging = AgingConfig{GracePeriod: time.Second, Interval: time.Second, Step: 1, MaxEffective: 90, UrgentThreshold: 150}
			}
			benchSteadyState(b, cfg, 100000, 1, []string{""}, 5*time.Second, false)
		})
	}
}

// BenchmarkScale measures one submission plus one dispatch with 1,000 and
// 1,000,000 jobs queued over 10,000 keys, mixed types and priorities, aging
// on; bytes/job is the heap held per queued job. Each job waits about
// scaleWait, at both sizes, so every job ages before it starts. Jobs of the
// top ten priorities become urgent within that wait, and jobs of any
// priority that wait longer do too (scaleConfig). In queued-1M-timed, one
// job in ten is delayed by half that wait (NotBefore) and one in twenty
// has a start deadline it meets (StartBy): their timers are set, fire or
// are cancelled on the way.
func BenchmarkScale(b *testing.B) {
	for _, n := range []int{1000, 1000000} {
		b.Run("queued-"+count(n), func(b *testing.B) {
			benchSteadyState(b, scaleConfig(), n, 10000, []string{"fg", "bg", "repack"}, scaleWait, false)
		})
	}
	b.Run("queued-1M-timed", func(b *testing.B) {
		benchSteadyState(b, scaleConfig(), 1000000, 10000, []string{"fg", "bg", "repack"}, scaleWait, true)
	})
}

// BenchmarkScaleKeys is Scale/queued-1M over fewer keys, 100 and 1,000
// instead of 10,000. The queue, the heaps and the mix are the same; what
// shrinks is the per-key state (key records, flows, lanes, the type-wide
// and tier heaps over them), until it stays in cache. The difference from
// Scale/queued-1M is what the misses on that state cost.
func BenchmarkScaleKeys(b *testing.B) {
	for _, keys := range []int{100, 1000} {
		b.Run("keys-"+count(keys), func(b *testing.B) {
			benchSteadyState(b, scaleConfig(), 1000000, keys, []string{"fg", "bg", "repack"}, scaleWait, false)
		})
	}
}

// BenchmarkScaleRules is Scale/queued-1M with rules of the order taken
// away: urgency-off has no urgent threshold (jobs age, none becomes
// urgent), aging-off no aging at all, one-type a single type of no tier
// limit, cap or conflict group, one-type-aging-off both. The queue, its
// keys and priorities are the same; the difference from Scale/queued-1M is
// what those rules cost with a million jobs queued, which
// Floor/fair-queue-1M does not do.
func BenchmarkScaleRules(b *testing.B) {
	types := []string{"fg", "bg", "repack"}
	for _, v := range []struct {
		name   string
		change func(*Config)
		types  []string
	}{
		{"urgency-off", func(c *Config) { c.Aging.UrgentThreshold = 0 }, types},
		{"aging-off", func(c *Config) { c.Aging = AgingConfig{} }, types},
		{"one-type", func(c *Config) { c.Types, c.TierLimits = nil, nil }, []string{""}},
		{"one-type-aging-off", func(c *Config) { c.Types, c.TierLimits, c.Aging = nil, nil, AgingConfig{} }, []string{""}},
	} {
		b.Run(v.name, func(b *testing.B) {
			cfg := scaleConfig()
			v.change(&cfg)
			benchSteadyState(b, cfg, 1000000, 10000, v.types, scaleWait, false)
		})
	}
}

// scaleWait is how long a job waits in the Scale benchmarks: three grace
// periods of scaleConfig. A job aged that long has gained 20 points: the
// top 20 priorities reach the ceiling, and the top 10 the urgent threshold.
const scaleWait = 30 * time.Second

func scaleConfig() Config {
	return Config{
		MaxConcurrency: 64,
		TierLimits:     map[Tier]int{Background: 48},
		Types: map[string]TypeConfig{
			"fg":     {Tier: Foreground},
			"bg":     {Tier: Background, MaxConcurrency: 32},
			"repack": {Tier: Background, MaxConcurrency: 8, ConflictGroup: "git"},
		},
		Aging: AgingConfig{GracePeriod: 10 * time.Second, Interval: time.Second, Step: 1, MaxEffective: 90, UrgentThreshold: 110},
	}
}

// BenchmarkAllocationEvents measures work with an event hook and a
// configured key, so that every key that starts or stops having work
// recomputes the configured key's allocation.
//
// idle-10k: a RunSync on a key of its own while 10,000 keys that have
// finished their work are remembered; keys without work must cost
// nothing.
//
// busy-1k, busy-30k: a Submit on a key of its own, the end of the oldest
// running job and a dispatch, while that many keys have work queued; keys
// with work must cost nothing either (target: within 2x).
func BenchmarkAllocationEvents(b *testing.B) {
	cfg := func() Config {
		return Config{
			MaxConcurrency: 16,
			Keys:           map[string]KeyConfig{"configured": {Weight: 2}},
			OnEvent:        func(Event) {},
			EventBuffer:    1 << 16,
		}
	}
	b.Run("idle-10k", func(b *testing.B) {
		s := benchScheduler(b, cfg())
		ctx := context.Background()
		names := make([]string, 10000)
		for i := range names {
			names[i] = fmt.Sprintf("key-%d", i)
			if err := s.RunSync(ctx, Job{Key: names[i]}, noop); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := s.RunSync(ctx, Job{Key: names[i%len(names)]}, noop); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, n := range []int{1000, 30000} {
		b.Run("busy-"+count(n), func(b *testing.B) {
			s := benchScheduler(b, cfg())
			d := newBenchDriver(b, s)
			names := make([]string, 3*n) // a key comes round again long after its job ended
			for i := range names {
				names[i] = fmt.Sprintf("key-%d", i)
			}
			d.submit(Job{Key: "configured"}) // runs throughout: finishOldest skips it
			for i := 0; i < n; i++ {
				d.submit(Job{Key: names[i]})
			}
			d.dispatch()
			next := n
			op := func() {
				d.clk.Advance(time.Millisecond)
				d.submit(Job{Key: names[next%len(names)]})
				next++
				d.finishThenDispatch(1)
			}
			for i := 0; i < 2*n; i++ { // until every key has had work once
				op()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				op()
			}
		})
	}
}

// benchSteadyState fills the queue with n jobs over keys keys, then times
// operations that each submit one job, finish the oldest running one and
// dispatch, so the queue stays at n. The clock advances wait/n per job,
// in the fill too, so each job waits about wait.
//
// Before timing, it runs n operations untimed. A job's wait depends on its
// priority, so the queue of a scheduler that has run for a while holds
// more old, low-priority jobs than the fill leaves. Until the fill's jobs
// have turned over, the aged heaps keep growing; timed then, the figures
// included that growth and the collections it set off.
func benchSteadyState(b *testing.B, cfg Config, n, keys int, types []string, wait time.Duration, timed bool) {
	step := wait / time.Duration(n)
	s := benchScheduler(b, cfg)
	d := newBenchDriver(b, s)
	rng := rand.New(rand.NewPCG(1, 2))
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("key-%d", i)
	}
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("repo-%d", i)
	}
	gen := func() Job {
		j := Job{
			Type:     types[rng.IntN(len(types))],
			ID:       ids[rng.IntN(len(ids))],
			Key:      names[rng.IntN(keys)],
			Priority: 1 + rng.IntN(100),
		}
		if timed {
			switch rng.IntN(20) {
			case 0, 1:
				j.NotBefore = d.clk.Now().Add(wait / 2)
			case 2:
				j.StartBy = d.clk.Now().Add(100 * wait)
			}
		}
		return j
	}
	// Fill the slots, then the queue.
	for i := 0; i < cfg.MaxConcurrency; i++ {
		d.submit(gen())
	}
	d.dispatch()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	advance := func() {
		d.clk.Advance(step)
		if timed {
			d.due() // as the clock timer would: else the submission catches up, and starts jobs
		}
	}
	for i := 0; i < n; i++ {
		advance()
		d.submit(gen())
	}
	op := func() {
		advance()
		d.submit(gen())
		d.finishThenDispatch(1)
	}
	for i := 0; i < n; i++ {
		op()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perJob := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		op()
	}
	b.StopTimer()
	if q := s.Stats().Queued; q < n-n/10 {
		b.Fatalf("%d jobs queued, not about %d: jobs started outside the driver", q, n)
	}
	b.ReportMetric(perJob, "bytes/queued-job")
	runtime.KeepAlive(d)
}

// benchDriver drives a scheduler's dispatcher directly, without goroutines:
// jobs are submitted and finished under the lock as the public API would.
type benchDriver struct {
	s       *Scheduler
	clk     *clock.Fake
	started []*rt.Task // in start order, ended ones removed lazily
}

// newBenchDriver returns a driver for s. Its running jobs have no
// goroutine to end them, so it ends them itself before Close waits for
// them.
func newBenchDriver(b *testing.B, s *Scheduler) *benchDriver {
	d := &benchDriver{s: s, clk: s.rt.Clock().(benchClock).Fake}
	b.Cleanup(d.finishAll) // runs before the Close registered earlier
	return d
}

func (d *benchDriver) finishAll() {
	r := d.s.rt
	r.Lock()
	defer r.Unlock()
	for _, t := range d.started { // no dispatch: the queue stays for Close
		if t.Rec().Running() {
			r.FinishLocked(t, nil, r.NowLocked())
		}
	}
}

func (d *benchDriver) submit(desc Job) {
	r := d.s.rt
	r.Lock()
	t := rt.NewSubmitTask(context.Background(), noop) // a queued RunSync job holds 64 bytes more: its caller's context
	if err := r.EnqueueLocked(t, jobOf(&desc), r.NowLocked()); err != nil {
		panic(err)
	}
	if t.Rec().Running() { // started at once: nothing else waited
		r.StartedLocked(t)
		d.started = append(d.started, t)
	}
	r.Unlock()
}

// due applies what has fallen due in the engine (delayed jobs joining the
// queue), as the scheduler's clock timer would, but without dispatching:
// the driver starts jobs itself. A submission made with due work pending
// would catch up on it and dispatch, starting jobs on goroutines.
func (d *benchDriver) due() {
	r := d.s.rt
	r.Lock()
	defer r.Unlock()
	if len(r.EngineLocked().Due(r.NowLocked())) > 0 {
		panic("benchDriver: a job expired")
	}
}

// dispatch starts every admissible job and returns how many it started.
func (d *benchDriver) dispatch() int {
	r := d.s.rt
	r.Lock()
	defer r.Unlock()
	return d.dispatchLocked(r.NowLocked())
}

func (d *benchDriver) dispatchLocked(now int64) int {
	r := d.s.rt
	e := r.EngineLocked()
	if len(e.Due(now)) > 0 {
		panic("benchDriver: a job expired")
	}
	n := 0
	for {
		j := e.Next(now)
		if j == nil {
			return n
		}
		t := rt.TaskOf(j)
		r.StartedLocked(t)
		d.started = append(d.started, t)
		n++
	}
}

// finishOldest ends the longest-running job other than the first skip
// ones started (skip 1 keeps a long-running holder in place).
func (d *benchDriver) finishOldest(skip int) {
	r := d.s.rt
	r.Lock()
	defer r.Unlock()
	d.finishOldestLocked(skip, r.NowLocked())
}

// finishThenDispatch ends the longest-running job but the first skip, then
// starts every admissible job and returns how many it started, under one
// hold of the lock at one instant: as a worker that ends its job takes
// its next one.
func (d *benchDriver) finishThenDispatch(skip int) int {
	r := d.s.rt
	r.Lock()
	defer r.Unlock()
	now := r.NowLocked()
	d.finishOldestLocked(skip, now)
	return d.dispatchLocked(now)
}

func (d *benchDriver) finishOldestLocked(skip int, now int64) {
	for len(d.started) > skip {
		t := d.started[skip]
		d.started = append(d.started[:skip], d.started[skip+1:]...)
		if t.Rec().Running() {
			d.s.rt.FinishLocked(t, nil, now)
			return
		}
	}
}

func benchScheduler(b *testing.B, cfg Config) *Scheduler {
	b.Helper()
	if cfg.Clock == nil {
		cfg.Clock = benchClock{clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	}
	s, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// benchClock is a fake clock whose timers never fire: the benchDriver
// applies what falls due itself (benchDriver.dispatch), so that no job is
// started by the scheduler's timer, on a goroutine of its own.
type benchClock struct{ *clock.Fake }

func (benchClock) AfterFunc(time.Duration, func()) (stop func() bool) {
	return func() bool { return true }
}

func count(n int) string {
	switch {
	case n >= 1000000 && n%1000000 == 0:
		return fmt.Sprintf("%dM", n/1000000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// BenchmarkAdminPage measures what an admin page's refresh costs the
// scheduler's lock with 200,000 jobs queued over 10,000 keys, mixed types
// and priorities, aging on, half of them past their grace period, 64 of
// them running: the page's core call, Queue of its first 100 jobs, whole
// (queued-200k, with the lock's hold sampled as LockHold samples it,
// lock-ns/op: the page's own allocations and the collector they wake
// around it) and the part of it that holds the lock, alone
// (queued-200k-held: what Queue copies under the lock, in the lock's
// round trip; it builds the JobInfos after), beside one EstimateWait
// (estimate-wait), a call that takes the lock for O(types + tiers),
// Stats, which the page shows beside the queue (stats-200k), and
// Snapshot, which lists and sorts every job (snapshot-200k). The last
// three hold the lock from start to end, so their time is the time the
// lock is held. The goal: the lock held per page within 10x of one
// EstimateWait.
func BenchmarkAdminPage(b *testing.B) {
	const n = 200000
	s := benchScheduler(b, scaleConfig())
	d := newBenchDriver(b, s)
	r := rand.New(rand.NewPCG(32, 2))
	types := []string{"fg", "bg", "repack"}
	for range n {
		d.submit(Job{
			Type: types[r.IntN(len(types))], ID: fmt.Sprint(r.IntN(1000)),
			Key: fmt.Sprintf("k%d", r.IntN(10000)), Priority: 1 + r.IntN(100),
		})
		d.clk.Advance(100 * time.Microsecond) // 20 s in all: half of them past their grace period
	}
	d.dispatch()
	b.Run("queued-200k", func(b *testing.B) {
		b.ReportAllocs()
		var ls *lockSampler
		if runtime.GOMAXPROCS(0) >= 2 { // the sampler needs a core of its own
			ls = startLockSampler(b, s)
		}
		for i := 0; i < b.N; i++ {
			if p := s.Queue(0, 100); len(p.Jobs) != 100 {
				b.Fatalf("a page of %d jobs", len(p.Jobs))
			}
		}
		if ls != nil {
			ls.report(b, b.N, "op")
		}
	})
	b.Run("queued-200k-held", func(b *testing.B) {
		b.ReportAllocs()
		var c rt.PageCopy
		for i := 0; i < b.N; i++ {
			s.rt.Locked(func(_ *engine.Engine, now int64) { s.rt.QueueLocked(&c, 0, 100, now) })
		}
	})
	b.Run("estimate-wait", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := s.EstimateWait(Job{Type: "fg", Key: "k1"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stats-200k", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if s.Stats().Queued < n-100 {
				b.Fatal("short stats")
			}
		}
	})
	b.Run("snapshot-200k", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if len(s.Snapshot()) < n {
				b.Fatal("a short snapshot")
			}
		}
	})
}
