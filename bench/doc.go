// Package bench measures fairsched's durable mode (Enqueue on a
// fairschedsqlite Store) beside the durable job queues a Go user would
// pick instead on SQLite: river (riversqlite driver), goqite (its jobs
// Runner), and a floor of plain database/sql, all on the same
// modernc.org/sqlite driver and the same file system. It is a module of
// its own so that fairsched's users never download the peers.
//
// BenchmarkDurablePeers/<workload>/<sync>/<system> runs, per b.N, one
// complete run of 20,000 no-op jobs, enqueue → run → recorded as
// completed (or deleted) in the file, on a fresh SQLite file in WAL mode
// with busy_timeout 5000, at synchronous NORMAL and at FULL. The workers
// are started before the timer; the timer runs from the first enqueue
// until every handler has run and the file shows no unfinished job (it is
// polled every millisecond once the handlers are done: completions are
// written asynchronously by fairsched, river and goqite alike). Setup
// (open, migrate, start) and teardown are not timed.
//
// Workloads:
//   - bulk: one goroutine enqueues the 20,000 jobs in batches of 1,000,
//     one insert-many call per batch, while the workers run;
//   - producers16: 16 goroutines enqueue 1,250 jobs each, one job per
//     call, while the workers run.
//
// Systems: fairsched (MaxConcurrency 100; EnqueueMany for bulk), river
// (default Config, MaxWorkers 100, one connection as riversqlite asks),
// river-cooldown1ms (FetchCooldown and FetchPollInterval at river's
// minimum, 1ms), goqite (jobs.Runner, Limit 100, PollInterval 1ms, one
// connection as its README asks; it has no bulk insert, so a bulk batch
// is one transaction of 1,000 inserts), floor (one table, batch inserts
// of 1,000 rows per statement, 4 claimers taking 100 rows per
// transaction with UPDATE ... RETURNING and marking them done in
// another; one connection).
//
// Reported per run: jobs/s over the timed part, cpu-µs/job (user+system
// CPU of the whole process from getrusage over the timed part), and
// allocations.
//
//	cd bench && go test -run '^$' -bench . -benchtime 1x -count 3
package bench
