package benchpeers

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/alitto/pond/v2"
	"github.com/fairsched/fairsched"
)

// burst is the size of a burst, and workers how many run at once.
const burst, workers = 10000, 16

// BenchmarkBurst submits 10,000 no-op jobs through 16 workers and waits
// for them all, per burst, and reports the time per job. The names stay
// as they are, so that runs compare:
//
//   - fairsched: Submit, one job at a time (its Submit/burst-10k
//     benchmark);
//   - fairsched-many: SubmitMany, the burst as one batch (its
//     Submit/many-10k);
//   - pond: pond v2's Pool.Go, fire and forget: nothing to wait on;
//   - pond-submit: pond v2's Pool.Submit, whose Task can be waited on, as
//     a fairsched Handle can: the like-for-like peer.
func BenchmarkBurst(b *testing.B) {
	b.Run("fairsched", func(b *testing.B) {
		s := newScheduler(b)
		var c counter
		fn := func(context.Context) error { c.done(); return nil }
		runBursts(b, &c, func() error {
			_, err := s.Submit(context.Background(), fairsched.Job{}, fn)
			return err
		})
	})
	b.Run("fairsched-many", func(b *testing.B) {
		s := newScheduler(b)
		var c counter
		jobs := make([]fairsched.SubmitParams, burst)
		for k := range jobs {
			jobs[k].Fn = func(context.Context) error { c.done(); return nil }
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			c.reset()
			if _, err := s.SubmitMany(context.Background(), jobs); err != nil {
				b.Fatal(err)
			}
			c.wait()
		}
		reportPerJob(b)
	})
	b.Run("pond", func(b *testing.B) {
		pool := pond.NewPool(workers)
		defer pool.StopAndWait()
		var c counter
		fn := c.done // one function value for every job, as fairsched's
		runBursts(b, &c, func() error { return pool.Go(fn) })
	})
	b.Run("pond-submit", func(b *testing.B) {
		pool := pond.NewPool(workers)
		defer pool.StopAndWait()
		var c counter
		fn := c.done
		runBursts(b, &c, func() error {
			_ = pool.Submit(fn) // its Task, to wait on, as a Handle
			return nil
		})
	})
}

// newScheduler returns a Scheduler with workers slots, closed at the end
// of the benchmark.
func newScheduler(b *testing.B) *fairsched.Scheduler {
	s, err := fairsched.New(fairsched.Config{MaxConcurrency: workers})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// counter counts a burst's jobs down to its end.
type counter struct {
	left atomic.Int64
	end  chan struct{} // set before each burst, closed by its last job
}

func (c *counter) reset() {
	c.left.Store(burst)
	c.end = make(chan struct{})
}

func (c *counter) done() {
	if c.left.Add(-1) == 0 {
		close(c.end)
	}
}

func (c *counter) wait() { <-c.end }

// runBursts submits b.N bursts, one job at a time, with submit, and waits
// for each burst to end, counted by c.
func runBursts(b *testing.B, c *counter, submit func() error) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.reset()
		for k := 0; k < burst; k++ {
			if err := submit(); err != nil {
				b.Fatal(err)
			}
		}
		c.wait()
	}
	reportPerJob(b)
}

func reportPerJob(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*burst), "ns/job")
}
