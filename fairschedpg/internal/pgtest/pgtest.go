// Package pgtest gives each test of the PostgreSQL store a schema of its
// own on a real server: the one FAIRSCHED_PG_DSN names (scripts/pg.sh
// starts a throwaway one and prints the line to export).
//
// Without FAIRSCHED_PG_DSN, a test is skipped, and Main says so on
// stderr whether or not -v is given; with CI set in the environment, it
// fails instead, so that CI never passes by skipping.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"
)

// EnvDSN is the environment variable that names the server.
const EnvDSN = "FAIRSCHED_PG_DSN"

const missing = EnvDSN + " is not set: the PostgreSQL store's tests need a server. " +
	"Start a throwaway one with `eval \"$(scripts/pg.sh start DIR)\"` from the repository's root " +
	"(and `scripts/pg.sh stop DIR` afterwards)"

// Main runs the tests of a package, with goroutine-leak checks, saying
// loudly when they skip for want of a server.
func Main(m *testing.M) {
	if os.Getenv(EnvDSN) == "" {
		if os.Getenv("CI") != "" {
			fmt.Fprintf(os.Stderr, "FAIL: %s (CI is set: the tests may not skip)\n", missing)
		} else {
			fmt.Fprintf(os.Stderr, "\n*** SKIPPING the PostgreSQL tests: %s ***\n\n", missing)
		}
	}
	goleak.VerifyTestMain(m)
}

// DSN returns the server's address, or skips t (fails it under CI).
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		if os.Getenv("CI") != "" {
			t.Fatal(missing)
		}
		t.Skip(missing)
	}
	return dsn
}

// Pool returns a pool of connections to a new, empty schema of its own,
// which t's cleanup drops with the pool's connections (unless t failed:
// then it stays, for a look). The schema is the
// connections' search_path: statements name the tables unqualified.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, _ := PoolSchema(t)
	return pool
}

// PoolSchema is Pool, and returns the schema's name too, for another
// pool on it (Config).
func PoolSchema(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	dsn := DSN(t)
	ctx := context.Background()
	var b [8]byte
	rand.Read(b[:])
	name := "fairsched_test_" + hex.EncodeToString(b[:])

	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connecting to %s's server: %v", EnvDSN, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("creating the test's schema: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kept the failed test's schema %s, to look at", name)
			return
		}
		admin, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("dropping the test's schema %s: %v", name, err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP SCHEMA "+name+" CASCADE"); err != nil {
			t.Errorf("dropping the test's schema %s: %v", name, err)
		}
	})
	pool, err := pgxpool.NewWithConfig(ctx, Config(t, name))
	if err != nil {
		t.Fatalf("opening a pool: %v", err)
	}
	t.Cleanup(pool.Close) // before the schema's drop: cleanups run last first
	return pool, name
}

// Config returns a pool's configuration whose connections use schema.
func Config(t testing.TB, schema string) *pgxpool.Config {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(DSN(t))
	if err != nil {
		t.Fatalf("%s: %v", EnvDSN, err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	return cfg
}
