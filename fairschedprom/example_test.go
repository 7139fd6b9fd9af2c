package fairschedprom_test

import (
	"context"
	"fmt"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedprom"
	"github.com/prometheus/client_golang/prometheus"
)

func ExampleNewCollector() {
	s, err := fairsched.New(fairsched.Config{MaxConcurrency: 8})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	// Register the collector on the registry the service serves, e.g.
	// http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})).
	reg := prometheus.NewRegistry()
	reg.MustRegister(fairschedprom.NewCollector(s))

	_ = s.RunSync(context.Background(), fairsched.Job{Key: "tenant-a"}, func(context.Context) error { return nil })

	mfs, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "fairsched_jobs_submitted_total", "fairsched_job_duration_seconds":
			fmt.Println(mf.GetName(), mf.GetType())
		}
	}
	// Output:
	// fairsched_job_duration_seconds HISTOGRAM
	// fairsched_jobs_submitted_total COUNTER
}

// Two schedulers in one process are told apart by a constant label.
func ExampleRegister() {
	fg, _ := fairsched.New(fairsched.Config{MaxConcurrency: 16})
	bg, _ := fairsched.New(fairsched.Config{MaxConcurrency: 2})
	defer fg.Close()
	defer bg.Close()

	reg := prometheus.NewRegistry()
	for name, s := range map[string]*fairsched.Scheduler{"requests": fg, "batch": bg} {
		if err := fairschedprom.Register(reg, s, fairschedprom.WithConstLabels(prometheus.Labels{"pool": name})); err != nil {
			fmt.Println(err)
		}
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "fairsched_jobs_submitted_total" {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "pool" {
						fmt.Println(l.GetValue())
					}
				}
			}
		}
	}
	// Output:
	// batch
	// requests
}
