package benchpg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedpg"
)

// BenchmarkBulk runs, per b.N, 20,000 no-op jobs end to end, inserted in
// batches of 1,000 by one producer while 1, 2 or 4 stand-ins for
// processes run them: see the package documentation.
func BenchmarkBulk(b *testing.B) { benchThroughput(b, 1) }

// BenchmarkProducers is BenchmarkBulk with 16 producers, each inserting
// one job per call, as a service's request handlers do: see the package
// documentation.
func BenchmarkProducers(b *testing.B) { benchThroughput(b, producers) }

// producers is how many goroutines insert in BenchmarkProducers.
const producers = 16

// benchThroughput runs every system with 1, 2 and 4 stand-ins for
// processes, the jobs inserted by one producer in batches (n 1) or by n
// producers one job per call.
func benchThroughput(b *testing.B, n int) {
	for _, procs := range []int{1, 2, 4} {
		b.Run("procs-"+strconv.Itoa(procs), func(b *testing.B) {
			b.Run("floor", func(b *testing.B) { runBulk(b, procs, n, floorBulk) })
			b.Run("fairsched", func(b *testing.B) { runBulk(b, procs, n, fairschedBulk) })
			b.Run("river/cooldown-100ms", func(b *testing.B) { runBulk(b, procs, n, riverBulk(false)) })
			b.Run("river/cooldown-1ms", func(b *testing.B) { runBulk(b, procs, n, riverBulk(true)) })
		})
	}
}

// bulkSystem readies a run on a fresh schema: procs stand-ins for
// processes, started, each job's run calling ran once. It returns the
// producer's insert of jobs first .. first+n-1 in one call (safe for
// concurrent use: producers call it at once), and finish,
// which returns once the database shows every job done (completed or
// deleted): called once ran has been called for every job.
type bulkSystem func(b *testing.B, schema string, procs int, ran func()) (insert func(ctx context.Context, first, n int) error, finish func(ctx context.Context) error, stop func())

// runBulk runs b.N runs of totalJobs jobs on a bulkSystem, inserted by
// one producer in batches (producers 1) or by producers goroutines one
// job per call, and reports jobs/s over their timed parts: from the
// first insert to the database showing every job done. Setup and
// teardown are not timed.
func runBulk(b *testing.B, procs, producers int, sys bulkSystem) {
	total := totalJobs
	if testing.Short() {
		total = 2 * batchSize
	}
	ctx := context.Background()
	var elapsed time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		schema := newSchema(b)
		var runs atomic.Int64
		done := make(chan struct{})
		ran := func() {
			if runs.Add(1) == int64(total) {
				close(done)
			}
		}
		insert, finish, stop := sys(b, schema, procs, ran)
		runtime.GC()
		b.StartTimer()
		start := time.Now()
		err := bulkOnce(ctx, total, producers, insert, finish, done)
		d := time.Since(start)
		b.StopTimer()
		stop()
		if err != nil {
			b.Fatalf("after %v, %d of %d jobs run: %v", d.Round(time.Millisecond), runs.Load(), total, err)
		}
		if n := runs.Load(); n != int64(total) {
			b.Fatalf("%d runs for %d jobs", n, total)
		}
		elapsed += d
		b.StartTimer()
	}
	b.ReportMetric(float64(b.N*total)/elapsed.Seconds(), "jobs/s")
}

// bulkOnce inserts total jobs while they run, in batches by one producer
// or one per call by producers, and returns once every one has run and
// the database shows it done.
func bulkOnce(ctx context.Context, total, producers int, insert func(ctx context.Context, first, n int) error, finish func(ctx context.Context) error, done <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	if err := produce(ctx, total, producers, insert); err != nil {
		return err
	}
	select {
	case <-done:
	case <-ctx.Done():
		return errors.New("the jobs did not all run: hung")
	}
	return finish(ctx)
}

