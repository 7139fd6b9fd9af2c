package fairsched

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/fairsched/fairsched/internal/clock"
	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/refmodel"
	"github.com/fairsched/fairsched/internal/rt"
)

// diffOptions says what a run checks besides the hard limits and the
// engine's invariants (Verify, after every event), and on what.
type diffOptions struct {
	engine bool // replay on the engine alone, not on a Scheduler
	ref    bool // replay on the reference model and compare starts
	stats  bool // check Stats against the driver's own counts after every event
	hook   bool // count each job's ends: each must end exactly once
	order  bool // compare the queue's order (Queue) with the reference's (Order)
}

// diffStart is one start as seen by the driver.
type diffStart struct {
	Job     int
	At      time.Duration
	Kind    string
	Replica string // the replica it runs on, if any
}

func (s diffStart) String() string {
	if s.Replica != "" {
		return fmt.Sprintf("%v j%d %s on %s", s.At, s.Job, s.Kind, s.Replica)
	}
	return fmt.Sprintf("%v j%d %s", s.At, s.Job, s.Kind)
}

// diffJobRun is the driver's view of one job of the workload.
type diffJobRun struct {
	accepted bool
	seq      uint64 // the system's
	refSeq   uint64
	started  bool
	ended    bool
	start    time.Duration
	failed   int // attempts failed and retried
	// A submission of a type that joins duplicates: joiner if it joined
	// job of; attached counts, on a job, the submissions attached to it,
	// its own included; detached says this submission detached.
	joiner    bool
	of        int
	attached  int
	detached  bool
	completed bool   // ended, its function having returned nil
	batched   bool   // taken in with its batch, before its own arrival event
	replica   string // the replica its attempt runs on, as the system said
}

// errDiffInvalid marks a workload whose configuration New rejects; the
// shrinker never keeps one.
var errDiffInvalid = errors.New("invalid configuration")

// diffRunner replays a workload on a diffSystem, driving a fake clock
// from event to event, and on the reference model in lockstep. The system
// takes in each event completely before the next one, so a run is
// deterministic.
type diffRunner struct {
	orig  *diffWorkload // as given
	w     *diffWorkload // as replayed: with the periodic job's occurrences
	opts  diffOptions
	sys   diffSystem
	clk   *clock.Fake
	t0    time.Time
	now   time.Duration
	ref   *refmodel.Model
	jobs  []diffJobRun
	bySeq map[uint64]int // real seq -> job index
	// waitingDup is, for each (type, ID) of a type that supersedes, the
	// job a newer submission would replace, until it starts.
	waitingDup map[dupKey]int
	// openJoin is, for each (type, ID) of a type that joins duplicates,
	// the job a duplicate joins (if it has not ended).
	openJoin map[dupKey]int
	order    []int // job indices in start order
	// batch is set while the jobs of a batch, submitted together, are
	// taken in one by one: what the system said of each.
	batch *diffBatchRun
	// held are the starts seen while a batch was taken in, compared with
	// the reference's at the sync that ends it.
	held []diffStart

	real, model []diffStart // the start sequences
	trace       []string    // the events applied, for reports

	// The keys' current configurations, for the hard-limit check: those
	// set at run time, then (until ResetKeys) Config.Keys, then the default.
	keyCfg    map[string]KeyConfig
	keysReset bool
	keyReset  map[string]bool // keys ResetKey reset

	// The global, tier and type limits in force.
	caps struct {
		global int
		tier   map[Tier]int
		typ    map[string]int
		res    map[string]int
		// The replicas known, and whether one was ever set.
		replicas   map[string]diffReplica
		replicated bool
	}

	// The periodic job: when its next occurrence is (-1: none), and its
	// latest occurrence, by index in w.Jobs (-1: none yet).
	periodicNext time.Duration
	periodicLast int
	// refExpired are the jobs the reference expired at an occurrence's
	// instant, before the occurrence, for due to report with the rest.
	refExpired []uint64

	// Counts the Stats must agree with.
	rejected, completed, failed, cancelled, expired, unrun, running, pending int
}

func newDiffRunner(w *diffWorkload, opts diffOptions) *diffRunner {
	// The runner's w gains the periodic job's occurrences as jobs, and a
	// resume of every pause left in force, so that every job ends.
	r := &diffRunner{orig: w, w: w.clone(), opts: opts, jobs: make([]diffJobRun, len(w.Jobs)),
		bySeq: map[uint64]int{}, keyCfg: map[string]KeyConfig{}, keyReset: map[string]bool{}, waitingDup: map[dupKey]int{}, openJoin: map[dupKey]int{}}
	r.w.Changes = append(r.w.Changes, w.resumesLeft()...)
	return r
}

// resumesLeft returns a resume, after every event of the workload, of
// each key and type that its changes leave paused, and of each resource
// whose capacity they change, its configured capacity.
func (w *diffWorkload) resumesLeft() []diffKeyChange {
	type target struct {
		key string
		typ *string
	}
	name := func(c diffKeyChange) string {
		if c.Pause.Type != nil {
			return "type " + *c.Pause.Type
		}
		return "key " + c.Key
	}
	changes := slices.Clone(w.Changes)
	slices.SortStableFunc(changes, func(a, b diffKeyChange) int { return cmp.Compare(a.At, b.At) })
	paused := map[string]target{}
	end := time.Duration(0)
	for _, j := range w.Jobs {
		end = max(end, j.At, j.CancelAt, j.At+j.Delay)
	}
	for _, c := range changes {
		end = max(end, c.At)
		if c.Pause == nil {
			continue
		}
		if c.Pause.Resume {
			delete(paused, name(c))
		} else {
			paused[name(c)] = target{c.Key, c.Pause.Type}
		}
	}
	if p := w.Periodic; p != nil {
		end = max(end, p.Stop)
	}
	var out []diffKeyChange
	for _, n := range slices.Sorted(maps.Keys(paused)) {
		t := paused[n]
		out = append(out, diffKeyChange{At: end + diffUnits(1), Key: t.key, Pause: &diffPause{Type: t.typ, Resume: true}})
	}
	// A job that needs more than a capacity lowered meanwhile waits for
	// it to grow: the capacities go back to their configuration too.
	for _, name := range slices.Sorted(maps.Keys(w.Cfg.Resources)) {
		if slices.ContainsFunc(changes, func(c diffKeyChange) bool { return c.Resource != nil && c.Resource.Name == name }) {
			out = append(out, diffKeyChange{At: end + diffUnits(1), Resource: &diffResource{name, w.Cfg.Resources[name]}})
		}
	}
	// A job that no replica may run waits for one: every replica named
	// is set last with a slot and every type.
	if w.hasReplicas() {
		named := map[string]bool{}
		for _, rep := range w.Replicas {
			named[rep.Name] = true
		}
		for _, c := range changes {
			if c.Replica != nil {
				named[c.Replica.Name] = true
			}
		}
		for _, j := range w.Jobs {
			if j.Replica != "" {
				named[j.Replica] = true
			}
		}
		for _, name := range slices.Sorted(maps.Keys(named)) {
			out = append(out, diffKeyChange{At: end + diffUnits(1), Replica: &diffReplica{Name: name, Capacity: 1}})
		}
	}
	return out
}

