package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"
)

const floorSchema = `
CREATE TABLE jobs (id INTEGER PRIMARY KEY, state INTEGER NOT NULL DEFAULT 0, args BLOB NOT NULL);
CREATE INDEX jobs_queued ON jobs (id) WHERE state = 0;`

// setupFloor: the least a durable queue on SQLite does, in plain
// database/sql on one connection: a jobs table; inserts of 1,000 rows
// in one statement (bulk) or of one row per transaction; 4 claimers that
// take 100 queued rows per transaction (UPDATE ... RETURNING), decode
// their arguments, and mark them done in one more transaction, polling
// every millisecond when nothing is queued.
func setupFloor(ctx context.Context, path string, sm syncMode, ran func()) (*system, error) {
	db, err := openDB(path, sm)
	if err != nil {
		return nil, err
	}
	if _, err := db.ExecContext(ctx, floorSchema); err != nil {
		db.Close()
		return nil, err
	}
	insertMany := "INSERT INTO jobs (args) VALUES " + strings.TrimSuffix(strings.Repeat("(?),", batchSize), ",")
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	errs := make([]error, claimers)
	for c := range claimers {
		wg.Go(func() {
			for cctx.Err() == nil {
				n, err := floorClaim(cctx, db, ran)
				if err != nil {
					if cctx.Err() == nil {
						errs[c] = err
					}
					return
				}
				if n == 0 {
					select {
					case <-time.After(time.Millisecond):
					case <-cctx.Done():
					}
				}
			}
		})
	}
	args := func(i int) []byte {
		b, _ := json.Marshal(noopArgs{N: i})
		return b
	}
	return &system{
		enqueueMany: func(ctx context.Context, first, n int) error {
			vals := make([]any, n)
			for k := range vals {
				vals[k] = args(first + k)
			}
			q := insertMany
			if n != batchSize {
				q = "INSERT INTO jobs (args) VALUES " + strings.TrimSuffix(strings.Repeat("(?),", n), ",")
			}
			_, err := db.ExecContext(ctx, q, vals...)
			return err
		},
		enqueue: func(ctx context.Context, i int) error {
			_, err := db.ExecContext(ctx, `INSERT INTO jobs (args) VALUES (?)`, args(i))
			return err
		},
		unfinished: func(context.Context) (int, error) {
			return 0, nil // ran is called once the done transaction committed
		},
		verify: func(ctx context.Context) error {
			return expect(ctx, db, map[string]int{
				`SELECT count(*) FROM jobs WHERE state = 2`:  totalJobs,
				`SELECT count(*) FROM jobs WHERE state != 2`: 0,
			})
		},
		stop: func() error {
			cancel()
			wg.Wait()
			return errors.Join(errors.Join(errs...), db.Close())
		},
	}, nil
}

// floorClaim claims up to claimSize queued jobs, runs them, and marks
// them done; it returns how many it ran.
func floorClaim(ctx context.Context, db *sql.DB, ran func()) (int, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `UPDATE jobs SET state = 1
WHERE id IN (SELECT id FROM jobs WHERE state = 0 ORDER BY id LIMIT ?) RETURNING id, args`, claimSize)
	if err != nil {
		return 0, err
	}
	var ids []any
	var raws [][]byte
	for rows.Next() {
		var id int64
		var raw []byte
		if err := rows.Scan(&id, &raw); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
		raws = append(raws, raw)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	for _, raw := range raws { // the no-op jobs
		var a noopArgs
		if err := json.Unmarshal(raw, &a); err != nil {
			return 0, err
		}
	}
	_, err = db.ExecContext(ctx, `UPDATE jobs SET state = 2 WHERE id IN (`+
		strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")+`)`, ids...)
	if err != nil {
		return 0, err
	}
	for range ids {
		ran()
	}
	return len(ids), nil
}
