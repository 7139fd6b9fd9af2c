package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fairsched/fairsched/internal/store"
	"github.com/jackc/pgx/v5"
)

// ErrCapacity is returned by Register for a capacity below 1.
var ErrCapacity = errors.New("fairschedpg: a replica's capacity must be at least 1")

// ErrReplicaDead is returned by Heartbeat for a replica that a leader
// declared dead, or whose registration lapsed: its running jobs are lost
// attempts, granted again elsewhere; it must stop what it runs, and
// register again to take part. It is the store interface's error, as
// ErrNotRegistered and ErrFenced are.
var ErrReplicaDead = store.ErrReplicaDead

// ErrNotRegistered is returned by Heartbeat for a replica that is not
// registered (or deregistered).
var ErrNotRegistered = store.ErrNotRegistered

// Replica is a row of the registry.
type Replica struct {
	ID       string
	Capacity int
	Live     bool // false: declared dead
	// Since is how long ago, by the database's clock, its last
	// heartbeat was (its registration counts as one).
	Since time.Duration
	// Registered is when it last registered, in µs since the epoch by
	// the database's clock: it changes when the replica registers again
	// (a restart under its name), and tells its two lives apart.
	Registered int64
}

// ErrConfigMismatch is returned by Register for a replica whose
// configuration's fingerprint differs from a live replica's. It is the
// store interface's error.
var ErrConfigMismatch = store.ErrConfigMismatch

// registryLockKey is the first key of the advisory lock Register holds
// for its transaction, exclusive, and Heartbeat shared, the second being
// the schema's name's hash: "fsrg" in ASCII (Migrate's and the Store's
// locks are others).
const registryLockKey = 0x66737267

// Batcher is what Register needs of a database: it runs a batch in one
// transaction. A *pgxpool.Pool or a *pgx.Conn does (a batch is an
// implicit transaction), a pgx.Tx (in itself), the Store's Querier (in a
// transaction of its own).
type Batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Register records replica id, live, with capacity slots, its
// configuration's fingerprint, its lease and a heartbeat now. A replica
// registered already under id (a restart, or one declared dead or lapsed
// that comes back) is live again with the capacity, the fingerprint and
// the lease given.
//
// A registration lapses once its heartbeat is its lease old or older, by
// the database's clock: its replica fenced itself by then. Register
// ignores it, and Heartbeat refuses it; it stays live, for a leader's
// Sweep to declare dead. Each row's lease is its own: the replicas that
// Register checks may have another configuration, and another lease,
// than the one registering.
//
// It records nothing, and fails with ErrConfigMismatch, if a live
// replica other than id, its registration not lapsed, has another
// fingerprint. The check and the record are one statement, after an
// advisory lock that every Register takes, exclusive, for its
// transaction: in READ COMMITTED a statement sees what committed before
// it began, so a Register that waited for the lock sees the one that
// held it, and of two replicas with different fingerprints registering
// at once, the second refuses. (One statement alone would not do: both
// would check before either inserted, and both insert.) Heartbeat takes
// the lock shared, and reads the clock under it: a heartbeat either
// committed before the check began, and the check sees it, or reads the
// clock after the check's commit, and finds lapsed what the check found
// lapsed; so no replica the check counted as lapsed comes back but by
// registering, checked, again. A replica declared dead or deregistered
// meanwhile can only make the check refuse what it could have let in,
// never let in what it must refuse.
func Register(ctx context.Context, db Batcher, id string, capacity int, fingerprint string, lease time.Duration) error {
	if id == "" {
		return errors.New("fairschedpg: a replica needs a name")
	}
	if capacity < 1 {
		return fmt.Errorf("%w: replica %q has %d", ErrCapacity, id, capacity)
	}
	if lease <= 0 {
		return fmt.Errorf("fairschedpg: a replica's lease must be positive: replica %q has %v", id, lease)
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))`, registryLockKey)
	b.Queue(`