// diffEvent is an arrival, a cancellation or a key change. At one instant
// arrivals go first, then cancellations, then key changes, each kind in
// workload order; then the jobs due to finish, in start order.
type diffEvent struct {
	at   time.Duration
	kind int // diffArrival, diffCancellation or diffKeyChanged
	idx  int // in Jobs, or in Changes for diffKeyChanged
}

// The kinds of diffEvent, in the order they are applied at one instant.
const (
	diffArrival = iota
	diffCancellation
	diffKeyChanged
	diffScheduled   // the periodic job is scheduled
	diffUnscheduled // and stopped
)

func (r *diffRunner) events() []diffEvent {
	var evs []diffEvent
	for i, j := range r.w.Jobs {
		evs = append(evs, diffEvent{j.At, diffArrival, i})
		if j.CancelAt >= 0 {
			evs = append(evs, diffEvent{max(j.CancelAt, j.At), diffCancellation, i})
		}
	}
	for i, c := range r.w.Changes {
		evs = append(evs, diffEvent{c.At, diffKeyChanged, i})
	}
	if p := r.w.Periodic; p != nil {
		evs = append(evs, diffEvent{p.Start, diffScheduled, 0})
		evs = append(evs, diffEvent{p.Stop, diffUnscheduled, 0})
	}
	slices.SortStableFunc(evs, func(a, b diffEvent) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.kind - b.kind
	})
	return evs
}

// run replays the workload and returns the first problem found.
func (r *diffRunner) run() error {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r.clk, r.t0 = clock.NewFake(t0), t0
	r.periodicNext, r.periodicLast = -1, -1
	var err error
	if r.opts.engine {
		r.sys, err = newDiffEngine(r.w.Cfg, r.clk)
	} else {
		r.sys, err = newDiffScheduler(r.w.Cfg, r.clk, r.opts.hook)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", errDiffInvalid, err)
	}
	defer r.sys.close()
	if r.opts.ref {
		cfg := diffRefConfig(r.w.Cfg)
		if r.opts.engine { // the disable policy is the Scheduler's, not its engine's
			for name, tc := range cfg.Types {
				tc.Disable = refmodel.Disable{}
				cfg.Types[name] = tc
			}
		}
		r.ref = refmodel.New(cfg)
	}
	r.caps.global, r.caps.tier, r.caps.typ = r.w.Cfg.MaxConcurrency, maps.Clone(r.w.Cfg.TierLimits), map[string]int{}
	r.caps.res = maps.Clone(r.w.Cfg.Resources)
	r.caps.replicas = map[string]diffReplica{}
	if de, ok := r.sys.(*diffEngine); ok {
		de.replicaOf = func(i int) string { return r.w.Jobs[i].Replica }
	} else if r.w.hasReplicas() {
		return fmt.Errorf("%w: the Scheduler has no replicas yet", errDiffInvalid)
	}
	for _, rep := range r.w.Replicas {
		if err := r.setReplica(rep); err != nil {
			return err
		}
	}
	if r.caps.tier == nil {
		r.caps.tier = map[Tier]int{}
	}
	for name, tc := range r.w.Cfg.Types {
		r.caps.typ[name] = tc.MaxConcurrency
	}

	evs := r.events()
	for {
		at, ok := r.next(evs)
		if !ok {
			break
		}
		r.clk.Set(t0.Add(at)) // the system's timers due by then fire
		r.now = at
		// The periodic job's occurrence is off the grid of the other
		// events: at its instants only a rate limit's token may fall due,
		// which a submission takes in first.
		if r.periodicNext == at {
			if err := r.occur(); err != nil {
				return err
			}
		}
		if err := r.due(); err != nil {
			return err
		}
		for len(evs) > 0 && evs[0].at == at {
			ev := evs[0]
			evs = evs[1:]
			if err := r.apply(ev); err != nil {
				return err
			}
		}
		for _, i := range r.finishing(at) {
			if err := r.finish(i); err != nil {
				return err
			}
		}
	}
	return r.final()
}

// next returns the time of the next event: an arrival, cancellation or
// key change, a running job's finish, or a time something falls due (a
// delayed job's NotBefore, a start deadline) for the system or the
// reference.
func (r *diffRunner) next(evs []diffEvent) (time.Duration, bool) {
	at, ok := time.Duration(0), false
	if len(evs) > 0 {
		at, ok = evs[0].at, true
	}
	if r.periodicNext >= 0 && (!ok || r.periodicNext < at) {
		at, ok = r.periodicNext, true
	}
	if due, has := r.sys.nextDue(); has && (!ok || due < at) {
		at, ok = max(due, r.now), true // a deadline passed is due at once
	}
	if r.ref != nil {
		if due, has := r.ref.NextDue(r.now.Microseconds()); has && (!ok || time.Duration(due)*time.Microsecond < at) {
			at, ok = max(time.Duration(due)*time.Microsecond, r.now), true
		}
	}
	for _, i := range r.order {
		if j := &r.jobs[i]; !j.ended {
			if f := j.start + r.w.Jobs[i].Dur; !ok || f < at {
				at, ok = f, true
			}
		}
	}
	return at, ok
}

// finishing returns the running jobs due to end at t, in start order.
func (r *diffRunner) finishing(t time.Duration) []int {
	var out []int
	for _, i := range r.order {
		if j := &r.jobs[i]; !j.ended && j.start+r.w.Jobs[i].Dur == t {
			out = append(out, i)
		}
	}
	return out
}

