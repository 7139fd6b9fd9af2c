// Command quickstart is fairsched in a few lines: requests in the
// foreground, each client's share kept fair, and background work that
// yields to them.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/fairsched/fairsched"
)

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(w io.Writer) error {
	s, err := fairsched.New(fairsched.Config{
		MaxConcurrency: 4,
		TierLimits:     map[fairsched.Tier]int{fairsched.Background: 2}, // room kept for requests
		Types: map[string]fairsched.TypeConfig{
			"request": {Tier: fairsched.Foreground, DefaultCost: 10 * time.Millisecond},
			"report":  {Tier: fairsched.Background, DefaultCost: time.Second},
		},
	})
	if err != nil {
		return err
	}
	defer s.Close()

	// Background work: Submit returns at once; the scheduler runs it.
	report, err := s.Submit(context.Background(), fairsched.Job{Type: "report"}, func(ctx context.Context) error {
		time.Sleep(20 * time.Millisecond) // the work itself
		return nil
	})
	if err != nil {
		return err
	}
	// A request: RunSync waits for a slot, runs fn here, returns its error.
	for _, client := range []string{"alice", "bob", "alice"} {
		err := s.RunSync(context.Background(), fairsched.Job{Type: "request", Key: client},
			func(ctx context.Context) error { fmt.Fprintf(w, "served %s\n", client); return nil })
		if err != nil {
			return err // a full queue is fairsched.ErrQueueFull: answer 429
		}
	}
	if err := report.Wait(context.Background()); err != nil {
		return err
	}
	st := s.Stats()
	fmt.Fprintf(w, "%d jobs completed\n", st.Completed)
	return nil
}
