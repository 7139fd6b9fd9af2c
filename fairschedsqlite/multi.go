package fairschedsqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/fairsched/fairsched/internal/store"
)

// Many rows per statement. Each statement costs SQLite a step through its
// virtual machine and database/sql a round of conversions, whatever its
// rows: the writer gives the consecutive requests of one kind in a
// transaction (inserts, starts, plain completions) one statement per
// maxRows rows, prepared once per row count.

const maxRows = 100

type multiKind uint8

const (
	multiInsert     multiKind = iota // a job's columns, 9 per row
	multiStart                       // (id, started) per row
	multiComplete                    // (id, finished) per row
	multiStartAt                     // started, then the IDs: one time for all
	multiCompleteAt                  // finished, then the IDs: one time for all
)

// multiStmt returns the statement of kind k for n rows, 1 <= n <=
// maxRows, preparing it on first use.
func (w *writer) multiStmt(ctx context.Context, k multiKind, n int) (*sql.Stmt, error) {
	key := [2]int{int(k), n}
	if st := w.multi[key]; st != nil {
		return st, nil
	}
	var q string
	switch k {
	case multiInsert:
		q = `INSERT INTO fairsched_jobs (state, type, key, ref, priority, submitted, not_before, start_by, args, after, needs) VALUES ` +
			rows("(1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", n)
	case multiStart:
		q = `UPDATE fairsched_jobs SET attempt = attempt + 1, started = ` + byID(n) + ` WHERE id IN (` + ids(n) +
			`) AND state = 1 AND started = 0 RETURNING id, args`
	case multiComplete:
		q = `UPDATE fairsched_jobs SET state = 3, finished = ` + byID(n) + `, error = NULL, started = 0 WHERE id IN (` + ids(n) + `)`
	case multiStartAt:
		q = `UPDATE fairsched_jobs SET attempt = attempt + 1, started = ? WHERE id IN (` + rows("?", n) +
			`) AND state = 1 AND started = 0 RETURNING id, args`
	case multiCompleteAt:
		q = `UPDATE fairsched_jobs SET state = 3, finished = ?, error = NULL, started = 0 WHERE id IN (` + rows("?", n) + `)`
	}
	st, err := w.conn.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if w.multi == nil {
		w.multi = make(map[[2]int]*sql.Stmt)
	}
	w.multi[key] = st
	return st, nil
}

// byID returns a CASE giving each row of n its own time: parameters
// ?1, ?3 ... are the IDs, ?2, ?4 ... their times.
func byID(n int) string {
	var b strings.Builder
	b.WriteString("CASE id")
	for i := range n {
		fmt.Fprintf(&b, " WHEN ?%d THEN ?%d", 2*i+1, 2*i+2)
	}
	b.WriteString(" END")
	return b.String()
}

// ids returns the ID parameters of byID's n rows.
func ids(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "?%d", 2*i+1)
	}
	return b.String()
}

// rows returns n copies of row, comma-separated.
func rows(row string, n int) string {
	return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

// insertAll inserts jobs, maxRows per statement, and assigns their IDs:
// under AUTOINCREMENT the rows of one INSERT get consecutive IDs, in the
// order of its VALUES, the last of them last_insert_rowid.
func (w *writer) insertAll(ctx context.Context, jobs []*store.Job) error {
	args := make([]any, 0, 10*maxRows)
	for len(jobs) > 0 {
		n := min(len(jobs), maxRows)
		st, err := w.multiStmt(ctx, multiInsert, n)
		if err != nil {
			return err
		}
		args = args[:0]
		for _, j := range jobs[:n] {
			args = append(args, insertArgs(j)...)
		}
		res, err := st.ExecContext(ctx, args...)
		if err != nil {
			return err
		}
		last, err := res.LastInsertId()
		if err != nil {
			return err
		}
		for i, j := range jobs[:n] {
			j.ID = last - int64(n-1-i)
			w.ids = append(w.ids, j.ID)
		}
		jobs = jobs[n:]
	}
	return nil
}

// startAll records the starts rs, maxRows per statement, and gives each
// its job's arguments, or errNotQueued. The store counts attempts itself
// (attempt + 1, as the scheduler does).
func (w *writer) startAll(ctx context.Context, rs []*store.Request) error {
	args := make([]any, 0, 1+maxRows)
	waiting := make(map[int64]*store.Request, min(len(rs), maxRows))
	for len(rs) > 0 {
		n := min(len(rs), maxRows)
		st, err := w.timedStmt(ctx, multiStart, multiStartAt, rs[:n], &args)
		if err != nil {
			return err
		}
		clear(waiting)
		for _, r := range rs[:n] {
			waiting[r.Op.ID] = r
			r.Args = nil
		}
		res, err := st.QueryContext(ctx, args...)
		if err != nil {
			return err
		}
		for res.Next() {
			var id int64
			var a []byte
			if err := res.Scan(&id, &a); err != nil {
				res.Close()
				return err
			}
			if r := waiting[id]; r != nil {
				r.Args = a
			}
		}
		if err := res.Close(); err != nil {
			return err
		}
		if err := res.Err(); err != nil {
			return err
		}
		for _, r := range rs[:n] {
			if r.Args == nil { // no row came back
				r.Err = fmt.Errorf("%w: job %d", errNotQueued, r.Op.ID)
			}
		}
		rs = rs[n:]
	}
	return nil
}

// completeAll records the completions rs (ops without an attempt to
// append), maxRows per statement.
func (w *writer) completeAll(ctx context.Context, rs []*store.Request) error {
	args := make([]any, 0, 2*maxRows)
	for len(rs) > 0 {
		n := min(len(rs), maxRows)
		st, err := w.timedStmt(ctx, multiComplete, multiCompleteAt, rs[:n], &args)
		if err != nil {
			return err
		}
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return err
		}
		rs = rs[n:]
	}
	return nil
}

// timedStmt returns the statement that records rs, each with its time,
// and sets args to its arguments. When every time of rs falls in one
// millisecond, as it mostly does for the requests of one transaction,
// the statement of kind at gives them all the earliest: a time off by
// less than a millisecond, for a statement cheaper than byID's CASE by a
// sixth of the writer's work.
func (w *writer) timedStmt(ctx context.Context, each, at multiKind, rs []*store.Request, args *[]any) (*sql.Stmt, error) {
	a := (*args)[:0]
	lo, hi := rs[0].Op.At, rs[0].Op.At
	for _, r := range rs[1:] {
		lo, hi = min(lo, r.Op.At), max(hi, r.Op.At)
	}
	if hi-lo < 1000 {
		a = append(a, lo)
		for _, r := range rs {
			a = append(a, r.Op.ID)
		}
		*args = a
		return w.multiStmt(ctx, at, len(rs))
	}
	for _, r := range rs {
		a = append(a, r.Op.ID, r.Op.At)
	}
	*args = a
	return w.multiStmt(ctx, each, len(rs))
}
