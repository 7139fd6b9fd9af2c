package fairschedpg

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/fairsched/fairsched/fairschedpg/internal/cluster"
	"github.com/fairsched/fairsched/internal/store"
	"github.com/jackc/pgx/v5"
)

// A take reads the jobs other transactions committed since the cursor
// (watch.go derives why it is exact). The new jobs since snapshot known
// are the unseen rows whose xid known did not show: those in its
// in-progress list (xip), and those at or past its xmax. Their index is
// on (xid, id), so a page reads them in that order, from where the last
// one stopped, in three ranges each an index probe whatever the table
// holds: the rest of the xid the last page stopped in, if it is one of
// xip; the xids of xip past it; and the xids from xmax on, past it. Each
// is cut to the jobs the round's snapshot shows before it is limited, so
// that a short page means the round has read them all.

// takeCursor is where the takes have reached: every unseen job that
// snapshot known shows is the scheduler's. A round reads the unseen
// jobs that its snapshot, to, shows and known did not, in pages in
// (xid, id) order after the last one read; a short page ends it, and to
// becomes known.
type takeCursor struct {
	known string // a snapshot, as text; "": none (every unseen unfinished job is new)
	// server is the start time of the server known was taken on
	// (pg_postmaster_start_time), "" if not known: a round on another
	// (restarted, or a standby promoted) is told (errRestarted).
	server string
	to     string // the round's snapshot; "": no round under way
	after  struct {
		xid uint64 // 0: the round's first page
		id  int64
	}
}

// snapshot is a pg_snapshot's parts: the transactions it shows are those
// below xmax but those in xip.
type snapshot struct {
	xmax uint64
	xip  []uint64
}

// parseSnapshot reads a pg_snapshot's text, "xmin:xmax:xip,xip,...".
func parseSnapshot(s string) (snapshot, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return snapshot{}, fmt.Errorf("fairschedpg: a snapshot %q", s)
	}
	var snap snapshot
	var err error
	if snap.xmax, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return snapshot{}, fmt.Errorf("fairschedpg: a snapshot %q: %w", s, err)
	}
	if parts[2] != "" {
		for _, x := range strings.Split(parts[2], ",") {
			v, err := strconv.ParseUint(x, 10, 64)
			if err != nil {
				return snapshot{}, fmt.Errorf("fairschedpg: a snapshot %q: %w", s, err)
			}
			snap.xip = append(snap.xip, v)
		}
	}
	return snap, nil
}

// qTake reads a page of up to $8 unseen jobs new since a snapshot known,
// in (xid, id) order after ($1, $2), that the round's snapshot $6 shows
// (NULL: this statement's, the round's first): those of xid $1 past ID
// $2 if $1 is in known's xip ($3 says), those of the xids $4 (known's
// xip past $1), and those past ($5, $7): past ($1, $2) if $1 is at or
// past known's xmax, else from xmax on, past (xmax, 0) (IDs are
// positive), up to the round's snapshot's xmax (the transactions begun
// after it, open or not, are the next round's).
// Each range is an index probe; the ORDER BY of each matches the index,
// and the round's snapshot is a value (a scalar subquery), not a join,
// so that no plan, generic or not, reads the table in another order.
const qTake = `WITH t AS (SELECT coalesce($6::text::pg_snapshot, pg_current_snapshot()) AS s)
SELECT %[1]s FROM (
	(SELECT j.* FROM fairsched_jobs j WHERE unseen AND state < 3 AND $3 AND xid = $1::text::xid8 AND id > $2
		AND pg_visible_in_snapshot(xid, (SELECT s FROM t)) ORDER BY xid, id LIMIT $8)
	UNION ALL
	(SELECT j.* FROM fairsched_jobs j WHERE unseen AND state < 3 AND xid = ANY($4::text[]::xid8[])
		AND pg_visible_in_snapshot(xid, (SELECT s FROM t)) ORDER BY xid, id LIMIT $8)
	UNION ALL
	(SELECT j.* FROM fairsched_jobs j WHERE unseen AND state < 3 AND (xid, id) > ($5::text::xid8, $7) AND xid < pg_snapshot_xmax((SELECT s FROM t))
		AND pg_visible_in_snapshot(xid, (SELECT s FROM t)) ORDER BY xid, id LIMIT $8)
) n ORDER BY n.xid, n.id LIMIT $8`

