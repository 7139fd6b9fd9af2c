package fairsched

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/fairsched/fairsched/internal/clock"
	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/refmodel"
	"github.com/fairsched/fairsched/internal/rt"
)

// diffSystem is what a diffRunner replays a workload on: the Scheduler,
// with its goroutines, contexts and events (diffScheduler), or its engine
// alone, called directly as the Scheduler would call it (diffEngine). Each
// method takes in one event completely before it returns.
type diffSystem interface {
	// submit submits job i, to run after the jobs of after (by index),
	// and returns its sequence number, or the error that refused it.
	submit(i int, d Job, after []int) (uint64, error)
	// join submits job i, a duplicate of job k that joins it, and returns
	// the number of the job it joined.
	join(i, k int, d Job) (uint64, error)
	// submitMany submits jobs idx, described by ds, each to run after the
	// jobs of its after, together (SubmitMany), and returns each one's
	// sequence number (the joined job's, for one that joined), and the
	// running jobs as each had been taken in, and the jobs (by index)
	// that each ended unrun, as unrun would have returned them had it
	// been called after each; or the error that refused the batch. The
	// engine alone has no batch: it returns errDiffNoBatch.
	submitMany(idx []int, ds []Job, after [][]int) (seqs []uint64, running [][]*engine.Job, unrun [][]int, err error)
	// detach detaches submission i from job k; if last, k is then
	// cancelled, and detach returns k's error once it has ended.
	detach(i, k int, last bool) error
	// superseded checks that waiting job i ended, replaced by a newer
	// submission of its type and ID.
	superseded(i int) error
	// unrun returns the jobs that ended without running, since the last
	// call, because a job they run after did not complete, by index.
	unrun() ([]int, error)
	// cancel cancels accepted job i, which has not ended, and returns the
	// job's error: context.Canceled, whether it was queued or running.
	cancel(i int) error
	// finish lets running job i end, its function returning nil, and
	// returns the job's error.
	finish(i int) error
	setKey(name string, c KeyConfig) error
	setKeyWeight(name string, w float64) error
	resetKeys()
	resetKey(name string)
	setMaxConcurrency(n int) error
	setTierLimit(t Tier, n int) error
	setTypeLimit(name string, n int) error
	setResource(name string, n int) error
	// setReplica and removeReplica set and remove a replica (the engine
	// alone: the Scheduler has none yet).
	setReplica(name string, capacity int, types []string) (bool, error)
	removeReplica(name string) (bool, error)
	// pause pauses (or resumes) a type if typ is not nil, else a key.
	pause(key string, typ *string, resume bool) error
	// waiting returns what holds each waiting job, by sequence number.
	waiting() map[uint64]diffWhy
	// order returns the waiting jobs' sequence numbers in the order the
	// dispatcher ranks them (Scheduler.Queue, Engine.QueueOrder).
	order() []uint64
	// fail lets running job i's attempt fail with errDiffAttempt. If retry,
	// the job is put back until at (a Scheduler computes at itself, from
	// its type's policy); otherwise it ends, and fail returns its error.
	fail(i int, retry bool, at time.Duration) error
	// schedule starts the periodic job: a Scheduler's Schedule; the engine
	// alone has none, and is given each occurrence (occurrence).
	schedule(s Schedule, job Job) error
	unschedule()
	// occurrence takes in the periodic job's occurrence due now, as job i:
	// a Scheduler has submitted it, or had it refused, itself; the engine
	// is given it. It returns its sequence number or the refusal.
	occurrence(i int, job Job) (uint64, error)
	// unexpectedOccurrence reports an occurrence the system submitted
	// when it should have skipped it.
	unexpectedOccurrence() (uint64, bool)
	// nextDue returns the next time the system has something fall due.
	nextDue() (time.Duration, bool)
	// due takes in what fell due by the clock's time (the Scheduler's
	// timers fired as the clock was set) and returns the jobs that expired
	// since the last call, by index.
	due() ([]int, error)
	// inspect checks the system's invariants and returns its running jobs
	// in the order the engine lists them, every flow's virtual time and
	// every cost estimate.
	inspect() (running []*engine.Job, vt map[engine.FlowID]float64, est map[engine.EstimateID]float64, err error)
	// counts returns what Stats counts: submitted, completed, failed,
	// cancelled, expired, rejected, active and queued.
	counts() []int
	// parked returns the parked jobs as counted and as listed one by one.
	parked() (counted, listed int)
	// ends returns, after close, how many times each job was reported to
	// have ended (by EventFinished, or the engine's Observer).
	ends() map[uint64]int
	// close ends the run: everything left is released, nothing outlives it.
	close() error
}

