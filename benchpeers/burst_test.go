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
// for them all, per burst, and reports the time per job: fairsched's
// Submit (its Submit/burst-10k benchmark) beside pond v2's worker pool.
func BenchmarkBurst(b *testing.B) {
	b.Run("fairsched", func(b *testing.B) {
		s, err := fairsched.New(fairsched.Config{MaxConcurrency: workers})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
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
				if _, err := s.Submit(context.Background(), fairsched.Job{}, fn); err != nil {
					b.Fatal(err)
				}
			}
			<-done
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*burst), "ns/job")
	})
	b.Run("pond", func(b *testing.B) {
		pool := pond.NewPool(workers)
		defer pool.StopAndWait()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			var left atomic.Int64
			left.Store(burst)
			done := make(chan struct{})
			fn := func() {
				if left.Add(-1) == 0 {
					close(done)
				}
			}
			for k := 0; k < burst; k++ {
				if err := pool.Go(fn); err != nil {
					b.Fatal(err)
				}
			}
			<-done
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*burst), "ns/job")
	})
}