// due takes in what fell due at the current instant, before its events:
// delayed jobs joined the queue and jobs past their start deadline ended,
// the same ones on both sides.
func (r *diffRunner) due() error {
	expired, err := r.sys.due()
	if err != nil {
		return fmt.Errorf("at %v: %v", r.now, err)
	}
	if r.ref != nil {
		var want []int
		for _, seq := range append(r.refExpired, r.ref.Due(r.now.Microseconds())...) {
			want = append(want, r.refJob(seq))
		}
		r.refExpired = nil
		slices.Sort(want)
		if !slices.Equal(expired, want) {
			return fmt.Errorf("at %v: the scheduler expired %v, the reference %v", r.now, expired, want)
		}
	}
	if err := r.endWaiting(expired, "expired", &r.expired); err != nil {
		return err
	}
	r.trace = append(r.trace, fmt.Sprintf("%v timers", r.now))
	return r.sync()
}

func (r *diffRunner) apply(ev diffEvent) error {
	switch ev.kind {
	case diffArrival:
		return r.arrive(ev.idx)
	case diffCancellation:
		return r.cancel(ev.idx)
	case diffScheduled:
		r.trace = append(r.trace, fmt.Sprintf("%v schedule", r.now))
		r.periodicNext = r.w.Periodic.occurrence(r.now)
		return r.sys.schedule(diffSchedule{r.w.Periodic, r.t0}, r.w.Periodic.Job)
	case diffUnscheduled:
		r.trace = append(r.trace, fmt.Sprintf("%v stop the schedule", r.now))
		r.periodicNext = -1
		r.sys.unschedule()
		return nil
	default:
		return r.change(r.w.Changes[ev.idx])
	}
}

// occur takes in an occurrence of the periodic job: submitted as a new
// job unless its predecessor has not ended, then it is skipped; a
// Scheduler submits it itself, from its own timer.
func (r *diffRunner) occur() error {
	p := r.w.Periodic
	r.periodicNext = p.occurrence(r.now)
	if last := r.periodicLast; last >= 0 && !r.jobs[last].ended {
		r.trace = append(r.trace, fmt.Sprintf("%v occurrence skipped: j%d has not ended", r.now, last))
		if seq, ok := r.sys.unexpectedOccurrence(); ok {
			return fmt.Errorf("at %v: the scheduler submitted an occurrence (seq %d) whose predecessor j%d has not ended", r.now, seq, last)
		}
		return nil
	}
	i := len(r.w.Jobs)
	r.w.Jobs = append(r.w.Jobs, diffJob{Job: p.Job, At: r.now, Dur: p.Dur, CancelAt: -1})
	r.jobs = append(r.jobs, diffJobRun{})
	if r.ref != nil {
		// A submission takes in first what fell due by now (a rate
		// limit's token), and what that starts starts before it.
		r.refExpired = append(r.refExpired, r.ref.Due(r.now.Microseconds())...)
	}
	if err := r.arriveBy(i, func() (uint64, error) { return r.sys.occurrence(i, p.Job) }); err != nil {
		return err
	}
	if r.jobs[i].accepted {
		r.periodicLast = i
	}
	return nil
}

// change applies a key change to both schedulers. SetKey may be refused
// (the reservations would exceed MaxConcurrency); both must agree.
func (r *diffRunner) change(c diffKeyChange) error {
	now := r.now.Microseconds()
	switch {
	case c.Reset:
		r.trace = append(r.trace, fmt.Sprintf("%v ResetKeys()", r.now))
		r.sys.resetKeys()
		if r.ref != nil {
			r.ref.ResetKeys(now)
		}
		r.keyCfg, r.keysReset = map[string]KeyConfig{}, true
	case c.Resource != nil:
		err := r.sys.setResource(c.Resource.Name, c.Resource.N)
		r.trace = append(r.trace, fmt.Sprintf("%v SetResource(%q, %d): %v", r.now, c.Resource.Name, c.Resource.N, err))
		if err != nil {
			return fmt.Errorf("SetResource(%q, %d): %v", c.Resource.Name, c.Resource.N, err)
		}
		if r.ref != nil && !r.ref.SetResource(now, c.Resource.Name, c.Resource.N) {
			return fmt.Errorf("SetResource(%q, %d): the reference does not have it", c.Resource.Name, c.Resource.N)
		}
		r.caps.res[c.Resource.Name] = c.Resource.N
	case c.Pause != nil:
		if err := r.pause(c.Key, *c.Pause); err != nil {
			return err
		}
	case c.Replica != nil:
		if err := r.setReplica(*c.Replica); err != nil {
			return err
		}
	case c.Limit != nil:
		err := r.setLimit(*c.Limit)
		r.trace = append(r.trace, fmt.Sprintf("%v %v: %v", r.now, *c.Limit, err))
		if err != nil && err != errDiffRefused {
			return err
		}
	case c.ResetKey:
		r.trace = append(r.trace, fmt.Sprintf("%v ResetKey(%q)", r.now, c.Key))
		r.sys.resetKey(c.Key)
		if r.ref != nil {
			r.ref.ResetKey(now, c.Key)
		}
		delete(r.keyCfg, c.Key)
		r.keyReset[c.Key] = true
	case c.Set != nil:
		err := r.sys.setKey(c.Key, *c.Set)
		r.trace = append(r.trace, fmt.Sprintf("%v SetKey(%q, %+v): %v", r.now, c.Key, *c.Set, err))
		if r.ref != nil {
			if ok := r.ref.SetKey(now, c.Key, diffRefKey(*c.Set)); ok != (err == nil) {
				return fmt.Errorf("at %v SetKey(%q, %+v): scheduler error %v, reference accepted=%v", r.now, c.Key, *c.Set, err, ok)
			}
		}
		if err == nil {
			r.keyCfg[c.Key] = *c.Set
		}
	default:
		r.trace = append(r.trace, fmt.Sprintf("%v SetKeyWeight(%q, %v)", r.now, c.Key, c.Weight))
		if err := r.sys.setKeyWeight(c.Key, c.Weight); err != nil {
			return fmt.Errorf("SetKeyWeight(%q, %v): %v", c.Key, c.Weight, err)
		}
		if r.ref != nil {
			r.ref.SetKeyWeight(now, c.Key, c.Weight)
		}
	}
	return r.sync()
}