// floorBulk is the least a queue on PostgreSQL does: one table; the
// producer inserts 1,000 rows per statement; each stand-in for a process
// is a goroutine with a connection of its own that, in one transaction,
// claims the 100 oldest rows not locked by another (SELECT ... FOR UPDATE
// SKIP LOCKED), runs them (decodes their arguments), and deletes them,
// polling every millisecond when it finds none.
func floorBulk(b *testing.B, schema string, procs int, ran func()) (func(context.Context, int, int) error, func(context.Context) error, func()) {
	ctx := context.Background()
	producer := newPool(b, schema) // the producers' connections
	if _, err := producer.Exec(ctx, `CREATE TABLE floor_jobs (id bigserial PRIMARY KEY, args jsonb NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make([]error, procs)
	for p := range procs {
		conn := connect(b, schema)
		wg.Go(func() {
			for cctx.Err() == nil {
				n, err := floorClaim(cctx, conn, ran)
				if err != nil {
					if cctx.Err() == nil {
						errs[p] = err
					}
					return
				}
				if n == 0 {
					select {
					case <-time.After(time.Millisecond):
					case <-cctx.Done():
					}
				}
			}
		})
	}
	insert := func(ctx context.Context, first, n int) error {
		args := make([]string, n)
		for k := range args {
			a, _ := json.Marshal(noopArgs{N: first + k})
			args[k] = string(a)
		}
		_, err := producer.Exec(ctx, `INSERT INTO floor_jobs (args) SELECT unnest($1::jsonb[])`, args)
		return err
	}
	finish := func(context.Context) error { return nil } // ran is called once the delete committed
	stop := func() {
		cancel()
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			b.Error(err)
		}
	}
	return insert, finish, stop
}

// floorClaim claims up to 100 rows, runs and deletes them in one
// transaction, and returns how many.
func floorClaim(ctx context.Context, conn *pgx.Conn, ran func()) (int, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, `SELECT id, args FROM floor_jobs ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`, claimSize)
	if err != nil {
		return 0, err
	}
	ids := make([]int64, 0, claimSize)
	var raw []byte
	var id int64
	var args noopArgs
	for rows.Next() {
		if err := rows.Scan(&id, &raw); err != nil {
			rows.Close()
			return 0, err
		}
		if err := json.Unmarshal(raw, &args); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, tx.Commit(ctx)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM floor_jobs WHERE id = ANY($1)`, ids); err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	for range ids {
		ran()
	}
	return len(ids), nil
}

// riverBulk: procs river Clients on the schema, in this process, each on
// a pool of its own (a process of its own), as startRiver starts them;
// the producer inserts through the first one (InsertMany). The run ends
// when the table shows every job completed: river records completions
// after the job's Work returns, in batches.
func riverBulk(cooldown1ms bool) bulkSystem {
	return func(b *testing.B, schema string, procs int, ran func()) (func(context.Context, int, int) error, func(context.Context) error, func()) {
		migrateRiver(b, schema)
		clients := make([]*river.Client[pgx.Tx], procs)
		stops := make([]func(), procs)
		for p := range procs {
			clients[p], stops[p] = startRiver(b, schema, cooldown1ms, ran)
		}
		check := newPool(b, schema)
		insert := func(ctx context.Context, first, n int) error {
			batch := make([]river.InsertManyParams, n)
			for k := range batch {
				batch[k] = river.InsertManyParams{Args: noopArgs{N: first + k}}
			}
			_, err := clients[0].InsertMany(ctx, batch)
			return err
		}
		finish := func(ctx context.Context) error {
			return awaitCompleted(ctx, check, `SELECT count(*) FROM river_job WHERE state <> 'completed'`)
		}
		stop := func() {
			for _, s := range stops {
				s()
			}
			check.Close()
		}
		return insert, finish, stop
	}
}

// bulkCapacity is each fairsched replica's capacity in BenchmarkBulk:
// as many jobs at once as a river Client's MaxWorkers.
const bulkCapacity = 100

