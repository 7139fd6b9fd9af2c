package fairschedprom

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/internal/clock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func newScheduler(t *testing.T, cfg fairsched.Config) *fairsched.Scheduler {
	t.Helper()
	s, err := fairsched.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// gated is a job function that runs until a value arrives on its gate and
// returns that value, or until its context ends.
func gated(gate <-chan error) func(context.Context) error {
	return func(ctx context.Context) error {
		select {
		case err := <-gate:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func submit(t *testing.T, s *fairsched.Scheduler, job fairsched.Job, fn func(context.Context) error) fairsched.Handle {
	t.Helper()
	h, err := s.Submit(context.Background(), job, fn)
	if err != nil {
		t.Fatalf("Submit(%+v): %v", job, err)
	}
	return h
}

// scenario drives a scheduler on a fake clock through a fixed story and
// calls mid while three keys are busy:
//
//	t=0  A (build, alice) and B (index, bob) start; 2 slots are now full.
//	     C (index, bob) queues; D (index, bob) is refused: bob's MaxPending is 1.
//	     E (index, carol) queues.      <- mid
//	     E is cancelled.
//	t=2  A completes; C starts after waiting 2s.
//	t=3  B fails after 3s; C completes after 1s.
//	     A job of an unknown type is refused; Shutdown; a build is refused.
func scenario(t *testing.T, mid func(*Collector)) *Collector {
	t.Helper()
	clk := clock.NewFake(t0)
	s := newScheduler(t, fairsched.Config{
		MaxConcurrency: 2,
		Clock:          clk,
		Types: map[string]fairsched.TypeConfig{
			"build": {Tier: fairsched.Foreground},
			"index": {Tier: fairsched.Background},
		},
		Keys:       map[string]fairsched.KeyConfig{"alice": {Weight: 2}},
		DefaultKey: fairsched.KeyConfig{MaxPending: 1},
	})
	c := NewCollector(s, WithBusiestKeys()) // bob and carol are not configured

	gateA, gateB, gateC := make(chan error), make(chan error), make(chan error)
	a := submit(t, s, fairsched.Job{Type: "build", Key: "alice"}, gated(gateA))
	b := submit(t, s, fairsched.Job{Type: "index", Key: "bob"}, gated(gateB))
	cj := submit(t, s, fairsched.Job{Type: "index", Key: "bob"}, gated(gateC))
	if _, err := s.Submit(context.Background(), fairsched.Job{Type: "index", Key: "bob"}, gated(nil)); !errors.Is(err, fairsched.ErrQueueFull) {
		t.Fatalf("fourth submission for bob: got %v, want ErrQueueFull", err)
	}
	e := submit(t, s, fairsched.Job{Type: "index", Key: "carol"}, gated(nil))
	if mid != nil {
		mid(c)
	}
	e.Cancel()
	<-e.Done()

	clk.Advance(2 * time.Second)
	gateA <- nil
	<-a.Done()

	clk.Advance(time.Second)
	gateB <- errors.New("index broken")
	gateC <- nil
	<-b.Done()
	<-cj.Done()

	if _, err := s.Submit(context.Background(), fairsched.Job{Type: "nope"}, gated(nil)); !errors.Is(err, fairsched.ErrUnknownType) {
		t.Fatalf("submission of an unknown type: got %v, want ErrUnknownType", err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(context.Background(), fairsched.Job{Type: "build"}, gated(nil)); !errors.Is(err, fairsched.ErrClosed) {
		t.Fatalf("submission after Shutdown: got %v, want ErrClosed", err)
	}
	return c
}

func TestCollectAndCompareMidScenario(t *testing.T) {
	scenario(t, func(c *Collector) {
		// Capacity 2: alice (weight 2) wants 1 and gets it; bob and carol
		// (weight 1) split the remaining slot.
		const want = `
# HELP fairsched_running_jobs Running jobs, by tier and job type.
# TYPE fairsched_running_jobs gauge
fairsched_running_jobs{tier="background",type="index"} 1
fairsched_running_jobs{tier="foreground",type="build"} 1
# HELP fairsched_queued_jobs Queued jobs, including parked and delayed ones, by tier and job type.
# TYPE fairsched_queued_jobs gauge
fairsched_queued_jobs{tier="background",type="index"} 2
fairsched_queued_jobs{tier="foreground",type="build"} 0
# HELP fairsched_parked_jobs Queued jobs waiting on a conflicting job or their key's concurrency cap.
# TYPE fairsched_parked_jobs gauge
fairsched_parked_jobs 0
# HELP fairsched_key_weight Weight of the fairness key; only configured keys are listed, unless the collector lists the busiest others too.
# TYPE fairsched_key_weight gauge
fairsched_key_weight{key="alice"} 2
fairsched_key_weight{key="bob"} 1
fairsched_key_weight{key="carol"} 1
# HELP fairsched_key_allocation_slots Weighted max-min fair share of the slots allocated to the key, given the keys with work.
# TYPE fairsched_key_allocation_slots gauge
fairsched_key_allocation_slots{key="alice"} 1
fairsched_key_allocation_slots{key="bob"} 0.5
fairsched_key_allocation_slots{key="carol"} 0.5
# HELP fairsched_key_utilisation_ratio Running jobs of the key divided by its allocation; 0 when nothing is allocated.
# TYPE fairsched_key_utilisation_ratio gauge
fairsched_key_utilisation_ratio{key="alice"} 1
fairsched_key_utilisation_ratio{key="bob"} 2
fairsched_key_utilisation_ratio{key="carol"} 0
# HELP fairsched_key_running_jobs Running jobs of the fairness key.
# TYPE fairsched_key_running_jobs gauge
fairsched_key_running_jobs{key="alice"} 1
fairsched_key_running_jobs{key="bob"} 1
fairsched_key_running_jobs{key="carol"} 0
# HELP fairsched_key_queued_jobs Queued jobs of the fairness key.
# TYPE fairsched_key_queued_jobs gauge
fairsched_key_queued_jobs{key="alice"} 0
fairsched_key_queued_jobs{key="bob"} 1
fairsched_key_queued_jobs{key="carol"} 1
# HELP fairsched_other_keys Busy fairness keys not listed by name in the key metrics.
# TYPE fairsched_other_keys gauge
fairsched_other_keys 0
`
		if err := testutil.CollectAndCompare(c, strings.NewReader(want),
			"fairsched_running_jobs", "fairsched_queued_jobs", "fairsched_parked_jobs",
			"fairsched_key_weight", "fairsched_key_allocation_slots",
			"fairsched_key_utilisation_ratio", "fairsched_key_running_jobs",
			"fairsched_key_queued_jobs", "fairsched_other_keys",
		); err != nil {
			t.Error(err)
		}
	})
}

func TestCollectAndCompareAfterScenario(t *testing.T) {
	c := scenario(t, nil)
	const want = `
# HELP fairsched_jobs_submitted_total Jobs accepted into the queue; each ends exactly once.
# TYPE fairsched_jobs_submitted_total counter
fairsched_jobs_submitted_total 4
# HELP fairsched_jobs_started_total Jobs that got a slot, by tier and job type.
# TYPE fairsched_jobs_started_total counter
fairsched_jobs_started_total{tier="background",type="index"} 2
fairsched_jobs_started_total{tier="foreground",type="build"} 1
# HELP fairsched_jobs_finished_total Jobs that ended, by tier, job type and outcome; cancelled includes jobs that left the queue without starting, expired those that missed their start deadline, dependency_failed those that did not run because a job they run after did not complete.
# TYPE fairsched_jobs_finished_total counter
fairsched_jobs_finished_total{outcome="cancelled",tier="background",type="index"} 1
fairsched_jobs_finished_total{outcome="completed",tier="background",type="index"} 1
fairsched_jobs_finished_total{outcome="dependency_failed",tier="background",type="index"} 0
fairsched_jobs_finished_total{outcome="dependency_failed",tier="foreground",type="build"} 0
fairsched_jobs_finished_total{outcome="expired",tier="background",type="index"} 0
fairsched_jobs_finished_total{outcome="failed",tier="background",type="index"} 1
fairsched_jobs_finished_total{outcome="cancelled",tier="foreground",type="build"} 0
fairsched_jobs_finished_total{outcome="completed",tier="foreground",type="build"} 1
fairsched_jobs_finished_total{outcome="expired",tier="foreground",type="build"} 0
fairsched_jobs_finished_total{outcome="failed",tier="foreground",type="build"} 0
# HELP fairsched_jobs_rejected_total Submissions of a known job type refused, by tier, job type and reason: queue_full (the queue or the key's pending limit) or closed.
# TYPE fairsched_jobs_rejected_total counter
fairsched_jobs_rejected_total{reason="closed",tier="background",type="index"} 0
fairsched_jobs_rejected_total{reason="closed",tier="foreground",type="build"} 1
fairsched_jobs_rejected_total{reason="queue_full",tier="background",type="index"} 1
fairsched_jobs_rejected_total{reason="queue_full",tier="foreground",type="build"} 0
# HELP fairsched_jobs_rejected_unknown_type_total Submissions refused because they named a job type that is not registered.
# TYPE fairsched_jobs_rejected_unknown_type_total counter
fairsched_jobs_rejected_unknown_type_total 1
# HELP fairsched_jobs_started_by_effective_priority_total Jobs that got a slot, by their effective priority at start in bands of ten.
# TYPE fairsched_jobs_started_by_effective_priority_total counter
fairsched_jobs_started_by_effective_priority_total{effective_priority="0-9"} 0
fairsched_jobs_started_by_effective_priority_total{effective_priority="10-19"} 0
fairsched_jobs_started_by_effective_priority_total{effective_priority="20-29"} 0
fairsched_jobs_started_by_effective_priority_total{effective_priority="30-39"} 0
fairsched_jobs_started_by_effective_priority_total{effective_priority="40-49"} 0
fairsched_jobs_started_by_effective_priority_total{effective_priority="50-59"} 3
fairsched_jobs_started_by_effective_priority_total{effective_priority="60-69"} 0
fairsched_jobs_started_by_effective_priority_total{effective_priority="70-79"} 0
fairsched_jobs_started_by_effective_priority_total{effective_priority="80-89"} 0
fairsched_jobs_started_by_effective_priority_total{effective_priority="90-99"} 0
fairsched_jobs_started_by_effective_priority_total{effective_priority="100"} 0
# HELP fairsched_aging_promotions_total Jobs that started above their base priority because they aged while waiting.
# TYPE fairsched_aging_promotions_total counter
fairsched_aging_promotions_total 0
# HELP fairsched_urgent_starts_total Jobs that started as urgent, ahead of tiers, weights and reservations.
# TYPE fairsched_urgent_starts_total counter
fairsched_urgent_starts_total 0
# HELP fairsched_running_jobs Running jobs, by tier and job type.
# TYPE fairsched_running_jobs gauge
fairsched_running_jobs{tier="background",type="index"} 0
fairsched_running_jobs{tier="foreground",type="build"} 0
# HELP fairsched_queue_wait_seconds Time from submission to start of the jobs that started.
# TYPE fairsched_queue_wait_seconds histogram
fairsched_queue_wait_seconds_bucket{le="0.001"} 2
fairsched_queue_wait_seconds_bucket{le="0.005"} 2
fairsched_queue_wait_seconds_bucket{le="0.01"} 2
fairsched_queue_wait_seconds_bucket{le="0.05"} 2
fairsched_queue_wait_seconds_bucket{le="0.1"} 2
fairsched_queue_wait_seconds_bucket{le="0.5"} 2
fairsched_queue_wait_seconds_bucket{le="1"} 2
fairsched_queue_wait_seconds_bucket{le="5"} 3
fairsched_queue_wait_seconds_bucket{le="10"} 3
fairsched_queue_wait_seconds_bucket{le="30"} 3
fairsched_queue_wait_seconds_bucket{le="60"} 3
fairsched_queue_wait_seconds_bucket{le="300"} 3
fairsched_queue_wait_seconds_bucket{le="1800"} 3
fairsched_queue_wait_seconds_bucket{le="+Inf"} 3
fairsched_queue_wait_seconds_sum 2
fairsched_queue_wait_seconds_count 3
# HELP fairsched_job_duration_seconds Time from start to end of the jobs that ran.
# TYPE fairsched_job_duration_seconds histogram
fairsched_job_duration_seconds_bucket{le="0.001"} 0
fairsched_job_duration_seconds_bucket{le="0.005"} 0
fairsched_job_duration_seconds_bucket{le="0.01"} 0
fairsched_job_duration_seconds_bucket{le="0.05"} 0
fairsched_job_duration_seconds_bucket{le="0.1"} 0
fairsched_job_duration_seconds_bucket{le="0.5"} 0
fairsched_job_duration_seconds_bucket{le="1"} 1
fairsched_job_duration_seconds_bucket{le="5"} 3
fairsched_job_duration_seconds_bucket{le="10"} 3
fairsched_job_duration_seconds_bucket{le="30"} 3
fairsched_job_duration_seconds_bucket{le="60"} 3
fairsched_job_duration_seconds_bucket{le="300"} 3
fairsched_job_duration_seconds_bucket{le="1800"} 3
fairsched_job_duration_seconds_bucket{le="+Inf"} 3
fairsched_job_duration_seconds_sum 6
fairsched_job_duration_seconds_count 3
# HELP fairsched_key_running_jobs Running jobs of the fairness key.
# TYPE fairsched_key_running_jobs gauge
fairsched_key_running_jobs{key="alice"} 0
# HELP fairsched_other_keys Busy fairness keys not listed by name in the key metrics.
# TYPE fairsched_other_keys gauge
fairsched_other_keys 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"fairsched_jobs_submitted_total", "fairsched_jobs_started_total",
		"fairsched_jobs_finished_total", "fairsched_jobs_rejected_total",
		"fairsched_jobs_rejected_unknown_type_total",
		"fairsched_jobs_started_by_effective_priority_total",
		"fairsched_aging_promotions_total", "fairsched_urgent_starts_total",
		"fairsched_running_jobs", "fairsched_queue_wait_seconds", "fairsched_job_duration_seconds",
		"fairsched_key_running_jobs", "fairsched_other_keys",
	); err != nil {
		t.Error(err)
	}
}

func TestCollectAndLint(t *testing.T) {
	check := func(name string, c *Collector) {
		t.Helper()
		problems, err := testutil.CollectAndLint(c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s: %s", name, p.Metric, p.Text)
		}
	}
	check("idle", NewCollector(newScheduler(t, fairsched.Config{})))
	scenario(t, func(c *Collector) { check("busy", c) })
	check("after", scenario(t, nil))
}

// TestDescribeMatchesCollect registers the collector on a pedantic
// registry, which fails a Gather whose metrics do not match Describe.
func TestDescribeMatchesCollect(t *testing.T) {
	scenario(t, func(c *Collector) {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		descs := make(chan *prometheus.Desc, 64)
		c.Describe(descs)
		close(descs)
		const replicaOnly = 5 + 4 // the replica_ and cluster_ metrics: this scheduler is no replica
		if got, want := len(mfs), len(descs)-replicaOnly; got != want {
			t.Errorf("gathered %d metric families, described %d, %d of them a replica's", got, len(descs), replicaOnly)
		}
	})
}

func TestOptionsAndRegister(t *testing.T) {
	s1 := newScheduler(t, fairsched.Config{})
	s2 := newScheduler(t, fairsched.Config{})
	reg := prometheus.NewPedanticRegistry()
	if err := Register(reg, s1, WithConstLabels(prometheus.Labels{"pool": "a"})); err != nil {
		t.Fatal(err)
	}
	if err := Register(reg, s2, WithConstLabels(prometheus.Labels{"pool": "b"})); err != nil {
		t.Fatalf("second scheduler with another const label: %v", err)
	}
	if err := Register(reg, s2, WithConstLabels(prometheus.Labels{"pool": "b"})); err == nil {
		t.Error("registering the same metrics twice: got nil error")
	}
	if err := s1.RunSync(context.Background(), fairsched.Job{}, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	const want = `
# HELP fairsched_jobs_submitted_total Jobs accepted into the queue; each ends exactly once.
# TYPE fairsched_jobs_submitted_total counter
fairsched_jobs_submitted_total{pool="a"} 1
fairsched_jobs_submitted_total{pool="b"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fairsched_jobs_submitted_total"); err != nil {
		t.Error(err)
	}

	c := NewCollector(s1, WithNamespace("app_scheduler"))
	if n := testutil.CollectAndCount(c, "app_scheduler_jobs_submitted_total"); n != 1 {
		t.Errorf("with namespace app_scheduler: %d series of app_scheduler_jobs_submitted_total, want 1", n)
	}
	if n := testutil.CollectAndCount(c, "fairsched_jobs_submitted_total"); n != 0 {
		t.Errorf("with namespace app_scheduler: %d series still named fairsched_, want 0", n)
	}
}

// families gathers reg and indexes the result by metric name.
func families(t *testing.T, reg prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Error(err)
		return nil
	}
	out := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func sum(mf *dto.MetricFamily) float64 {
	var v float64
	for _, m := range mf.GetMetric() {
		switch {
		case m.Gauge != nil:
			v += m.GetGauge().GetValue()
		case m.Counter != nil:
			v += m.GetCounter().GetValue()
		}
	}
	return v
}

// TestConcurrentScrapes scrapes from several goroutines while jobs run. Run
// it with -race. Every scrape must be one consistent view: running jobs
// never exceed the slots.
func TestConcurrentScrapes(t *testing.T) {
	const slots, jobs, scrapers, scrapes = 4, 400, 4, 50
	s := newScheduler(t, fairsched.Config{
		MaxConcurrency: slots,
		Types:          map[string]fairsched.TypeConfig{"web": {Tier: fairsched.Foreground}},
		Keys:           map[string]fairsched.KeyConfig{"tenant-0": {Weight: 3}},
	})
	c := NewCollector(s)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)

	gate := make(chan error)
	var hs []fairsched.Handle
	for i := 0; i < jobs; i++ {
		job := fairsched.Job{Key: fmt.Sprintf("tenant-%d", i%10)}
		if i%2 == 0 {
			job.Type = "web"
		}
		hs = append(hs, submit(t, s, job, gated(gate)))
	}
	// The scrapers start once both types have jobs: the default type's
	// series appear only once it is used.
	var wg sync.WaitGroup
	for i := 0; i < scrapers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < scrapes; n++ {
				mfs := families(t, reg)
				if r := sum(mfs["fairsched_running_jobs"]); r > slots {
					t.Errorf("a scrape shows %v running jobs, more than %d slots", r, slots)
				}
				if k := sum(mfs["fairsched_key_running_jobs"]); k > slots {
					t.Errorf("a scrape shows %v running jobs across keys, more than %d slots", k, slots)
				}
				if n := testutil.CollectAndCount(c, "fairsched_jobs_started_total"); n != 2 {
					t.Errorf("CollectAndCount(jobs_started_total) = %d, want 2 (one per type)", n)
				}
			}
		}()
	}

	// Release the jobs one by one while the scrapers run.
	for range jobs {
		gate <- nil
	}
	for _, h := range hs {
		<-h.Done()
	}
	wg.Wait()

	const want = `
# HELP fairsched_jobs_submitted_total Jobs accepted into the queue; each ends exactly once.
# TYPE fairsched_jobs_submitted_total counter
fairsched_jobs_submitted_total 400
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fairsched_jobs_submitted_total"); err != nil {
		t.Error(err)
	}
	if got := sum(families(t, reg)["fairsched_jobs_started_total"]); got != jobs {
		t.Errorf("jobs started: %v, want %d", got, jobs)
	}
}

// TestKeyLabelsBounded keeps 1,000 distinct ephemeral keys busy and checks
// that only the configured keys carry key labels, the rest being summed up
// in fairsched_other_keys*; and that WithBusiestKeys adds at most
// MaxListedKeys of the others.
func TestKeyLabelsBounded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []Option
		listed int // unconfigured keys labelled, at most
	}{
		{"default", nil, 0},
		{"WithBusiestKeys", []Option{WithBusiestKeys()}, fairsched.MaxListedKeys},
	} {
		t.Run(tc.name, func(t *testing.T) { testKeyLabelsBounded(t, tc.opts, tc.listed) })
	}
}

func testKeyLabelsBounded(t *testing.T, opts []Option, maxListed int) {
	const slots, clients = 8, 1000
	configured := map[string]fairsched.KeyConfig{"alice": {Weight: 2}, "bob": {}}
	s := newScheduler(t, fairsched.Config{MaxConcurrency: slots, Keys: configured})
	reg := prometheus.NewPedanticRegistry()
	if err := Register(reg, s, opts...); err != nil {
		t.Fatal(err)
	}

	release := make(chan struct{})
	var hs []fairsched.Handle
	for i := 0; i < clients; i++ {
		hs = append(hs, submit(t, s, fairsched.Job{Key: fmt.Sprintf("client-%04d", i)},
			func(ctx context.Context) error {
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}))
	}

	mfs := families(t, reg)
	keys := map[string]bool{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "key" {
					keys[l.GetValue()] = true
					if !strings.HasPrefix(name, "fairsched_key_") {
						t.Errorf("%s carries a key label", name)
					}
				}
			}
		}
	}
	for name := range configured {
		if !keys[name] {
			t.Errorf("configured key %q has no series", name)
		}
	}
	listed := len(keys) - len(configured)
	if listed > maxListed || maxListed > 0 && listed == 0 {
		t.Errorf("%d unconfigured keys labelled, want 1 to %d", listed, maxListed)
	}
	if got, want := sum(mfs["fairsched_other_keys"]), float64(clients-listed); got != want {
		t.Errorf("fairsched_other_keys = %v, want %v", got, want)
	}
	running := sum(mfs["fairsched_key_running_jobs"]) + sum(mfs["fairsched_other_keys_running_jobs"])
	queued := sum(mfs["fairsched_key_queued_jobs"]) + sum(mfs["fairsched_other_keys_queued_jobs"])
	if running != slots || queued != clients-slots {
		t.Errorf("listed plus other keys: %v running, %v queued; want %d and %d", running, queued, slots, clients-slots)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint with 1,000 keys busy: %v %v", problems, err)
	}

	close(release)
	for _, h := range hs {
		<-h.Done()
	}
}

// TestKeyNotUTF8 checks that keys whose names cannot be label values,
// configured or not, are counted with the other keys and do not fail the
// scrape, whatever the options.
func TestKeyNotUTF8(t *testing.T) {
	for _, opts := range [][]Option{nil, {WithBusiestKeys()}} {
		s := newScheduler(t, fairsched.Config{MaxConcurrency: 1, Keys: map[string]fairsched.KeyConfig{"bad-\xfe": {}}})
		reg := prometheus.NewPedanticRegistry()
		if err := Register(reg, s, opts...); err != nil {
			t.Fatal(err)
		}
		gate := make(chan error)
		h1 := submit(t, s, fairsched.Job{Key: "tenant-\xff"}, gated(gate))
		h2 := submit(t, s, fairsched.Job{Key: "bad-\xfe"}, gated(gate))
		mfs := families(t, reg) // fails the test if Gather fails
		if got := sum(mfs["fairsched_other_keys"]); got != 2 {
			t.Errorf("fairsched_other_keys = %v, want 2", got)
		}
		if got := sum(mfs["fairsched_other_keys_running_jobs"]) + sum(mfs["fairsched_other_keys_queued_jobs"]); got != 2 {
			t.Errorf("other keys' jobs = %v, want 2", got)
		}
		if n := len(mfs["fairsched_key_running_jobs"].GetMetric()); n != 0 {
			t.Errorf("%d key series for keys that are not UTF-8", n)
		}
		close(gate)
		<-h1.Done()
		<-h2.Done()
	}
}

// The default job type, always registered, has series only once a job of
// it has been submitted: a service that names every job's type sees no
// empty type="" series.
func TestDefaultTypeSeriesOnlyOnceUsed(t *testing.T) {
	s, err := fairsched.New(fairsched.Config{Types: map[string]fairsched.TypeConfig{"work": {}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := NewCollector(s)
	count := func() int { return testutil.CollectAndCount(c, "fairsched_jobs_started_total") }
	if err := s.RunSync(context.Background(), fairsched.Job{Type: "work"}, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d started series with the default type unused, want 1 (type=\"work\")", n)
	}
	if err := s.RunSync(context.Background(), fairsched.Job{}, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Fatalf("%d started series once the default type ran a job, want 2", n)
	}
}

// A job that misses its start deadline counts as finished, expired; a
// delayed job is queued and delayed.
func TestCollectExpiredAndDelayed(t *testing.T) {
	clk := clock.NewFake(t0)
	s := newScheduler(t, fairsched.Config{MaxConcurrency: 1, Clock: clk, Types: map[string]fairsched.TypeConfig{"sync": {}}})
	gate := make(chan error)
	_, err := s.Submit(context.Background(), fairsched.Job{Type: "sync"}, gated(gate))
	if err != nil {
		t.Fatal(err)
	}
	h, err := s.Submit(context.Background(), fairsched.Job{Type: "sync", StartBy: t0.Add(time.Second)}, gated(gate))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(context.Background(), fairsched.Job{Type: "sync", NotBefore: t0.Add(time.Hour)}, gated(gate)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	<-h.Done()
	want := `
# HELP fairsched_delayed_jobs Queued jobs waiting for their NotBefore time.
# TYPE fairsched_delayed_jobs gauge
fairsched_delayed_jobs 1
# HELP fairsched_jobs_finished_total Jobs that ended, by tier, job type and outcome; cancelled includes jobs that left the queue without starting, expired those that missed their start deadline, dependency_failed those that did not run because a job they run after did not complete.
# TYPE fairsched_jobs_finished_total counter
fairsched_jobs_finished_total{outcome="cancelled",tier="background",type="sync"} 0
fairsched_jobs_finished_total{outcome="completed",tier="background",type="sync"} 0
fairsched_jobs_finished_total{outcome="dependency_failed",tier="background",type="sync"} 0
fairsched_jobs_finished_total{outcome="expired",tier="background",type="sync"} 1
fairsched_jobs_finished_total{outcome="failed",tier="background",type="sync"} 0
# HELP fairsched_queued_jobs Queued jobs, including parked and delayed ones, by tier and job type.
# TYPE fairsched_queued_jobs gauge
fairsched_queued_jobs{tier="background",type="sync"} 1
`
	if err := testutil.CollectAndCompare(NewCollector(s), strings.NewReader(want),
		"fairsched_delayed_jobs", "fairsched_jobs_finished_total", "fairsched_queued_jobs"); err != nil {
		t.Fatal(err)
	}
	close(gate)
}

// Queued jobs are counted by what holds them, every reason listed.
func TestCollectWaiting(t *testing.T) {
	s := newScheduler(t, fairsched.Config{MaxConcurrency: 1})
	gate := make(chan error)
	running, err := s.Submit(context.Background(), fairsched.Job{Key: "a"}, gated(gate))
	if err != nil {
		t.Fatal(err)
	}
	s.PauseKey("b")
	for _, key := range []string{"a", "b", "b"} {
		if _, err := s.Submit(context.Background(), fairsched.Job{Key: key}, gated(gate)); err != nil {
			t.Fatal(err)
		}
	}
	want := `
# HELP fairsched_waiting_jobs Queued jobs by what holds them: not-before, dependency, paused, rate, tier-cap, type-cap, key-cap, conflict, resource, turn, or no-handler; and, for a replica, replicas-full or no-replica.
# TYPE fairsched_waiting_jobs gauge
fairsched_waiting_jobs{reason="conflict"} 0
fairsched_waiting_jobs{reason="dependency"} 0
fairsched_waiting_jobs{reason="key-cap"} 0
fairsched_waiting_jobs{reason="no-handler"} 0
fairsched_waiting_jobs{reason="not-before"} 0
fairsched_waiting_jobs{reason="paused"} 2
fairsched_waiting_jobs{reason="rate"} 0
fairsched_waiting_jobs{reason="resource"} 0
fairsched_waiting_jobs{reason="tier-cap"} 0
fairsched_waiting_jobs{reason="turn"} 1
fairsched_waiting_jobs{reason="type-cap"} 0
`
	if err := testutil.CollectAndCompare(NewCollector(s), strings.NewReader(want), "fairsched_waiting_jobs"); err != nil {
		t.Fatal(err)
	}
	s.ResumeKey("b")
	close(gate)
	if err := running.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A failed attempt that is retried counts in job_retries_total.
func TestCollectRetries(t *testing.T) {
	clk := clock.NewFake(t0)
	retried := make(chan struct{}, 1)
	s := newScheduler(t, fairsched.Config{Clock: clk, Types: map[string]fairsched.TypeConfig{
		"flaky": {Retry: fairsched.RetryPolicy{Attempts: 2, Backoff: time.Second}}},
		OnEvent: func(ev fairsched.Event) {
			if ev.Kind == fairsched.EventRetrying {
				retried <- struct{}{}
			}
		}})
	h, err := s.Submit(context.Background(), fairsched.Job{Type: "flaky"}, func(ctx context.Context) error {
		if fairsched.Attempt(ctx) == 1 {
			return errors.New("flaky")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	<-retried // the first attempt failed and was put back
	// The hook runs on a goroutine of its own, and may see the event
	// before the scheduler has set the backoff's timer: a call that takes
	// the scheduler's lock waits for that, so that moving the clock then
	// fires it.
	s.Stats()
	clk.Advance(time.Second)
	if err := h.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP fairsched_job_retries_total Failed attempts that were retried, by tier and job type.
# TYPE fairsched_job_retries_total counter
fairsched_job_retries_total{tier="background",type="flaky"} 1
`
	if err := testutil.CollectAndCompare(NewCollector(s), strings.NewReader(want), "fairsched_job_retries_total"); err != nil {
		t.Fatal(err)
	}
}

// A paused key's allocation goes to the others at once, while its running
// jobs finish: 4 slots, a and b backlogged with equal weights, b paused at
// 5 s with two jobs running.
func TestCollectAllocationOfPausedKey(t *testing.T) {
	clk := clock.NewFake(t0)
	s := newScheduler(t, fairsched.Config{MaxConcurrency: 4, Clock: clk,
		Keys: map[string]fairsched.KeyConfig{"a": {Weight: 1}, "b": {Weight: 1}}})
	gate := make(chan error)
	var hs []fairsched.Handle
	for range 4 {
		hs = append(hs, submit(t, s, fairsched.Job{Key: "a"}, gated(gate)))
		hs = append(hs, submit(t, s, fairsched.Job{Key: "b"}, gated(gate)))
	}
	clk.Advance(5 * time.Second)
	s.PauseKey("b")
	const want = `
# HELP fairsched_key_allocation_slots Weighted max-min fair share of the slots allocated to the key, given the keys with work.
# TYPE fairsched_key_allocation_slots gauge
fairsched_key_allocation_slots{key="a"} 4
fairsched_key_allocation_slots{key="b"} 0
# HELP fairsched_key_running_jobs Running jobs of the fairness key.
# TYPE fairsched_key_running_jobs gauge
fairsched_key_running_jobs{key="a"} 2
fairsched_key_running_jobs{key="b"} 2
`
	if err := testutil.CollectAndCompare(NewCollector(s), strings.NewReader(want),
		"fairsched_key_allocation_slots", "fairsched_key_running_jobs"); err != nil {
		t.Error(err)
	}
	close(gate)
	s.ResumeKey("b")
	for _, h := range hs {
		<-h.Done()
	}
}

// A replica's own figures are labelled with its name, its busy and idle
// time as counters of seconds.
func TestReplicaMetrics(t *testing.T) {
	c := NewCollector(newScheduler(t, fairsched.Config{}))
	ch := make(chan prometheus.Metric, 8)
	c.collectReplica(ch, &fairsched.ReplicaStats{Name: "web-1", Leader: true, Term: 3, Capacity: 8, Running: 2,
		Busy: 1500 * time.Millisecond, Idle: 4 * time.Second})
	close(ch)
	got := map[string]float64{}
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		if l := pb.GetLabel(); len(l) != 1 || l[0].GetName() != "replica" || l[0].GetValue() != "web-1" {
			t.Errorf("%s: labels %v", m.Desc(), l)
		}
		name := metricName(m)
		if pb.Counter != nil {
			got[name] = pb.Counter.GetValue()
		} else {
			got[name] = pb.Gauge.GetValue()
		}
	}
	want := map[string]float64{
		"fairsched_replica_capacity_slots": 8, "fairsched_replica_running_jobs": 2, "fairsched_replica_leader": 1,
		"fairsched_replica_busy_seconds_total": 1.5, "fairsched_replica_idle_seconds_total": 4,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// The cluster's figures, which the replica that leads has, are gauges by
// tier and type, by reason, and of the dead jobs.
func TestClusterMetrics(t *testing.T) {
	c := NewCollector(newScheduler(t, fairsched.Config{}))
	ch := make(chan prometheus.Metric, 32)
	c.collectCluster(ch, &fairsched.Stats{
		Types: []fairsched.TypeStats{
			{Name: "mail", Tier: fairsched.Background, Running: 3, Queued: 40},
			{Name: "http", Tier: fairsched.Foreground, Running: 1},
		},
		Waiting: map[fairsched.WaitReason]int{fairsched.WaitTurn: 20, fairsched.WaitReplicasFull: 12, fairsched.WaitNoReplica: 8},
		Dead:    2,
	})
	close(ch)
	got := map[string]float64{}
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		name := metricName(m)
		for _, l := range pb.GetLabel() {
			name += "," + l.GetValue()
		}
		got[name] = pb.Gauge.GetValue()
	}
	for name, want := range map[string]float64{
		"fairsched_cluster_running_jobs,background,mail": 3, "fairsched_cluster_queued_jobs,background,mail": 40,
		"fairsched_cluster_running_jobs,foreground,http": 1, "fairsched_cluster_queued_jobs,foreground,http": 0,
		"fairsched_cluster_waiting_jobs,turn": 20, "fairsched_cluster_waiting_jobs,replicas-full": 12,
		"fairsched_cluster_waiting_jobs,no-replica": 8, "fairsched_cluster_waiting_jobs,no-handler": 0,
		"fairsched_cluster_waiting_jobs,conflict": 0, "fairsched_cluster_dead_jobs": 2,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s: %v (there: %v), want %v", name, v, ok, want)
		}
	}
}

// metricName returns the fully-qualified name of m's Desc.
func metricName(m prometheus.Metric) string {
	name := m.Desc().String()
	name = name[strings.Index(name, `"`)+1:]
	return name[:strings.Index(name, `"`)]
}