// join has submission i join job k: the system returns k's number, and
// the reference raises k's priority to i's. A disabled pair joins
// nothing: the submission is refused, as the reference says.
func (r *diffRunner) join(i, k int) error {
	desc := r.w.Jobs[i].Job
	var seq uint64
	var err error
	if r.batch != nil {
		seq = r.batch.seqs[r.batch.pos]
	} else {
		seq, err = r.sys.join(i, k, desc)
	}
	disabled := r.ref != nil && r.ref.Disabled(r.now.Microseconds(), desc.Type, desc.ID)
	switch {
	case errors.Is(err, ErrDisabled) && (r.ref == nil || disabled):
		r.trace = append(r.trace, fmt.Sprintf("%v submit j%d: %v", r.now, i, err))
		return nil
	case err != nil:
		return fmt.Errorf("j%d joining j%d: %v", i, k, err)
	case disabled:
		return fmt.Errorf("j%d joined j%d, while the reference has its pair disabled", i, k)
	}
	if seq != r.jobs[k].seq {
		return fmt.Errorf("j%d joined seq %d, want j%d's %d", i, seq, k, r.jobs[k].seq)
	}
	j := &r.jobs[i]
	j.joiner, j.of, j.seq = true, k, seq
	r.jobs[k].attached++
	r.trace = append(r.trace, fmt.Sprintf("%v j%d joins j%d", r.now, i, k))
	if r.ref != nil {
		p := desc.Priority
		if p == 0 {
			if p = r.w.Cfg.Types[desc.Type].DefaultPriority; p == 0 {
				p = 50
			}
		}
		r.ref.Raise(r.now.Microseconds(), r.jobs[k].refSeq, p)
	}
	return r.sync()
}

// detach detaches submission i from job k, which it joined or is; the
// job is cancelled when none is left attached.
func (r *diffRunner) detach(i, k int) error {
	r.jobs[i].detached = true
	r.jobs[k].attached--
	last := r.jobs[k].attached == 0
	r.trace = append(r.trace, fmt.Sprintf("%v j%d detaches from j%d (last %v)", r.now, i, k, last))
	err := r.sys.detach(i, k, last)
	if !last {
		if err != nil {
			return fmt.Errorf("j%d detaching: %v", i, err)
		}
		return r.sync()
	}
	if !errors.Is(err, context.Canceled) {
		return fmt.Errorf("j%d cancelled by its last detaching at %v ended with %v, want context.Canceled", k, r.now, err)
	}
	return r.endCancelled(k, r.jobs[k].started)
}

// pause pauses or resumes a key or a type on both sides.
func (r *diffRunner) pause(key string, p diffPause) error {
	now := r.now.Microseconds()
	err := r.sys.pause(key, p.Type, p.Resume)
	verb := map[bool]string{false: "Pause", true: "Resume"}[p.Resume]
	if p.Type != nil {
		r.trace = append(r.trace, fmt.Sprintf("%v %sType(%q): %v", r.now, verb, *p.Type, err))
		if err != nil {
			return fmt.Errorf("%sType(%q): %v", verb, *p.Type, err)
		}
	} else {
		r.trace = append(r.trace, fmt.Sprintf("%v %sKey(%q)", r.now, verb, key))
	}
	if r.ref == nil {
		return nil
	}
	switch {
	case p.Type != nil && p.Resume:
		r.ref.ResumeType(now, *p.Type)
	case p.Type != nil:
		r.ref.PauseType(now, *p.Type)
	case p.Resume:
		r.ref.ResumeKey(now, key)
	default:
		r.ref.PauseKey(now, key)
	}
	return nil
}

// errDiffRefused marks a limit change that both sides refused.
var errDiffRefused = errors.New("refused")

// setLimit applies a change of the global, a tier's or a type's limit to
// both sides, which must agree on whether it is refused.
func (r *diffRunner) setLimit(c diffLimit) error {
	now := r.now.Microseconds()
	switch {
	case c.Type != nil:
		err := r.sys.setTypeLimit(*c.Type, c.N)
		ok := err == nil // without the reference, the system's answer stands
		if r.ref != nil {
			ok = r.ref.SetTypeLimit(now, *c.Type, c.N)
		}
		if (err == nil) != ok {
			return fmt.Errorf("SetTypeLimit(%q, %d): system error %v, reference accepted %v", *c.Type, c.N, err, ok)
		}
		if err != nil {
			return errDiffRefused
		}
		r.caps.typ[*c.Type] = c.N
	case c.Tier != nil:
		if err := r.sys.setTierLimit(*c.Tier, c.N); err != nil {
			return fmt.Errorf("SetTierLimit(%d, %d): %v", *c.Tier, c.N, err)
		}
		if r.ref != nil {
			r.ref.SetTierLimit(now, int(*c.Tier), c.N)
		}
		r.caps.tier[*c.Tier] = c.N
	default:
		err := r.sys.setMaxConcurrency(c.N)
		ok := err == nil
		if r.ref != nil {
			ok = r.ref.SetMaxConcurrency(now, c.N)
		}
		if (err == nil) != ok {
			return fmt.Errorf("SetMaxConcurrency(%d): system error %v, reference accepted %v", c.N, err, ok)
		}
		if err != nil {
			return errDiffRefused
		}
		r.caps.global = c.N
	}
	return nil
}

// diffBatchRun is what the system said of a batch: each job's sequence
// number, and the running jobs as each had been taken in.
type diffBatchRun struct {
	seqs    []uint64
	running [][]*engine.Job
	unrun   [][]int // the jobs each ended unrun
	pos     int     // the job being taken in
}

func (r *diffRunner) arrive(i int) error {
	if r.jobs[i].batched {
		return nil // taken in with its batch
	}
	if b := r.w.Jobs[i].Batch; b != 0 && r.batch == nil {
		idx := []int{i}
		for k := i + 1; k < len(r.w.Jobs); k++ {
			if r.w.Jobs[k].Batch == b && r.w.Jobs[k].At == r.w.Jobs[i].At {
				idx = append(idx, k)
			}
		}
		return r.arriveBatch(idx)
	}
	return r.arriveOne(i)
}

