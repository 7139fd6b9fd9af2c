package fairschedsqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fairsched/fairsched"
)

// BenchmarkDurable measures durable jobs end to end, enqueue → run →
// complete, of no-op handlers, on a fresh file: 16 goroutines each
// enqueueing one job per call, and a bulk enqueue of 100,000 jobs in
// batches of 1,000, at synchronous NORMAL and FULL. One op is the whole
// run; it reports jobs/s, CPU per job (user + system, the process's) and
// commits per job.
func BenchmarkDurable(b *testing.B) {
	for _, syn := range []Synchronous{Normal, Full} {
		b.Run("producers-16/"+syn.String(), func(b *testing.B) { benchDurable(b, syn, 20_000, 16, 1) })
		b.Run("bulk-100k/"+syn.String(), func(b *testing.B) { benchDurable(b, syn, 100_000, 1, 1000) })
	}
}

type noop struct {
	N int `json:"n"`
}

// benchDurable runs jobs no-op jobs, enqueued by producers goroutines in
// batches of batch, b.N times.
func benchDurable(b *testing.B, syn Synchronous, jobs, producers, batch int) {
	b.ReportAllocs()
	var elapsed time.Duration
	var cpu time.Duration
	var commits int64
	for range b.N {
		b.StopTimer()
		st, err := Open(filepath.Join(b.TempDir(), "jobs.db"), Options{Synchronous: syn})
		if err != nil {
			b.Fatal(err)
		}
		var done atomic.Int64
		all := make(chan struct{})
		var hs fairsched.Handlers
		fairsched.AddHandler(&hs, "noop", func(context.Context, noop) error {
			if done.Add(1) == int64(jobs) {
				close(all)
			}
			return nil
		})
		s, err := fairsched.New(fairsched.Config{MaxConcurrency: 100, Store: st, Handlers: &hs})
		if err != nil {
			b.Fatal(err)
		}
		c0, u0 := st.w.commits.Load(), cpuTime()
		t0 := time.Now()
		b.StartTimer()
		var wg sync.WaitGroup
		for p := range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				params := make([]fairsched.EnqueueParams, 0, batch)
				for i := p; i < jobs; i += producers {
					params = append(params, fairsched.EnqueueParams{Job: fairsched.Job{Type: "noop"}, Args: noop{N: i}})
					if len(params) == batch || i+producers >= jobs {
						if _, err := s.EnqueueMany(ctx, params); err != nil {
							panic(err)
						}
						params = params[:0]
					}
				}
			}()
		}
		wg.Wait()
		<-all
		if err := s.Shutdown(context.Background()); err != nil { // the last ends committed
			b.Fatal(err)
		}
		b.StopTimer()
		elapsed += time.Since(t0)
		cpu += cpuTime() - u0
		commits += st.w.commits.Load() - c0
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
	}
	n := float64(b.N * jobs)
	b.ReportMetric(n/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/job")
	b.ReportMetric(float64(commits)/n, "commits/job")
	b.ReportMetric(0, "ns/op") // the whole run is one op: jobs/s says it
}

// cpuTime returns the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(fmt.Sprint("getrusage: ", err))
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
