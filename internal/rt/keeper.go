package rt

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/fairsched/fairsched/internal/cluster"
	"github.com/fairsched/fairsched/internal/decide"
	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/store"
)

// Keeping the cluster's durable jobs (internal/decide, durable.go). In a
// cluster the durable jobs are the database's, and the leader keeps them
// for its term: a Runtime of its own (a keeper), made as the term begins
// (newKeeper), on the store's view fenced by the term, whose Decider is
// the term's Leader over the keeper's engine, which also decides every
// replica's closures. It is the durable mode of one process, its
// policies and records unchanged, but for three things:
//
//   - An attempt runs on the replica the engine placed it on: the keeper
//     records its start (the store's Start, fenced), sends the replica a
//     Run, and waits for its Done (remoteRun). The Run is stamped as the
//     job is granted, under the lock, and sent after the start's commit:
//     if the replica sent a Hello meanwhile, it drops the Run, and the
//     Hello, which does not list the attempt, made the keeper count it
//     lost (Runs), so an attempt is never both lost and run.
//   - The store is read once, at newKeeper, before the term asks the
//     replicas for their jobs; the jobs are queued when every replica has
//     answered (Ready). An attempt the store has as running is adopted on
//     the replica whose Hello lists it (engine.AdoptOn), and its Done
//     awaited as any other's; one whose end a Hello carries again (the
//     last leader did not record it) is adopted and ends at once; one no
//     replica lists is lost, as at a restart. A Done that comes before
//     Ready is kept until its job is adopted.
//   - When the term ends (abandon) nothing more is written: an attempt
//     still running on a replica stays running in the store, for the next
//     leader to adopt, and the queued jobs stay as they are.
//
// The keeper runs no closure and no handler, has no event hook and no
// schedules; the replicas' Enqueue insert their jobs in the store, which
// the keeper's Watch takes (arrived).

// keeperConfig makes a Runtime the keeper of one term (Config.keeper).
type keeperConfig struct {
	name     string // the leader's replica
	capacity int    // its capacity
	out      *decide.Outbox
	valid    func() bool // the Leader's guard: the term may still decide
}

// keeper is what a keeper Runtime keeps besides a durable Runtime's.
// Guarded by Runtime.mu.
type keeper struct {
	leader *decide.Leader
	st     *termStore
	ready  bool
	// Until Ready: the jobs read from the store, what each replica said
	// it runs (by job ID), and the Dones that came first.
	recovered []*store.Job
	reported  map[int64]reportedRun
	early     map[int64]decide.Msg
	// runs are the attempts granted and not ended, by job ID.
	runs map[int64]*remoteRun
	// While a job that arrived is queued (arrive): how the store has the
	// jobs it runs after, read without the lock (depEnds); again, whether
	// it came before, the store's answer then standing.
	ends  map[int64]depEnd
	again bool
}

// reportedRun is an attempt a replica's Hello listed running, or whose
// end came before Ready (early).
type reportedRun struct {
	replica string
	attempt int
	// started is when it started, by the keeper's clock: the Hello's
	// instant less how long it had run; 0, ended: the store's start.
	started int64
}

// remoteRun is one attempt of a durable job on a replica.
type remoteRun struct {
	replica string
	attempt int
	run     decide.Msg // the Run, stamped as granted
	adopted bool       // running before the term: nothing to start or send
	sent    bool       // its Run was sent
	done    chan error // receives the attempt's result, once (ended)
	ended   bool
}

// end gives the attempt's result, once.
func (r *remoteRun) end(err error) {
	if !r.ended {
		r.ended = true
		r.done <- err
	}
}

// errNotRun ends an attempt its replica never began (DoneNotRun): it
// does not count as one, and its job is queued again at once
// (requeueUnrunLocked).
var errNotRun = fmt.Errorf("%w: the replica never began it", ErrLost)

