// Package fairschedpg is the PostgreSQL store of fairsched: many
// replicas of a service on one PostgreSQL database, behaving as one
// scheduler, with one of them, the leader, making every decision.
//
// It is not usable as Config.Store yet. What it has today is the
// groundwork: the schema and its migrations (Migrate), the leader's lease
// with its term fencing, and the replicas' registry. The store itself,
// and the scheduler's side of leadership, come next.
//
// It is a Go module of its own, on github.com/jackc/pgx/v5, so that the
// core module and the SQLite store never download or link pgx.
//
// A deploy pipeline can create or migrate the schema before the replicas
// start:
//
//	pool, err := pgxpool.New(ctx, dsn)
//	...
//	if err := fairschedpg.Migrate(ctx, pool); err != nil { ... }
//
// Migrate is safe to run from every replica at once, and does nothing to
// a schema already at its version. A schema that a newer version of this
// module wrote is refused with ErrSchemaTooNew and left untouched, so
// that a rolling upgrade never has an old replica write to a new schema.
package fairschedpg

import (
	"context"

	"github.com/fairsched/fairsched/fairschedpg/internal/schema"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SchemaVersion is the version of the schema this version of the module
// creates and uses.
const SchemaVersion = 1

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