// diffScheduler runs a workload's jobs as Submit jobs of a Scheduler whose
// functions block until the runner releases them at their finish time.
type diffScheduler struct {
	s       *Scheduler
	timer   *time.Timer // turns a hang into a failure
	handles map[int]Handle
	release map[int]chan error // what the job's function returns
	live    map[int]bool       // submitted, not known to have ended

	periodic     *Periodic
	periodicRun  chan error // what the running occurrence returns: one runs at a time
	lastPeriodic uint64     // the seq of the latest occurrence taken in

	endMu   sync.Mutex     // the hook runs on a goroutine of the scheduler's
	endSeqs map[uint64]int // EventFinished per seq, written by the hook

	batched func(h Handle, e *engine.Engine) // called, under the lock, after each job of a SubmitMany, with its Handle
}

func newDiffScheduler(cfg Config, clk *clock.Fake, hook bool) (*diffScheduler, error) {
	d := &diffScheduler{handles: map[int]Handle{}, release: map[int]chan error{}, live: map[int]bool{}, endSeqs: map[uint64]int{}}
	cfg.Clock = clk
	cfg.signals = rt.NewSignals()
	cfg.signals.Batched = func(h rt.Handle, e *engine.Engine) {
		if d.batched != nil {
			d.batched(Handle{h}, e)
		}
	}
	if hook {
		cfg.EventBuffer = 1 << 12 // far more than a workload makes; checked
		cfg.OnEvent = func(ev Event) {
			if ev.Kind == EventFinished {
				d.endMu.Lock()
				d.endSeqs[ev.Seq]++
				d.endMu.Unlock()
			}
		}
	}
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	d.s = s
	d.timer = time.NewTimer(time.Hour)
	return d, nil
}

func (d *diffScheduler) submit(i int, desc Job, after []int) (uint64, error) {
	for _, k := range after {
		desc.After = append(desc.After, d.handles[k])
	}
	release := make(chan error, 1)
	h, err := d.s.Submit(context.Background(), desc, awaitRelease(release))
	if err != nil {
		return 0, err
	}
	d.handles[i], d.release[i], d.live[i] = h, release, true
	return h.Seq(), nil
}

func (d *diffScheduler) submitMany(idx []int, ds []Job, after [][]int) ([]uint64, [][]*engine.Job, [][]int, error) {
	// Which job a member joins is known once the batch is in: each
	// function reads its release channel from a cell, which a member that
	// joined points at its job's before the job can run.
	cells := make([]chan error, len(idx))
	ps := make([]SubmitParams, len(idx))
	for m := range idx {
		desc := ds[m]
		for _, k := range after[m] {
			desc.After = append(desc.After, d.handles[k])
		}
		cells[m] = make(chan error, 1)
		cell := &cells[m]
		ps[m] = SubmitParams{Job: desc, Fn: func(ctx context.Context) error { return awaitRelease(*cell)(ctx) }}
	}
	// As each job is taken in, under the lock: what runs, and which jobs
	// have ended, of those live before the batch and the batch's so far
	// (which of them ended unrun is known from their errors after).
	var running [][]*engine.Job
	var ended [][]int
	done := func(h Handle) bool { t, _ := h.h.Task(); return t.Rec().State() == engine.StateDone }
	var batchHandles []Handle
	d.batched = func(h Handle, eng *engine.Engine) {
		running = append(running, eng.RunningJobs())
		batchHandles = append(batchHandles, h)
		var e []int
		for k := range d.live {
			if done(d.handles[k]) {
				e = append(e, k)
			}
		}
		for n, bh := range batchHandles {
			if _, joined := bh.h.Task(); !joined && done(bh) {
				e = append(e, idx[n])
			}
		}
		ended = append(ended, e)
	}
	hs, err := d.s.SubmitMany(context.Background(), ps)
	d.batched = nil
	if err != nil {
		return nil, nil, nil, err
	}
	owner := map[uint64]int{} // each job's first submission, by seq
	for k, h := range d.handles {
		if o, ok := owner[h.Seq()]; !ok || k < o {
			owner[h.Seq()] = k
		}
	}
	seqs := make([]uint64, len(idx))
	for m, i := range idx {
		seqs[m] = hs[m].Seq()
		d.handles[i] = hs[m]
		if k, ok := owner[seqs[m]]; ok { // joined job k
			cells[m] = d.release[k]
			continue
		}
		owner[seqs[m]] = i
		d.release[i], d.live[i] = cells[m], true
	}
	// The jobs each member ended unrun: those that ended as it was taken
	// in, and not before, with a *DependencyError of their own.
	unrun := make([][]int, len(idx))
	seen := map[int]bool{}
	for m := range idx {
		for _, k := range ended[m] {
			if seen[k] {
				continue
			}
			seen[k] = true
			var de *DependencyError
			if err := d.handles[k].Err(); errors.As(err, &de) && de.Seq == d.handles[k].Seq() {
				unrun[m] = append(unrun[m], k)
				delete(d.live, k)
			}
		}
		slices.Sort(unrun[m])
	}
	return seqs, running, unrun, nil
}

