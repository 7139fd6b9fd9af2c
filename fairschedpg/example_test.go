package fairschedpg_test

import (
	"context"
	"log"
	"os"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedpg"
	"github.com/jackc/pgx/v5/pgxpool"
)

type Welcome struct {
	Email string `json:"email"`
}

// A service's durable jobs in its own PostgreSQL database: the store on
// the service's pool, passed as Config.Store, and a job enqueued in the
// same transaction as the change that calls for it.
func ExampleOpenPool() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	st, err := fairschedpg.OpenPool(ctx, pool) // creates or migrates the tables
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close() // after the Scheduler's Shutdown

	var handlers fairsched.Handlers
	fairsched.AddHandler(&handlers, "welcome", func(ctx context.Context, w Welcome) error {
		log.Printf("welcome, %s", w.Email) // send it; JobID(ctx) makes a send idempotent
		return nil
	})
	s, err := fairsched.New(fairsched.Config{MaxConcurrency: 8, Store: st, Handlers: &handlers})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Shutdown(ctx)

	// The job exists if and only if the sign-up commits.
	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx) // after Commit, it does nothing
	if _, err := tx.Exec(ctx, `INSERT INTO signups (email) VALUES ($1)`, "ann@example.com"); err != nil {
		log.Fatal(err)
	}
	if _, err := fairsched.EnqueueTx(ctx, s, tx, fairsched.Job{Type: "welcome"}, Welcome{Email: "ann@example.com"}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}

	// Jobs with no transaction of the service's: Enqueue returns once
	// the job is committed.
	if _, err := s.Enqueue(ctx, fairsched.Job{Type: "welcome", Key: "tenant-7"}, Welcome{Email: "bo@example.com"}); err != nil {
		log.Fatal(err)
	}
}

// Replicas of one service behind a load balancer, one scheduler for all:
// each process opens a replica's Store on the same database and names
// itself, and the limits hold across them.
func ExampleOpenReplica() {
	ctx := context.Background()
	st, err := fairschedpg.OpenReplica(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()         // after the Scheduler's Close
	name, _ := os.Hostname() // unique per replica, and stable across its restarts
	s, err := fairsched.New(fairsched.Config{
		MaxConcurrency: 16, // for the whole cluster
		Store:          st,
		Replica:        &fairsched.Replica{Name: name, Capacity: 8},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	err = s.RunSync(ctx, fairsched.Job{Key: "tenant-7"}, func(ctx context.Context) error {
		return nil // runs here, in one of the cluster's 16 slots
	})
	if err != nil {
		log.Fatal(err)
	}
}