// requeueUnrunLocked puts durable job t back in the queue at now, its
// attempt uncounted: its replica never began it (errNotRun). The store
// counts it undone (OpInterrupt, as for an attempt Close cut short in one
// process), and no retry policy, disable rule or dead list hears of it.
func (s *Runtime) requeueUnrunLocked(t *task, now int64) {
	dt := s.durable.of(t)
	dt.attempt-- // its goroutine returned: the lock guards it again
	attempt := int32(1)
	if a := attemptsOf(t); a != nil {
		attempt = int32(len(a.list) + 1)
	}
	t.ctx = &jobContext{parent: durableParent, valuesOnly: true, attempt: attempt}
	s.decider().Retry(&t.rec, now, now)
	t.rec.Tag = tagWaiting
	s.durable.st.Post(store.Op{Kind: store.OpInterrupt, ID: dt.id, At: s.wallOf(now)})
	s.armLocked(now)
}

// errTermOver ends the wait for an attempt when the keeper's term ends:
// the attempt may still run, and nothing of it is recorded here.
var errTermOver = errors.New("fairsched: the leader's term ended")

// termStore is the store as a keeper writes it: the term's view, whose
// writes are dropped once the term is over (abandon), so that a keeper
// that stops while its term still holds writes nothing of its ending.
type termStore struct {
	store.Store
	over atomic.Bool
}

func (t *termStore) Post(op store.Op) {
	if !t.over.Load() {
		t.Store.Post(op)
	}
}

func (t *termStore) PutState(name string, value []byte) {
	if !t.over.Load() {
		t.Store.PutState(name, value)
	}
}

func (t *termStore) Start(ctx context.Context, id int64, at int64) ([]byte, error) {
	if t.over.Load() {
		return nil, errTermOver
	}
	return t.Store.Start(ctx, id, at)
}

func (t *termStore) Insert(ctx context.Context, state *store.StateWrite, jobs ...*store.Job) error {
	if t.over.Load() {
		return errTermOver
	}
	return t.Store.Insert(ctx, state, jobs...)
}

// Watch is the view's.
func (t *termStore) Watch(arrived func(*store.Job)) error {
	return t.Store.(store.Watcher).Watch(arrived)
}

// keeperGrantee is a keeper's Grantee (decide.Keeper).
type keeperGrantee Runtime

// Granted starts durable job j's attempt on the replica the engine placed
// it on: its Run is stamped now, and sent once its start is recorded.
func (g *keeperGrantee) Granted(j *engine.Job) {
	s := (*Runtime)(g)
	dt := s.durable.of(taskOf(j))
	k := s.keeper
	k.runs[dt.id] = &remoteRun{replica: j.Replica(), attempt: int(dt.attempt) + 1, run: k.leader.RunMsg(j.Replica()),
		done: make(chan error, 1)}
	s.grantedLocked(&dt.task)
}

func (g *keeperGrantee) Ended(j *engine.Job, o engine.Outcome, r *engine.Refusal, now int64) {
	(*grantee)(g).Ended(j, o, r, now)
}

// Done ends the attempt m names, if it is the one replica was sent; one
// that comes before Ready is kept for its job's adoption.
func (g *keeperGrantee) Done(replica string, m *decide.Msg, now int64) {
	k := g.keeper
	id := int64(m.Seq)
	if !k.ready {
		k.heardEnd(replica, m)
		return
	}
	if r := k.runs[id]; r != nil && r.replica == replica && r.attempt == m.Attempt {
		r.end(doneError(m))
	}
}

// heardEnd keeps, before Ready, the end of an attempt replica ran (a
// Done, alone or in a Hello), by job ID, the latest attempt's: Ready
// takes it if the store has that attempt running (restoreLocked), whatever
// Hellos come meanwhile.
func (k *keeper) heardEnd(replica string, m *decide.Msg) {
	if had, ok := k.early[int64(m.Seq)]; ok && had.Attempt > m.Attempt {
		return
	}
	d := *m
	d.Replica = replica
	k.early[int64(m.Seq)] = d
}

// doneError returns the error of the attempt m ended: nil if it
// completed.
func doneError(m *decide.Msg) error {
	switch {
	case m.Outcome == engine.Completed:
		return nil
	case m.Flags&decide.DoneNotRun != 0:
		return fmt.Errorf("%w (on replica %s: %s)", errNotRun, m.Replica, m.Err)
	case m.Flags&decide.DoneLost != 0:
		return fmt.Errorf("%w (on replica %s: %s)", ErrLost, m.Replica, m.Err)
	}
	err := errorOf(m.Err)
	if err == nil {
		err = errors.New("fairsched: the attempt failed")
	}
	if m.Flags&decide.DonePermanent != 0 {
		err = Permanent(err)
	}
	return err
}

