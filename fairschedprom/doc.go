// Package fairschedprom exports a fairsched.Scheduler's statistics as
// Prometheus metrics. It is a package of its own so that programs that use
// fairsched without Prometheus do not link the Prometheus client.
//
// # Registration
//
// A Collector reads one Scheduler. Register it on the registry the service
// already serves:
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(fairschedprom.NewCollector(s))
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// or, equivalently, fairschedprom.Register(reg, s). Two schedulers in one
// registry need telling apart: give each collector a different namespace
// (WithNamespace) or a distinguishing constant label (WithConstLabels), or
// the second registration fails.
//
// # Model
//
// The collector keeps no state and starts no goroutine. Each scrape calls
// Scheduler.Stats once and builds constant metrics from that one consistent
// view, so every series of a scrape describes the same instant, and a
// scrape holds the scheduler's lock only as long as Stats does. Counters
// are the scheduler's own cumulative counts: they reset only when the
// Scheduler is replaced.
//
// # Cardinality
//
// Label values never come from an unbounded set. Tier, job type and
// outcome are bounded by the scheduler's configuration. Fairness keys are
// not: a service may key by client address or tenant, and thousands of
// keys come and go. The per-key metrics (fairsched_key_*) therefore carry a
// key label only for the configured keys (Config.Keys and keys set at run
// time), whose number the service controls. Every other key with work is
// summed up, without a key label, in fairsched_other_keys,
// fairsched_other_keys_running_jobs and fairsched_other_keys_queued_jobs;
// so is a key whose name is not valid UTF-8, which cannot be a label value.
//
// WithBusiestKeys also labels the busiest unconfigured keys, up to
// fairsched.MaxListedKeys per scrape. Which keys those are changes with
// load, so over time each key that was ever among them gets series of its
// own: use it only when the keys come from a small set.
//
// # Metrics
//
// With the default namespace "fairsched":
//
//	fairsched_queue_wait_seconds                 histogram  submission to start, jobs that started
//	fairsched_job_duration_seconds               histogram  start to end, jobs that ran
//	fairsched_jobs_submitted_total               counter    jobs accepted into the queue
//	fairsched_jobs_started_total                 counter    {tier, type}
//	fairsched_jobs_finished_total                counter    {tier, type, outcome="completed|failed|cancelled|expired"}
//	fairsched_job_retries_total                  counter    {tier, type}: failed attempts that were retried
//	fairsched_jobs_rejected_total                counter    {tier, type, reason="queue_full|closed"}: submissions refused
//	fairsched_jobs_rejected_unknown_type_total   counter    submissions naming a job type not registered
//	fairsched_jobs_started_by_effective_priority_total
//	                                             counter    {effective_priority="0-9", ..., "90-99", "100"}
//	fairsched_aging_promotions_total             counter    jobs that started above their base priority
//	fairsched_urgent_starts_total                counter    jobs that started as urgent
//	fairsched_reserved_starts_total              counter    jobs that started under their key's MinSlots
//	fairsched_excess_redistributed_total         counter    starts beyond the key's share, on capacity others left idle
//	fairsched_events_dropped_total               counter    events OnEvent fell too far behind to receive
//	fairsched_keys_forgotten_total               counter    idle keys forgotten after IdleTTL
//	fairsched_cost_estimates_forgotten_total     counter    cost estimates forgotten after IdleTTL
//	fairsched_running_jobs                       gauge      {tier, type}
//	fairsched_queued_jobs                        gauge      {tier, type}, including parked and delayed jobs
//	fairsched_parked_jobs                        gauge      queued jobs waiting on a conflict or their key's cap
//	fairsched_delayed_jobs                       gauge      queued jobs waiting for their NotBefore time
//	fairsched_dead_jobs                          gauge      dead jobs kept (Submit jobs that failed for good)
//	fairsched_jobs_dead_total                    counter    Submit jobs that failed for good
//	fairsched_disabled_pairs                     gauge      (type, ID) pairs turned away by a DisablePolicy
//	fairsched_periodic_occurrences_skipped_total counter    periodic occurrences skipped
//	fairsched_keys_tracked                       gauge      fairness keys remembered
//	fairsched_cost_estimates                     gauge      (type, ID) cost estimates remembered
//	fairsched_key_weight                         gauge      {key}
//	fairsched_key_allocation_slots               gauge      {key}: weighted max-min fair share of the slots
//	fairsched_key_utilisation_ratio              gauge      {key}: running jobs / allocation
//	fairsched_key_running_jobs                   gauge      {key}
//	fairsched_key_queued_jobs                    gauge      {key}
//	fairsched_other_keys                         gauge      busy keys not listed by name
//	fairsched_other_keys_running_jobs            gauge      their running jobs
//	fairsched_other_keys_queued_jobs             gauge      their queued jobs
//
// A replica of several (fairsched.Config.Replica) adds its own figures,
// labelled {replica}, which no other replica's collector sends; the
// figures above are then its own jobs':
//
//	fairsched_replica_capacity_slots             gauge      {replica}: the most jobs it runs at once
//	fairsched_replica_running_jobs               gauge      {replica}
//	fairsched_replica_leader                     gauge      {replica}: 1 while it leads
//	fairsched_replica_busy_seconds_total         counter    {replica}: time it ran at least one job
//	fairsched_replica_idle_seconds_total         counter    {replica}: time it ran none
//
// The replica that leads also sends the cluster's figures
// (fairsched.Stats.Cluster): every replica's jobs as the leader decides
// them, and every durable job, queued in the database or running on any
// replica. No other replica sends them, so summing over replicas counts
// each job once:
//
//	fairsched_cluster_running_jobs               gauge      {tier, type}
//	fairsched_cluster_queued_jobs                gauge      {tier, type}: durable jobs included
//	fairsched_cluster_waiting_jobs               gauge      {reason}
//	fairsched_cluster_dead_jobs                  gauge      the cluster's dead durable jobs
//
// Tiers are labelled by Tier.String ("background", "foreground", or the
// number of any other tier), and the default job type and the empty
// fairness key by the empty string, which Prometheus treats as the label
// being absent. The default job type, which every scheduler has, gets
// series only once a job of it has been submitted. Per-tier totals are sums over types:
// sum by (tier) (fairsched_running_jobs).
//
// The effective priority of started jobs is a counter per band of ten, not
// a histogram: the scheduler counts jobs per band but does not keep the sum
// of their priorities, and a histogram's _sum would have to be invented. The
// bands still give the distribution, for instance
// sum by (effective_priority) (rate(fairsched_jobs_started_by_effective_priority_total[5m])).
package fairschedprom
