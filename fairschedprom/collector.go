package fairschedprom

import (
	"strconv"
	"unicode/utf8"

	"github.com/fairsched/fairsched"
	"github.com/prometheus/client_golang/prometheus"
)

// Option configures a Collector.
type Option func(*options)

type options struct {
	namespace   string
	constLabels prometheus.Labels
	busiest     bool
}

// WithNamespace sets the prefix of every metric name; the default is
// "fairsched". An empty namespace leaves the names unprefixed.
func WithNamespace(ns string) Option {
	return func(o *options) { o.namespace = ns }
}

// WithConstLabels adds labels with fixed values to every metric, for
// instance to tell two schedulers of one process apart.
func WithConstLabels(l prometheus.Labels) Option {
	return func(o *options) { o.constLabels = l }
}

// WithBusiestKeys also gives the per-key metrics a series for each
// unconfigured key that Stats.Keys lists: the fairsched.MaxListedKeys
// busiest. Which keys those are changes with load, so over time every key
// that was ever among the busiest gets series of its own, and the number of
// series is bounded only by the number of keys. Use it when keys come from
// a small, known set; by default only configured keys are labelled.
func WithBusiestKeys() Option {
	return func(o *options) { o.busiest = true }
}

// Collector is a prometheus.Collector for one Scheduler. It holds no state
// between scrapes: each Collect reads Scheduler.Stats once and turns that
// view into constant metrics. Safe for concurrent scrapes.
type Collector struct {
	s       *fairsched.Scheduler
	busiest bool

	queueWait, jobDuration *prometheus.Desc

	submitted, started, finished, retries, rejected, byEffective *prometheus.Desc
	rejectedUnknown                                              *prometheus.Desc
	promotions, urgent, reserved, excess                         *prometheus.Desc
	eventsDropped, keysForgotten, costsForgotten                 *prometheus.Desc

	running, queued, parked, delayed, keysTracked, costEstimates *prometheus.Desc
	waiting                                                      *prometheus.Desc
	dead, deadTotal, disabled, skipped                           *prometheus.Desc
	joins, superseded                                            *prometheus.Desc

	keyWeight, keyAllocation, keyUtilisation, keyRunning, keyQueued *prometheus.Desc
	otherKeys, otherRunning, otherQueued                            *prometheus.Desc

	replicaCapacity, replicaRunning, replicaLeader, replicaBusy, replicaIdle *prometheus.Desc
	clusterRunning, clusterQueued, clusterWaiting, clusterDead               *prometheus.Desc

	all []*prometheus.Desc
}

