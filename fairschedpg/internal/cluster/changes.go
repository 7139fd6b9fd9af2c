package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/fairsched/fairsched/internal/store"
	"github.com/jackc/pgx/v5"
)

// The cluster's log of changes of the configuration, fairsched_changes:
// each change a replica made at run time, numbered by a bigserial,
// which every replica and every leader applies in order of the numbers,
// reading "the changes after the last I applied".
//
// A bigserial alone would not do: numbers are taken when a row is
// inserted, not when it commits, so of two appends at once the one with
// the smaller number may commit second, after a reader has read the
// other's and moved past both; it would never apply that change. So
// every append takes an advisory lock for its transaction (changesLockKey)
// before it takes its number: appends are one at a time, each takes its
// number and commits before the next takes its own, and numbers commit
// in order. (PostgreSQL makes a transaction's commit visible before it
// releases its locks, so the next append commits after this one is
// visible: a reader that sees a number sees every smaller one.) An
// append that fails leaves a number unused, which a reader skips.
// Changes are rare (an operator's calls), so the appends' waiting on one
// another costs nothing that matters; the reads take no lock.
//
// Each change is kept with the fingerprint of the configuration it
// changed, and read by it: a deploy of another configuration starts
// from that configuration alone, not from changes made to the one
// before. The log only grows: each row is a few dozen bytes, and a new
// leader reads its configuration's whole once (an index on fingerprint
// and seq).

// changesLockKey is the first key of the advisory lock AppendChange holds
// for its transaction, the second being the schema's name's hash: "fscg"
// in ASCII.
const changesLockKey = 0x66736367

// AppendChange appends body, a change of the configuration of
// fingerprint, to the log of changes, in a transaction of its own (db's
// batch), and returns its number: numbers commit in order.
func AppendChange(ctx context.Context, db Batcher, fingerprint string, body []byte) (int64, error) {
	if len(body) == 0 {
		return 0, errors.New("fairschedpg: an empty change of the configuration")
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))`, changesLockKey)
	b.Queue(`INSERT INTO fairsched_changes (fingerprint, body) VALUES ($1, $2) RETURNING seq`, fingerprint, body)
	br := db.SendBatch(ctx, b)
	var seq int64
	_, err := br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(&seq)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("fairschedpg: appending a change of the configuration: %w", err)
	}
	return seq, nil
}

// Changes returns the changes of the log of the configuration of
// fingerprint numbered after after, in order.
func Changes(ctx context.Context, q Querier, fingerprint string, after int64) ([]store.ChangeRecord, error) {
	rows, err := q.Query(ctx, `SELECT seq, body FROM fairsched_changes WHERE fingerprint = $1 AND seq > $2 ORDER BY seq`,
		fingerprint, after)
	if err != nil {
		return nil, fmt.Errorf("fairschedpg: reading the changes of the configuration: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.ChangeRecord, error) {
		var r store.ChangeRecord
		err := row.Scan(&r.Seq, &r.Body)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("fairschedpg: reading the changes of the configuration: %w", err)
	}
	return out, nil
}
