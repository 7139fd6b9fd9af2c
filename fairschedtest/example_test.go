package fairschedtest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedtest"
)

// A test of aging in virtual time: a low-priority job waits behind a
// running one, and the test moves the clock instead of sleeping.
func ExampleClock() {
	clk := fairschedtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := fairsched.New(fairsched.Config{
		MaxConcurrency: 1,
		Clock:          clk,
		Aging:          fairsched.AgingConfig{Interval: 5 * time.Second, Step: 10},
	})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	release := make(chan struct{})
	blocker, _ := s.Submit(context.Background(), fairsched.Job{}, func(context.Context) error { <-release; return nil })
	waiter, _ := s.Submit(context.Background(), fairsched.Job{Priority: fairsched.PriorityLow}, func(context.Context) error { return nil })

	clk.Advance(25 * time.Second) // five intervals: +50
	for _, j := range s.Snapshot() {
		if j.Seq == waiter.Seq() {
			fmt.Println("waited", j.Wait, "priority", j.BasePriority, "->", j.EffectivePriority)
		}
	}
	close(release)
	_ = blocker.Wait(context.Background())
	fmt.Println(waiter.Wait(context.Background()))
	// Output:
	// waited 25s priority 20 -> 70
	// <nil>
}
