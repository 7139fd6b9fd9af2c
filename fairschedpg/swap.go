package fairschedpg

import (
	"context"
	"fmt"

	"github.com/fairsched/fairsched/internal/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SwapInsert is for the scheduler (store.Swapper): the replicas that keep
// one durable schedule each try to enqueue its occurrence, and the one
// whose swap of the schedule's state finds the value it read wins. It is
// a transaction of its own, not one of the writer's, whose transactions
// hold other callers' writes: a swap that loses rolls back alone.
//
// Under READ COMMITTED, an UPDATE that meets a row another transaction
// changed waits for it, then tests its WHERE on the row as committed: of
// two swaps from one value, the second finds the first's value and
// changes nothing. Two first swaps (no value yet) race on the name's
// primary key, and the second inserts nothing (ON CONFLICT DO NOTHING).
func (st *Store) SwapInsert(ctx context.Context, state *store.StateWrite, old []byte, jobs ...*store.Job) (bool, error) {
	ctx, cancel := st.stmtCtx(ctx)
	defer cancel()
	conn, err := st.pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("fairschedpg: %w", err)
	}
	defer conn.Release() // a connection left in a transaction is destroyed, not reused
	fail := func(err error) (bool, error) {
		conn.Exec(ctx, "ROLLBACK")
		return false, fmt.Errorf("fairschedpg: %w", err)
	}
	b := &pgx.Batch{}
	st.begin(b, false)
	if len(jobs) > 0 {
		// A replica's jobs are the leader's to take, as its Inserts are
		// (writer.go).
		queueInsert(b, qInsert, st.shared, jobs)
		if st.shared {
			b.Queue(`SELECT pg_notify($1, '')`, st.watch.channel) // sent at the commit
		}
	}
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return fail(err)
	}
	table, row := stateTable(state.Name)
	value := state.Value(jobs)
	var tag pgconn.CommandTag
	if old == nil {
		tag, err = conn.Exec(ctx, `INSERT INTO `+table+` (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`, row, value)
	} else {
		tag, err = conn.Exec(ctx, `UPDATE `+table+` SET value = $2, updated = now() WHERE name = $1 AND value = $3`, row, value, old)
	}
	if err != nil {
		return fail(err)
	}
	if tag.RowsAffected() != 1 {
		for _, j := range jobs {
			j.ID = 0 // rolled back: never a job's
		}
		if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
			return false, fmt.Errorf("fairschedpg: %w", err)
		}
		return false, nil
	}
	if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
		return false, fmt.Errorf("fairschedpg: %w", commitUnknown(err))
	}
	return true, nil
}

var _ store.Swapper = (*Store)(nil)