// qTakeAll is qTake with no snapshot known (a Watch with no Recover
// before): a page of up to $3 unseen unfinished jobs that the round's
// snapshot $1 shows, with IDs past $2, in ID order. A job inserted before
// the inserting transaction was kept (xid NULL) is read too.
const qTakeAll = `SELECT %[1]s FROM fairsched_jobs
WHERE unseen AND state < 3 AND id > $2
	AND (xid IS NULL OR pg_visible_in_snapshot(xid, coalesce($1::text::pg_snapshot, pg_current_snapshot())))
ORDER BY id LIMIT $3`

// qSnapshot reads a transaction's snapshot and the start time of the
// server it runs on.
const qSnapshot = `SELECT pg_current_snapshot()::text, pg_postmaster_start_time()::text`

// errRestarted says that the database server restarted, or another took
// its place, since the snapshot a cursor knows: the transaction ids of
// the transactions it lost (aborted, or committed without waiting for
// the disk, their records not yet written) may be given again, to
// transactions the snapshot would show as done. A leader's term ends
// then, so that the next reads every job again; a Store of one process
// goes on (the Store's doc says what it may miss).
var errRestarted = errors.New("fairschedpg: the database server restarted since the jobs were last read")

// The statements, with the columns scanJob reads and the job's xid.
var (
	qTakeCols    = fmt.Sprintf(qTake, jobCols("n.")+", n.xid::text")
	qTakeAllCols = fmt.Sprintf(qTakeAll, jobCols("")+", coalesce(xid::text, '0')")
)

// take reads the next page of jobs new since cursor c, in one snapshot,
// and returns them in ID order, with the cursor past them. A leader's
// take (lease not nil) takes nothing once its Lease knows its term is
// over.
func (w *watcher) take(lease *cluster.Lease, c takeCursor) ([]*store.Job, takeCursor, error) {
	if lease != nil {
		if _, held := lease.Term(); !held {
			return nil, c, fmt.Errorf("%w (%s holds no lease)", store.ErrFenced, lease.Holder())
		}
	}
	var to any // NULL: the round begins, in this snapshot
	if c.to != "" {
		to = c.to
	}
	q, args := qTakeAllCols, []any{to, c.after.id, takeBatch}
	if c.known != "" {
		known, err := parseSnapshot(c.known)
		if err != nil {
			return nil, c, err
		}
		inXip := slices.Contains(known.xip, c.after.xid)
		var later []string // known's xip past the last xid read
		for _, x := range known.xip {
			if x > c.after.xid {
				later = append(later, strconv.FormatUint(x, 10))
			}
		}
		fromXid, fromID := known.xmax, int64(0)
		if c.after.xid >= known.xmax {
			fromXid, fromID = c.after.xid, c.after.id
		}
		q, args = qTakeCols, []any{strconv.FormatUint(c.after.xid, 10), c.after.id, inXip, later,
			strconv.FormatUint(fromXid, 10), to, fromID, takeBatch}
	}
	next := c
	var jobs []*store.Job
	var intern store.Interner
	var server string
	err := w.st.readSnapshot(w.ctx, func(b *pgx.Batch) {
		if c.to == "" { // a round begins: its snapshot is this transaction's
			b.Queue(qSnapshot).QueryRow(func(r pgx.Row) error { return r.Scan(&next.to, &server) })
		}
		b.Queue(q, args...).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var xidText string
				j, err := scanJob(rows, &intern, &xidText)
				if err != nil {
					return err
				}
				xid, err := strconv.ParseUint(xidText, 10, 64)
				if err != nil {
					return fmt.Errorf("job %d: its transaction %q: %w", j.ID, xidText, err)
				}
				jobs = append(jobs, j)
				next.after.xid, next.after.id = xid, j.ID
			}
			return rows.Err()
		})
	})
	if err != nil {
		return nil, c, err
	}
	if c.to == "" && server != c.server {
		if c.server != "" && lease != nil {
			// Its ids may have been given again (below): the term ends,
			// and the next reads every job (Recover).
			term, _ := lease.Term()
			lease.Lost(term)
			return nil, c, fmt.Errorf("%w (%s's term %d): %w", store.ErrFenced, lease.Holder(), term, errRestarted)
		}
		next.server = server
	}
	slices.SortFunc(jobs, func(a, b *store.Job) int { return cmp.Compare(a.ID, b.ID) })
	if len(jobs) < takeBatch {
		return jobs, takeCursor{known: next.to, server: next.server}, nil
	}
	return jobs, next, nil
}
