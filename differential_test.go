package fairsched

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// diffShrinks counts the failures shrunk so far. Shrinking replays a
// workload hundreds of times, so only the first few failures of a test run
// are shrunk; the rest are reported as they are.
var diffShrinks atomic.Int32

// diffCheck runs w with opts and, if it fails, shrinks it and fails the
// test with a report of the smallest failing workload found. It returns
// the run's runner.
func diffCheck(t *testing.T, what string, w *diffWorkload, opts diffOptions) *diffRunner {
	t.Helper()
	r := newDiffRunner(w, opts)
	err := r.run()
	if err == nil {
		return r
	}
	if errors.Is(err, errDiffInvalid) {
		t.Fatalf("%s: the generator made an invalid workload: %v\n%s", what, err, w.goString())
	}
	if diffShrinks.Add(1) > 3 {
		t.Fatalf("%s fails (not shrunk: enough failures were).\n%s", what, r.report(err))
	}
	small := diffShrink(w, opts, time.Now().Add(10*time.Second))
	sr := newDiffRunner(small, opts)
	serr := sr.run()
	t.Fatalf("%s fails.\n\n=== shrunk ===\n%s\n\n=== original ===\n%s", what, sr.report(serr), r.report(err))
	return nil
}

// diffSeeds is how many random workloads TestDifferential runs: 400 in
// the everyday run, 2,000 in the long run CI makes (FAIRSCHED_LONG set,
// see longRun), 100 with -short.
func diffSeeds() int {
	switch {
	case longRun:
		return 2000
	case testing.Short():
		return 100
	}
	return 400
}

// TestDifferential replays random workloads on the scheduler and on the
// reference model and requires identical start sequences, besides every
// other check of diffRunner (a quarter of the seeds also check Stats, an
// eighth count finish events). IdleTTL is longer than the workloads here;
// TestDifferentialIdleTTL covers forgetting. Each seed is a subtest, so a
// failure can be replayed alone with -run 'TestDifferential/seed=N$'.
func TestDifferential(t *testing.T) {
	for seed := range uint64(diffSeeds()) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			w := diffGenerate(diffRandSource{rand.New(rand.NewPCG(seed, 0x5eed))}, 60, false)
			diffCheck(t, fmt.Sprintf("seed %d", seed), w, diffOptions{ref: true, stats: seed%4 == 0, hook: seed%8 == 1})
		})
	}
}

// TestDifferentialEngine is TestDifferential on the engine alone, driven
// directly with no goroutine, so it runs many more workloads in the time,
// each checked against the reference model after every event.
// The seeds are split over two parallel subtests, one per core here. One
// in twenty of the workloads at least must let jobs use units held for
// another (backfill), and as many let a job do so past one that may not
// (lookahead), so that the rules are tried and not only stated. Two
// thirds of the workloads run replicas (diffAddReplicas), and one in ten
// at least must have a job the order passed over for lack of a free
// replica, and as many a job that ran on another than the first.
func TestDifferentialEngine(t *testing.T) {
	const parts = 2
	seeds := 2 * diffSeeds()
	var backfilled, passed, replicaHeld, packed atomic.Int64
	t.Run("parts", func(t *testing.T) {
		for part := range uint64(parts) {
			t.Run(fmt.Sprintf("part=%d", part), func(t *testing.T) {
				t.Parallel()
				for seed := part; seed < uint64(seeds); seed += parts {
					src := diffRandSource{rand.New(rand.NewPCG(seed, 0xe9))}
					w := diffGenerate(src, 60, seed%4 == 3)
					diffAddReplicas(src, w)
					r := diffCheck(t, fmt.Sprintf("seed %d", seed), w, diffOptions{engine: true, ref: true, stats: true, hook: true})
					if r.ref.Backfills() > 0 {
						backfilled.Add(1)
					}
					if r.ref.ReplicaHeld() > 0 {
						replicaHeld.Add(1)
					}
					if slices.ContainsFunc(r.real, func(s diffStart) bool { return s.Replica != "" && s.Replica != "p0" }) {
						packed.Add(1)
					}
					if r.ref.BackfillsPast() > 0 {
						passed.Add(1)
					}
				}
			})
		}
	})
	n, past := int(backfilled.Load()), int(passed.Load())
	t.Logf("%d of %d workloads backfilled, %d past a job that may not", n, seeds, past)
	held, other := int(replicaHeld.Load()), int(packed.Load())
	t.Logf("%d of %d workloads passed over a job for lack of a free replica, %d ran one past the first replica", held, seeds, other)
	if held < seeds/10 || other < seeds/10 {
		t.Errorf("%d and %d of %d workloads held a job for a replica and ran one past the first, want one in ten at least", held, other, seeds)
	}
	if n < seeds/20 {
		t.Errorf("%d of %d workloads backfilled, want one in twenty at least", n, seeds)
	}
	if past < seeds/20 {
		t.Errorf("%d of %d workloads backfilled past a job that may not, want one in twenty at least", past, seeds)
	}
}

