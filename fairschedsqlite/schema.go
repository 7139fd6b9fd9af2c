package fairschedsqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// The schema's version is SQLite's user_version. Each migration takes a
// database from one version to the next, in one transaction; a file made
// by a newer version of this package is refused, never written.

// schemaVersion is the version this package writes.
const schemaVersion = 5

// migrations[v] takes the schema from version v to v+1.
var migrations = []string{
	0: `
CREATE TABLE fairsched_jobs (
	id         INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused: a job's identity for good
	state      INTEGER NOT NULL,                  -- 1 queued (running if started != 0), 3 completed, 4 ended, 5 dead
	type       TEXT    NOT NULL,
	key        TEXT    NOT NULL,
	ref        TEXT    NOT NULL,                  -- fairsched.Job.ID
	priority   INTEGER NOT NULL,
	submitted  INTEGER NOT NULL,                  -- µs since the Unix epoch, as every time here
	not_before INTEGER NOT NULL DEFAULT 0,
	start_by   INTEGER NOT NULL DEFAULT 0,
	attempt    INTEGER NOT NULL DEFAULT 0,        -- attempts started
	allowed    INTEGER NOT NULL DEFAULT 0,        -- attempts allowed in all, if set by a retry by hand
	started    INTEGER NOT NULL DEFAULT 0,        -- the running attempt's start; 0: none runs
	finished   INTEGER NOT NULL DEFAULT 0,
	attempts   TEXT,                              -- JSON array of finished attempts; NULL: none kept
	error      TEXT,                              -- why it ended, if it did not complete
	args       BLOB    NOT NULL
);
CREATE INDEX fairsched_jobs_unfinished ON fairsched_jobs (id) WHERE state < 3;
CREATE INDEX fairsched_jobs_finished ON fairsched_jobs (finished) WHERE state >= 3;
`,
	1: `
CREATE TABLE fairsched_state (
	name  TEXT PRIMARY KEY, -- "fair": the keys' virtual times and the learned costs
	value BLOB NOT NULL
);
`,
	2: `
ALTER TABLE fairsched_jobs ADD COLUMN after TEXT; -- JSON array of the IDs of the jobs it runs after; NULL: none
`,
	3: `
ALTER TABLE fairsched_jobs ADD COLUMN needs TEXT; -- JSON object: units of resources it needs in place of its type's; NULL: its type's
`,
	4: `
ALTER TABLE fairsched_jobs ADD COLUMN stood INTEGER NOT NULL DEFAULT 0; -- its lane's paused µs when it was set aside with its aging clock running (store.Job.Stood); 0: none kept
`,
}

// ErrSchemaTooNew is returned by Open for a database whose schema a newer
// version of this package wrote: it is left untouched.
var ErrSchemaTooNew = errors.New("fairschedsqlite: the database's schema is newer than this package's")

// migrate brings db's schema to schemaVersion.
func migrate(ctx context.Context, db *sql.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for {
		var v int
		if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
			return fmt.Errorf("fairschedsqlite: reading the schema version: %w", err)
		}
		switch {
		case v == schemaVersion:
			return nil
		case v > schemaVersion:
			return fmt.Errorf("%w: version %d, this package knows %d", ErrSchemaTooNew, v, schemaVersion)
		}
		if err := step(ctx, conn, v); err != nil {
			return fmt.Errorf("fairschedsqlite: migrating the schema from version %d to %d: %w", v, v+1, err)
		}
	}
}

// step runs migration v in one transaction. It re-reads the version
// inside the transaction, so that two processes migrating at once apply
// it once.
func step(ctx context.Context, conn *sql.Conn, v int) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var now int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&now); err != nil {
		return err
	}
	if now != v {
		return nil // another process migrated it
	}
	if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v+1)); err != nil {
		return err
	}
	return tx.Commit()
}