// arriveBatch takes in jobs idx, submitted together (SubmitMany): both
// sides admit all or none of them, then take each in as its own
// submission at this instant, in order; the starts are compared once all
// are in.
func (r *diffRunner) arriveBatch(idx []int) error {
	ds := make([]Job, len(idx))
	after := make([][]int, len(idx))
	refs := make([]refmodel.Job, len(idx))
	for m, i := range idx {
		r.jobs[i].batched = true
		ds[m], refs[m] = r.w.Jobs[i].job(r.t0), r.w.Jobs[i].refJob()
		for _, k := range r.w.Jobs[i].After {
			if r.jobs[k].accepted {
				after[m] = append(after[m], k)
			}
		}
	}
	seqs, running, unrun, err := r.sys.submitMany(idx, ds, after)
	noBatch := errors.Is(err, errDiffNoBatch)
	r.trace = append(r.trace, fmt.Sprintf("%v submit %v together: %v", r.now, idx, err))
	admitted := err == nil || noBatch // the engine alone, without the reference: one by one
	if r.ref != nil {
		bad, fits := r.ref.Admits(r.now.Microseconds(), refs)
		admitted = bad < 0 && fits
		var be *BatchError
		var qf *QueueFullError
		switch {
		case noBatch:
		case admitted != (err == nil):
			return fmt.Errorf("batch %v at %v: scheduler error %v, reference admits %v (first refused %d)", idx, r.now, err, admitted, bad)
		case bad >= 0 && (!errors.As(err, &be) || be.Index != bad):
			return fmt.Errorf("batch %v at %v: scheduler error %v, the reference refuses job %d of it", idx, r.now, err, bad)
		case err != nil && bad < 0 && !errors.As(err, &qf):
			return fmt.Errorf("batch %v at %v: scheduler error %v, the reference finds no room", idx, r.now, err)
		}
	}
	if noBatch {
		if !admitted {
			// Refused as a whole: the engine alone does not say so.
			return nil
		}
		for _, i := range idx {
			if err := r.arriveOne(i); err != nil {
				return err
			}
		}
		return nil
	}
	if err != nil {
		var qf *QueueFullError
		var be *BatchError
		switch {
		case errors.As(err, &qf):
			r.rejected += len(idx)
		case errors.As(err, &be) && (errors.Is(err, ErrStartDeadline) || errors.Is(err, ErrDisabled) || errors.Is(err, ErrTooMuch)):
		default:
			return fmt.Errorf("batch %v: %v", idx, err)
		}
		return r.sync()
	}
	r.batch = &diffBatchRun{seqs: seqs, running: running, unrun: unrun}
	for m, i := range idx {
		r.batch.pos = m
		if err := r.arriveOne(i); err != nil {
			r.batch = nil
			return err
		}
	}
	r.batch = nil
	return r.sync()
}

// arriveOne takes in job i's submission on both sides.
func (r *diffRunner) arriveOne(i int) error {
	desc := r.w.Jobs[i].Job
	policy := r.w.Cfg.Types[desc.Type].Duplicates
	key := dupKey{desc.Type, desc.ID}
	if policy == JoinQueued || policy == JoinRunning {
		if k, ok := r.openJoin[key]; ok && !r.jobs[k].ended {
			return r.join(i, k)
		}
		defer func() {
			if j := &r.jobs[i]; j.accepted {
				j.attached = 1
				if !j.ended && (policy == JoinRunning || !j.started) {
					r.openJoin[key] = i
				}
			}
		}()
	}
	var after []int
	for _, k := range r.w.Jobs[i].After {
		if r.jobs[k].accepted {
			after = append(after, k)
		}
	}
	return r.arriveBy(i, func() (uint64, error) {
		if r.batch != nil {
			return r.batch.seqs[r.batch.pos], nil
		}
		return r.sys.submit(i, r.w.Jobs[i].job(r.t0), after)
	})
}

// arriveBy takes in job i's submission, made by submit, on both sides.
func (r *diffRunner) arriveBy(i int, submit func() (uint64, error)) error {
	j := &r.jobs[i]
	// A job of a type that supersedes replaces the one of its type and ID
	// that waits, the latest accepted and not started since.
	desc := r.w.Jobs[i].Job
	key, old := dupKey{desc.Type, desc.ID}, -1
	supersedes := r.w.Cfg.Types[desc.Type].Duplicates == Supersede
	if k, ok := r.waitingDup[key]; supersedes && ok && !r.jobs[k].started && !r.jobs[k].ended {
		old = k
	}
	seq, err := submit()
	var qf *QueueFullError
	switch {
	case err == nil:
		j.accepted, j.seq = true, seq
		r.bySeq[j.seq] = i
		r.pending++
		r.trace = append(r.trace, fmt.Sprintf("%v submit j%d (seq %d)", r.now, i, j.seq))
	case errors.As(err, &qf):
		r.rejected++
		r.trace = append(r.trace, fmt.Sprintf("%v submit j%d: %v", r.now, i, err))
	case errors.Is(err, ErrStartDeadline), // a deadline that cannot be met
		errors.Is(err, ErrDisabled), // a (type, ID) that kept failing
		errors.Is(err, ErrTooMuch):  // more units than a resource has now
		r.trace = append(r.trace, fmt.Sprintf("%v submit j%d: %v", r.now, i, err))
	default:
		return fmt.Errorf("submit j%d: %v", i, err)
	}
	if r.ref != nil {
		d := r.w.Jobs[i].refJob()
		for _, k := range r.w.Jobs[i].After {
			if r.jobs[k].accepted {
				d.After = append(d.After, r.jobs[k].refSeq)
			}
		}
		var oldSeq uint64
		if old >= 0 {
			oldSeq = r.jobs[old].refSeq
		}
		seq, ok := r.ref.Supersede(r.now.Microseconds(), oldSeq, d)
		if ok != j.accepted {
			return fmt.Errorf("j%d at %v: scheduler accepted=%v (err %v), reference accepted=%v", i, r.now, j.accepted, err, ok)
		}
		if ok && seq != j.seq {
			return fmt.Errorf("j%d at %v: scheduler seq %d, reference seq %d", i, r.now, j.seq, seq)
		}
		j.refSeq = seq
	}
	if supersedes && j.accepted {
		if old >= 0 {
			if err := r.sys.superseded(old); err != nil {
				return fmt.Errorf("at %v: %v", r.now, err)
			}
			r.jobs[old].ended = true
			r.pending--
			r.cancelled++
			r.trace = append(r.trace, fmt.Sprintf("%v j%d superseded by j%d", r.now, old, i))
		}
		r.waitingDup[key] = i // forgotten when it starts (sync)
	}
	return r.sync()
}

// cancel cancels a job: a queued one leaves the queue, a running one
// returns at once (its function sees its context end) and counts as
// failed. Cancelling a job that was rejected or has ended does nothing.
func (r *diffRunner) cancel(i int) error {
	j := &r.jobs[i]
	switch {
	case j.joiner:
		if j.detached || r.jobs[j.of].ended {
			return nil
		}
		return r.detach(i, j.of)
	case !j.accepted || j.ended:
		return nil
	case j.attached > 0:
		if j.detached {
			return nil
		}
		return r.detach(i, i)
	}
	if err := r.sys.cancel(i); !errors.Is(err, context.Canceled) {
		return fmt.Errorf("j%d cancelled at %v ended with %v, want context.Canceled", i, r.now, err)
	}
	return r.endCancelled(i, j.started)
}

