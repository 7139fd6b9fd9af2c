package fairsched_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedtest"
)

// Foreground work waits for a slot on the caller's goroutine.
func ExampleScheduler_RunSync() {
	s, err := fairsched.New(fairsched.Config{MaxConcurrency: 4})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	err = s.RunSync(context.Background(), fairsched.Job{Key: "203.0.113.7"}, func(ctx context.Context) error {
		fmt.Println("serving the request")
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// serving the request
	// err: <nil>
}

// Background work runs on the scheduler's goroutines; the Handle waits for
// it or cancels it.
func ExampleScheduler_Submit() {
	s, err := fairsched.New(fairsched.Config{MaxConcurrency: 2})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	h, err := s.Submit(context.Background(), fairsched.Job{Type: "", ID: "repo-1", Priority: fairsched.PriorityLow}, func(ctx context.Context) error {
		return errors.New("repack failed")
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(h.Wait(context.Background()))
	// Output: repack failed
}

// Work that arrives together is submitted together: one decision for the
// batch, all or none, each job placed as its own Submit would be.
func ExampleScheduler_SubmitMany() {
	s, err := fairsched.New(fairsched.Config{MaxConcurrency: 4, MaxQueue: 100})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	var jobs []fairsched.SubmitParams
	for _, repo := range []string{"repo-1", "repo-2", "repo-3"} {
		jobs = append(jobs, fairsched.SubmitParams{
			Job: fairsched.Job{ID: repo},
			Fn:  func(ctx context.Context) error { return nil },
		})
	}
	hs, err := s.SubmitMany(context.Background(), jobs)
	if err != nil {
		panic(err)
	}
	for _, h := range hs {
		fmt.Println(h.Seq(), h.Wait(context.Background()))
	}

	// A batch that does not fit the queue is refused whole.
	big := make([]fairsched.SubmitParams, 101)
	for i := range big {
		big[i].Fn = func(ctx context.Context) error { return nil }
	}
	_, err = s.SubmitMany(context.Background(), big)
	fmt.Println(errors.Is(err, fairsched.ErrQueueFull), s.Stats().Queued)
	// Output:
	// 1 <nil>
	// 2 <nil>
	// 3 <nil>
	// true 0
}

// Job types give work a tier, caps and a conflict group: a clone and a
// repack of one repository never overlap, and background work is capped so
// that foreground work always finds a slot.
func ExampleScheduler_RegisterType() {
	s, err := fairsched.New(fairsched.Config{
		MaxConcurrency: 8,
		TierLimits:     map[fairsched.Tier]int{fairsched.Background: 4},
	})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	fmt.Println(s.RegisterType("clone", fairsched.TypeConfig{Tier: fairsched.Foreground, ConflictGroup: "git", DefaultCost: 10 * time.Second}))
	fmt.Println(s.RegisterType("repack", fairsched.TypeConfig{Tier: fairsched.Background, MaxConcurrency: 3, ConflictGroup: "git"}))
	_, err = s.Submit(context.Background(), fairsched.Job{Type: "gc"}, func(context.Context) error { return nil })
	fmt.Println(err)
	// Output:
	// <nil>
	// <nil>
	// fairsched: unknown job type "gc"
}

// A full queue is refused at once, with the limit, the size and an
// estimate of the wait, so a service can answer 429 Too Many Requests with
// a Retry-After.
func ExampleQueueFullError() {
	s, err := fairsched.New(fairsched.Config{
		MaxConcurrency: 1,
		DefaultKey:     fairsched.KeyConfig{MaxPending: 1},
	})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	release := make(chan struct{})
	block := func(context.Context) error { <-release; return nil }
	s.Submit(context.Background(), fairsched.Job{Key: "greedy"}, block) // runs
	s.Submit(context.Background(), fairsched.Job{Key: "greedy"}, block) // queues

	_, err = s.Submit(context.Background(), fairsched.Job{Key: "greedy"}, block)
	var full *fairsched.QueueFullError
	if errors.As(err, &full) {
		// Retry-After in whole seconds, rounded up, at least 1: the
		// running job's default second half done, then the queued one's.
		retry := strconv.Itoa(int(full.RetryAfter() / time.Second))
		fmt.Println(http.StatusTooManyRequests, full.Key, full.Limit, full.Size, full.Wait, retry)
	}
	// Another key is not affected by the greedy one's limit.
	_, err = s.Submit(context.Background(), fairsched.Job{Key: "polite"}, block)
	fmt.Println(err)
	close(release)
	// Output:
	// 429 greedy 1 1 1.5s 2
	// <nil>
}

// Weights share capacity between fairness keys; they can change at run
// time.
func ExampleScheduler_SetKeyWeight() {
	s, err := fairsched.New(fairsched.Config{
		MaxConcurrency: 16,
		Keys: map[string]fairsched.KeyConfig{
			"s3://prod":      {Weight: 3, MaxConcurrency: 12},
			"s3://b2-backup": {Weight: 1, MaxConcurrency: 6, MinSlots: 2},
		},
	})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	fmt.Println(s.SetKeyWeight("s3://prod", 5))
	fmt.Println(s.SetKeyWeight("s3://prod", 0))
	// Output:
	// <nil>
	// fairsched: key "s3://prod": weight 0 must be positive
}

// The starvation bound follows from the aging configuration.
func ExampleAgingConfig_MaxWait() {
	aging := fairsched.AgingConfig{
		GracePeriod:     time.Minute,
		Interval:        10 * time.Second,
		Step:            5,
		MaxEffective:    fairsched.PriorityHigh,
		UrgentThreshold: 120,
	}
	bound, _ := aging.MaxWait(fairsched.PriorityLow)
	fmt.Println("a priority-20 job is first in line within", bound)
	fmt.Println("its effective priority after 2 minutes:", aging.Effective(fairsched.PriorityLow, 2*time.Minute))
	// Output:
	// a priority-20 job is first in line within 4m20s
	// its effective priority after 2 minutes: 50
}

// Shutdown lets queued and running work finish; new work is refused.
func ExampleScheduler_Shutdown() {
	s, err := fairsched.New(fairsched.Config{MaxConcurrency: 1})
	if err != nil {
		panic(err)
	}
	for i := 0; i < 3; i++ {
		s.Submit(context.Background(), fairsched.Job{}, func(context.Context) error { return nil })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fmt.Println(s.Shutdown(ctx))
	_, err = s.Submit(context.Background(), fairsched.Job{}, func(context.Context) error { return nil })
	fmt.Println(err)
	fmt.Println(s.Stats().Completed)
	// Output:
	// <nil>
	// fairsched: scheduler closed
	// 3
}

// A job given a start deadline ends with ErrStartDeadline if it has not
// started by then: here the only slot stays taken. NotBefore delays a job.
// The test clock moves time by hand; the scheduler's timer fires in it.
func ExampleJob_startBy() {
	clk := fairschedtest.NewClock(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	s, err := fairsched.New(fairsched.Config{MaxConcurrency: 1, Clock: clk})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	release := make(chan struct{})
	s.Submit(context.Background(), fairsched.Job{}, func(context.Context) error { <-release; return nil })
	dispatch, _ := s.Submit(context.Background(), fairsched.Job{StartBy: clk.Now().Add(30 * time.Second)},
		func(context.Context) error { return nil })
	report, _ := s.Submit(context.Background(), fairsched.Job{NotBefore: clk.Now().Add(time.Hour)},
		func(context.Context) error { return nil })

	clk.Advance(30 * time.Second)
	fmt.Println(errors.Is(dispatch.Err(), fairsched.ErrStartDeadline), s.Stats().Delayed)
	close(release)
	clk.Advance(time.Hour)
	fmt.Println(report.Wait(context.Background()))
	// Output:
	// true 1
	// <nil>
}

// A periodic job: an occurrence every minute, skipped while the previous
// one still runs.
func ExampleScheduler_Schedule() {
	clk := fairschedtest.NewClock(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	s, err := fairsched.New(fairsched.Config{Clock: clk})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	ran := make(chan time.Time, 10)
	p, err := s.Schedule(context.Background(), fairsched.Every(time.Minute), fairsched.Job{ID: "reindex"},
		func(context.Context) error { ran <- clk.Now(); return nil })
	if err != nil {
		panic(err)
	}
	for range 3 {
		clk.Advance(time.Minute)
		fmt.Println((<-ran).Format("15:04"))
		p.Last().Wait(context.Background())
	}
	p.Stop()
	// Output:
	// 09:01
	// 09:02
	// 09:03
}
