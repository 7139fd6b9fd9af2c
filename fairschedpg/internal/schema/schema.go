// Package schema creates and migrates the PostgreSQL store's tables.
//
// Each migration takes the schema from one version to the next; Migrate
// applies the pending ones in one transaction (PostgreSQL's DDL is
// transactional: a failed migration leaves nothing half done) and records
// each in fairsched_schema_version. Replicas starting together may all
// call Migrate: the first to take a transaction-scoped advisory lock
// migrates, the others wait for it and then find nothing to do.
//
// A database whose schema a newer version of this module wrote is refused
// (ErrTooNew), never written: in a rolling upgrade, the replicas still on
// the old version stop at their next Migrate instead of writing rows they
// do not understand. Migrations must therefore only ever be added at the
// end, and a released one never edited.
//
// Times the replicas share (the lease, heartbeats) are timestamptz, set
// from the database's clock. A job's times are µs since the Unix epoch
// (bigint), as the store interface (store.Job) carries them.
package schema

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Version is the schema version this module writes: one per migration.
const Version = 2

// migrations[v] takes the schema from version v to v+1.
var migrations = [Version]string{
	0: `
-- A job: what the SQLite store keeps of one, column for column, with a
-- dead job one in state 5 (a retry by hand is then an UPDATE, as there).
CREATE TABLE fairsched_jobs (
	id         bigint   GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- never reused: a job's identity for good
	state      smallint NOT NULL CHECK (state BETWEEN 1 AND 5),    -- 1 queued (running if started <> 0), 3 completed, 4 ended, 5 dead
	type       text     NOT NULL,
	key        text     NOT NULL,
	ref        text     NOT NULL,                 -- fairsched.Job.ID
	priority   integer  NOT NULL,                 -- raised when a duplicate joins it
	submitted  bigint   NOT NULL,                 -- µs since the Unix epoch, as every job time here; its aging clock runs from here
	not_before bigint   NOT NULL DEFAULT 0,
	start_by   bigint   NOT NULL DEFAULT 0,
	attempt    integer  NOT NULL DEFAULT 0,       -- attempts started: the fencing token of the one running
	allowed    integer  NOT NULL DEFAULT 0,       -- attempts allowed in all, if set by a retry by hand
	started    bigint   NOT NULL DEFAULT 0,       -- the running attempt's start; 0: none runs
	replica    text,                              -- the replica the running attempt was granted to; NULL: none
	finished   bigint   NOT NULL DEFAULT 0,
	attempts   jsonb,                             -- finished attempts, [{"start","end","err"}]; NULL: none kept
	error      text,                              -- why it ended, if it did not complete
	after      bigint[],                          -- the jobs it runs after; NULL: none
	needs      jsonb,                             -- units of resources it needs in place of its type's; NULL: its type's
	stood      bigint   NOT NULL DEFAULT 0,       -- its lane's paused µs when set aside with its aging clock running; 0: none kept
	args       bytea    NOT NULL,                 -- the handler's arguments, JSON, byte for byte
	unseen     boolean  NOT NULL DEFAULT false    -- inserted in a caller's transaction (EnqueueTx), not yet taken by a scheduler
);
CREATE INDEX fairsched_jobs_unfinished ON fairsched_jobs (id) WHERE state < 3;
CREATE INDEX fairsched_jobs_finished ON fairsched_jobs (finished) WHERE state >= 3;
CREATE INDEX fairsched_jobs_dead ON fairsched_jobs (finished DESC, id DESC) WHERE state = 5;
CREATE INDEX fairsched_jobs_running ON fairsched_jobs (replica) WHERE replica IS NOT NULL;
CREATE INDEX fairsched_jobs_unseen ON fairsched_jobs (id) WHERE unseen;

-- Named values the scheduler keeps beside its jobs: "fair" (the keys'
-- virtual times and the learned costs) and "pauses" (the keys and types
-- paused, since when, and the lanes' paused time).
CREATE TABLE fairsched_state (
	name    text        PRIMARY KEY,
	value   bytea       NOT NULL,
	updated timestamptz NOT NULL DEFAULT now()
);

-- Durable periodic schedules: each one's next occurrence and latest job,
-- as the scheduler encodes them.
CREATE TABLE fairsched_schedules (
	name    text        PRIMARY KEY,
	value   bytea       NOT NULL,
	updated timestamptz NOT NULL DEFAULT now()
);

-- The changes of the configuration made at run time on any replica
-- (limits, weights, pauses), each encoded by the scheduler, in the order
-- every replica and every leader applies them, with the fingerprint of
-- the configuration they change (another's are not read). Appends commit
-- in the order of their numbers (an advisory lock around each): a reader
-- that has read up to a number never finds a smaller one later.
CREATE TABLE fairsched_changes (
	seq         bigserial   PRIMARY KEY,
	fingerprint text        NOT NULL,
	body        bytea       NOT NULL,
	at          timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX fairsched_changes_by_fingerprint ON fairsched_changes (fingerprint, seq);

-- The leader's lease: one row. A replica takes it when it has lapsed,
-- with the next term; every write a leader makes is fenced by its term.
CREATE TABLE fairsched_leader (
	one     boolean     PRIMARY KEY DEFAULT true CHECK (one),
	term    bigint      NOT NULL,
	holder  text        NOT NULL,                 -- the replica holding it; '' in term 0
	expires timestamptz NOT NULL                  -- the database's clock
);
INSERT INTO fairsched_leader (term, holder, expires) VALUES (0, '', '-infinity');

-- The replicas, each with its capacity (slots), its configuration's
-- fingerprint, its lease and its last heartbeat. A registration whose
-- heartbeat is lease old or older has lapsed: it counts for nothing
-- until it registers again, though it stays live until a leader's sweep.
CREATE TABLE fairsched_replicas (
	id          text        PRIMARY KEY,          -- the replica's name: packing offers work in this order
	capacity    integer     NOT NULL CHECK (capacity > 0),
	fingerprint text        NOT NULL,             -- the live replicas' not lapsed are all one: a replica with another is refused
	lease       interval    NOT NULL CHECK (lease > interval '0'), -- the replica's own: its registration lapses by it
	heartbeat   timestamptz NOT NULL,             -- the database's clock
	state       text        NOT NULL CHECK (state IN ('live', 'dead')),
	registered  timestamptz NOT NULL,
	died        timestamptz                       -- when a leader declared it dead
);
`,
	1: `
-- The scheduler learns of the jobs other transactions insert (unseen:
-- a caller's transaction's, a replica's) by the transaction that
-- inserted them, which it reads against the snapshot of its last look:
-- a read, where it cleared a mark on each before, one row write less a
-- job. Rows inserted before this version have none (NULL): the next
-- start of a scheduler reads them all, as it reads every unfinished job.
-- The default is set apart from the column so that adding it rewrites
-- no row.
ALTER TABLE fairsched_jobs ADD COLUMN xid xid8;
ALTER TABLE fairsched_jobs ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
DROP INDEX fairsched_jobs_unseen;
CREATE INDEX fairsched_jobs_unseen ON fairsched_jobs (xid, id) WHERE unseen AND state < 3;

-- No replica was ever written here: the leader keeps which replica runs
-- an attempt.
DROP INDEX fairsched_jobs_running;
ALTER TABLE fairsched_jobs DROP COLUMN replica;

-- Room on each page for a job's start, which changes no indexed column,
-- to be written beside the row it replaces (a heap-only update: no index
-- entry written). Pages filled from now on keep it; those filled before
-- stay as they are.
ALTER TABLE fairsched_jobs SET (fillfactor = 50);
`,
}