// endCancelled takes in that job i ended cancelled: running (its function
// returned its context's error), or waiting.
func (r *diffRunner) endCancelled(i int, running bool) error {
	j := &r.jobs[i]
	j.ended = true
	if running {
		r.trace = append(r.trace, fmt.Sprintf("%v cancel running j%d", r.now, i))
		r.running--
		r.failed++
		if r.ref != nil {
			r.ref.Stop(r.now.Microseconds(), j.refSeq)
		}
	} else {
		r.trace = append(r.trace, fmt.Sprintf("%v cancel queued j%d", r.now, i))
		r.pending--
		r.cancelled++
		if r.ref != nil && !r.ref.Cancel(r.now.Microseconds(), j.refSeq) {
			return fmt.Errorf("j%d at %v: queued in the scheduler, not in the reference", i, r.now)
		}
	}
	return r.sync()
}

func (r *diffRunner) finish(i int) error {
	j := &r.jobs[i]
	if dj := r.w.Jobs[i]; j.failed < dj.Fails {
		return r.fail(i)
	}
	r.trace = append(r.trace, fmt.Sprintf("%v finish j%d", r.now, i))
	if err := r.sys.finish(i); err != nil {
		return fmt.Errorf("j%d finished at %v with %v", i, r.now, err)
	}
	r.completed++
	j.completed = true
	return r.ended(i, false)
}

// ended records that running job i ended, on both sides, its last
// attempt failed or not.
func (r *diffRunner) ended(i int, failed bool) error {
	r.jobs[i].ended = true
	r.running--
	switch {
	case r.ref == nil:
	case failed:
		r.ref.Fail(r.now.Microseconds(), r.jobs[i].refSeq)
	default:
		r.ref.Finish(r.now.Microseconds(), r.jobs[i].refSeq)
	}
	return r.sync()
}

// fail fails running job i's attempt. If its type's policy allows another,
// the job waits out its backoff and is started again later; otherwise it
// ends, failed.
func (r *diffRunner) fail(i int) error {
	j := &r.jobs[i]
	j.failed++
	p := r.w.Cfg.Types[r.w.Jobs[i].Job.Type].Retry
	if j.failed >= p.Attempts {
		r.trace = append(r.trace, fmt.Sprintf("%v j%d fails for good", r.now, i))
		if err := r.sys.fail(i, false, 0); err != errDiffAttempt {
			return fmt.Errorf("j%d failed for good at %v with %v", i, r.now, err)
		}
		r.failed++
		return r.ended(i, true)
	}
	at := r.now + rt.RetryPolicy(p).Wait(j.failed)
	r.trace = append(r.trace, fmt.Sprintf("%v j%d fails, retries at %v", r.now, i, at))
	if err := r.sys.fail(i, true, at); err != nil {
		return fmt.Errorf("j%d retried at %v: %v", i, r.now, err)
	}
	j.started = false
	r.order = slices.DeleteFunc(r.order, func(k int) bool { return k == i })
	r.running--
	r.pending++
	if r.ref != nil {
		r.ref.Retry(r.now.Microseconds(), j.refSeq, at.Microseconds())
	}
	return r.sync()
}

// sync records the jobs the scheduler and the reference started since the
// last event and compares them, after checking the scheduler's invariants.
func (r *diffRunner) sync() error {
	if r.batch != nil {
		// A job of a batch is in: what it ended unrun is compared and
		// taken in, and what it started taken in, so that the next job of
		// the batch meets them ended and started; the starts are compared
		// at the end.
		if err := r.compareUnrun(r.batch.unrun[r.batch.pos]); err != nil {
			return err
		}
		got, err := r.takeStarts(r.batch.running[r.batch.pos])
		r.held = append(r.held, got...)
		return err
	}
	if err := r.takeUnrun(); err != nil {
		return err
	}
	running, vt, est, err := r.sys.inspect()
	got, serr := r.takeStarts(running)
	err = errors.Join(err, serr)
	got, r.held = append(r.held, got...), nil
	if err != nil {
		return fmt.Errorf("at %v: invariant broken: %v", r.now, err)
	}
	r.pending -= len(got)
	r.running += len(got)
	r.real = append(r.real, got...)
	if err := r.checkLimits(got); err != nil {
		return fmt.Errorf("at %v, after %q: hard limit broken: %v", r.now, r.trace[len(r.trace)-1], err)
	}
	if r.ref != nil {
		var want []diffStart
		for _, st := range r.ref.TakeStarts() {
			want = append(want, diffStart{r.refJob(st.Seq), time.Duration(st.At) * time.Microsecond, st.Kind.String(), st.Replica})
		}
		r.model = append(r.model, want...)
		if !slices.Equal(got, want) {
			return fmt.Errorf("at %v, after %q: the scheduler started %v, the reference %v",
				r.now, r.trace[len(r.trace)-1], got, want)
		}
		if err := r.compareState(vt, est); err != nil {
			return fmt.Errorf("at %v, after %q: %v", r.now, r.trace[len(r.trace)-1], err)
		}
		if err := r.compareWhy(); err != nil {
			return fmt.Errorf("at %v, after %q: %v", r.now, r.trace[len(r.trace)-1], err)
		}
		if r.opts.order {
			if err := r.compareOrder(); err != nil {
				return fmt.Errorf("at %v, after %q: %v", r.now, r.trace[len(r.trace)-1], err)
			}
		}
	}
	if r.opts.stats {
		return r.checkStats()
	}
	return nil
}

// takeStarts takes in the jobs of running not seen running before, and
// returns their starts. A dispatch appends the jobs it starts to the
// running list in start order, and an event ends at most one job before
// dispatching, so the new jobs are the list's tail, in order.
func (r *diffRunner) takeStarts(running []*engine.Job) ([]diffStart, error) {
	var got []diffStart
	var err error
	for _, j := range running {
		i, ok := r.bySeq[j.Seq()]
		if !ok {
			err = errors.Join(err, fmt.Errorf("unknown job seq %d running", j.Seq()))
			continue
		}
		if jr := &r.jobs[i]; !jr.started {
			jr.started, jr.start = true, r.now
			if d := r.w.Jobs[i].Job; r.waitingDup[dupKey{d.Type, d.ID}] == i {
				delete(r.waitingDup, dupKey{d.Type, d.ID})
			}
			if d := r.w.Jobs[i].Job; r.w.Cfg.Types[d.Type].Duplicates == JoinQueued && r.openJoin[dupKey{d.Type, d.ID}] == i {
				delete(r.openJoin, dupKey{d.Type, d.ID})
			}
			r.order = append(r.order, i)
			jr.replica = j.Replica()
			got = append(got, diffStart{i, r.now, diffKindName(j.Kind()), jr.replica})
		}
	}
	return got, err
}

