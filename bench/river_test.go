package bench

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
)

type riverNoop noopArgs

func (riverNoop) Kind() string { return "noop" }

type riverWorker struct {
	river.WorkerDefaults[riverNoop]
	ran func()
}

func (w *riverWorker) Work(context.Context, *river.Job[riverNoop]) error {
	w.ran()
	return nil
}

// setupRiver: a river Client on riversqlite, its migrations run first,
// one queue of MaxWorkers 100; with cooldown, FetchCooldown and
// FetchPollInterval at river's minimum (1ms) instead of their defaults
// (100ms and 1s).
func setupRiver(cooldown bool) setupFunc {
	return func(ctx context.Context, path string, sm syncMode, ran func()) (*system, error) {
		db, err := openDB(path, sm)
		if err != nil {
			return nil, err
		}
		driver := riversqlite.New(db)
		migrator, err := rivermigrate.New(driver, nil)
		if err != nil {
			db.Close()
			return nil, err
		}
		if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
			db.Close()
			return nil, err
		}
		ws := river.NewWorkers()
		river.AddWorker(ws, &riverWorker{ran: ran})
		cfg := &river.Config{
			Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
			Workers: ws,
			Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		}
		if cooldown {
			cfg.FetchCooldown = river.FetchCooldownMin
			cfg.FetchPollInterval = river.FetchPollIntervalMin
		}
		client, err := river.NewClient(driver, cfg)
		if err != nil {
			db.Close()
			return nil, err
		}
		if err := client.Start(ctx); err != nil {
			db.Close()
			return nil, err
		}
		return &system{
			enqueueMany: func(ctx context.Context, first, n int) error {
				batch := make([]river.InsertManyParams, n)
				for k := range batch {
					batch[k] = river.InsertManyParams{Args: riverNoop{N: first + k}}
				}
				_, err := client.InsertMany(ctx, batch)
				return err
			},
			enqueue: func(ctx context.Context, i int) error {
				_, err := client.Insert(ctx, riverNoop{N: i}, nil)
				return err
			},
			unfinished: func(ctx context.Context) (int, error) {
				return count(ctx, db, `SELECT count(*) FROM river_job
WHERE state IN ('available', 'pending', 'retryable', 'running', 'scheduled')`)
			},
			verify: func(ctx context.Context) error {
				return expect(ctx, db, map[string]int{
					`SELECT count(*) FROM river_job WHERE state = 'completed'`:  totalJobs,
					`SELECT count(*) FROM river_job WHERE state != 'completed'`: 0,
				})
			},
			stop: func() error {
				return errors.Join(client.Stop(ctx), db.Close())
			},
		}, nil
	}
}
