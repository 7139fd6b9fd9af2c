package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fairsched/fairsched/internal/store"
	"github.com/jackc/pgx/v5"
)

// ErrCapacity is returned by Register for a capacity below 1.
var ErrCapacity = errors.New("fairschedpg: a replica's capacity must be at least 1")

// ErrReplicaDead is returned by Heartbeat for a replica that a leader
// declared dead: its running jobs are lost attempts, granted again
// elsewhere; it must stop what it runs, and register again to take part.
// It is the store interface's error, as ErrNotRegistered and ErrFenced
// are.
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

// Register records replica id, live, with capacity slots and a
// heartbeat now. A replica registered already under id (a restart, or
// one declared dead that comes back) is live again with the capacity
// given.
func Register(ctx context.Context, q Querier, id string, capacity int) error {
	if id == "" {
		return errors.New("fairschedpg: a replica needs a name")
	}
	if capacity < 1 {
		return fmt.Errorf("%w: replica %q has %d", ErrCapacity, id, capacity)
	}
	_, err := q.Exec(ctx, `
INSERT INTO fairsched_replicas (id, capacity, heartbeat, state, registered)
VALUES ($1, $2, clock_timestamp(), 'live', clock_timestamp())
ON CONFLICT (id) DO UPDATE
SET capacity = excluded.capacity, heartbeat = excluded.heartbeat, state = 'live', registered = excluded.registered, died = NULL`,
		id, capacity)
	if err != nil {
		return fmt.Errorf("fairschedpg: registering replica %q: %w", id, err)
	}
	return nil
}

// Heartbeat records that replica id is alive now, by the database's
// clock. It fails with ErrReplicaDead if a leader declared it dead, and
// with ErrNotRegistered if it is not registered.
func Heartbeat(ctx context.Context, q Querier, id string) error {
	var state string
	err := q.QueryRow(ctx, `
WITH beat AS (
	UPDATE fairsched_replicas SET heartbeat = clock_timestamp()
	WHERE id = $1 AND state = 'live'
	RETURNING state
)
SELECT state FROM beat
UNION ALL
SELECT state FROM fairsched_replicas WHERE id = $1 AND NOT EXISTS (SELECT FROM beat)`, id).Scan(&state)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: %q", ErrNotRegistered, id)
	case err != nil:
		return fmt.Errorf("fairschedpg: replica %q's heartbeat: %w", id, err)
	case state != "live":
		return fmt.Errorf("%w: %q", ErrReplicaDead, id)
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
