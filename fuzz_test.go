package fairsched

import (
	"math/rand/v2"
	"testing"
)

// Fuzz targets. The fuzzer's bytes are decoded into a workload by the
// generator of the differential test (diffGenerate over a diffByteSource:
// one byte per choice, the simplest choice once the input runs out), and
// the workload is replayed in virtual time by the same driver. Plain
// `go test` runs the seed corpus below; `go test -fuzz=FuzzScheduler`
// explores further.

// fuzzMaxJobs bounds the jobs of a fuzz workload: small inputs, many runs.
const fuzzMaxJobs = 40

// fuzzWorkload decodes data. Its first choice says whether IdleTTL is a
// few units (keys and estimates forgotten during the run) or an hour.
func fuzzWorkload(data []byte) *diffWorkload {
	src := &diffByteSource{b: data}
	forget := src.intn(2) == 1
	return diffGenerate(src, fuzzMaxJobs, forget)
}

// fuzzEngineWorkload decodes data as fuzzWorkload does, then replicas
// from the bytes left (diffAddReplicas): the engine alone runs them.
func fuzzEngineWorkload(data []byte) *diffWorkload {
	src := &diffByteSource{b: data}
	forget := src.intn(2) == 1
	w := diffGenerate(src, fuzzMaxJobs, forget)
	diffAddReplicas(src, w)
	return w
}

// fuzzRecorder is a diffSource that draws from a PRNG and records each
// choice as the byte a diffByteSource decodes back to the same choice, so
// that a random workload becomes a fuzz input.
type fuzzRecorder struct {
	r   *rand.Rand
	out []byte
}

func (s *fuzzRecorder) intn(n int) int {
	if n <= 1 {
		return 0
	}
	v := s.r.IntN(n)
	if n > 256 {
		s.out = append(s.out, byte(v>>8))
	}
	s.out = append(s.out, byte(v))
	return v
}

// fuzzSeeds are the seed corpus: the empty input (one plain job) and the
// encodings of workloads drawn from a fixed PRNG, every other one with a
// short IdleTTL.
func fuzzSeeds() [][]byte {
	seeds := [][]byte{{}}
	for seed := range uint64(12) {
		rec := &fuzzRecorder{r: rand.New(rand.NewPCG(seed, 0xf022))}
		forget := seed%2 == 1
		rec.out = append(rec.out, byte(seed%2))
		diffGenerate(rec, fuzzMaxJobs, forget)
		seeds = append(seeds, rec.out)
	}
	return seeds
}

// fuzzEngineSeeds are fuzzSeeds and the encodings of as many workloads
// with replicas, from another PRNG stream.
func fuzzEngineSeeds() [][]byte {
	seeds := fuzzSeeds()
	for seed := range uint64(12) {
		rec := &fuzzRecorder{r: rand.New(rand.NewPCG(seed, 0x9e9))}
		forget := seed%2 == 1
		rec.out = append(rec.out, byte(seed%2))
		w := diffGenerate(rec, fuzzMaxJobs, forget)
		diffAddReplicas(rec, w)
		seeds = append(seeds, rec.out)
	}
	return seeds
}

// FuzzScheduler replays the decoded workload on the scheduler alone and
// checks, after every event: the scheduler's own invariants
// (verifyLocked: no hard limit exceeded, no conflict overlapped, every
// count and index consistent), the hard limits again from the driver's
// record of what runs, and Stats against the driver's counts (Submitted
// == Completed+Failed+Cancelled+Active+Queued, each of them right). At
// the end every accepted job has ended, and each was reported finished
// exactly once.
func FuzzScheduler(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		w := fuzzWorkload(data)
		r := newDiffRunner(w, diffOptions{stats: true, hook: true})
		if err := r.run(); err != nil {
			t.Fatal(r.report(err))
		}
	})
}

// FuzzDifferential replays the decoded workload on the scheduler and the
// reference model, which must start the same jobs in the same order at the
// same times, besides every check of FuzzScheduler.
func FuzzDifferential(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		w := fuzzWorkload(data)
		r := newDiffRunner(w, diffOptions{ref: true, stats: true, hook: true})
		if err := r.run(); err != nil {
			t.Fatal(r.report(err))
		}
	})
}

// FuzzEngine is FuzzDifferential on the engine alone, called directly as
// the Scheduler calls it: with no goroutine to wait for, the fuzzer tries
// far more workloads in the time. Its workloads also run replicas
// (fuzzEngineWorkload), which the Scheduler does not have yet.
func FuzzEngine(f *testing.F) {
	for _, s := range fuzzEngineSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		w := fuzzEngineWorkload(data)
		r := newDiffRunner(w, diffOptions{engine: true, ref: true, stats: true, hook: true})
		if err := r.run(); err != nil {
			t.Fatal(r.report(err))
		}
	})
}

// TestFuzzSeedsDecode checks that the seed corpus decodes to the workloads
// it was recorded from, so that the fuzz targets start from varied,
// meaningful inputs rather than whatever the encoding drifted to.
func TestFuzzSeedsDecode(t *testing.T) {
	for i, data := range fuzzSeeds()[1:] {
		rec := &fuzzRecorder{r: rand.New(rand.NewPCG(uint64(i), 0xf022))}
		want := diffGenerate(rec, fuzzMaxJobs, i%2 == 1).goString()
		if got := fuzzWorkload(data).goString(); got != want {
			t.Errorf("seed %d decodes to\n%s\nwant\n%s", i, got, want)
		}
	}
}

// TestFuzzEngineSeedsHaveReplicas checks that FuzzEngine's own seeds
// decode to workloads with replicas, most of them.
func TestFuzzEngineSeedsHaveReplicas(t *testing.T) {
	n := 0
	for _, data := range fuzzEngineSeeds()[len(fuzzSeeds()):] {
		if fuzzEngineWorkload(data).hasReplicas() {
			n++
		}
	}
	if n < 6 {
		t.Errorf("%d of FuzzEngine's 12 seeds of its own have replicas, want 6 at least", n)
	}
}