// Compile-time check that Collector is a prometheus.Collector.
var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a Collector for s. Register it on a
// prometheus.Registerer; see the package documentation.
func NewCollector(s *fairsched.Scheduler, opts ...Option) *Collector {
	o := options{namespace: "fairsched"}
	for _, opt := range opts {
		opt(&o)
	}
	c := &Collector{s: s, busiest: o.busiest}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		d := prometheus.NewDesc(prometheus.BuildFQName(o.namespace, "", name), help, labels, o.constLabels)
		c.all = append(c.all, d)
		return d
	}
	tierType := []string{"tier", "type"}

	c.queueWait = desc("queue_wait_seconds",
		"Time from submission to start of the jobs that started.")
	c.jobDuration = desc("job_duration_seconds",
		"Time from start to end of the jobs that ran.")

	c.submitted = desc("jobs_submitted_total",
		"Jobs accepted into the queue; each ends exactly once.")
	c.started = desc("jobs_started_total",
		"Jobs that got a slot, by tier and job type.", tierType...)
	c.finished = desc("jobs_finished_total",
		"Jobs that ended, by tier, job type and outcome; cancelled includes jobs that left the queue without starting, expired those that missed their start deadline, dependency_failed those that did not run because a job they run after did not complete.",
		"tier", "type", "outcome")
	c.retries = desc("job_retries_total",
		"Failed attempts that were retried, by tier and job type.", tierType...)
	c.rejected = desc("jobs_rejected_total",
		"Submissions of a known job type refused, by tier, job type and reason: queue_full (the queue or the key's pending limit) or closed.",
		"tier", "type", "reason")
	c.rejectedUnknown = desc("jobs_rejected_unknown_type_total",
		"Submissions refused because they named a job type that is not registered.")
	c.byEffective = desc("jobs_started_by_effective_priority_total",
		"Jobs that got a slot, by their effective priority at start in bands of ten.", "effective_priority")
	c.promotions = desc("aging_promotions_total",
		"Jobs that started above their base priority because they aged while waiting.")
	c.urgent = desc("urgent_starts_total",
		"Jobs that started as urgent, ahead of tiers, weights and reservations.")
	c.reserved = desc("reserved_starts_total",
		"Jobs that started under their key's reservation (MinSlots).")
	c.excess = desc("excess_redistributed_total",
		"Job starts beyond the key's fair share, made with capacity that other keys left idle.")
	c.eventsDropped = desc("events_dropped_total",
		"Events not delivered because the OnEvent hook fell behind.")
	c.keysForgotten = desc("keys_forgotten_total",
		"Idle fairness keys forgotten after IdleTTL.")
	c.costsForgotten = desc("cost_estimates_forgotten_total",
		"Cost estimates forgotten after IdleTTL.")

	c.running = desc("running_jobs",
		"Running jobs, by tier and job type.", tierType...)
	c.queued = desc("queued_jobs",
		"Queued jobs, including parked and delayed ones, by tier and job type.", tierType...)
	c.parked = desc("parked_jobs",
		"Queued jobs waiting on a conflicting job or their key's concurrency cap.")
	c.delayed = desc("delayed_jobs",
		"Queued jobs waiting for their NotBefore time.")
	c.joins = desc("jobs_joined_total",
		"Submissions that joined the job of their type and ID instead of making one.")
	c.superseded = desc("jobs_superseded_total",
		"Waiting jobs replaced by a newer submission of their type and ID (counted as cancelled too).")
	c.waiting = desc("waiting_jobs",
		"Queued jobs by what holds them: not-before, dependency, paused, rate, tier-cap, type-cap, key-cap, conflict, resource, turn, or no-handler; and, for a replica, replicas-full or no-replica.", "reason")
	c.dead = desc("dead_jobs",
		"Dead jobs kept: Submit jobs that failed for good, which RetryDead can run again.")
	c.deadTotal = desc("jobs_dead_total",
		"Submit jobs that failed for good, kept or not.")
	c.disabled = desc("disabled_pairs",
		"(Job type, ID) pairs whose submissions the type's DisablePolicy turns away now.")
	c.skipped = desc("periodic_occurrences_skipped_total",
		"Occurrences of periodic jobs not submitted: their predecessor had not ended, or the queue was full.")
	c.keysTracked = desc("keys_tracked",
		"Fairness keys the scheduler remembers.")
	c.costEstimates = desc("cost_estimates",
		"Cost estimates, one per (job type, ID), the scheduler remembers.")

	c.keyWeight = desc("key_weight",
		"Weight of the fairness key; only configured keys are listed, unless the collector lists the busiest others too.", "key")
	c.keyAllocation = desc("key_allocation_slots",
		"Weighted max-min fair share of the slots allocated to the key, given the keys with work.", "key")
	c.keyUtilisation = desc("key_utilisation_ratio",
		"Running jobs of the key divided by its allocation; 0 when nothing is allocated.", "key")
	c.keyRunning = desc("key_running_jobs",
		"Running jobs of the fairness key.", "key")
	c.keyQueued = desc("key_queued_jobs",
		"Queued jobs of the fairness key.", "key")
	c.otherKeys = desc("other_keys",
		"Busy fairness keys not listed by name in the key metrics.")
	c.otherRunning = desc("other_keys_running_jobs",
		"Running jobs of the fairness keys not listed by name.")
	c.otherQueued = desc("other_keys_queued_jobs",
		"Queued jobs of the fairness keys not listed by name.")

	c.replicaCapacity = desc("replica_capacity_slots",
		"The most jobs the replica runs at once (Config.Replica); only for a replica, as are the replica_ metrics.", "replica")
	c.replicaRunning = desc("replica_running_jobs",
		"Jobs running on the replica.", "replica")
	c.replicaLeader = desc("replica_leader",
		"1 while the replica leads the cluster, 0 otherwise.", "replica")
	c.replicaBusy = desc("replica_busy_seconds_total",
		"Time the replica ran at least one job.", "replica")
	c.replicaIdle = desc("replica_idle_seconds_total",
		"Time the replica ran no job: a replica that packing leaves idle can be scaled down.", "replica")

	c.clusterRunning = desc("cluster_running_jobs",
		"Running jobs of the whole cluster, by tier and job type, wherever they run; only from the replica that leads, as are the cluster_ metrics (Stats.Cluster): sum them across replicas without counting a job twice.", tierType...)
	c.clusterQueued = desc("cluster_queued_jobs",
		"Queued jobs of the whole cluster, durable ones included, by tier and job type.", tierType...)
	c.clusterWaiting = desc("cluster_waiting_jobs",
		"Queued jobs of the whole cluster by what holds them: the reasons of waiting_jobs; replicas-full: every replica it may run on runs its capacity; no-replica: no live replica may run it (none has its handler).", "reason")
	c.clusterDead = desc("cluster_dead_jobs",
		"Dead jobs the leader keeps: the cluster's durable jobs that failed for good.")
	return c
}