func (d *diffScheduler) cancel(i int) error {
	d.handles[i].Cancel()
	delete(d.live, i)
	return d.await(i)
}

func (d *diffScheduler) finish(i int) error {
	d.release[i] <- nil
	delete(d.live, i)
	return d.await(i)
}

// errDiffAttempt is the error of a failing attempt.
var errDiffAttempt = errors.New("the attempt failed")

func (d *diffScheduler) fail(i int, retry bool, _ time.Duration) error {
	d.release[i] <- errDiffAttempt
	if !retry {
		delete(d.live, i)
		return d.await(i)
	}
	d.timer.Reset(10 * time.Second)
	defer d.timer.Stop()
	for seq := d.handles[i].Seq(); ; {
		select {
		case got := <-d.s.rt.Signals().Retried:
			if got != seq {
				return fmt.Errorf("j%d failed, but job %d was retried", i, got)
			}
			return nil
		case <-d.handles[i].Done():
			return fmt.Errorf("j%d ended with %v instead of being retried", i, d.handles[i].Err())
		case <-d.timer.C:
			return fmt.Errorf("j%d was not retried", i)
		}
	}
}

func (d *diffScheduler) schedule(spec Schedule, job Job) error {
	d.periodicRun = make(chan error, 1)
	p, err := d.s.Schedule(context.Background(), spec, job, func(ctx context.Context) error {
		select {
		case err := <-d.periodicRun:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	d.periodic = p
	return err
}

func (d *diffScheduler) unschedule() { d.periodic.Stop() }

func (d *diffScheduler) occurrence(i int, _ Job) (uint64, error) {
	h := d.periodic.Last()
	if h.Seq() == d.lastPeriodic {
		// Refused: the only refusal possible for it is a full queue.
		return 0, &QueueFullError{}
	}
	d.lastPeriodic = h.Seq()
	d.handles[i], d.release[i], d.live[i] = h, d.periodicRun, true
	return h.Seq(), nil
}

func (d *diffScheduler) unexpectedOccurrence() (uint64, bool) {
	if h := d.periodic.Last(); h.Seq() != d.lastPeriodic {
		return h.Seq(), true
	}
	return 0, false
}

func (d *diffScheduler) nextDue() (time.Duration, bool) {
	var due int64
	var ok bool
	d.s.rt.Locked(func(e *engine.Engine, _ int64) { due, ok = e.NextDue() })
	return d.s.rt.TimeOf(due).Sub(d.s.rt.Epoch()), ok
}

// due reports the jobs that ended by themselves: past their start
// deadline, as the scheduler's timer fired while the clock was set. The
// fake clock runs a timer's function on the goroutine that sets it, so
// every such end has happened by now.
func (d *diffScheduler) due() ([]int, error) {
	return d.endedBy(func(h Handle) (bool, error) {
		switch err := h.Err(); {
		case errors.Is(err, ErrDependency):
			return false, nil // unrun's
		case !errors.Is(err, ErrStartDeadline):
			return false, fmt.Errorf("ended by itself with %v", err)
		}
		return true, nil
	})
}

// unrun reports the jobs that ended with a *DependencyError: ended by the
// event just taken in, under the lock that took it in.
func (d *diffScheduler) unrun() ([]int, error) {
	return d.endedBy(func(h Handle) (bool, error) {
		var de *DependencyError
		if !errors.As(h.Err(), &de) || de.Seq != h.Seq() {
			return false, fmt.Errorf("ended by itself with %v", h.Err())
		}
		return true, nil
	})
}

// endedBy takes out of the live jobs, and returns, those that ended and
// that took says are its to take; an end it finds wrong is an error.
func (d *diffScheduler) endedBy(took func(Handle) (bool, error)) ([]int, error) {
	var out []int
	for i := range d.live {
		h := d.handles[i]
		select {
		case <-h.Done():
		default:
			continue
		}
		ok, err := took(h)
		if err != nil {
			return nil, fmt.Errorf("j%d %v", i, err)
		}
		if ok {
			out = append(out, i)
			delete(d.live, i)
		}
	}
	slices.Sort(out)
	return out, nil
}

// await waits until job i has ended and returns its error. The scheduler
// ends a job and dispatches under one hold of its lock, so once Done is
// closed and the lock taken (by inspect), the event has been taken in
// completely.
func (d *diffScheduler) await(i int) error {
	h := d.handles[i]
	done := h.Done()
	select {
	case <-done:
		return h.Err()
	default:
	}
	d.timer.Reset(10 * time.Second)
	select {
	case <-done:
		d.timer.Stop()
		return h.Err()
	case <-d.timer.C:
		return fmt.Errorf("j%d did not end", i)
	}
}

func (d *diffScheduler) setKey(name string, c KeyConfig) error     { return d.s.SetKey(name, c) }
func (d *diffScheduler) setKeyWeight(name string, w float64) error { return d.s.SetKeyWeight(name, w) }
func (d *diffScheduler) resetKeys()                                { d.s.ResetKeys() }
func (d *diffScheduler) resetKey(name string)                      { d.s.ResetKey(name) }
func (d *diffScheduler) setMaxConcurrency(n int) error             { return d.s.SetMaxConcurrency(n) }
func (d *diffScheduler) setTierLimit(t Tier, n int) error          { return d.s.SetTierLimit(t, n) }
func (d *diffScheduler) setTypeLimit(name string, n int) error     { return d.s.SetTypeLimit(name, n) }

func (d *diffScheduler) waiting() map[uint64]diffWhy {
	out := map[uint64]diffWhy{}
	for _, ji := range d.s.Snapshot() {
		if !ji.Running {
			out[ji.Seq] = diffWhy{ji.Waiting.String(), ji.WaitingOn, ji.WaitingFor}
		}
	}
	return out
}

func (d *diffScheduler) order() []uint64 {
	p := d.s.Queue(0, math.MaxInt)
	var out []uint64
	for _, ji := range p.Jobs[p.Running : p.Running+p.Waiting] { // the paused follow
		out = append(out, ji.Seq)
	}
	return out
}

func (d *diffScheduler) join(i, k int, desc Job) (uint64, error) {
	// Whichever submission's function runs, the job's finish releases it.
	h, err := d.s.Submit(context.Background(), desc, awaitRelease(d.release[k]))
	if err != nil {
		return 0, err
	}
	d.handles[i] = h
	return h.Seq(), nil
}

func (d *diffScheduler) detach(i, k int, last bool) error {
	h := d.handles[i]
	h.Cancel()
	if err := h.Wait(context.Background()); !errors.Is(err, context.Canceled) {
		return fmt.Errorf("a detached submission's Wait returned %v", err)
	}
	if i == k {
		d.handles[k] = ownHandle(h) // the job's own end, not its first submission's
	}
	if !last {
		return nil
	}
	delete(d.live, k)
	d.handles[k] = ownHandle(h)
	return d.await(k)
}

func (d *diffScheduler) superseded(i int) error {
	delete(d.live, i)
	if err := d.await(i); !errors.Is(err, ErrSuperseded) {
		return fmt.Errorf("j%d ended with %v, want ErrSuperseded", i, err)
	}
	return nil
}

func (d *diffScheduler) setResource(name string, n int) error { return d.s.SetResource(name, n) }

var errDiffNoReplicas = errors.New("the Scheduler has no replicas yet")

func (d *diffScheduler) setReplica(string, int, []string) (bool, error) {
	return false, errDiffNoReplicas
}
func (d *diffScheduler) removeReplica(string) (bool, error) { return false, errDiffNoReplicas }

func (d *diffScheduler) pause(key string, typ *string, resume bool) error {
	switch {
	case typ != nil && resume:
		return d.s.ResumeType(*typ)
	case typ != nil:
		return d.s.PauseType(*typ)
	case resume:
		d.s.ResumeKey(key)
	default:
		d.s.PauseKey(key)
	}
	return nil
}

func (d *diffScheduler) inspect() (running []*engine.Job, vt map[engine.FlowID]float64, est map[engine.EstimateID]float64, err error) {
	d.s.rt.Locked(func(e *engine.Engine, now int64) {
		running, vt, est, err = e.RunningJobs(), e.VirtualTimes(), e.Estimates(), e.Verify(now)
	})
	return running, vt, est, err
}

func (d *diffScheduler) counts() []int {
	st := d.s.Stats()
	if st.Submitted != st.Completed+st.Failed+st.Cancelled+st.Expired+st.DependencyFailed+uint64(st.Running+st.Queued) {
		return nil // do not add up: no count can match
	}
	return []int{int(st.Submitted), int(st.Completed), int(st.Failed), int(st.Cancelled), int(st.Expired), int(st.DependencyFailed),
		int(st.Rejected), st.Running, st.Queued}
}

func (d *diffScheduler) parked() (int, int) {
	n := 0
	for _, ji := range d.s.Snapshot() {
		if ji.Parked {
			n++
		}
	}
	return d.s.Stats().Parked, n
}

func (d *diffScheduler) ends() map[uint64]int {
	if d.s.Stats().EventsDropped != 0 {
		return nil
	}
	d.endMu.Lock()
	defer d.endMu.Unlock()
	return d.endSeqs
}

// close releases every job still blocked and closes the scheduler, so no
// goroutine outlives a run, whatever went wrong.
func (d *diffScheduler) close() error {
	for _, r := range d.release {
		select {
		case r <- nil:
		default:
		}
	}
	d.timer.Stop()
	return d.s.Close()
}

// diffEngine drives the engine alone, with no goroutine: each event is
// one call, followed, as in the Scheduler, by starting every job that can
// start. Time is the runner's fake clock, in µs since the run began.
type diffEngine struct {
	e         *engine.Engine
	cfg       Config
	clk       *clock.Fake
	t0        time.Time
	jobs      map[int]*engine.Job
	index     map[*engine.Job]int
	endSeqs   map[uint64]int
	expired   []*engine.Job          // by a Due a submission called first, for due to report
	toReplace map[dupKey]*engine.Job // of Supersede types: the job to replace
	replicaOf func(i int) string     // the replica job i is bound to; nil: none
}

func newDiffEngine(cfg Config, clk *clock.Fake) (*diffEngine, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	d := &diffEngine{cfg: cfg, clk: clk, t0: clk.Now(), jobs: map[int]*engine.Job{}, index: map[*engine.Job]int{}, endSeqs: map[uint64]int{},
		toReplace: map[dupKey]*engine.Job{}}
	d.e = engine.New(cfg.engine(), diffEndCounter(d.endSeqs))
	for _, name := range sortedKeys(cfg.Types) {
		if err := d.e.RegisterType(name, cfg.Types[name].engine()); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (d *diffEngine) now() int64 { return d.clk.Now().Sub(d.t0).Microseconds() }

// dispatch starts every job that can start now, as the Scheduler does
// after each event.
func (d *diffEngine) dispatch() {
	for now := d.now(); ; {
		j := d.e.Next(now)
		if j == nil {
			return
		}
		d.forgetWaiting(j)
	}
}

// supersede does what a Scheduler does for a job j of a type whose policy
// is Supersede, just accepted: it cancels the job of its type and ID that
// waits, if one does, and is the one to replace next if it waits.
func (d *diffEngine) supersede(j *engine.Job) {
	if d.cfg.Types[j.Type()].Duplicates != Supersede {
		return
	}
	key := dupKey{j.Type(), j.ID()}
	if old := d.toReplace[key]; old != nil && old.Waiting() {
		d.e.Cancel(old, d.now())
	}
	delete(d.toReplace, key)
	if j.Waiting() {
		d.toReplace[key] = j
	}
}

// forgetWaiting forgets j, which started, as the job to replace.
func (d *diffEngine) forgetWaiting(j *engine.Job) {
	if key := (dupKey{j.Type(), j.ID()}); d.toReplace[key] == j {
		delete(d.toReplace, key)
	}
}

func (d *diffEngine) submit(i int, desc Job, after []int) (uint64, error) {
	j := new(engine.Job)
	ed := engine.Desc{Type: desc.Type, ID: desc.ID, Key: desc.Key, Priority: desc.Priority}
	var tm engine.Times
	if d.replicaOf != nil {
		tm.Replica = d.replicaOf(i)
	}
	for _, k := range after {
		tm.After = append(tm.After, d.jobs[k])
	}
	if desc.Needs != nil {
		tm.Needs = rt.EngineNeeds(desc.Needs)
		if tm.Needs == nil {
			tm.Needs = []engine.Need{}
		}
	}
	if due, ok := d.e.NextDue(); ok && due <= d.now() {
		d.expired = append(d.expired, d.e.Due(d.now())...) // as the Scheduler catches up first
		d.dispatch()
	}
	if !desc.NotBefore.IsZero() {
		tm.NotBefore = desc.NotBefore.Sub(d.t0).Microseconds()
	}
	if !desc.StartBy.IsZero() {
		tm.StartBy = desc.StartBy.Sub(d.t0).Microseconds()
	}
	would := d.e.WouldStartOn(&ed, tm.Needs, tm.Replica, d.now()) && tm.NotBefore <= d.now() && !d.waitsForAny(tm.After)
	// WouldStart does not know that the job it asks about would replace
	// one, whose claim on resources then ends.
	old := d.toReplace[dupKey{desc.Type, desc.ID}]
	replaces := d.cfg.Types[desc.Type].Duplicates == Supersede && old != nil && old.Waiting()
	if r := d.e.Enqueue(j, &ed, &tm, d.now()); r != nil {
		switch r.Reason {
		case engine.RefusedFull, engine.RefusedKeyFull:
			return 0, &QueueFullError{KeyLimit: r.Reason == engine.RefusedKeyFull, Key: desc.Key, Limit: r.Limit, Size: r.Size}
		case engine.RefusedNeverStarts:
			return 0, ErrStartDeadline
		case engine.RefusedUnknownResource:
			return 0, ErrUnknownResource
		case engine.RefusedTooMuch:
			return 0, ErrTooMuch
		}
		return 0, fmt.Errorf("refused: reason %d", r.Reason)
	}
	d.jobs[i], d.index[j] = j, i
	d.supersede(j)
	d.dispatch()
	if would != j.Running() && !replaces {
		return 0, fmt.Errorf("j%d: WouldStart said %v, but it started %v", i, would, j.Running())
	}
	return j.Seq(), nil
}

// errDiffNoBatch is the engine's answer to a batch: the runner submits
// its jobs one by one, once the reference has admitted them together.
var errDiffNoBatch = errors.New("the engine alone has no batch")

func (d *diffEngine) submitMany([]int, []Job, [][]int) ([]uint64, [][]*engine.Job, [][]int, error) {
	return nil, nil, nil, errDiffNoBatch
}

// cancel ends a queued job as cancelled, or a running one as a Scheduler's
// does: its function returns its context's error, so it ran and failed.
func (d *diffEngine) cancel(i int) error {
	j := d.jobs[i]
	switch {
	case j.Running():
		d.e.Finish(j, engine.Failed, d.now())
	case j.Waiting():
		d.e.Cancel(j, d.now())
	default:
		return fmt.Errorf("j%d cancelled in state %d", i, j.State())
	}
	d.dispatch()
	return context.Canceled
}

func (d *diffEngine) finish(i int) error {
	j := d.jobs[i]
	if !j.Running() {
		return fmt.Errorf("j%d finished in state %d", i, j.State())
	}
	d.e.Finish(j, engine.Completed, d.now())
	d.dispatch()
	return nil
}

func (d *diffEngine) fail(i int, retry bool, at time.Duration) error {
	j := d.jobs[i]
	if !j.Running() {
		return fmt.Errorf("j%d failed in state %d", i, j.State())
	}
	if retry {
		d.e.Retry(j, at.Microseconds(), d.now())
	} else {
		d.e.Finish(j, engine.Failed, d.now())
	}
	d.dispatch()
	if retry {
		return nil
	}
	return errDiffAttempt
}

func (d *diffEngine) schedule(Schedule, Job) error              { return nil }
func (d *diffEngine) unschedule()                               {}
func (d *diffEngine) occurrence(i int, job Job) (uint64, error) { return d.submit(i, job, nil) }

// waitsForAny reports whether a job of after has not completed: it has
// not ended, or ended otherwise.
func (d *diffEngine) waitsForAny(after []*engine.Job) bool {
	return slices.ContainsFunc(after, func(j *engine.Job) bool {
		return j.State() != engine.StateDone || j.Outcome() != engine.Completed
	})
}

func (d *diffEngine) unrun() ([]int, error) {
	var out []int
	for _, u := range d.e.TakeUnrun() {
		out = append(out, d.index[u.Job])
	}
	slices.Sort(out)
	return out, nil
}
func (d *diffEngine) unexpectedOccurrence() (uint64, bool) { return 0, false }

func (d *diffEngine) nextDue() (time.Duration, bool) {
	due, ok := d.e.NextDue()
	return time.Duration(due) * time.Microsecond, ok
}

// due applies what fell due, then starts what can start, as the
// Scheduler's timer does.
func (d *diffEngine) due() ([]int, error) {
	var out []int
	for _, j := range append(d.expired, d.e.Due(d.now())...) {
		out = append(out, d.index[j])
	}
	d.expired = nil
	d.dispatch()
	slices.Sort(out)
	return out, nil
}

// setKey, setKeyWeight: the Scheduler's validation, then the engine.
func (d *diffEngine) setKey(name string, c KeyConfig) error {
	if err := c.validate(name); err != nil {
		return err
	}
	if !d.e.SetKey(name, c.engine(), d.now()) {
		return errors.New("the reservations would exceed MaxConcurrency")
	}
	d.dispatch()
	return nil
}

func (d *diffEngine) setKeyWeight(name string, w float64) error {
	if problem := weightProblem(w); problem != "" {
		return errors.New(problem)
	}
	d.e.SetKeyWeight(name, w, d.now())
	d.dispatch()
	return nil
}

func (d *diffEngine) setMaxConcurrency(n int) error {
	if !d.e.SetMaxConcurrency(n, d.now()) {
		return errors.New("the reservations would exceed it")
	}
	d.dispatch()
	return nil
}

func (d *diffEngine) setTierLimit(t Tier, n int) error {
	d.e.SetTierLimit(int(t), n)
	d.dispatch()
	return nil
}

func (d *diffEngine) setTypeLimit(name string, n int) error {
	if !d.e.SetTypeLimit(name, n) {
		return ErrUnknownType
	}
	d.dispatch()
	return nil
}

func (d *diffEngine) waiting() map[uint64]diffWhy {
	out := map[uint64]diffWhy{}
	for _, j := range d.e.PendingJobs() {
		w := d.e.WhyWaiting(j)
		out[j.Seq()] = diffWhy{diffWhyName(w.Why), w.On, w.Resource}
	}
	return out
}

// diffWhyName names a reason as the reference model does: the Scheduler's
// names, and the replicas' reasons, which it does not name yet.
func diffWhyName(w engine.Why) string {
	switch w {
	case engine.WhyReplicasFull:
		return refmodel.WhyReplicasFull.String()
	case engine.WhyNoReplica:
		return refmodel.WhyNoReplica.String()
	}
	return WaitReason(w).String()
}

func (d *diffEngine) order() []uint64 {
	var out []uint64
	for _, j := range d.e.QueueOrder(d.now(), 0, math.MaxInt) {
		out = append(out, j.Seq())
	}
	return out
}

func (d *diffEngine) join(i, k int, desc Job) (uint64, error) {
	j := d.jobs[k]
	p, _ := d.e.BasePriority(&engine.Desc{Type: desc.Type, ID: desc.ID, Key: desc.Key, Priority: desc.Priority})
	d.e.Raise(j, p, d.now())
	d.dispatch()
	return j.Seq(), nil
}

func (d *diffEngine) detach(i, k int, last bool) error {
	if !last {
		return nil
	}
	return d.cancel(k)
}

func (d *diffEngine) superseded(i int) error {
	if j := d.jobs[i]; j.State() != engine.StateDone || j.Outcome() != engine.NotRun {
		return fmt.Errorf("j%d superseded, but in state %d, outcome %d", i, j.State(), j.Outcome())
	}
	return nil
}

func (d *diffEngine) setReplica(name string, capacity int, types []string) (bool, error) {
	ok := d.e.SetReplica(name, capacity, types, d.now())
	d.dispatch()
	return ok, nil
}

func (d *diffEngine) removeReplica(name string) (bool, error) {
	ok := d.e.RemoveReplica(name, d.now())
	d.dispatch()
	return ok, nil
}

func (d *diffEngine) setResource(name string, n int) error {
	if !d.e.SetResource(name, n, d.now()) {
		return ErrUnknownResource
	}
	d.dispatch()
	return nil
}

func (d *diffEngine) pause(key string, typ *string, resume bool) error {
	ok := true
	switch {
	case typ != nil && resume:
		ok = d.e.ResumeType(*typ, d.now())
	case typ != nil:
		ok = d.e.PauseType(*typ, d.now())
	case resume:
		d.e.ResumeKey(key, d.now())
	default:
		d.e.PauseKey(key, d.now())
	}
	if !ok {
		return ErrUnknownType
	}
	d.dispatch()
	return nil
}

func (d *diffEngine) resetKey(name string) {
	d.e.ResetKey(name, d.now())
	d.dispatch()
}

func (d *diffEngine) resetKeys() {
	d.e.ResetKeys(d.now())
	d.dispatch()
}

func (d *diffEngine) inspect() ([]*engine.Job, map[engine.FlowID]float64, map[engine.EstimateID]float64, error) {
	return d.e.RunningJobs(), d.e.VirtualTimes(), d.e.Estimates(), d.e.Verify(d.now())
}

func (d *diffEngine) counts() []int {
	sum := d.e.Summary()
	rejected := sum.RejectedUnknownType
	for _, t := range d.e.Types() {
		rejected += t.RejectedFull + t.RejectedClosed
	}
	return []int{int(sum.Submitted), int(sum.Completed), int(sum.Failed), int(sum.Cancelled), int(sum.Expired), int(sum.DependencyFailed),
		int(rejected), sum.Running, sum.Pending + sum.Delayed + sum.Paused + sum.Blocked}
}

func (d *diffEngine) parked() (int, int) {
	n := 0
	for _, j := range d.e.PendingJobs() {
		if d.e.Held(j) {
			n++
		}
	}
	return d.e.Summary().Parked, n
}

func (d *diffEngine) ends() map[uint64]int { return d.endSeqs }
func (d *diffEngine) close() error         { return nil }

// diffEndCounter is an engine Observer that counts each job's ends.
type diffEndCounter map[uint64]int

func (c diffEndCounter) Submitted(*engine.Job, int64)                      {}
func (c diffEndCounter) Started(*engine.Job, int, bool, int64)             {}
func (c diffEndCounter) Finished(j *engine.Job, _ engine.Outcome, _ int64) { c[j.Seq()]++ }
func (c diffEndCounter) Cancelled(j *engine.Job, _ int64)                  { c[j.Seq()]++ }
func (c diffEndCounter) Expired(j *engine.Job, _ int64)                    { c[j.Seq()]++ }
func (c diffEndCounter) DependencyFailed(j, _ *engine.Job, _ int64)        { c[j.Seq()]++ }
func (c diffEndCounter) Retrying(*engine.Job, int64, int64)                {}
func (c diffEndCounter) AllocationChanged(string, float64, float64, engine.AllocationReason, int64) {
}

// awaitRelease returns a job function that returns what release gives
// it, or its context's error if that ends first.
func awaitRelease(release <-chan error) func(context.Context) error {
	return func(ctx context.Context) error {
		select {
		case err := <-release:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ownHandle returns a Handle on the job h refers to, as its first
// submission's: the job's own end, not a joiner's.
func ownHandle(h Handle) Handle {
	t, _ := h.h.Task()
	return Handle{rt.OwnHandle(t)}
}
