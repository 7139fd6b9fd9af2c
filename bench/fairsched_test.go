package bench

import (
	"context"
	"errors"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedsqlite"
)

// setupFairsched: a Scheduler with MaxConcurrency 100 on a
// fairschedsqlite Store; bulk batches go through EnqueueMany.
func setupFairsched(ctx context.Context, path string, sm syncMode, ran func()) (*system, error) {
	opts := fairschedsqlite.Options{Synchronous: fairschedsqlite.Normal}
	if sm == syncFull {
		opts.Synchronous = fairschedsqlite.Full
	}
	st, err := fairschedsqlite.Open(path, opts)
	if err != nil {
		return nil, err
	}
	var hs fairsched.Handlers
	fairsched.AddHandler(&hs, "noop", func(context.Context, noopArgs) error {
		ran()
		return nil
	})
	s, err := fairsched.New(fairsched.Config{MaxConcurrency: workers, Store: st, Handlers: &hs})
	if err != nil {
		st.Close()
		return nil, err
	}
	job := fairsched.Job{Type: "noop"}
	return &system{
		enqueueMany: func(ctx context.Context, first, n int) error {
			batch := make([]fairsched.EnqueueParams, n)
			for k := range batch {
				batch[k] = fairsched.EnqueueParams{Job: job, Args: noopArgs{N: first + k}}
			}
			_, err := s.EnqueueMany(ctx, batch)
			return err
		},
		enqueue: func(ctx context.Context, i int) error {
			_, err := s.Enqueue(ctx, job, noopArgs{N: i})
			return err
		},
		unfinished: func(ctx context.Context) (int, error) {
			return count(ctx, st.DB(), `SELECT count(*) FROM fairsched_jobs WHERE state < 3`)
		},
		verify: func(ctx context.Context) error {
			return expect(ctx, st.DB(), map[string]int{
				`SELECT count(*) FROM fairsched_jobs WHERE state = 3`:  totalJobs,
				`SELECT count(*) FROM fairsched_jobs WHERE state != 3`: 0,
			})
		},
		stop: func() error {
			return errors.Join(s.Shutdown(ctx), st.Close())
		},
	}, nil
}