// Runs notes what replica runs, and the ends it sent again: before
// Ready, for the adoptions (an attempt whose end it sent again is adopted
// and ends at once); after, it ends every attempt granted to it that it
// does not list, and those it sent the end of again as they ended. One
// whose Run was not sent yet (its start was being recorded) is not sent:
// it was never begun (errNotRun: queued again, the attempt uncounted,
// and its number never handed to a handler). One whose Run was sent is
// lost: the Run may have crossed the Hello, dropped by the replica, and
// the replica would have sent its end again had it run it.
func (g *keeperGrantee) Runs(replica string, runs map[int64]decide.Msg, now int64) {
	k := g.keeper
	if !k.ready {
		for id, r := range k.reported {
			if r.replica == replica {
				delete(k.reported, id) // it runs no more, or its replica was removed
			}
		}
		for id, m := range k.early {
			if m.Replica == replica && runs == nil {
				delete(k.early, id) // its replica was removed: lost (it cannot be adopted there)
			}
		}
		for id, m := range runs {
			if m.Kind == decide.Done {
				k.heardEnd(replica, &m)
				continue
			}
			k.reported[id] = reportedRun{replica: replica, attempt: m.Attempt, started: now - m.Ran}
		}
		return
	}
	for id, r := range k.runs {
		if r.replica != replica {
			continue
		}
		switch m, listed := runs[id]; {
		case listed && m.Attempt == r.attempt && m.Kind == decide.Done:
			r.end(doneError(&m))
		case listed && m.Attempt == r.attempt: // it runs
		case runs != nil && !r.adopted && !r.sent:
			r.end(fmt.Errorf("%w (replica %s's Hello came as its start was recorded)", errNotRun, replica))
		default:
			r.end(fmt.Errorf("%w (replica %s no longer runs it)", ErrLost, replica))
		}
	}
}

// Ready queues the jobs read from the store: every replica answered.
func (g *keeperGrantee) Ready(now int64) {
	s := (*Runtime)(g)
	k := s.keeper
	k.ready = true
	d := s.durable
	if d == nil { // no durable job to keep
		return
	}
	d.byID = make(map[int64]*durableTask) // for the term: the replicas' jobs may run after any
	for _, j := range k.recovered {
		s.restoreLocked(j, now)
	}
	d.stood = nil
	k.recovered, k.reported, k.early = nil, nil, nil
	s.armLocked(now)
	s.catchUpLocked(now)
	s.scheduleFairSaveLocked()
	if err := k.st.Watch(s.arrived); err != nil && s.cfg.Logger != nil {
		s.cfg.Logger.Error("fairsched: the leader cannot watch for the replicas' durable jobs", "err", err)
	}
}

// adoptLocked queues restored job dt, described by desc and tm, as
// running since started on the replica that reported it, and awaits its
// attempt's end. It reports false if the engine refused it.
func (s *Runtime) adoptLocked(dt *durableTask, desc *Job, tm *engine.Times, r reportedRun, now int64) bool {
	k := s.keeper
	if ref := s.eng.AdoptOn(&dt.rec, descOf(desc), tm, r.replica, max(r.started, 1), now); ref != nil {
		// Its needs no longer fit the resources: it ends, as a job
		// restored queued would (restoreLocked).
		err := fmt.Errorf("fairsched: durable job %d could not be adopted by a new leader: %w", dt.id, needsError(ref))
		s.durable.st.Post(store.Op{Kind: store.OpEnd, ID: dt.id, At: s.wallOf(now), Err: err.Error()})
		return false
	}
	run := &remoteRun{replica: r.replica, attempt: r.attempt, adopted: true, done: make(chan error, 1)}
	k.runs[dt.id] = run
	s.grantedLocked(&dt.task)
	if m, ok := k.early[dt.id]; ok && m.Replica == r.replica && m.Attempt == r.attempt {
		run.end(doneError(&m))
	}
	return true
}

