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
	// server tells the server known was taken on, as it was then
	// (qServerID), "" if not known: a page read on another (restarted
	// after a crash, or a standby promoted) is told (errRestarted).
	server string
	to     string // the round's snapshot; "": no round under way
	after  struct {
		xid uint64 // 0: the round's first page
		id  int64
	}
	// maxID is the largest ID of a job handed on from this cursor's
	// reads, Recover's included: a job committed, so one whose ID the
	// server never gives again, whatever it loses in a crash.
	maxID int64
	// again, after the server restarted, is the cursor as it was then:
	// the round under way reads again every unseen job but those it
	// had handed on (qTakeAgain), in ID order, and handed holds the IDs
	// this round has handed on, in case the server restarts again
	// before it ends. nil: no such round.
	again  *takeCursor
	handed map[int64]bool
	upto   int64 // the largest ID the round's snapshot shows, in such a round
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

// qTakeAgain reads a page of up to $8 unseen unfinished jobs that the
// round's snapshot $2 shows (NULL: this statement's), with IDs past $1
// and up to $9, in ID order, that a cursor as it was when the server
// restarted had not handed on, or with IDs past its maxID, $3 (restart.go
// derives it). $4 is that cursor's known, $5 its round's snapshot, ($6,
// $7) where that round had reached; each NULL if it had none. A page
// reads at most againWindow IDs' unfinished jobs, whatever it finds
// among them: one that filtered a large backlog all at once could outlast
// the statement timeout, page after page.
const qTakeAgain = `SELECT %[1]s FROM fairsched_jobs
WHERE state < 3 AND id > $1 AND id <= $9 AND unseen
	AND (xid IS NULL OR pg_visible_in_snapshot(xid, coalesce($2::text::pg_snapshot, pg_current_snapshot())))
	AND (id > $3 OR xid IS NOT NULL AND NOT coalesce(CASE WHEN $4::text IS NULL
		THEN pg_visible_in_snapshot(xid, $5::text::pg_snapshot) AND id <= $7
		ELSE pg_visible_in_snapshot(xid, $4::text::pg_snapshot)
			OR pg_visible_in_snapshot(xid, $5::text::pg_snapshot) AND (xid, id) <= ($6::text::xid8, $7)
		END, false))
ORDER BY id LIMIT $8`

// againWindow is the most IDs one page of a round read again covers;
// qMaxID is where such a round ends: the largest ID its snapshot shows.
const (
	againWindow = 100_000
	qMaxID      = `SELECT coalesce(max(id), 0) FROM fairsched_jobs`
)

// qServerID tells a server as it runs, one crash from the next: its
// start time, which a restart changes, and when its shared statistics
// were last reset, which the recovery from every crash does, a
// backend's too, after which the server goes on under the same start
// time (restart_after_crash) and may give the lost transactions' ids
// again. A clean shutdown loses no transaction id, and keeps both. (A
// reset of the statistics by hand reads as a restart, which only costs a
// round that reads every unseen job again.)
const qServerID = `pg_postmaster_start_time()::text || ' ' || coalesce((SELECT stats_reset FROM pg_stat_bgwriter)::text, '')`

// qSnapshot reads a transaction's snapshot and the server it runs on;
// qServer the server alone.
const (
	qSnapshot = `SELECT pg_current_snapshot()::text, ` + qServerID
	qServer   = `SELECT ` + qServerID
)

// errRestarted says that the database server restarted, or recovered
// from a crash, or another took its place, since the snapshot a cursor
// knows: the transaction ids of
// the transactions it lost (aborted, or committed without waiting for
// the disk, their records not yet written) may be given again, to
// transactions the snapshot would show as done. A leader's term ends
// then, so that the next reads every job again; a Store of one process
// reads again the jobs it has not handed on (restart.go).
var errRestarted = errors.New("fairschedpg: the database server restarted since the jobs were last read")