// fairschedBulk is fairsched's durable jobs across replicas: procs
// replicas (Config.Replica, Capacity 100, MaxConcurrency 100 per replica
// for the cluster), each on a Store of its own on a pool of its own, all
// with a handler of the no-op type, which decodes its arguments; the
// producer calls EnqueueMany on the first, and the leader runs the jobs
// on the replicas. The run ends when the table shows every job
// completed (polled every millisecond once all have run).
func fairschedBulk(b *testing.B, schema string, procs int, ran func()) (func(context.Context, int, int) error, func(context.Context) error, func()) {
	ctx := context.Background()
	if err := fairschedpg.Migrate(ctx, newPool(b, schema)); err != nil {
		b.Fatal(err)
	}
	var ss []*fairsched.Scheduler
	var stores []*fairschedpg.Store
	for p := range procs {
		st, err := fairschedpg.OpenReplicaPool(ctx, newPool(b, schema))
		if err != nil {
			b.Fatal(err)
		}
		var h fairsched.Handlers
		fairsched.AddHandler(&h, "noop", func(context.Context, noopArgs) error { ran(); return nil })
		s, err := fairsched.New(fairsched.Config{
			MaxConcurrency: bulkCapacity * procs,
			Store:          st,
			Handlers:       &h,
			Replica:        &fairsched.Replica{Name: fmt.Sprintf("r%d", p+1), Capacity: bulkCapacity, Lease: replicaLease},
			Logger:         warnLogger(),
		})
		if err != nil {
			b.Fatal(err)
		}
		ss, stores = append(ss, s), append(stores, st)
	}
	check := newPool(b, schema)
	insert := func(ctx context.Context, first, n int) error {
		batch := make([]fairsched.EnqueueParams, n)
		for k := range batch {
			batch[k] = fairsched.EnqueueParams{Job: fairsched.Job{Type: "noop"}, Args: noopArgs{N: first + k}}
		}
		_, err := ss[0].EnqueueMany(ctx, batch)
		return err
	}
	finish := func(ctx context.Context) error {
		return awaitCompleted(ctx, check, `SELECT count(*) FROM fairsched_jobs WHERE state <> 3`)
	}
	stop := func() {
		for i, s := range ss {
			if err := s.Close(); err != nil {
				b.Errorf("closing replica %d: %v", i+1, err)
			}
			if err := stores[i].Close(); err != nil {
				b.Errorf("closing replica %d's store: %v", i+1, err)
			}
		}
		check.Close()
	}
	return insert, finish, stop
}

// awaitCompleted returns once unfinished, a count of the jobs not yet
// completed in the table, is 0, reading it every millisecond: a system
// that records completions after the handlers return (in batches) shows
// them a little after the last run.
func awaitCompleted(ctx context.Context, check *pgxpool.Pool, unfinished string) error {
	for {
		var n int
		if err := check.QueryRow(ctx, unfinished).Scan(&n); err != nil {
			return fmt.Errorf("counting unfinished jobs: %w", err)
		}
		if n == 0 {
			return nil
		}
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("every job ran, but %d are still not completed in the table", n)
		}
	}
}

// produce inserts total jobs: in batches of batchSize by one goroutine,
// or, with producers above 1, one per call by that many goroutines, each
// taking the next job's number.
func produce(ctx context.Context, total, producers int, insert func(ctx context.Context, first, n int) error) error {
	if producers == 1 {
		for first := 0; first < total; first += batchSize {
			if err := insert(ctx, first, min(batchSize, total-first)); err != nil {
				return fmt.Errorf("insert: %w", err)
			}
		}
		return nil
	}
	var next atomic.Int64
	errs := make([]error, producers)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < total; i = int(next.Add(1) - 1) {
				if err := insert(ctx, i, 1); err != nil {
					errs[p] = fmt.Errorf("insert of job %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