// TestDifferentialGeneratesUrgentAtOnce checks that the generator makes
// the workloads that tell a job urgent from its submission from one urgent
// only once its grace period ends: among TestDifferentialEngine's seeds,
// many have a grace period, an urgent threshold and a job based at or
// above it.
func TestDifferentialGeneratesUrgentAtOnce(t *testing.T) {
	n, seeds := 0, uint64(2*diffSeeds())
	for seed := range seeds {
		w := diffGenerate(diffRandSource{rand.New(rand.NewPCG(seed, 0xe9))}, 60, seed%4 == 3)
		a := w.Cfg.Aging
		if a.GracePeriod == 0 || a.UrgentThreshold == 0 {
			continue
		}
		if slices.ContainsFunc(w.Jobs, func(j diffJob) bool {
			base := j.Job.Priority
			if base == 0 {
				base = cmp.Or(w.Cfg.Types[j.Job.Type].DefaultPriority, PriorityNormal)
			}
			return clampPriority(base) >= a.UrgentThreshold
		}) {
			n++
		}
	}
	t.Logf("%d of %d workloads", n, seeds)
	assert.Greater(t, n, int(seeds/20))
}

// TestDifferentialOrder is TestDifferentialEngine, on its first half of
// workloads (replicas included), comparing after every event the queue as the engine lists it
// (QueueOrder) with the order the reference model ranks it in: its
// urgent, reserved and fair steps, every limit ignored.
func TestDifferentialOrder(t *testing.T) {
	for seed := range uint64(diffSeeds()) {
		src := diffRandSource{rand.New(rand.NewPCG(seed, 0xe9))}
		w := diffGenerate(src, 60, seed%4 == 3)
		diffAddReplicas(src, w)
		diffCheck(t, fmt.Sprintf("seed %d", seed), w, diffOptions{engine: true, ref: true, order: true})
	}
}

// TestDifferentialQueue is TestDifferentialOrder through Scheduler.Queue,
// on TestDifferential's first eighth of workloads.
func TestDifferentialQueue(t *testing.T) {
	for seed := range uint64(diffSeeds() / 8) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			w := diffGenerate(diffRandSource{rand.New(rand.NewPCG(seed, 0x5eed))}, 60, false)
			diffCheck(t, fmt.Sprintf("seed %d", seed), w, diffOptions{ref: true, order: true})
		})
	}
}

// TestDifferentialIdleTTL is TestDifferential with an IdleTTL of a few
// units, so that idle keys and unused cost estimates are forgotten and
// come back brand-new during the run.
func TestDifferentialIdleTTL(t *testing.T) {
	for seed := range uint64(diffSeeds() / 4) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			w := diffGenerate(diffRandSource{rand.New(rand.NewPCG(seed, 0x77c))}, 60, true)
			diffCheck(t, fmt.Sprintf("seed %d", seed), w, diffOptions{ref: true, stats: seed%4 == 0})
		})
	}
}

// TestDifferentialRegressions replays the regression workloads.
func TestDifferentialRegressions(t *testing.T) {
	for _, name := range slices.Sorted(maps.Keys(diffRegressions)) {
		t.Run(name, func(t *testing.T) {
			reg := diffRegressions[name]
			r := newDiffRunner(reg.w, reg.opts)
			if err := r.run(); err != nil {
				t.Fatal(r.report(err))
			}
		})
	}
}