// ErrTooNew is returned by Migrate for a database whose schema a newer
// version of this module wrote: it is left untouched.
var ErrTooNew = errors.New("fairschedpg: the database's schema is newer than this version of fairschedpg knows; upgrade this replica")

// lockKey is the advisory lock Migrate holds (with the schema's name's
// hash as the second key, so that two schemas of one database migrate
// independently): "fsch" in ASCII.
const lockKey = 0x66736368

// Beginner is what Migrate needs of a database: a *pgxpool.Pool, a
// *pgx.Conn.
type Beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Migrate brings the schema to Version, in one transaction, and returns
// the version found before. It does nothing to a schema at Version, and
// refuses one past it with an error wrapping ErrTooNew.
func Migrate(ctx context.Context, db Beginner) (was int, err error) {
	return migrateTo(ctx, db, Version)
}

// migrateTo is Migrate up to version to, for the test of an upgrade.
func migrateTo(ctx context.Context, db Beginner, to int) (was int, err error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return 0, fmt.Errorf("fairschedpg: migrating the schema: %w", err)
	}
	defer tx.Rollback(ctx) // after Commit, it does nothing
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))`, lockKey); err != nil {
		return 0, fmt.Errorf("fairschedpg: migrating the schema: waiting for other replicas: %w", err)
	}
	if _, err := tx.Exec(ctx, `
CREATE TABLE IF NOT EXISTS fairsched_schema_version (
	version integer     PRIMARY KEY,
	applied timestamptz NOT NULL DEFAULT now()
)`); err != nil {
		return 0, fmt.Errorf("fairschedpg: migrating the schema: %w", err)
	}
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM fairsched_schema_version`).Scan(&was); err != nil {
		return 0, fmt.Errorf("fairschedpg: reading the schema version: %w", err)
	}
	if was > Version {
		return was, fmt.Errorf("%w: version %d, this one knows up to %d", ErrTooNew, was, Version)
	}
	if was >= to {
		return was, nil // the rollback ends the transaction: nothing was written
	}
	for v := was; v < to; v++ {
		if _, err := tx.Exec(ctx, migrations[v]); err != nil {
			return was, fmt.Errorf("fairschedpg: migrating the schema from version %d to %d: %w", v, v+1, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO fairsched_schema_version (version) VALUES ($1)`, v+1); err != nil {
			return was, fmt.Errorf("fairschedpg: migrating the schema from version %d to %d: %w", v, v+1, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return was, fmt.Errorf("fairschedpg: migrating the schema: %w", err)
	}
	return was, nil
}
