package fairschedsqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/internal/store"
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

// BenchmarkReopen measures a start on a file with a million queued jobs
// over 10,000 keys: one op opens the file and makes a Scheduler on it,
// which queues every job again. It reports the heap held per queued job
// then, and, measured in the same run, that of the same million jobs
// given to Submit as closures (each holding its argument), the in-memory
// way: durable jobs must cost no more.
func BenchmarkReopen(b *testing.B) {
	const n, keys = 1_000_000, 10_000
	path := millionJobsFile(b, n, keys)
	b.ReportAllocs()
	b.ResetTimer()
	var perJob float64
	for range b.N {
		before := heapInUse()
		st, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		var hs fairsched.Handlers
		hold := make(chan struct{})
		fairsched.AddHandler(&hs, "noop", func(ctx context.Context, _ noop) error { <-hold; return nil })
		s, err := fairsched.New(fairsched.Config{MaxConcurrency: 1, Store: st, Handlers: &hs})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		// Each op completes the job it starts.
		millionCompleted++
		if q := s.Stats().Queued; q != n-millionCompleted {
			b.Fatalf("%d jobs queued again, want %d", q, n-millionCompleted)
		}
		perJob = float64(heapInUse()-before) / n
		close(hold)
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(perJob, "bytes/queued-job")
	b.ReportMetric(inMemoryBytesPerJob(b, n, keys), "in-memory-bytes/queued-job")
}

// millionJobsFile returns a file of n queued jobs over keys keys, made
// once per process.
func millionJobsFile(b *testing.B, n, keys int) string {
	millionOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fairschedsqlite-bench")
		if err != nil {
			panic(err)
		}
		benchDirs = append(benchDirs, dir)
		millionPath = filepath.Join(dir, "jobs.db")
		st, err := Open(millionPath)
		if err != nil {
			panic(err)
		}
		batch := make([]*store.Job, 0, 10_000)
		for i := range n {
			k, p, id := benchJob(i, keys)
			batch = append(batch, &store.Job{Type: "noop", Key: k, Ref: id, Priority: p, Submitted: time.Now().UnixMicro(),
				State: store.Queued, Args: []byte(`{"n":1}`)})
			if len(batch) == cap(batch) {
				if err := st.Insert(context.Background(), nil, batch...); err != nil {
					panic(err)
				}
				batch = batch[:0]
			}
		}
		if err := st.Close(); err != nil {
			panic(err)
		}
	})
	return millionPath
}

var (
	millionOnce      sync.Once
	millionPath      string
	millionCompleted int      // jobs of the file completed by BenchmarkReopen's ops
	benchDirs        []string // removed by TestMain
)

// benchJob returns the key, priority and ID of the i-th job of a bench
// file with keys keys.
func benchJob(i, keys int) (key string, priority int, id string) {
	return benchNames[i%keys], 1 + i%100, benchIDs[i%len(benchIDs)]
}

var benchNames, benchIDs = func() ([]string, []string) {
	names, ids := make([]string, 10_000), make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprint("key-", i)
	}
	for i := range ids {
		ids[i] = fmt.Sprint("repo-", i)
	}
	return names, ids
}()

// inMemoryBytesPerJob returns the heap held per queued job by n Submit
// jobs alike those of millionJobsFile, each a closure holding its
// argument.
func inMemoryBytesPerJob(b *testing.B, n, keys int) float64 {
	before := heapInUse()
	s, err := fairsched.New(fairsched.Config{MaxConcurrency: 1})
	if err != nil {
		b.Fatal(err)
	}
	hold := make(chan struct{})
	ctx := context.Background()
	for i := range n {
		k, p, id := benchJob(i, keys)
		args := &noop{N: i}
		if _, err := s.Submit(ctx, fairsched.Job{Key: k, ID: id, Priority: p}, func(context.Context) error {
			<-hold
			_ = args.N
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	perJob := float64(heapInUse()-before) / float64(n)
	close(hold)
	s.Close()
	return perJob
}

// heapInUse returns the bytes the heap holds after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