// takeUnrun takes in the jobs that ended without running because a job
// they run after did not complete, the same ones on both sides.
func (r *diffRunner) takeUnrun() error {
	got, err := r.sys.unrun()
	if err != nil {
		return fmt.Errorf("at %v: %v", r.now, err)
	}
	return r.compareUnrun(got)
}

// compareUnrun compares got, the jobs the scheduler ended unrun, with
// those the reference did, and takes them in.
func (r *diffRunner) compareUnrun(got []int) error {
	if r.ref != nil {
		var want []int
		for _, seq := range r.ref.TakeUnrun() {
			want = append(want, r.refJob(seq))
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			return fmt.Errorf("at %v, after %q: the scheduler ended %v unrun, the reference %v", r.now, r.trace[len(r.trace)-1], got, want)
		}
	}
	return r.endWaiting(got, "ended unrun: a job it runs after did not complete", &r.unrun)
}

// endWaiting takes in that the waiting jobs ended by themselves, as
// what says, and counts them in count.
func (r *diffRunner) endWaiting(ended []int, what string, count *int) error {
	for _, i := range ended {
		j := &r.jobs[i]
		if j.started || j.ended {
			return fmt.Errorf("at %v: j%d %s, but it had started or ended", r.now, i, what)
		}
		j.ended = true
		r.pending--
		*count++
		r.trace = append(r.trace, fmt.Sprintf("%v j%d %s", r.now, i, what))
	}
	return nil
}

// checkLimits checks the hard limits of docs/design.md from the driver's
// own record of which jobs run, independently of the scheduler's counts.
// Key caps can be lowered at run time below what a key already runs, so
// they are checked for the keys that just started jobs: the last of those
// starts had to find the key below its cap.
func (r *diffRunner) checkLimits(started []diffStart) error {
	c := r.w.Cfg
	all := 0
	tiers := map[Tier]int{}
	types := map[string]int{}
	keys := map[string]int{}
	held := map[[2]string]int{}
	units := map[string]int{}
	for _, i := range r.order {
		if r.jobs[i].ended {
			continue
		}
		d := r.w.Jobs[i].Job
		tc := c.Types[d.Type]
		for res, u := range diffNeeds(d, tc) {
			units[res] += u
		}
		all++
		tiers[tc.Tier]++
		types[d.Type]++
		keys[d.Key]++
		if tc.ConflictGroup != "" {
			ck := [2]string{tc.ConflictGroup, d.ID}
			if held[ck]++; held[ck] > 1 {
				return fmt.Errorf("conflict %v held %d times", ck, held[ck])
			}
		}
	}
	// Every limit can be lowered at run time below what already runs, so
	// each is checked where a job just started: that start had to find it
	// not reached, so after the step its scope runs no more than it.
	over := func(n, limit int) bool { return limit > 0 && n > limit }
	if len(started) > 0 && over(all, r.caps.global) {
		return fmt.Errorf("%d running, MaxConcurrency %d", all, r.caps.global)
	}
	onReplica := map[string]int{}
	for _, i := range r.order {
		if !r.jobs[i].ended {
			onReplica[r.jobs[i].replica]++
		}
	}
	for _, st := range started {
		if err := r.checkReplica(st.Job, onReplica); err != nil {
			return err
		}
		// No job starts before every job it runs after completed.
		for _, k := range r.w.Jobs[st.Job].After {
			if r.jobs[k].accepted && !r.jobs[k].completed {
				return fmt.Errorf("j%d started before j%d, which it runs after, completed", st.Job, k)
			}
		}
		d := r.w.Jobs[st.Job].Job
		tier := c.Types[d.Type].Tier
		if limit := r.caps.tier[tier]; over(tiers[tier], limit) {
			return fmt.Errorf("tier %d: %d running, cap %d", tier, tiers[tier], limit)
		}
		if limit := r.caps.typ[d.Type]; over(types[d.Type], limit) {
			return fmt.Errorf("type %q: %d running, cap %d", d.Type, types[d.Type], limit)
		}
		if limit := r.keyConfig(d.Key).MaxConcurrency; over(keys[d.Key], limit) {
			return fmt.Errorf("key %q: %d running, cap %d", d.Key, keys[d.Key], limit)
		}
		for res := range diffNeeds(d, c.Types[d.Type]) {
			if units[res] > r.caps.res[res] {
				return fmt.Errorf("resource %q: %d units held, capacity %d", res, units[res], r.caps.res[res])
			}
		}
	}
	return nil
}

// diffNeeds returns what job d of type tc needs of the resources.
func diffNeeds(d Job, tc TypeConfig) map[string]int {
	if d.Needs != nil {
		return d.Needs
	}
	return tc.Needs
}

// keyConfig returns key name's configuration as the driver knows it.
func (r *diffRunner) keyConfig(name string) KeyConfig {
	if kc, ok := r.keyCfg[name]; ok {
		return kc
	}
	if kc, ok := r.w.Cfg.Keys[name]; ok && !r.keysReset && !r.keyReset[name] {
		return kc
	}
	return defaultOfKey(r.w.Cfg, name)
}

func (r *diffRunner) refJob(seq uint64) int {
	for i, j := range r.jobs {
		if j.accepted && j.refSeq == seq {
			return i
		}
	}
	return -1
}

// diffWhy is what holds a waiting job, and the number of the job that
// holds it, if one does.
type diffWhy struct {
	why      string
	on       uint64
	resource string
}

// compareWhy checks that both sides say the same thing holds each waiting
// job, and, for a conflict, the same running job.
func (r *diffRunner) compareWhy() error {
	got := r.sys.waiting()
	for i, j := range r.jobs {
		if !j.accepted || j.started || j.ended {
			continue
		}
		g, ok := got[j.seq]
		if !ok {
			return fmt.Errorf("j%d (seq %d) waits but the system does not list it", i, j.seq)
		}
		w := r.ref.Why(r.now.Microseconds(), j.refSeq)
		gotOn, wantOn := -1, -1
		if g.on != 0 {
			gotOn = r.bySeq[g.on]
		}
		if w.On != 0 {
			wantOn = r.refJob(w.On)
		}
		if g.why != w.Why.String() || gotOn != wantOn || g.resource != w.Resource {
			return fmt.Errorf("j%d waits for %s (j%d %q), the reference says %s (j%d %q)", i, g.why, gotOn, g.resource, w.Why, wantOn, w.Resource)
		}
	}
	return nil
}

