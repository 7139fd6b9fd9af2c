// Package benchpg measures fairsched on PostgreSQL beside the job queue a
// Go user would pick there instead, river (v0.51.1, riverpgxv5 driver),
// and a floor of plain pgx, all on one server: the one FAIRSCHED_PG_DSN
// names, as for fairschedpg's tests (scripts/pg.sh starts a throwaway
// one). Without it the benchmarks skip, saying so on stderr; with CI set
// in the environment they fail instead. It is a module of its own so that
// fairsched's users never download the peers.
//
// fairsched's replicas are Schedulers with Config.Replica, each on a Store
// of its own (fairschedpg.OpenReplicaPool) on a pool of connections of its
// own, as a process would have, but in this process. The same goes for
// river's clients and the floor's workers: in one process, each with
// connections of its own, they stand in for processes, and share one Go
// runtime, and the machine's cores with the server.
//
// BenchmarkLatency/<system> runs, per b.N, a fixed number of jobs or
// calls, one at a time, each once the one before has started, the system
// otherwise idle, after 20 unmeasured ones; it reports the median and the
// 99th percentile (nearest rank) of the time from the call that submits
// one to the start of its handler or closure (p50-µs, p99-µs):
//   - river/cooldown-100ms: one river Client, its default FetchCooldown
//     (100 ms) and FetchPollInterval (1 s), MaxWorkers 100, a no-op
//     worker; Client.Insert of one job, to its Work. 300 jobs: each waits
//     about 100 ms for the cooldown.
//   - river/cooldown-1ms: the same with FetchCooldown and
//     FetchPollInterval at river's minimum, 1 ms (the poll interval may
//     not be shorter than the cooldown). 2,000 jobs.
//   - runsync/replicas-1/leader: one replica (Capacity 16, Lease 5 s,
//     MaxConcurrency 16), which leads; RunSync of a no-op closure on it,
//     to the closure's start. 2,000 calls, every slot free at each.
//   - runsync/replicas-4/follower: four replicas on one schema (Capacity
//     16 each, MaxConcurrency 64); RunSync on the first replica by name
//     that does not lead: its request goes to the leader through the
//     database, and the grant comes back the same way.
//   - runsync/replicas-4/leader: the same on the leader: its own closures
//     are decided in its process, without the database.
//
// A run fails if leadership changed during it (Stats().Replica).
//
// BenchmarkBulk/procs-<n>/<system> runs, per b.N, 20,000 no-op jobs end to
// end on a fresh schema: one producer inserts them in batches of 1,000
// while n stand-ins for processes (1, 2, 4) run them. The timer runs from
// the first insert until every job has run and the database shows it
// done; setup (schema, migrations, clients started) and teardown are not
// timed. It reports jobs/s.
//   - floor: one table (bigserial id, jsonb arguments); an insert of
//     1,000 rows per statement (unnest); each of n goroutines with a
//     connection of its own, in one transaction, claims the 100 oldest rows
//     no other holds (SELECT ... FOR UPDATE SKIP LOCKED), runs them
//     (decodes their arguments), deletes them, and commits, polling every
//     millisecond when it finds none.
//   - river/cooldown-100ms, river/cooldown-1ms: n river Clients configured
//     as above, each on a pool of its own (pgxpool's default size); the
//     producer calls InsertMany on the first. river records completions
//     in batches after Work returns: the run ends when the table shows
//     every job completed (polled every millisecond once all have run).
//   - fairsched: n replicas (Config.Replica, Capacity 100 each, as a
//     river Client's MaxWorkers; MaxConcurrency 100·n for the cluster),
//     each on a replica's Store on a pool of its own, each with a handler
//     of the no-op type that decodes its arguments; the producer calls
//     EnqueueMany on the first, and the leader runs every job on the
//     replicas, recording each attempt's start before it runs and its end
//     after. The run ends when the table shows every job completed
//     (polled every millisecond once all have run).
//
// BenchmarkProducers/procs-<n>/<system> is the same with 16 producers,
// each inserting one job per call, as a service's request handlers do:
// the floor's producers share a pool of their own (pgxpool's default
// size), river's call InsertMany of one job on the first Client, and
// fairsched's EnqueueMany of one job on the first replica, whose writes
// are grouped into the transactions that commit while they wait.
//
// From the repository's root, about 5 minutes:
//
//	eval "$(scripts/pg.sh start /tmp/fairsched-pg)"
//	(cd benchpg && go test -run '^$' -bench . -benchtime 1x)
//	scripts/pg.sh stop /tmp/fairsched-pg && rm -rf /tmp/fairsched-pg
//
// With -short, each run is cut short (50 latency samples, 2,000 jobs per
// bulk run): CI runs it so, once, so that the module does not rot.
package benchpg
