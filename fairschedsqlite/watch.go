package fairschedsqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/fairsched/fairsched/internal/store"
)

// Jobs enqueued in a caller's transaction (InsertTx) are not the
// scheduler's until that transaction commits, and only the database knows
// when it does. The watcher finds them by their IDs: under AUTOINCREMENT
// with one writer at a time, a committed job's ID is greater than every ID
// committed before it, so every job above a cursor that has not been seen
// is new. While an InsertTx may be uncommitted (pending), the watcher
// reads the jobs above its cursor every pollInterval, an indexed range
// read that finds nothing most times; otherwise it sleeps. The writer's
// own inserts, already the scheduler's, are told apart by their IDs
// (ours), noted before their transaction commits.

const (
	pollInterval = 2 * time.Millisecond
	// pollPatience: a pending ID the cursor has not reached after this
	// long was most likely rolled back and never reused; then the watcher
	// polls every slowPoll until it is.
	pollPatience = 10 * time.Second
	slowPoll     = time.Second
)

type watcher struct {
	db *sql.DB

	// telling is held by a poll from its read of arrived until it has
	// handed on what it found: Watch waits for it, so that the callback
	// it replaced is not called once it returns.
	telling sync.Mutex

	mu sync.Mutex
	// Guarded by mu.
	arrived func(*store.Job)   // nil: no one watches
	cursor  int64              // every job with an ID up to cursor is known
	pending int64              // the highest ID InsertTx gave that the cursor has not passed; 0: none
	since   time.Time          // when pending was last raised
	ours    map[int64]struct{} // IDs the writer inserted above the cursor while pending
	started bool

	wake chan struct{} // a token: pending was raised
	quit chan struct{}
	wg   sync.WaitGroup
}

func newWatcher(db *sql.DB) *watcher {
	return &watcher{db: db, ours: make(map[int64]struct{}), wake: make(chan struct{}, 1), quit: make(chan struct{})}
}

// Watch is for the scheduler: it calls arrived with each job a caller's
// transaction committed (InsertTx), from the Store's goroutine, until
// Watch is called again (nil: no one). Once Watch returns, the callback
// it replaced is not called again: Watch waits for a call in progress,
// so it must not be called from that callback.
func (st *Store) Watch(arrived func(*store.Job)) error {
	w := st.watch
	var top int64
	if err := st.db.QueryRow(`SELECT coalesce(max(id), 0) FROM fairsched_jobs`).Scan(&top); err != nil {
		return fmt.Errorf("fairschedsqlite: %w", err)
	}
	w.mu.Lock()
	w.arrived, w.cursor = arrived, max(w.cursor, top)
	if !w.started {
		w.started = true
		w.wg.Add(1)
		go w.loop()
	}
	w.mu.Unlock()
	w.telling.Lock() // a poll that read the callback replaced hands on what it found first
	w.telling.Unlock()
	return nil
}

// InsertTx is for the scheduler: it inserts jobs in the caller's
// transaction tx, on this Store's database.
func (st *Store) InsertTx(ctx context.Context, tx *sql.Tx, jobs ...*store.Job) error {
	for _, j := range jobs {
		if err := tx.QueryRowContext(ctx, qInsert, insertArgs(j)...).Scan(&j.ID); err != nil {
			return fmt.Errorf("fairschedsqlite: %w", err)
		}
		st.watch.expect(j.ID)
	}
	return nil
}

var _ store.TxInserter[*sql.Tx] = (*Store)(nil)

// expect notes that a caller's transaction inserted id, and wakes the
// loop.
func (w *watcher) expect(id int64) {
	w.mu.Lock()
	w.pending, w.since = max(w.pending, id), time.Now()
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// inserting notes the IDs the writer inserts, before its transaction
// commits, so that no poll takes them for a caller's. done, called once
// the transaction has ended, forgets them if it did not commit, and lets
// the cursor pass them if no caller's insert is pending (the writer held
// the write lock, so none can be uncommitted below them).
func (w *watcher) inserting(ids []int64) (done func(committed bool)) {
	w.mu.Lock()
	for _, id := range ids {
		w.ours[id] = struct{}{}
	}
	w.mu.Unlock()
	return func(committed bool) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if !committed || w.pending == 0 {
			for _, id := range ids {
				delete(w.ours, id)
			}
		}
		if committed && w.pending == 0 {
			w.cursor = max(w.cursor, ids[len(ids)-1])
			for id := range w.ours { // noted while a caller's insert was pending
				if id <= w.cursor {
					delete(w.ours, id)
				}
			}
		}
	}
}

func (w *watcher) loop() {
	defer w.wg.Done()
	for {
		w.mu.Lock()
		pending, since := w.pending, w.since
		w.mu.Unlock()
		var tick <-chan time.Time
		if pending != 0 {
			every := pollInterval
			if time.Since(since) > pollPatience {
				every = slowPoll
			}
			tick = time.After(every)
		}
		select {
		case <-w.quit:
			return
		case <-w.wake:
		case <-tick:
		}
		w.poll()
	}
}

// poll reads the jobs above the cursor and hands on those that are new.
func (w *watcher) poll() {
	w.mu.Lock()
	cursor := w.cursor
	w.mu.Unlock()
	var found []*store.Job
	err := scanJobs(context.Background(), w.db, `WHERE id > ? ORDER BY id LIMIT 1000`, func(j *store.Job) error {
		found = append(found, j)
		return nil
	}, cursor)
	if err != nil {
		return // the next poll tries again
	}
	var arrived []*store.Job
	w.mu.Lock()
	for _, j := range found {
		switch _, mine := w.ours[j.ID]; {
		case j.ID <= w.cursor: // the writer's, passed since the read began
		case mine:
			delete(w.ours, j.ID)
		default:
			arrived = append(arrived, j)
		}
		w.cursor = max(w.cursor, j.ID)
	}
	w.telling.Lock() // until the last call of the callback read here
	defer w.telling.Unlock()
	tell := w.arrived
	if w.pending != 0 && w.cursor >= w.pending {
		w.pending = 0
		for id := range w.ours {
			if id <= w.cursor { // a writer's transaction that failed
				delete(w.ours, id)
			}
		}
	}
	w.mu.Unlock()
	for _, j := range arrived {
		if tell != nil {
			tell(j)
		}
	}
	if len(found) == 1000 { // more to read
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (w *watcher) stop() {
	close(w.quit)
	w.wg.Wait()
}
