package benchpg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// envDSN names the server (scripts/pg.sh starts a throwaway one and
// prints the line to export), as for fairschedpg's tests.
const envDSN = "FAIRSCHED_PG_DSN"

const missing = envDSN + " is not set: these benchmarks need a PostgreSQL server. " +
	"Start a throwaway one with `eval \"$(scripts/pg.sh start DIR)\"` from the repository's root " +
	"(and `scripts/pg.sh stop DIR` afterwards)"

const (
	totalJobs = 20000 // per throughput run
	batchSize = 1000  // jobs per insert-many call
	claimSize = 100   // rows the floor claims per transaction
	workers   = 100   // river's MaxWorkers per client

	runTimeout = 3 * time.Minute // a run that takes longer has hung
)

// TestMain says loudly, whether or not -v is given, that the benchmarks
// skip for want of a server; with CI set they fail instead (dsn).
func TestMain(m *testing.M) {
	if os.Getenv(envDSN) == "" {
		if os.Getenv("CI") != "" {
			fmt.Fprintf(os.Stderr, "FAIL: %s (CI is set: the benchmarks may not skip)\n", missing)
		} else {
			fmt.Fprintf(os.Stderr, "\n*** SKIPPING the PostgreSQL benchmarks: %s ***\n\n", missing)
		}
	}
	os.Exit(m.Run())
}

// dsn returns the server's address, or skips b (fails it under CI).
func dsn(b testing.TB) string {
	b.Helper()
	d := os.Getenv(envDSN)
	if d == "" {
		if os.Getenv("CI") != "" {
			b.Fatal(missing)
		}
		b.Skip(missing)
	}
	return d
}

// newSchema creates an empty schema of its own on the server, dropped
// (with what is in it) when b ends, and returns its name.
func newSchema(b testing.TB) string {
	b.Helper()
	d := dsn(b)
	ctx := context.Background()
	var r [8]byte
	rand.Read(r[:])
	name := "fairsched_bench_" + hex.EncodeToString(r[:])
	admin, err := pgx.Connect(ctx, d)
	if err != nil {
		b.Fatalf("connecting to %s's server: %v", envDSN, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		b.Fatalf("creating the schema: %v", err)
	}
	b.Cleanup(func() {
		admin, err := pgx.Connect(ctx, d)
		if err != nil {
			b.Errorf("dropping the schema %s: %v", name, err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP SCHEMA "+name+" CASCADE"); err != nil {
			b.Errorf("dropping the schema %s: %v", name, err)
		}
	})
	return name
}

// poolConfig returns a pool's configuration whose connections use schema.
func poolConfig(b testing.TB, schema string) *pgxpool.Config {
	b.Helper()
	cfg, err := pgxpool.ParseConfig(dsn(b))
	if err != nil {
		b.Fatalf("%s: %v", envDSN, err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	return cfg
}

// newPool opens a pool on schema, closed when b ends (before the schema
// is dropped: cleanups run last first). A pool stands for a process.
func newPool(b testing.TB, schema string) *pgxpool.Pool {
	b.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), poolConfig(b, schema))
	if err != nil {
		b.Fatalf("opening a pool: %v", err)
	}
	b.Cleanup(pool.Close)
	return pool
}

// connect opens one connection on schema, closed when b ends.
func connect(b testing.TB, schema string) *pgx.Conn {
	b.Helper()
	conn, err := pgx.ConnectConfig(context.Background(), poolConfig(b, schema).ConnConfig)
	if err != nil {
		b.Fatalf("connecting: %v", err)
	}
	b.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// reportLatency reports the median and the 99th percentile of lats (the
// nearest rank), in µs.
func reportLatency(b *testing.B, lats []time.Duration) {
	if len(lats) == 0 {
		return
	}
	slices.Sort(lats)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(lats)))) - 1
		return lats[max(0, min(i, len(lats)-1))]
	}
	b.ReportMetric(float64(rank(0.50).Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(rank(0.99).Nanoseconds())/1e3, "p99-µs")
}

// waitFor returns once ch receives, or fails b after a minute (a hang's
// bound, not a synchronisation).
func waitFor[T any](b *testing.B, ch <-chan T, what string) T {
	b.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		b.Fatalf("%s: nothing in a minute", what)
		panic("unreachable")
	}
}