// The statements, with the columns scanJob reads and the job's xid.
var (
	qTakeCols      = fmt.Sprintf(qTake, jobCols("n.")+", n.xid::text")
	qTakeAllCols   = fmt.Sprintf(qTakeAll, jobCols("")+", coalesce(xid::text, '0')")
	qTakeAgainCols = fmt.Sprintf(qTakeAgain, jobCols("")+", coalesce(xid::text, '0')")
)

// take reads the next page of jobs new since cursor c, in one snapshot,
// and returns them in ID order, with the cursor past them. A leader's
// take (lease not nil) takes nothing once its Lease knows its term is
// over, nor once it finds the server restarted.
func (w *watcher) take(lease *cluster.Lease, c takeCursor) ([]*store.Job, takeCursor, error) {
	if lease != nil {
		if _, held := lease.Term(); !held {
			return nil, c, fmt.Errorf("%w (%s holds no lease)", store.ErrFenced, lease.Holder())
		}
	}
	q, args, err := c.page()
	if err != nil {
		return nil, c, err
	}
	next := c
	var jobs []*store.Job
	var intern store.Interner
	var server string
	var n int // rows read
	err = w.st.readSnapshot(w.ctx, func(b *pgx.Batch) {
		if c.to == "" { // a round begins: its snapshot is this transaction's
			b.Queue(qSnapshot).QueryRow(func(r pgx.Row) error { return r.Scan(&next.to, &server) })
			if c.again != nil {
				b.Queue(qMaxID).QueryRow(func(r pgx.Row) error { return r.Scan(&next.upto) })
			}
		} else {
			b.Queue(qServer).QueryRow(func(r pgx.Row) error { return r.Scan(&server) })
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
				n++
			}
			return rows.Err()
		})
	})
	if err != nil {
		return nil, c, err
	}
	if server != c.server {
		if c.server != "" {
			// Its ids may have been given again (restart.go): what this
			// page read is dropped.
			if lease != nil { // the term ends, and the next reads every job (Recover)
				term, _ := lease.Term()
				lease.Lost(term)
				return nil, c, fmt.Errorf("%w (%s's term %d): %w", store.ErrFenced, lease.Holder(), term, errRestarted)
			}
			return w.take(nil, c.restarted(server))
		}
		next.server = server
	}
	if next.again != nil { // jobs handed on already in a round read again
		if next.handed == nil {
			next.handed = make(map[int64]bool)
		}
		jobs = slices.DeleteFunc(jobs, func(j *store.Job) bool { return next.handed[j.ID] })
		for _, j := range jobs {
			next.handed[j.ID] = true
		}
	}
	for _, j := range jobs {
		next.maxID = max(next.maxID, j.ID)
	}
	slices.SortFunc(jobs, func(a, b *store.Job) int { return cmp.Compare(a.ID, b.ID) })
	ends := n < takeBatch          // a short page ends a round
	if next.again != nil && ends { // but one read again reads its next window, if IDs are left
		next.after.id = c.after.id + againWindow
		ends = next.after.id >= next.upto
	}
	if ends {
		return jobs, takeCursor{known: next.to, server: next.server, maxID: next.maxID}, nil
	}
	return jobs, next, nil
}

// page returns the statement that reads c's next page, and its
// arguments.
func (c takeCursor) page() (string, []any, error) {
	var to any // NULL: the round begins, in this snapshot
	if c.to != "" {
		to = c.to
	}
	if a := c.again; a != nil {
		var known, aTo any
		if a.known != "" {
			known = a.known
		}
		if a.to != "" {
			aTo = a.to
		}
		return qTakeAgainCols, []any{c.after.id, to, a.maxID, known, aTo,
			strconv.FormatUint(a.after.xid, 10), a.after.id, takeBatch, c.after.id + againWindow}, nil
	}
	if c.known == "" {
		return qTakeAllCols, []any{to, c.after.id, takeBatch}, nil
	}
	known, err := parseSnapshot(c.known)
	if err != nil {
		return "", nil, err
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
	return qTakeCols, []any{strconv.FormatUint(c.after.xid, 10), c.after.id, inXip, later,
		strconv.FormatUint(fromXid, 10), to, fromID, takeBatch}, nil
}
