package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver, for every peer
)

const (
	totalJobs = 20000 // per run
	batchSize = 1000  // jobs per insert-many call (bulk)
	producers = 16    // enqueuing goroutines (producers16)
	workers   = 100   // concurrency of fairsched, river and goqite
	claimers  = 4     // the floor's claiming goroutines
	claimSize = 100   // rows the floor claims per transaction

	runTimeout = 3 * time.Minute // a run that takes longer has hung
)

// noopArgs are every job's arguments.
type noopArgs struct {
	N int `json:"n"`
}

// syncMode is SQLite's synchronous setting.
type syncMode string

const (
	syncNormal syncMode = "NORMAL"
	syncFull   syncMode = "FULL"
)

// dsn is the modernc.org/sqlite data source of every peer: WAL, a busy
// timeout of 5 s, the given synchronous setting, and BEGIN IMMEDIATE
// (as fairschedsqlite opens its own file).
func dsn(path string, sm syncMode) string {
	return fmt.Sprintf("file:%s?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(%s)&_txlock=immediate", path, sm)
}

// system is one job queue on a fresh file, its workers running.
type system struct {
	// enqueueMany enqueues jobs first .. first+n-1 in one insert-many call.
	enqueueMany func(ctx context.Context, first, n int) error
	// enqueue enqueues job i alone.
	enqueue func(ctx context.Context, i int) error
	// unfinished counts the jobs not yet recorded as completed (or
	// deleted) in the file: polled, cheaply, once every handler has run.
	unfinished func(ctx context.Context) (int, error)
	// verify checks, after the run, that the file holds every job as
	// completed (or none, for a queue that deletes them).
	verify func(ctx context.Context) error
	// stop stops the workers and closes the file.
	stop func() error
	// notes, if set, tells after the run what the system reported that
	// did not fail it (a redelivery, say), or "".
	notes func() string
}

// setupFunc opens a fresh file at path and starts the workers; each job's
// handler calls ran once.
type setupFunc func(ctx context.Context, path string, sm syncMode, ran func()) (*system, error)

var systems = []struct {
	name  string
	setup setupFunc
}{
	{"fairsched", setupFairsched},
	{"river", setupRiver(false)},
	{"river-cooldown1ms", setupRiver(true)},
	{"goqite", setupGoqite},
	{"floor", setupFloor},
}

// BenchmarkDurablePeers runs 20,000 no-op durable jobs end to end per
// b.N, per workload, synchronous setting and system: see the package
// documentation.
func BenchmarkDurablePeers(b *testing.B) {
	for _, workload := range []string{"bulk", "producers16"} {
		b.Run(workload, func(b *testing.B) {
			for _, sm := range []syncMode{syncNormal, syncFull} {
				b.Run(string(sm), func(b *testing.B) {
					for _, sys := range systems {
						b.Run(sys.name, func(b *testing.B) { runDurable(b, workload, sm, sys.setup) })
					}
				})
			}
		})
	}
}

// runDurable runs b.N complete runs of one workload on one system and
// reports jobs/s and cpu-µs/job over their timed parts.
func runDurable(b *testing.B, workload string, sm syncMode, setup setupFunc) {
	ctx := context.Background()
	b.ReportAllocs()
	var elapsed, cpu time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		path := filepath.Join(b.TempDir(), "jobs.db")
		var runs atomic.Int64
		done := make(chan struct{})
		ran := func() {
			if runs.Add(1) == totalJobs {
				close(done)
			}
		}
		sys, err := setup(ctx, path, sm, ran)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		b.StartTimer()
		start, cpu0 := time.Now(), cpuTime()
		err = runOnce(ctx, workload, sys, done)
		d, c := time.Since(start), cpuTime()-cpu0
		b.StopTimer()
		if err != nil {
			b.Errorf("after %v, %d of %d jobs run: %v", d.Round(time.Millisecond), runs.Load(), totalJobs, err)
		}
		if err == nil {
			if err := sys.verify(ctx); err != nil {
				b.Error(err)
			}
		}
		if err := sys.stop(); err != nil {
			b.Error(err)
		}
		if sys.notes != nil {
			if note := sys.notes(); note != "" {
				b.Log(note)
			}
		}
		if n := runs.Load(); n > totalJobs {
			b.Logf("%d handler runs for %d jobs: %d ran more than once", n, totalJobs, n-totalJobs)
		}
		if b.Failed() {
			b.FailNow()
		}
		elapsed += d
		cpu += c
		b.StartTimer()
	}
	jobs := float64(b.N * totalJobs)
	b.ReportMetric(jobs/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/jobs, "cpu-µs/job")
}

// runOnce enqueues the workload's jobs on sys and returns once every
// handler has run and the file shows no unfinished job.
func runOnce(ctx context.Context, workload string, sys *system, done <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	produced := make(chan error, 1)
	go func() { produced <- produce(ctx, workload, sys) }()
	select {
	case err := <-produced:
		if err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
		select {
		case <-done:
		case <-ctx.Done():
			return errors.New("the handlers did not all run: hung")
		}
	case <-done:
		if err := <-produced; err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
	case <-ctx.Done():
		return errors.New("the producers did not finish: hung")
	}
	for {
		n, err := sys.unfinished(ctx)
		if err != nil {
			return fmt.Errorf("counting unfinished jobs: %w", err)
		}
		if n == 0 {
			return nil
		}
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("every handler ran, but %d jobs are still not completed in the file", n)
		}
	}
}

// produce enqueues the workload's totalJobs jobs.
func produce(ctx context.Context, workload string, sys *system) error {
	switch workload {
	case "bulk":
		for first := 0; first < totalJobs; first += batchSize {
			if err := sys.enqueueMany(ctx, first, batchSize); err != nil {
				return err
			}
		}
		return nil
	case "producers16":
		var wg sync.WaitGroup
		errs := make([]error, producers)
		share := totalJobs / producers
		for p := range producers {
			wg.Go(func() {
				for i := p * share; i < (p+1)*share; i++ {
					if err := sys.enqueue(ctx, i); err != nil {
						errs[p] = fmt.Errorf("producer %d, job %d: %w", p, i, err)
						return
					}
				}
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	return fmt.Errorf("unknown workload %q", workload)
}

// count runs a query that returns one integer.
func count(ctx context.Context, db *sql.DB, query string) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, query).Scan(&n)
	return n, err
}

// expect fails unless each query returns its number.
func expect(ctx context.Context, db *sql.DB, want map[string]int) error {
	var errs []error
	for q, w := range want {
		n, err := count(ctx, db, q)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", q, err))
		} else if n != w {
			errs = append(errs, fmt.Errorf("%s: %d, want %d", q, n, w))
		}
	}
	return errors.Join(errs...)
}

// openDB opens a peer's file with one connection, as riversqlite and
// goqite ask, and the floor uses too: SQLite has one writer at a time,
// and the pool then queues the writers in Go instead of SQLite's busy
// handler sleeping them.
func openDB(path string, sm syncMode) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn(path, sm))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	return db, nil
}
