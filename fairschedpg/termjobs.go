package fairschedpg

import (
	"context"
	"sync"

	"github.com/fairsched/fairsched/fairschedpg/internal/cluster"
	"github.com/fairsched/fairsched/internal/store"
)

// A leader's view of the cluster's durable jobs (store.Leadership.Jobs),
// for maintainers. With replicas, the jobs are the database's and the
// leader of a term keeps them: it reads them as a new term begins, takes
// the jobs the replicas insert (unseen, as a caller's transaction's:
// watch.go), and records each attempt's start and end. Each of those
// writes is fenced by its term, as the leader's other writes are
// (lease.go), so that a leader woken past its lease (a SIGSTOP, a long
// pause) records nothing once a successor may have read the jobs:
//
//   - its writer's every transaction begins with qFence (writer.go),
//     which holds the lease row FOR KEY SHARE until the commit and aborts the
//     transaction unless the lease is still the term's: a successor's
//     campaign waits for a transaction in flight, and its Recover then
//     sees what it committed;
//   - its watcher's takes of unseen jobs write nothing (watch.go): a
//     stale leader's take can drop no job that its successor's Recover
//     does not read;
//   - its Recover reads the jobs in one snapshot with the lease
//     (qFenceRead): a leader that reads them once its term is over
//     (paused between its campaign and its Recover) fails with
//     ErrFenced.
//
// Other reads need no fence. The view shares the Store's pool and watcher
// session; its writer is its own, and its Close closes only that (what
// was posted is written first, or refused, fenced), and stops its
// watching if it is the watcher's of the moment. A fenced transaction
// records on the Lease that its term is over (Lease.Lost): the
// leadership's other calls then fail at once.

// termJobs is one term's view of the durable jobs.
type termJobs struct {
	writes // on w
	st     *Store
	lease  *cluster.Lease
	w      *writer

	mu        sync.Mutex
	recovered takeCursor // guarded by mu: where the view's Recover left the takes, for its Watch

	closeOnce sync.Once
	closeErr  error
}

var (
	_ store.Store   = (*termJobs)(nil)
	_ store.Watcher = (*termJobs)(nil)
)

func newTermJobs(st *Store, lease *cluster.Lease) *termJobs {
	j := &termJobs{st: st, lease: lease}
	j.w = newWriter(st, lease)
	j.writes = writes{B: j.w.b}
	return j
}

// Jobs is for the scheduler's replicas: the durable jobs as this term
// keeps them (store.Leadership). One view per term: every call returns
// it.
func (l *leadership) Jobs() store.Store {
	l.jobsOnce.Do(func() { l.jobs = newTermJobs(l.st, l.lease) })
	return l.jobs
}

// Recover is the Store's, while the term holds; its snapshot is where
// the view's Watch goes on from.
func (j *termJobs) Recover(ctx context.Context, fn func(*store.Job) error) error {
	from, err := j.st.recoverJobs(ctx, j.lease, fn)
	if err == nil {
		j.mu.Lock()
		j.recovered = from
		j.mu.Unlock()
	}
	return err
}

// HasDependencies, Ended and Dead are the Store's.
func (j *termJobs) HasDependencies(ctx context.Context) (bool, error) {
	return j.st.HasDependencies(ctx)
}
func (j *termJobs) Ended(ctx context.Context, id int64) (store.State, string, bool, error) {
	return j.st.Ended(ctx, id)
}
func (j *termJobs) Dead(ctx context.Context, limit int, fn func(*store.Job) error) error {
	return j.st.Dead(ctx, limit, fn)
}

// State is the Store's, after what was posted to the view.
func (j *termJobs) State(ctx context.Context, name string) ([]byte, error) {
	return j.st.state(ctx, j.w, name)
}

// Watch hands the jobs the replicas insert to arrived, taken in
// statements fenced by the term; nil stops the view's watching, not
// another's, and returns once a look in progress has handed on what it
// took, as the Store's Watch does.
func (j *termJobs) Watch(arrived func(*store.Job)) error {
	if arrived == nil {
		j.st.watch.unset(j.lease)
		j.st.watch.telling.Lock()
		j.st.watch.telling.Unlock()
		return nil
	}
	j.mu.Lock()
	from := j.recovered
	j.recovered = takeCursor{} // once: a Watch again goes on from where the takes reached
	j.mu.Unlock()
	j.st.watch.set(arrived, j.lease, from)
	return nil
}

// Close stops the view's watching and its writer (what was posted is
// written first, or refused, fenced), not the Store.
func (j *termJobs) Close() error {
	j.closeOnce.Do(func() {
		j.st.watch.unset(j.lease)
		j.closeErr = j.w.close()
	})
	return j.closeErr
}
