package fairschedpg

import (
	"context"
	"fmt"

	"github.com/fairsched/fairsched/internal/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Revive is for the scheduler (store.Reviver): a replica queues a dead
// job of the cluster again. The job becomes unseen, as a replica's insert
// is, and the leader's watcher is told in the same transaction, so the
// leader of the moment takes it with its attempts and its new allowance
// (a take returns whole rows), or the next leader reads it at its start.
// The UPDATE's WHERE is tested on the row as committed: of two revivals
// of one dead job at once, the second finds it queued and changes
// nothing.
func (st *Store) Revive(ctx context.Context, id, submitted, startBy int64) (bool, error) {
	if !st.shared {
		return false, fmt.Errorf("fairschedpg: Revive is for a replica's Store")
	}
	var revived int64
	err := st.run(ctx, false, func(b *pgx.Batch) {
		b.Queue(qRevive, id, submitted, startBy).Exec(func(tag pgconn.CommandTag) error {
			revived = tag.RowsAffected()
			return nil
		})
		b.Queue(`SELECT pg_notify($1, '')`, st.watch.channel) // sent at the commit; for nothing, a look that finds nothing
	})
	if err != nil {
		return false, fmt.Errorf("fairschedpg: queueing dead job %d again: %w", id, err)
	}
	return revived == 1, nil
}

// qRevive queues dead job $1 again, allowed one more attempt than it
// started.
const qRevive = `UPDATE fairsched_jobs SET state = 1, allowed = attempt + 1, submitted = $2, start_by = $3, not_before = 0,
	finished = 0, error = NULL, started = 0, stood = 0, unseen = true, xid = pg_current_xact_id()
WHERE id = $1 AND state = 5`

var _ store.Reviver = (*Store)(nil)