// remoteAttempt returns the function that runs durable job dt's attempt
// on its replica: it records the start (unless adopted), sends the Run,
// and returns the attempt's result when it comes. Called on the job's
// goroutine, without the lock.
func (s *Runtime) remoteAttempt(dt *durableTask) (func(context.Context) error, error) {
	s.mu.Lock()
	r := s.keeper.runs[dt.id]
	s.mu.Unlock()
	if !r.adopted {
		dt.attempt++ // only the goroutine that runs it touches it while it runs
		args, err := s.durable.st.Start(context.Background(), dt.id, s.wallOf(dt.rec.Started()))
		if err != nil {
			s.mu.Lock()
			delete(s.keeper.runs, dt.id)
			s.mu.Unlock()
			return nil, fmt.Errorf("fairsched: recording the start of job %d: %w", dt.id, err)
		}
		r.run.Seq, r.run.Attempt, r.run.Desc.Type, r.run.Args = uint64(dt.id), r.attempt, dt.rec.Type(), args
	}
	return func(ctx context.Context) error {
		s.mu.Lock()
		if !r.adopted && !r.ended {
			s.keeper.leader.Send(r.run)
			r.sent = true
		}
		s.mu.Unlock()
		var err error
		select {
		case err = <-r.done:
		case <-ctx.Done():
			err = context.Cause(ctx)
		}
		s.mu.Lock()
		if s.keeper.runs[dt.id] == r {
			delete(s.keeper.runs, dt.id)
		}
		s.mu.Unlock()
		return err
	}, nil
}

// abandon ends the keeper with its term: nothing more is written, each
// attempt's wait ends, and the Runtime closes, its jobs left in the
// store as they are.
func (s *Runtime) abandon() {
	if s.keeper.st != nil {
		s.keeper.st.over.Store(true)
	}
	s.mu.Lock()
	for _, r := range s.keeper.runs {
		r.end(errTermOver)
	}
	s.mu.Unlock()
	_ = s.Close()
	if s.keeper.st != nil {
		_ = s.keeper.st.Store.Close() // the view's writes and watch, not the replica's store
	}
}

// newTerm makes the decisions of a term this replica leads
// (cluster.Config.NewTerm): a keeper Runtime configured as this one was
// at New, on jobs (nil: no durable job), whose Leader sends on out and
// decides while valid reports true. It reads the store's jobs before it
// returns: the term begins once they are read.
func (s *Runtime) newTerm(jobs store.Store, out *decide.Outbox, valid func() bool) (cluster.Term, error) {
	cfg := s.cfg
	cfg.Cluster, cfg.Decider, cfg.OnEvent, cfg.Signals, cfg.Handlers, cfg.Store = nil, nil, nil, nil, nil, nil
	cfg.keeper = &keeperConfig{name: s.cfg.Cluster.Name, capacity: s.cfg.Cluster.Capacity, out: out, valid: valid}
	if jobs != nil {
		cfg.Store = &termStore{Store: jobs}
	}
	k, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return keeperTerm{k}, nil
}

// keeperTerm is a keeper Runtime as a term's decisions (cluster.Term).
type keeperTerm struct{ s *Runtime }

func (t keeperTerm) Leader() *decide.Leader        { return t.s.keeper.leader }
func (t keeperTerm) Deliver(apply func(now int64)) { t.s.Deliver(apply) }
func (t keeperTerm) Abandon()                      { t.s.abandon() }

// openKeeperStore reads what a keeper keeps of the store (the dead jobs,
// the fair state) and every unfinished job, which Ready queues: the
// replicas must say first which of them they run. The pauses are the
// cluster's log's, not the store's (internal/cluster, changes.go). It runs
// in New, before the Runtime is shared.
func (s *Runtime) openKeeperStore() error {
	k := s.keeper
	k.st = s.cfg.Store.(*termStore)
	s.durable = &durable{st: k.st, handlers: make(map[string]*Handler), everyType: true}
	s.eng.ClockMoved = s.clockMovedLocked
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	if err := s.loadDeadLocked(); err != nil {
		return err
	}
	if err := s.loadFairLocked(now); err != nil {
		return err
	}
	return k.st.Recover(context.Background(), func(j *store.Job) error {
		k.recovered = append(k.recovered, j)
		return nil
	})
}