// Register registers a new Collector for s on reg.
func Register(reg prometheus.Registerer, s *fairsched.Scheduler, opts ...Option) error {
	return reg.Register(NewCollector(s, opts...))
}

// Describe sends the descriptors of every metric the Collector emits.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.all {
		ch <- d
	}
}

// Collect reads the scheduler's statistics once and sends them as constant
// metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()

	ch <- histogram(c.queueWait, st.QueueWait)
	ch <- histogram(c.jobDuration, st.JobDuration)

	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- constMetric(d, prometheus.CounterValue, float64(v), labels)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- constMetric(d, prometheus.GaugeValue, v, labels)
	}

	counter(c.submitted, st.Submitted)
	counter(c.rejectedUnknown, st.RejectedUnknownType)
	counter(c.promotions, st.AgingPromotions)
	counter(c.urgent, st.UrgentStarts)
	counter(c.reserved, st.ReservedStarts)
	counter(c.excess, st.ExcessRedistributed)
	counter(c.eventsDropped, st.EventsDropped)
	counter(c.keysForgotten, st.KeysForgotten)
	counter(c.costsForgotten, st.CostsForgotten)
	for i, n := range st.EffectiveAtStart {
		counter(c.byEffective, n, effectiveBands[i])
	}

	for _, t := range st.Types {
		if t.Name == "" && unused(t) {
			continue // the default type is always there; its series only once used
		}
		tier := t.Tier.String()
		counter(c.started, t.Started, tier, t.Name)
		counter(c.finished, t.Completed, tier, t.Name, fairsched.OutcomeCompleted.String())
		counter(c.finished, t.Failed, tier, t.Name, fairsched.OutcomeFailed.String())
		counter(c.finished, t.Cancelled, tier, t.Name, fairsched.OutcomeCancelled.String())
		counter(c.finished, t.Expired, tier, t.Name, fairsched.OutcomeExpired.String())
		counter(c.finished, t.DependencyFailed, tier, t.Name, fairsched.OutcomeDependencyFailed.String())
		counter(c.retries, t.Retries, tier, t.Name)
		counter(c.rejected, t.RejectedFull, tier, t.Name, "queue_full")
		counter(c.rejected, t.RejectedClosed, tier, t.Name, "closed")
		gauge(c.running, float64(t.Running), tier, t.Name)
		gauge(c.queued, float64(t.Queued), tier, t.Name)
	}
	gauge(c.parked, float64(st.Parked))
	gauge(c.delayed, float64(st.Delayed))
	counter(c.joins, st.Joins)
	counter(c.superseded, st.Superseded)
	for _, r := range fairsched.WaitReasons() {
		if st.Replica == nil && replicaReason(r) {
			continue // never so, for a scheduler alone
		}
		gauge(c.waiting, float64(st.Waiting[r]), r.String())
	}
	gauge(c.dead, float64(st.Dead))
	counter(c.deadTotal, st.DeadTotal)
	gauge(c.disabled, float64(st.Disabled))
	counter(c.skipped, st.SkippedOccurrences)
	gauge(c.keysTracked, float64(st.KeysTracked))
	gauge(c.costEstimates, float64(st.CostEstimates))

	// Label the configured keys (and, if asked, the busiest others that
	// Stats.Keys lists). A key that is not valid UTF-8 cannot be a label
	// value, so it is counted with the others rather than failing the
	// scrape.
	other := st.OtherKeys
	for _, k := range st.Keys {
		if !(k.Configured || c.busiest) || !utf8.ValidString(k.Key) {
			if k.Running+k.Queued > 0 {
				other.Keys++
				other.Running += k.Running
				other.Queued += k.Queued
			}
			continue
		}
		gauge(c.keyWeight, k.Weight, k.Key)
		gauge(c.keyAllocation, k.Allocation, k.Key)
		gauge(c.keyUtilisation, k.Utilisation, k.Key)
		gauge(c.keyRunning, float64(k.Running), k.Key)
		gauge(c.keyQueued, float64(k.Queued), k.Key)
	}
	gauge(c.otherKeys, float64(other.Keys))
	gauge(c.otherRunning, float64(other.Running))
	gauge(c.otherQueued, float64(other.Queued))
	if r := st.Replica; r != nil {
		c.collectReplica(ch, r)
	}
	if cl := st.Cluster; cl != nil {
		c.collectCluster(ch, cl)
	}
}

