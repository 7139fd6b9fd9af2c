package benchpg

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// noopArgs are every river job's arguments.
type noopArgs struct {
	N int `json:"n"`
}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	ran func()
}

func (w *noopWorker) Work(context.Context, *river.Job[noopArgs]) error {
	w.ran()
	return nil
}

// migrateRiver runs river's migrations on schema.
func migrateRiver(b *testing.B, schema string) {
	b.Helper()
	ctx := context.Background()
	pool := newPool(b, schema)
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema, Logger: warnLogger()})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		b.Fatal(err)
	}
	pool.Close()
}

// startRiver starts a river Client on schema (migrated), on a pool of
// its own: a process of its own. Its one queue has MaxWorkers 100 and a
// no-op worker that calls ran; with cooldown1ms, FetchCooldown and
// FetchPollInterval are at river's minimum (1 ms; the poll interval may
// not be shorter than the cooldown) instead of their defaults (100 ms,
// 1 s). stop stops it and closes its pool; it is called when b ends, if
// not before.
func startRiver(b *testing.B, schema string, cooldown1ms bool, ran func()) (client *river.Client[pgx.Tx], stop func()) {
	b.Helper()
	ctx := context.Background()
	pool := newPool(b, schema)
	ws := river.NewWorkers()
	river.AddWorker(ws, &noopWorker{ran: ran})
	cfg := &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers: ws,
		Schema:  schema,
		Logger:  warnLogger(),
	}
	if cooldown1ms {
		cfg.FetchCooldown = river.FetchCooldownMin
		cfg.FetchPollInterval = river.FetchPollIntervalMin
	}
	client, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		b.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if err := client.Stop(ctx); err != nil {
				b.Errorf("stopping river: %v", err)
			}
			pool.Close()
		})
	}
	b.Cleanup(stop)
	return client, stop
}

func warnLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