// compareOrder checks that the system lists the waiting jobs in the order
// the reference ranks them.
func (r *diffRunner) compareOrder() error {
	var got, want []int
	for _, seq := range r.sys.order() {
		i, ok := r.bySeq[seq]
		if !ok {
			i = -1
		}
		got = append(got, i)
	}
	for _, seq := range r.ref.Order(r.now.Microseconds()) {
		want = append(want, r.refJob(seq))
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("the system lists the queue as %v, the reference orders it %v", got, want)
	}
	return nil
}

func diffKindName(k engine.Kind) string {
	switch k {
	case engine.Reserved:
		return refmodel.Reserved.String()
	case engine.Urgent:
		return refmodel.Urgent.String()
	}
	return refmodel.Fair.String()
}

// checkStats compares Stats (or the engine's counts) with the driver's
// own counts.
func (r *diffRunner) checkStats() error {
	got := r.sys.counts()
	accepted := r.completed + r.failed + r.cancelled + r.expired + r.unrun + r.running + r.pending
	want := []int{accepted, r.completed, r.failed, r.cancelled, r.expired, r.unrun, r.rejected, r.running, r.pending}
	if !slices.Equal(got, want) {
		return fmt.Errorf("at %v: submitted, completed, failed, cancelled, expired, unrun, rejected, active, queued = %v, want %v", r.now, got, want)
	}
	if counted, listed := r.sys.parked(); counted != listed {
		return fmt.Errorf("at %v: %d jobs counted parked, %d listed parked", r.now, counted, listed)
	}
	return nil
}

// compareState compares what the system and the reference carry from
// event to event besides the queue: every flow's virtual time and every
// cost estimate, exactly (both compute them by the same float operations
// in the same order). A wrong charge or estimate shows here before it
// changes an order, if it ever does.
func (r *diffRunner) compareState(vts map[engine.FlowID]float64, ests map[engine.EstimateID]float64) error {
	vt := map[refmodel.FlowID]float64{}
	est := map[refmodel.EstimateID]float64{}
	for id, v := range vts {
		vt[refmodel.FlowID(id)] = v
	}
	for id, e := range ests {
		est[refmodel.EstimateID(id)] = e
	}
	if want := r.ref.VirtualTimes(); !maps.Equal(vt, want) {
		return fmt.Errorf("virtual times differ:\nscheduler %v\nreference %v", vt, want)
	}
	if want := r.ref.Estimates(); !maps.Equal(est, want) {
		return fmt.Errorf("cost estimates differ:\nscheduler %v\nreference %v", est, want)
	}
	return nil
}

// final checks the end state: every accepted job ended, the reference
// agrees that nothing is left, and each job was reported finished exactly
// once.
func (r *diffRunner) final() error {
	for i, j := range r.jobs {
		if j.accepted && !j.ended {
			return fmt.Errorf("j%d never ended", i)
		}
	}
	if r.ref != nil {
		if p, n := r.ref.Pending(), r.ref.Running(); p != 0 || n != 0 {
			return fmt.Errorf("the reference still has %d pending and %d running jobs", p, n)
		}
	}
	if r.opts.hook {
		if err := r.sys.close(); err != nil { // delivers every event
			return fmt.Errorf("Close: %v", err)
		}
		ends := r.sys.ends()
		if ends == nil {
			return errors.New("events were dropped")
		}
		for i, j := range r.jobs {
			if n := ends[j.seq]; j.accepted && n != 1 {
				return fmt.Errorf("j%d (seq %d) reported ended %d times", i, j.seq, n)
			}
		}
		if n := r.completed + r.failed + r.cancelled + r.expired + r.unrun; len(ends) != n {
			return fmt.Errorf("end reports for %d jobs, %d ended", len(ends), n)
		}
	}
	return nil
}

// dupKey is a job's identity for its type's DuplicatePolicy: its type
// and ID.
type dupKey struct{ typ, id string }

// setReplica sets or removes a replica on both sides.
func (r *diffRunner) setReplica(rep diffReplica) error {
	now := r.now.Microseconds()
	if rep.Remove {
		ok, err := r.sys.removeReplica(rep.Name)
		r.trace = append(r.trace, fmt.Sprintf("%v RemoveReplica(%q): %v, %v", r.now, rep.Name, ok, err))
		if err != nil {
			return err
		}
		if r.ref != nil {
			if want := r.ref.RemoveReplica(now, rep.Name); ok != want {
				return fmt.Errorf("at %v RemoveReplica(%q): the system says %v, the reference %v", r.now, rep.Name, ok, want)
			}
		}
		delete(r.caps.replicas, rep.Name)
		return r.sync()
	}
	ok, err := r.sys.setReplica(rep.Name, rep.Capacity, rep.Types)
	r.trace = append(r.trace, fmt.Sprintf("%v SetReplica(%q, %d, %#v): %v %v", r.now, rep.Name, rep.Capacity, rep.Types, ok, err))
	if err != nil {
		return err
	}
	if r.ref != nil {
		if want := r.ref.SetReplica(now, rep.Name, rep.Capacity, rep.Types); ok != want {
			return fmt.Errorf("at %v SetReplica(%q): the system says %v, the reference %v", r.now, rep.Name, ok, want)
		}
	}
	if !ok {
		return r.sync()
	}
	r.caps.replicas[rep.Name], r.caps.replicated = rep, true
	return r.sync()
}

// checkReplica checks, from the driver's own record, that job i, which
// just started, runs on a replica once one was set, a known one it may
// run on, whose capacity its running jobs do not exceed, and on none
// before.
func (r *diffRunner) checkReplica(i int, onReplica map[string]int) error {
	name := r.jobs[i].replica
	if !r.caps.replicated {
		if name != "" {
			return fmt.Errorf("j%d runs on replica %q, none was set", i, name)
		}
		return nil
	}
	rep, known := r.caps.replicas[name]
	d := r.w.Jobs[i]
	switch {
	case !known:
		return fmt.Errorf("j%d runs on replica %q, not known", i, name)
	case d.Replica != "" && d.Replica != name:
		return fmt.Errorf("j%d, bound to replica %q, runs on %q", i, d.Replica, name)
	case d.Replica == "" && rep.Types != nil && !slices.Contains(rep.Types, d.Job.Type):
		return fmt.Errorf("j%d of type %q runs on replica %q, which has no handler for it", i, d.Job.Type, name)
	case onReplica[name] > rep.Capacity:
		return fmt.Errorf("replica %q: %d running, capacity %d", name, onReplica[name], rep.Capacity)
	}
	return nil
}
