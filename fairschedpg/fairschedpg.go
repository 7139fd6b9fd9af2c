// Package fairschedpg keeps a fairsched scheduler's durable jobs in a
// PostgreSQL database, through pgx v5: the durable mode of the SQLite
// store (fairschedsqlite), on the database a service runs already.
//
//	st, err := fairschedpg.Open(ctx, "postgres://app@db/app")
//	...
//	defer st.Close()
//	s, err := fairsched.New(fairsched.Config{Store: st, Handlers: handlers})
//	...
//	defer s.Shutdown(ctx) // before st.Close
//
// or, on a pool the service has opened already, OpenPool(ctx, pool): its
// own transactions on the pool can then enqueue jobs, which exist if and
// only if the transaction commits:
//
//	tx, err := pool.Begin(ctx)
//	...
//	id, err := fairsched.EnqueueTx(ctx, s, tx, fairsched.Job{Type: "welcome"}, email)
//	...
//	err = tx.Commit(ctx)
//
// What it keeps is what the SQLite store keeps: every job's identity,
// arguments, attempts and errors, not-before times and deadlines, dead
// jobs, duplicates' priorities, dependencies, resource needs, pauses,
// periodic schedules and the fair-share state; a restart, or a kill -9,
// loses no committed job and starts none twice at the same time. A job
// that was running when its process died is a lost attempt, retried by
// its type's policy.
//
// The tables live in the schema the pool's connections' search_path
// names first; Open and OpenPool create them, or migrate them, and
// refuse a schema that a newer version of this module wrote
// (ErrSchemaTooNew). A deploy pipeline can run Migrate first instead:
//
//	pool, err := pgxpool.New(ctx, dsn)
//	...
//	if err := fairschedpg.Migrate(ctx, pool); err != nil { ... }
//
// Every transaction of the Store's is READ COMMITTED, whatever the
// server's default, and every statement runs under a timeout
// (Options.StatementTimeout). Writes are grouped: the writes that queue
// while one transaction commits share the next one. Jobs committed by
// the service's transactions reach the scheduler through LISTEN/NOTIFY,
// within milliseconds of the commit, and a poll finds any whose
// notification was missed.
//
// A Store opened with Open or OpenPool is its schema's only one: a
// second, in any process, fails with ErrInUse until the first is closed
// or its process has died. Replicas of a service, each a process whose
// scheduler is one of several behaving as one (fairsched.Config.Replica),
// open theirs with OpenReplica or OpenReplicaPool instead: any number of
// those share a schema, with one leader elected in it at a time, which
// keeps the durable jobs of all of them: each replica inserts the jobs
// it is given, the leader takes them through the same notifications,
// and every write it makes of a job is fenced by its term.
//
// It is a Go module of its own, on github.com/jackc/pgx/v5, so that the
// core module and the SQLite store never download or link pgx. It
// implements the core module's store interface, which is internal: pair
// it with the core module of the same release.
package fairschedpg

import (
	"context"

	"github.com/fairsched/fairsched/fairschedpg/internal/schema"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SchemaVersion is the version of the schema this version of the module
// creates and uses.
const SchemaVersion = 2

// The schema's migrations are counted in one place.
var _ [SchemaVersion - schema.Version]struct{}
var _ [schema.Version - SchemaVersion]struct{}

// ErrSchemaTooNew is returned by Migrate for a database whose schema a
// newer version of this module wrote: it is left untouched. Upgrade the
// replica.
var ErrSchemaTooNew = schema.ErrTooNew

// Migrate creates the store's tables in pool's database (in the schema
// its connections' search_path names first), or brings them to
// SchemaVersion, in one transaction. Several replicas may call it at
// once: one migrates, the others wait for it. It fails with an error
// wrapping ErrSchemaTooNew for a schema past SchemaVersion.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := schema.Migrate(ctx, pool)
	return err
}