WITH other AS (
	SELECT id, fingerprint FROM fairsched_replicas
	WHERE state = 'live' AND id <> $1 AND fingerprint <> $3 AND heartbeat > clock_timestamp() - lease
), reg AS (
	INSERT INTO fairsched_replicas (id, capacity, fingerprint, lease, heartbeat, state, registered)
	SELECT $1, $2, $3, $4, clock_timestamp(), 'live', clock_timestamp()
	WHERE NOT EXISTS (SELECT FROM other)
	ON CONFLICT (id) DO UPDATE
	SET capacity = excluded.capacity, fingerprint = excluded.fingerprint, lease = excluded.lease,
		heartbeat = excluded.heartbeat, state = 'live', registered = excluded.registered, died = NULL
)
SELECT id, fingerprint FROM other ORDER BY id`, id, capacity, fingerprint, lease)
	br := db.SendBatch(ctx, b)
	var other [][2]string
	_, err := br.Exec()
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			other, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) ([2]string, error) {
				var r [2]string
				err := row.Scan(&r[0], &r[1])
				return r, err
			})
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fairschedpg: registering replica %q: %w", id, err)
	}
	if len(other) > 0 {
		return mismatch(id, fingerprint, other)
	}
	return nil
}

// mismatch is Register's error for replica id, of fingerprint fp, refused
// for the live replicas other, each a name and a fingerprint: it names a
// few, with the fingerprints' short forms.
func mismatch(id, fp string, other [][2]string) error {
	const most = 4
	var b strings.Builder
	for i, o := range other[:min(len(other), most)] {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q has %s", o[0], Short(o[1]))
	}
	if len(other) > most {
		fmt.Fprintf(&b, ", and %d more", len(other)-most)
	}
	return fmt.Errorf("%w: replica %q has configuration %s; live replica %s", ErrConfigMismatch, id, Short(fp), b.String())
}

// Short returns a fingerprint's short form, for messages: its first 8
// characters, quoted if empty.
func Short(fp string) string {
	if fp == "" {
		return `""`
	}
	return fp[:min(len(fp), 8)]
}

// Heartbeat records that replica id is alive now, by the database's
// clock. It fails with ErrReplicaDead if a leader declared it dead or if
// its registration lapsed (its heartbeat is its lease old or older: it
// is not renewed, and stays live for a leader's Sweep), and with
// ErrNotRegistered if it is not registered. It holds the registry's lock
// shared while it reads the clock (Register says why).
func Heartbeat(ctx context.Context, db Batcher, id string) error {
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock_shared($1, hashtext(current_schema()))`, registryLockKey)
	b.Queue(`
WITH beat AS (
	UPDATE fairsched_replicas SET heartbeat = clock_timestamp()
	WHERE id = $1 AND state = 'live' AND heartbeat > clock_timestamp() - lease
	RETURNING 'beat'::text, interval '0', lease
)
SELECT * FROM beat
UNION ALL
SELECT state, clock_timestamp() - heartbeat, lease FROM fairsched_replicas
WHERE id = $1 AND NOT EXISTS (SELECT FROM beat)`, id)
	br := db.SendBatch(ctx, b)
	var state string
	var age, lease time.Duration
	_, err := br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(&state, &age, &lease)
	}
	if cerr := br.Close(); err == nil || errors.Is(err, pgx.ErrNoRows) && cerr != nil {
		err = cerr
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: %q", ErrNotRegistered, id)
	case err != nil:
		return fmt.Errorf("fairschedpg: replica %q's heartbeat: %w", id, err)
	case state == "live": // not renewed, and live: lapsed
		return fmt.Errorf("%w: %q: its registration lapsed (its last heartbeat is %v old, its lease %v)",
			ErrReplicaDead, id, age.Round(time.Millisecond), lease)
	case state != "beat":
		return fmt.Errorf("%w: %q was declared dead", ErrReplicaDead, id)
	}
	return nil
}

// Deregister removes replica id from the registry (a replica that shut
// down, its jobs drained); it does nothing for one not registered.
func Deregister(ctx context.Context, q Querier, id string) error {
	if _, err := q.Exec(ctx, `DELETE FROM fairsched_replicas WHERE id = $1`, id); err != nil {
		return fmt.Errorf("fairschedpg: deregistering replica %q: %w", id, err)
	}
	return nil
}

// Replicas returns the registry, in the order of the replicas' names
// (the order in which grants pack).
func Replicas(ctx context.Context, q Querier) ([]Replica, error) {
	rows, err := q.Query(ctx, `
SELECT id, capacity, state = 'live', clock_timestamp() - heartbeat,
	(extract(epoch FROM registered) * 1000000)::bigint
FROM fairsched_replicas ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("fairschedpg: reading the replicas: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Replica, error) {
		var r Replica
		err := row.Scan(&r.ID, &r.Capacity, &r.Live, &r.Since, &r.Registered)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("fairschedpg: reading the replicas: %w", err)
	}
	return out, nil
}

// Sweep is a leader's: it declares dead every live replica whose last
// heartbeat is lapse old or older by the database's clock, fenced by
// l's term (ErrFenced: nothing declared), and returns their names in
// order.
func Sweep(ctx context.Context, l *Lease, q Querier, lapse time.Duration) ([]string, error) {
	if lapse <= 0 {
		return nil, fmt.Errorf("fairschedpg: a heartbeat's lapse must be positive, not %v", lapse)
	}
	dead, err := Returning[string](ctx, l, q, `
UPDATE fairsched_replicas SET state = 'dead', died = clock_timestamp()
WHERE state = 'live' AND heartbeat <= clock_timestamp() - $3::interval AND `+Fenced+`
RETURNING id`, lapse)
	if err != nil {
		return nil, err
	}
	slices.Sort(dead)
	return dead, nil
}