// collectCluster sends the cluster's figures, which the replica that
// leads has (Stats.Cluster).
func (c *Collector) collectCluster(ch chan<- prometheus.Metric, st *fairsched.Stats) {
	for _, t := range st.Types {
		if t.Name == "" && unused(t) {
			continue // as in Collect
		}
		labels := []string{t.Tier.String(), t.Name}
		ch <- constMetric(c.clusterRunning, prometheus.GaugeValue, float64(t.Running), labels)
		ch <- constMetric(c.clusterQueued, prometheus.GaugeValue, float64(t.Queued), labels)
	}
	for _, r := range fairsched.WaitReasons() {
		ch <- constMetric(c.clusterWaiting, prometheus.GaugeValue, float64(st.Waiting[r]), []string{r.String()})
	}
	ch <- constMetric(c.clusterDead, prometheus.GaugeValue, float64(st.Dead), nil)
}

// constMetric is prometheus.MustNewConstMetric without the panic: a metric
// that cannot be built is reported as an error by the registry's Gather
// (which promhttp turns into a failed scrape by default), not as a panic
// in Collect. Label values are kept valid above, so this is a backstop.
func constMetric(d *prometheus.Desc, t prometheus.ValueType, v float64, labels []string) prometheus.Metric {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}

// effectiveBands labels Stats.EffectiveAtStart: [i] counts priorities
// 10*i to 10*i+9, and the last one priority 100.
var effectiveBands = func() []string {
	var out []string
	for i := 0; i < 10; i++ {
		out = append(out, strconv.Itoa(10*i)+"-"+strconv.Itoa(10*i+9))
	}
	return append(out, "100")
}()

// histogram turns a cumulative fairsched.Histogram into a constant
// Prometheus histogram with the same upper bounds.
func histogram(d *prometheus.Desc, h fairsched.Histogram) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Buckets))
	for i, le := range h.Buckets {
		if i < len(h.Counts) {
			buckets[le] = h.Counts[i]
		}
	}
	return prometheus.MustNewConstHistogram(d, h.Count, h.Sum, buckets)
}

// unused reports whether a job type has never had a job.
func unused(t fairsched.TypeStats) bool {
	return t.Started+t.Cancelled+t.Expired+t.DependencyFailed+t.Retries+t.Rejected == 0 && t.Running+t.Queued == 0
}

// collectReplica sends a replica's own figures, labelled with its name:
// each replica's collector sends its own, so their sum counts nothing
// twice.
func (c *Collector) collectReplica(ch chan<- prometheus.Metric, r *fairsched.ReplicaStats) {
	leader := 0.0
	if r.Leader {
		leader = 1
	}
	ch <- constMetric(c.replicaCapacity, prometheus.GaugeValue, float64(r.Capacity), []string{r.Name})
	ch <- constMetric(c.replicaRunning, prometheus.GaugeValue, float64(r.Running), []string{r.Name})
	ch <- constMetric(c.replicaLeader, prometheus.GaugeValue, leader, []string{r.Name})
	ch <- constMetric(c.replicaBusy, prometheus.CounterValue, r.Busy.Seconds(), []string{r.Name})
	ch <- constMetric(c.replicaIdle, prometheus.CounterValue, r.Idle.Seconds(), []string{r.Name})
}

// replicaReason reports whether jobs wait for r only in a cluster of
// replicas.
func replicaReason(r fairsched.WaitReason) bool {
	return r == fairsched.WaitReplicasFull || r == fairsched.WaitNoReplica
}
