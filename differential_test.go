package fairsched

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairsched/fairsched/internal/clock"
	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/refmodel"
)

// The differential test. internal/refmodel restates the order of SPEC
// section 3 as literally as possible: at every dispatch it sorts all
// pending jobs by their full key and starts the first admissible one. The
// real scheduler reaches the same decisions through heaps, parking and
// incremental bookkeeping. Thousands of small random workloads are fed to
// both, event by event, in virtual time: arrivals, cancellations of queued
// and running jobs, finishes, and run-time key changes (SetKeyWeight,
// SetKey, ResetKeys). After every event
//
//   - the scheduler's own invariants hold (verifyLocked),
//   - the hard limits hold, counted by the driver from what it saw start,
//   - both started the same jobs, in the same order, by the same step of
//     the order (urgent, reserved, fair),
//   - both hold the same virtual time for every flow and the same cost
//     estimate for every (type, ID), bit for bit,
//   - and, for some workloads, Stats agree with the driver's counts.
//
// Any failure is shrunk to a small workload and reported as Go source,
// with the events and both start sequences. The same generator and driver
// serve the fuzz targets (fuzz_test.go).

// diffUnit is the granularity of workload times. Coarse units make
// simultaneous events, equal virtual times and exact aging thresholds
// common, which is where orderings go wrong.
const diffUnit = 100 * time.Millisecond

// diffWorkload is one randomized scenario: a configuration and the events
// to replay.
type diffWorkload struct {
	Cfg     Config
	Jobs    []diffJob
	Changes []diffKeyChange
}

// diffJob is one job of a workload, named j<index> in reports.
type diffJob struct {
	Job      Job
	At, Dur  time.Duration
	CancelAt time.Duration // < 0: never; a running job cancelled ends at once
}

// diffKeyChange is a run-time change of the keys' configuration:
// ResetKeys if Reset, else SetKey if Set is not nil, else SetKeyWeight.
type diffKeyChange struct {
	At     time.Duration
	Key    string
	Weight float64
	Set    *KeyConfig
	Reset  bool
}

// diffSource supplies the generator's choices: a seeded PRNG for the
// differential test, the fuzzer's bytes for the fuzz targets. Choice 0 is
// always the simplest, so an exhausted fuzz input yields a plain workload.
type diffSource interface {
	intn(n int) int // in [0, n)
}

type diffRandSource struct{ r *rand.Rand }

func (s diffRandSource) intn(n int) int { return s.r.IntN(n) }

// diffByteSource reads one byte per choice (two for choices over 256) and
// answers 0 once the input is used up.
type diffByteSource struct{ b []byte }

func (s *diffByteSource) intn(n int) int {
	if n <= 1 || len(s.b) == 0 {
		return 0
	}
	v := int(s.b[0])
	s.b = s.b[1:]
	if n > 256 && len(s.b) > 0 {
		v = v<<8 | int(s.b[0])
		s.b = s.b[1:]
	}
	return v % n
}

// diffChance is true with probability num/den; false on a zero choice.
func diffChance(src diffSource, num, den int) bool { return src.intn(den) >= den-num }

func diffPick[T any](src diffSource, options ...T) T { return options[src.intn(len(options))] }

func diffUnits(n int) time.Duration { return time.Duration(n) * diffUnit }

// diffGenerate builds a workload of at most maxJobs jobs: 1 to 3 tiers,
// up to 3 job types besides the default one (tiers, caps, conflict groups,
// default costs and priorities), up to 5 keys (weights, reservations, caps,
// pending limits), optional queue limit, aging and cost settings, then jobs
// with priorities, arrival times, durations and cancellations, and key
// changes. With forget, IdleTTL is a few units, so that idle keys and cost
// estimates are forgotten during the run; otherwise it is an hour, longer
// than any workload.
func diffGenerate(src diffSource, maxJobs int, forget bool) *diffWorkload {
	cfg := Config{IdleTTL: time.Hour}
	cfg.MaxConcurrency = diffPick(src, 2, 1, 3, 4, 0, 6)

	ntiers := 1 + src.intn(3)
	for t := range ntiers {
		if diffChance(src, 1, 3) {
			if cfg.TierLimits == nil {
				cfg.TierLimits = map[Tier]int{}
			}
			cfg.TierLimits[Tier(t)] = 1 + src.intn(3)
		}
	}

	types := []string{""}
	for i := range src.intn(4) {
		tc := TypeConfig{Tier: Tier(src.intn(ntiers))}
		if diffChance(src, 1, 3) {
			tc.MaxConcurrency = 1 + src.intn(3)
		}
		if diffChance(src, 1, 2) {
			tc.ConflictGroup = diffPick(src, "g0", "g1")
		}
		if diffChance(src, 1, 2) {
			tc.DefaultCost = diffUnits(1 + src.intn(30))
		}
		if diffChance(src, 1, 2) {
			tc.DefaultPriority = diffPick(src, 10, -1, 50, 80, 100, 120, 30, 75)
		}
		if cfg.Types == nil {
			cfg.Types = map[string]TypeConfig{}
		}
		name := fmt.Sprintf("t%d", i)
		cfg.Types[name] = tc
		types = append(types, name)
	}

	keys := []string{"", "a", "b", "c", "d"}[:1+src.intn(5)]
	budget := cfg.MaxConcurrency
	if budget == 0 {
		budget = 3
	}
	for _, k := range keys {
		if !diffChance(src, 2, 3) {
			continue
		}
		kc := KeyConfig{Weight: diffPick(src, 0, 1, 2, 0.5, 3, 1.5)}
		if budget > 0 && diffChance(src, 1, 2) {
			kc.MinSlots = 1 + src.intn(min(budget, 2))
			budget -= kc.MinSlots
		}
		if diffChance(src, 1, 3) {
			kc.MaxConcurrency = max(kc.MinSlots, 1) + src.intn(3)
		}
		if diffChance(src, 1, 5) {
			kc.MaxPending = 1 + src.intn(4)
		}
		if cfg.Keys == nil {
			cfg.Keys = map[string]KeyConfig{}
		}
		cfg.Keys[k] = kc
	}
	// Jobs may also use a key that is never configured.
	keys = append(keys, "z")
	if diffChance(src, 1, 3) {
		cfg.DefaultKey.Weight = diffPick(src, 1, 2, 0.5)
	}
	if diffChance(src, 1, 4) {
		cfg.DefaultKey.MaxConcurrency = 1 + src.intn(3)
	}
	if diffChance(src, 1, 6) {
		cfg.DefaultKey.MaxPending = 1 + src.intn(5)
	}
	if diffChance(src, 1, 6) {
		cfg.MaxQueue = 2 + src.intn(15)
	}
	if diffChance(src, 1, 2) {
		// Round steps and thresholds make scores hit the ceiling and the
		// urgent threshold exactly at event times, where >= and > differ.
		cfg.Aging = AgingConfig{
			GracePeriod: diffUnits(src.intn(6)),
			Interval:    diffUnits(1 + src.intn(5)),
			Step:        diffPick(src, 10, 5, 20, 3, 25, 40),
		}
		if diffChance(src, 1, 2) {
			cfg.Aging.MaxEffective = diffPick(src, 80, 60, 90, 100, 45, 73)
		}
		if diffChance(src, 2, 3) {
			cfg.Aging.UrgentThreshold = diffPick(src, 100, 60, 70, 120, 150, 85, 200, 101)
		}
	}
	cfg.CostAlpha = diffPick(src, 0, 0.5, 1, 0.1)
	cfg.DefaultCost = diffPick(src, 0, diffUnits(5), diffUnits(20), diffUnits(1))
	if forget {
		cfg.IdleTTL = diffUnits(3 + src.intn(20))
	}

	w := &diffWorkload{Cfg: cfg}
	span := diffPick(src, 0, 10, 40, 20)
	for range 1 + src.intn(maxJobs) {
		j := diffJob{
			Job: Job{
				Type: types[src.intn(len(types))],
				ID:   diffPick(src, "", "x", "y", "z"),
				Key:  keys[src.intn(len(keys))],
			},
			At:       diffUnits(src.intn(span + 1)),
			Dur:      diffUnits(1 + src.intn(20)),
			CancelAt: -1,
		}
		if diffChance(src, 1, 2) {
			j.Job.Priority = diffPick(src, 10, -1, 50, 80, 100, 120, 20, 90, 1)
		}
		if diffChance(src, 1, 8) {
			j.CancelAt = j.At + diffUnits(src.intn(10))
		}
		w.Jobs = append(w.Jobs, j)
	}
	if diffChance(src, 1, 3) {
		for range 1 + src.intn(4) {
			c := diffKeyChange{At: diffUnits(src.intn(span + 1)), Key: keys[src.intn(len(keys))]}
			switch src.intn(6) {
			case 0, 1, 2:
				c.Weight = diffPick(src, 2, 0.5, 1, 3, 4)
			case 3, 4:
				c.Set = &KeyConfig{Weight: diffPick(src, 0, 1, 2, 0.5, 3)}
				if diffChance(src, 1, 2) {
					c.Set.MinSlots = 1 + src.intn(2)
				}
				if diffChance(src, 1, 2) {
					c.Set.MaxConcurrency = max(c.Set.MinSlots, 1) + src.intn(2)
				}
				if diffChance(src, 1, 4) {
					c.Set.MaxPending = 1 + src.intn(3)
				}
			default:
				c.Reset = true
			}
			w.Changes = append(w.Changes, c)
		}
	}
	return w
}

// diffRefConfig translates a Config into the reference model's terms.
func diffRefConfig(c Config) refmodel.Config {
	r := refmodel.Config{
		MaxConcurrency: c.MaxConcurrency,
		MaxQueue:       c.MaxQueue,
		TierLimits:     map[int]int{},
		Types:          map[string]refmodel.Type{},
		Keys:           map[string]refmodel.Key{},
		DefaultKey:     refmodel.Key(c.DefaultKey),
		Aging:          refmodel.Aging(c.Aging),
		CostAlpha:      c.CostAlpha,
		DefaultCost:    c.DefaultCost,
		IdleTTL:        c.IdleTTL,
	}
	for t, n := range c.TierLimits {
		r.TierLimits[int(t)] = n
	}
	for name, tc := range c.Types {
		r.Types[name] = refmodel.Type{
			Tier: int(tc.Tier), MaxConcurrency: tc.MaxConcurrency, ConflictGroup: tc.ConflictGroup,
			DefaultCost: tc.DefaultCost, DefaultPriority: tc.DefaultPriority,
		}
	}
	for name, kc := range c.Keys {
		r.Keys[name] = refmodel.Key(kc)
	}
	return r
}

// diffOptions says what a run checks besides the hard limits and the
// scheduler's internal invariants (verifyLocked, after every event).
type diffOptions struct {
	ref   bool // replay on the reference model and compare starts
	stats bool // check Stats against the driver's own counts after every event
	hook  bool // count EventFinished per job: each must end exactly once
}

// diffStart is one start as seen by the driver.
type diffStart struct {
	Job  int
	At   time.Duration
	Kind string
}

func (s diffStart) String() string { return fmt.Sprintf("%v j%d %s", s.At, s.Job, s.Kind) }

// diffJobRun is the driver's view of one job of the workload.
type diffJobRun struct {
	accepted bool
	seq      uint64 // the real scheduler's
	refSeq   uint64
	h        Handle
	release  chan struct{}
	started  bool
	ended    bool
	start    time.Duration
}

// errDiffInvalid marks a workload whose configuration New rejects; the
// shrinker never keeps one.
var errDiffInvalid = errors.New("invalid configuration")

// diffRunner replays a workload on the real scheduler, driving a fake
// clock from event to event, and on the reference model in lockstep.
// Every job is a Submit job whose function blocks until the runner
// releases it at its finish time (or the job is cancelled); the runner
// waits for the scheduler to take in each event before the next one, so
// a run is deterministic.
type diffRunner struct {
	w     *diffWorkload
	opts  diffOptions
	s     *Scheduler
	clk   *clock.Fake
	now   time.Duration
	ref   *refmodel.Model
	jobs  []diffJobRun
	bySeq map[uint64]int // real seq -> job index
	order []int          // job indices in start order

	real, model []diffStart // the start sequences
	trace       []string    // the events applied, for reports

	// The keys' current configurations, for the hard-limit check: those
	// set at run time, then (until ResetKeys) Config.Keys, then DefaultKey.
	keyCfg    map[string]KeyConfig
	keysReset bool

	// Counts the Stats must agree with.
	rejected, completed, failed, cancelled, running, pending int

	endMu sync.Mutex     // the hook runs on a goroutine of the scheduler's
	ends  map[uint64]int // EventFinished per seq, written by the hook
	timer *time.Timer
}

func newDiffRunner(w *diffWorkload, opts diffOptions) *diffRunner {
	return &diffRunner{w: w, opts: opts, jobs: make([]diffJobRun, len(w.Jobs)), bySeq: map[uint64]int{}, keyCfg: map[string]KeyConfig{}}
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
	r.clk = clock.NewFake(t0)
	cfg := r.w.Cfg
	cfg.Clock = r.clk
	if r.opts.hook {
		r.ends = map[uint64]int{}
		cfg.EventBuffer = 1 << 12 // far more than a workload makes; checked
		cfg.OnEvent = func(ev Event) {
			if ev.Kind == EventFinished {
				r.endMu.Lock()
				r.ends[ev.Seq]++
				r.endMu.Unlock()
			}
		}
	}
	s, err := New(cfg)
	if err != nil {
		return fmt.Errorf("%w: %v", errDiffInvalid, err)
	}
	r.s = s
	defer r.close()
	if r.opts.ref {
		r.ref = refmodel.New(diffRefConfig(r.w.Cfg))
	}
	r.timer = time.NewTimer(time.Hour)
	defer r.timer.Stop()

	evs := r.events()
	for {
		at, ok := r.next(evs)
		if !ok {
			break
		}
		r.clk.Set(t0.Add(at))
		r.now = at
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
// key change, or a running job's finish.
func (r *diffRunner) next(evs []diffEvent) (time.Duration, bool) {
	at, ok := time.Duration(0), false
	if len(evs) > 0 {
		at, ok = evs[0].at, true
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

func (r *diffRunner) apply(ev diffEvent) error {
	switch ev.kind {
	case diffArrival:
		return r.arrive(ev.idx)
	case diffCancellation:
		return r.cancel(ev.idx)
	default:
		return r.change(r.w.Changes[ev.idx])
	}
}

// change applies a key change to both schedulers. SetKey may be refused
// (the reservations would exceed MaxConcurrency); both must agree.
func (r *diffRunner) change(c diffKeyChange) error {
	now := r.now.Microseconds()
	switch {
	case c.Reset:
		r.trace = append(r.trace, fmt.Sprintf("%v ResetKeys()", r.now))
		r.s.ResetKeys()
		if r.ref != nil {
			r.ref.ResetKeys(now)
		}
		r.keyCfg, r.keysReset = map[string]KeyConfig{}, true
	case c.Set != nil:
		err := r.s.SetKey(c.Key, *c.Set)
		r.trace = append(r.trace, fmt.Sprintf("%v SetKey(%q, %+v): %v", r.now, c.Key, *c.Set, err))
		if r.ref != nil {
			if ok := r.ref.SetKey(now, c.Key, refmodel.Key(*c.Set)); ok != (err == nil) {
				return fmt.Errorf("at %v SetKey(%q, %+v): scheduler error %v, reference accepted=%v", r.now, c.Key, *c.Set, err, ok)
			}
		}
		if err == nil {
			r.keyCfg[c.Key] = *c.Set
		}
	default:
		r.trace = append(r.trace, fmt.Sprintf("%v SetKeyWeight(%q, %v)", r.now, c.Key, c.Weight))
		if err := r.s.SetKeyWeight(c.Key, c.Weight); err != nil {
			return fmt.Errorf("SetKeyWeight(%q, %v): %v", c.Key, c.Weight, err)
		}
		if r.ref != nil {
			r.ref.SetKeyWeight(now, c.Key, c.Weight)
		}
	}
	return r.sync()
}

func (r *diffRunner) arrive(i int) error {
	j := &r.jobs[i]
	desc := r.w.Jobs[i].Job
	release := make(chan struct{})
	h, err := r.s.Submit(desc, func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	var qf *QueueFullError
	switch {
	case err == nil:
		j.accepted, j.h, j.release, j.seq = true, h, release, seqOf(h)
		r.bySeq[j.seq] = i
		r.pending++
		r.trace = append(r.trace, fmt.Sprintf("%v submit j%d (seq %d)", r.now, i, j.seq))
	case errors.As(err, &qf):
		r.rejected++
		r.trace = append(r.trace, fmt.Sprintf("%v submit j%d: %v", r.now, i, err))
	default:
		return fmt.Errorf("submit j%d: %v", i, err)
	}
	if r.ref != nil {
		seq, ok := r.ref.Submit(r.now.Microseconds(), refmodel.Job(desc))
		if ok != j.accepted {
			return fmt.Errorf("j%d at %v: scheduler accepted=%v (err %v), reference accepted=%v", i, r.now, j.accepted, err, ok)
		}
		if ok && seq != j.seq {
			return fmt.Errorf("j%d at %v: scheduler seq %d, reference seq %d", i, r.now, j.seq, seq)
		}
		j.refSeq = seq
	}
	return r.sync()
}

// cancel cancels a job: a queued one leaves the queue, a running one
// returns at once (its function sees its context end) and counts as
// failed. Cancelling a job that was rejected or has ended does nothing.
func (r *diffRunner) cancel(i int) error {
	j := &r.jobs[i]
	if !j.accepted || j.ended {
		return nil
	}
	j.h.Cancel()
	if err := r.await(i); err != nil {
		return err
	}
	if err := j.h.Err(); !errors.Is(err, context.Canceled) {
		return fmt.Errorf("j%d cancelled at %v ended with %v, want context.Canceled", i, r.now, err)
	}
	j.ended = true
	if j.started {
		r.trace = append(r.trace, fmt.Sprintf("%v cancel running j%d", r.now, i))
		r.running--
		r.failed++
		if r.ref != nil {
			r.ref.Finish(r.now.Microseconds(), j.refSeq)
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
	r.trace = append(r.trace, fmt.Sprintf("%v finish j%d", r.now, i))
	close(j.release)
	if err := r.await(i); err != nil {
		return err
	}
	if err := j.h.Err(); err != nil {
		return fmt.Errorf("j%d finished at %v with %v", i, r.now, err)
	}
	j.ended = true
	r.running--
	r.completed++
	if r.ref != nil {
		r.ref.Finish(r.now.Microseconds(), j.refSeq)
	}
	return r.sync()
}

// await waits until job i has ended. The scheduler ends a job and
// dispatches under one hold of its lock, so once Done is closed and the
// lock taken (by sync), the event has been taken in completely. The timer
// only turns a hang into a failure.
func (r *diffRunner) await(i int) error {
	done := r.jobs[i].h.Done()
	select {
	case <-done:
		return nil
	default:
	}
	r.timer.Reset(10 * time.Second)
	select {
	case <-done:
		r.timer.Stop()
		return nil
	case <-r.timer.C:
		return fmt.Errorf("j%d did not end at %v", i, r.now)
	}
}

// sync records the jobs the scheduler and the reference started since the
// last event and compares them, after checking the scheduler's invariants.
func (r *diffRunner) sync() error {
	r.s.mu.Lock()
	err := r.s.verifyLocked()
	var got []diffStart
	// A dispatch appends the jobs it starts to the running list in start
	// order, and an event ends at most one job before dispatching, so the
	// new jobs are the list's tail, in order.
	for _, j := range r.s.eng.RunningJobs() {
		i, ok := r.bySeq[j.Seq()]
		if !ok {
			err = errors.Join(err, fmt.Errorf("unknown job seq %d running", j.Seq()))
			continue
		}
		if jr := &r.jobs[i]; !jr.started {
			jr.started, jr.start = true, r.now
			r.order = append(r.order, i)
			got = append(got, diffStart{i, r.now, diffKindName(j.Kind())})
		}
	}
	r.s.mu.Unlock()
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
			want = append(want, diffStart{r.refJob(st.Seq), time.Duration(st.At) * time.Microsecond, st.Kind.String()})
		}
		r.model = append(r.model, want...)
		if !slices.Equal(got, want) {
			return fmt.Errorf("at %v, after %q: the scheduler started %v, the reference %v",
				r.now, r.trace[len(r.trace)-1], got, want)
		}
		if err := r.compareState(); err != nil {
			return fmt.Errorf("at %v, after %q: %v", r.now, r.trace[len(r.trace)-1], err)
		}
	}
	if r.opts.stats {
		return r.checkStats()
	}
	return nil
}

// checkLimits checks the hard limits of SPEC section 2 from the driver's
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
	for _, i := range r.order {
		if r.jobs[i].ended {
			continue
		}
		d := r.w.Jobs[i].Job
		tc := c.Types[d.Type]
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
	over := func(n, limit int) bool { return limit > 0 && n > limit }
	if over(all, c.MaxConcurrency) {
		return fmt.Errorf("%d running, MaxConcurrency %d", all, c.MaxConcurrency)
	}
	for t, n := range tiers {
		if over(n, c.TierLimits[t]) {
			return fmt.Errorf("tier %d: %d running, cap %d", t, n, c.TierLimits[t])
		}
	}
	for name, n := range types {
		if over(n, c.Types[name].MaxConcurrency) {
			return fmt.Errorf("type %q: %d running, cap %d", name, n, c.Types[name].MaxConcurrency)
		}
	}
	for _, st := range started {
		name := r.w.Jobs[st.Job].Job.Key
		if limit := r.keyConfig(name).MaxConcurrency; over(keys[name], limit) {
			return fmt.Errorf("key %q: %d running, cap %d", name, keys[name], limit)
		}
	}
	return nil
}

// keyConfig returns key name's configuration as the driver knows it.
func (r *diffRunner) keyConfig(name string) KeyConfig {
	if kc, ok := r.keyCfg[name]; ok {
		return kc
	}
	if kc, ok := r.w.Cfg.Keys[name]; ok && !r.keysReset {
		return kc
	}
	return r.w.Cfg.DefaultKey
}

func (r *diffRunner) refJob(seq uint64) int {
	for i, j := range r.jobs {
		if j.accepted && j.refSeq == seq {
			return i
		}
	}
	return -1
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

// checkStats compares Stats with the driver's own counts.
func (r *diffRunner) checkStats() error {
	st := r.s.Stats()
	got := []int{int(st.Submitted), int(st.Completed), int(st.Failed), int(st.Cancelled), int(st.Rejected), st.Active, st.Queued}
	accepted := r.completed + r.failed + r.cancelled + r.running + r.pending
	want := []int{accepted, r.completed, r.failed, r.cancelled, r.rejected, r.running, r.pending}
	if !slices.Equal(got, want) {
		return fmt.Errorf("at %v: Stats submitted, completed, failed, cancelled, rejected, active, queued = %v, want %v", r.now, got, want)
	}
	if st.Submitted != st.Completed+st.Failed+st.Cancelled+uint64(st.Active+st.Queued) {
		return fmt.Errorf("at %v: Stats do not add up: %+v", r.now, st)
	}
	return nil
}

// compareState compares what the scheduler and the reference carry from
// event to event besides the queue: every flow's virtual time and every
// cost estimate, exactly (both compute them by the same float operations
// in the same order). A wrong charge or estimate shows here before it
// changes an order, if it ever does.
func (r *diffRunner) compareState() error {
	vt := map[refmodel.FlowID]float64{}
	est := map[refmodel.EstimateID]float64{}
	r.s.mu.Lock()
	for id, v := range r.s.eng.VirtualTimes() {
		vt[refmodel.FlowID(id)] = v
	}
	for id, e := range r.s.eng.Estimates() {
		est[refmodel.EstimateID(id)] = e
	}
	r.s.mu.Unlock()
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
		if err := r.s.Close(); err != nil {
			return fmt.Errorf("Close: %v", err)
		}
		// Close has delivered every event.
		if d := r.s.Stats().EventsDropped; d != 0 {
			return fmt.Errorf("%d events dropped", d)
		}
		for i, j := range r.jobs {
			if n := r.ends[j.seq]; j.accepted && n != 1 {
				return fmt.Errorf("j%d (seq %d) reported finished %d times", i, j.seq, n)
			}
		}
		if len(r.ends) != r.completed+r.failed+r.cancelled {
			return fmt.Errorf("finish events for %d jobs, %d ended", len(r.ends), r.completed+r.failed+r.cancelled)
		}
	}
	return nil
}

// close releases every job still blocked and closes the scheduler, so no
// goroutine outlives a run, whatever went wrong.
func (r *diffRunner) close() {
	for _, j := range r.jobs {
		if j.accepted && !j.ended {
			select {
			case <-j.release:
			default:
				close(j.release)
			}
		}
	}
	_ = r.s.Close()
}

// report describes a failed run: the error, the workload as Go source (to
// paste into TestDifferentialRegressions), the events and both sequences.
func (r *diffRunner) report(err error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v\n\nworkload:\n%s\n\nevents:\n", err, r.w.goString())
	for _, e := range r.trace {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	b.WriteString("\nscheduler started:\n")
	for _, s := range r.real {
		fmt.Fprintf(&b, "  %v\n", s)
	}
	if r.ref != nil {
		b.WriteString("reference started:\n")
		for _, s := range r.model {
			fmt.Fprintf(&b, "  %v\n", s)
		}
	}
	return b.String()
}

// diffFails runs w and reports whether it fails other than by being
// invalid.
func diffFails(w *diffWorkload, opts diffOptions) bool {
	err := newDiffRunner(w, opts).run()
	return err != nil && !errors.Is(err, errDiffInvalid)
}

// diffShrink greedily simplifies a failing workload while it keeps failing:
// it drops jobs, key changes and cancellations, and resets settings to
// their defaults, one at a time, until no single step keeps it failing, or
// until the deadline.
func diffShrink(w *diffWorkload, opts diffOptions, deadline time.Time) *diffWorkload {
	for progress := true; progress; {
		progress = false
		for _, c := range diffSimplifications(w) {
			if time.Now().After(deadline) {
				return w
			}
			if diffFails(c, opts) {
				w, progress = c, true
				break
			}
		}
	}
	return w
}

// diffSimplifications lists the workloads one step simpler than w, the
// biggest steps first.
func diffSimplifications(w *diffWorkload) []*diffWorkload {
	var out []*diffWorkload
	edit := func(f func(c *diffWorkload)) {
		c := w.clone()
		f(c)
		out = append(out, c)
	}
	for i := range w.Jobs {
		edit(func(c *diffWorkload) { c.Jobs = slices.Delete(c.Jobs, i, i+1) })
	}
	for i := range w.Changes {
		edit(func(c *diffWorkload) { c.Changes = slices.Delete(c.Changes, i, i+1) })
	}
	cfg := w.Cfg
	if cfg.Aging != (AgingConfig{}) {
		edit(func(c *diffWorkload) { c.Cfg.Aging = AgingConfig{} })
		if cfg.Aging.MaxEffective != 0 {
			edit(func(c *diffWorkload) { c.Cfg.Aging.MaxEffective = 0 })
		}
		if cfg.Aging.UrgentThreshold != 0 {
			edit(func(c *diffWorkload) { c.Cfg.Aging.UrgentThreshold = 0 })
		}
		if cfg.Aging.GracePeriod != 0 {
			edit(func(c *diffWorkload) { c.Cfg.Aging.GracePeriod = 0 })
		}
	}
	if cfg.MaxQueue != 0 {
		edit(func(c *diffWorkload) { c.Cfg.MaxQueue = 0 })
	}
	if cfg.CostAlpha != 0 {
		edit(func(c *diffWorkload) { c.Cfg.CostAlpha = 0 })
	}
	if cfg.DefaultCost != 0 {
		edit(func(c *diffWorkload) { c.Cfg.DefaultCost = 0 })
	}
	if cfg.IdleTTL != time.Hour {
		edit(func(c *diffWorkload) { c.Cfg.IdleTTL = time.Hour })
	}
	if cfg.DefaultKey != (KeyConfig{}) {
		edit(func(c *diffWorkload) { c.Cfg.DefaultKey = KeyConfig{} })
	}
	for t := range cfg.TierLimits {
		edit(func(c *diffWorkload) { delete(c.Cfg.TierLimits, t) })
	}
	for name, kc := range cfg.Keys {
		edit(func(c *diffWorkload) { delete(c.Cfg.Keys, name) })
		for _, z := range []KeyConfig{{MinSlots: kc.MinSlots, MaxConcurrency: kc.MaxConcurrency, MaxPending: kc.MaxPending},
			{Weight: kc.Weight, MaxConcurrency: kc.MaxConcurrency, MaxPending: kc.MaxPending},
			{Weight: kc.Weight, MinSlots: kc.MinSlots, MaxPending: kc.MaxPending},
			{Weight: kc.Weight, MinSlots: kc.MinSlots, MaxConcurrency: kc.MaxConcurrency}} {
			if z != kc {
				edit(func(c *diffWorkload) { c.Cfg.Keys[name] = z })
			}
		}
	}
	for name, tc := range cfg.Types {
		if !slices.ContainsFunc(w.Jobs, func(j diffJob) bool { return j.Job.Type == name }) {
			edit(func(c *diffWorkload) { delete(c.Cfg.Types, name) })
		}
		for _, z := range []TypeConfig{{MaxConcurrency: tc.MaxConcurrency, ConflictGroup: tc.ConflictGroup, DefaultCost: tc.DefaultCost, DefaultPriority: tc.DefaultPriority},
			{Tier: tc.Tier, ConflictGroup: tc.ConflictGroup, DefaultCost: tc.DefaultCost, DefaultPriority: tc.DefaultPriority},
			{Tier: tc.Tier, MaxConcurrency: tc.MaxConcurrency, DefaultCost: tc.DefaultCost, DefaultPriority: tc.DefaultPriority},
			{Tier: tc.Tier, MaxConcurrency: tc.MaxConcurrency, ConflictGroup: tc.ConflictGroup, DefaultPriority: tc.DefaultPriority},
			{Tier: tc.Tier, MaxConcurrency: tc.MaxConcurrency, ConflictGroup: tc.ConflictGroup, DefaultCost: tc.DefaultCost}} {
			if z != tc {
				edit(func(c *diffWorkload) { c.Cfg.Types[name] = z })
			}
		}
	}
	for i, j := range w.Jobs {
		if j.CancelAt >= 0 {
			edit(func(c *diffWorkload) { c.Jobs[i].CancelAt = -1 })
		}
		if j.Job.Priority != 0 {
			edit(func(c *diffWorkload) { c.Jobs[i].Job.Priority = 0 })
		}
		if j.Job.ID != "" {
			edit(func(c *diffWorkload) { c.Jobs[i].Job.ID = "" })
		}
		if j.Job.Key != "" {
			edit(func(c *diffWorkload) { c.Jobs[i].Job.Key = "" })
		}
		if j.Job.Type != "" {
			edit(func(c *diffWorkload) { c.Jobs[i].Job.Type = "" })
		}
		if j.Dur > diffUnit {
			edit(func(c *diffWorkload) { c.Jobs[i].Dur = diffUnit })
			edit(func(c *diffWorkload) { c.Jobs[i].Dur -= diffUnit })
		}
		if j.At > 0 {
			edit(func(c *diffWorkload) {
				c.Jobs[i].At -= diffUnit
				if c.Jobs[i].CancelAt >= 0 {
					c.Jobs[i].CancelAt -= diffUnit
				}
			})
		}
	}
	return out
}

func (w *diffWorkload) clone() *diffWorkload {
	c := &diffWorkload{Cfg: w.Cfg, Jobs: slices.Clone(w.Jobs), Changes: slices.Clone(w.Changes)}
	c.Cfg.TierLimits = maps.Clone(w.Cfg.TierLimits)
	c.Cfg.Types = maps.Clone(w.Cfg.Types)
	c.Cfg.Keys = maps.Clone(w.Cfg.Keys)
	return c
}

// goString renders the workload as a Go expression of this package.
func (w *diffWorkload) goString() string {
	var b strings.Builder
	c := w.Cfg
	b.WriteString("&diffWorkload{\n\tCfg: Config{\n")
	field := func(name string, v any, zero bool) {
		if !zero {
			fmt.Fprintf(&b, "\t\t%s: %s,\n", name, strings.ReplaceAll(fmt.Sprintf("%#v", v), "fairsched.", ""))
		}
	}
	field("MaxConcurrency", c.MaxConcurrency, c.MaxConcurrency == 0)
	field("MaxQueue", c.MaxQueue, c.MaxQueue == 0)
	field("TierLimits", c.TierLimits, len(c.TierLimits) == 0)
	field("Types", c.Types, len(c.Types) == 0)
	field("Keys", c.Keys, len(c.Keys) == 0)
	field("DefaultKey", c.DefaultKey, c.DefaultKey == KeyConfig{})
	field("Aging", c.Aging, c.Aging == AgingConfig{})
	field("CostAlpha", c.CostAlpha, c.CostAlpha == 0)
	field("DefaultCost", c.DefaultCost, c.DefaultCost == 0)
	field("IdleTTL", c.IdleTTL, c.IdleTTL == 0)
	b.WriteString("\t},\n\tJobs: []diffJob{\n")
	for i, j := range w.Jobs {
		fmt.Fprintf(&b, "\t\t{Job: Job{Type: %q, ID: %q, Key: %q, Priority: %d}, At: %d * diffUnit, Dur: %d * diffUnit, CancelAt: %s}, // j%d\n",
			j.Job.Type, j.Job.ID, j.Job.Key, j.Job.Priority, j.At/diffUnit, j.Dur/diffUnit, diffUnitsString(j.CancelAt), i)
	}
	b.WriteString("\t},\n")
	if len(w.Changes) > 0 {
		b.WriteString("\tChanges: []diffKeyChange{\n")
		for _, c := range w.Changes {
			switch {
			case c.Reset:
				fmt.Fprintf(&b, "\t\t{At: %d * diffUnit, Reset: true},\n", c.At/diffUnit)
			case c.Set != nil:
				fmt.Fprintf(&b, "\t\t{At: %d * diffUnit, Key: %q, Set: &%s},\n", c.At/diffUnit, c.Key,
					strings.ReplaceAll(fmt.Sprintf("%#v", *c.Set), "fairsched.", ""))
			default:
				fmt.Fprintf(&b, "\t\t{At: %d * diffUnit, Key: %q, Weight: %v},\n", c.At/diffUnit, c.Key, c.Weight)
			}
		}
		b.WriteString("\t},\n")
	}
	b.WriteString("}")
	return b.String()
}

func diffUnitsString(d time.Duration) string {
	if d < 0 {
		return "-1"
	}
	return fmt.Sprintf("%d * diffUnit", d/diffUnit)
}

// diffShrinks counts the failures shrunk so far. Shrinking replays a
// workload hundreds of times, so only the first few failures of a test run
// are shrunk; the rest are reported as they are.
var diffShrinks atomic.Int32

// diffCheck runs w with opts and, if it fails, shrinks it and fails the
// test with a report of the smallest failing workload found.
func diffCheck(t *testing.T, what string, w *diffWorkload, opts diffOptions) {
	t.Helper()
	r := newDiffRunner(w, opts)
	err := r.run()
	if err == nil {
		return
	}
	if errors.Is(err, errDiffInvalid) {
		t.Fatalf("%s: the generator made an invalid workload: %v\n%s", what, err, w.goString())
	}
	if diffShrinks.Add(1) > 3 {
		t.Fatalf("%s fails (not shrunk: enough failures were).\n%s", what, r.report(err))
	}
	small := diffShrink(w, opts, time.Now().Add(10*time.Second))
	sr := newDiffRunner(small, opts)
	serr := sr.run()
	t.Fatalf("%s fails.\n\n=== shrunk ===\n%s\n\n=== original ===\n%s", what, sr.report(serr), r.report(err))
}

// diffSeeds is how many random workloads TestDifferential runs.
func diffSeeds() int {
	if testing.Short() {
		return 200
	}
	return 2000
}

// TestDifferential replays random workloads on the scheduler and on the
// reference model and requires identical start sequences, besides every
// other check of diffRunner (a quarter of the seeds also check Stats, an
// eighth count finish events). IdleTTL is longer than the workloads here;
// TestDifferentialIdleTTL covers forgetting. Each seed is a subtest, so a
// failure can be replayed alone with -run 'TestDifferential/seed=N$'.
func TestDifferential(t *testing.T) {
	for seed := range uint64(diffSeeds()) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			w := diffGenerate(diffRandSource{rand.New(rand.NewPCG(seed, 0x5eed))}, 60, false)
			diffCheck(t, fmt.Sprintf("seed %d", seed), w, diffOptions{ref: true, stats: seed%4 == 0, hook: seed%8 == 1})
		})
	}
}

// TestDifferentialIdleTTL is TestDifferential with an IdleTTL of a few
// units, so that idle keys and unused cost estimates are forgotten and
// come back brand-new during the run.
func TestDifferentialIdleTTL(t *testing.T) {
	for seed := range uint64(diffSeeds() / 4) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			w := diffGenerate(diffRandSource{rand.New(rand.NewPCG(seed, 0x77c))}, 60, true)
			diffCheck(t, fmt.Sprintf("seed %d", seed), w, diffOptions{ref: true, stats: seed%4 == 0})
		})
	}
}

// diffRegression is a workload on which the scheduler once went wrong,
// reduced to a few jobs, with the checks that show it.
type diffRegression struct {
	w    *diffWorkload
	opts diffOptions
}

// diffRegressions are the subtests of TestDifferentialRegressions.
var diffRegressions = map[string]diffRegression{
	// A key idle for IdleTTL was forgotten by the very submission that
	// brought it back: enqueueLocked looked the key up, then forgetLocked
	// deleted it from s.keys, and the job was queued on the orphaned
	// record. The key's next job got a fresh record, so the key's cap was
	// counted twice: j1 and j2 ran together although key "z" may run one
	// job at a time. (Checked without the reference, whose first
	// complaint would be the key missing from s.keys.)
	"ForgottenKeyCapCountedTwice": {&diffWorkload{
		Cfg: Config{
			DefaultKey: KeyConfig{MaxConcurrency: 1},
			IdleTTL:    8 * diffUnit,
		},
		Jobs: []diffJob{
			{Job: Job{Key: "z"}, At: 0 * diffUnit, Dur: 1 * diffUnit, CancelAt: -1}, // j0
			{Job: Job{Key: "z"}, At: 9 * diffUnit, Dur: 5 * diffUnit, CancelAt: -1}, // j1
			{Job: Job{Key: "z"}, At: 9 * diffUnit, Dur: 5 * diffUnit, CancelAt: -1}, // j2
		},
	}, diffOptions{stats: true, hook: true}},
	// The same bug as seen by the scheduler's own invariants: j2 was
	// queued on the orphaned record, which no longer counted among s.keys.
	"ForgottenKeyQueuedJobLost": {&diffWorkload{
		Cfg: Config{MaxConcurrency: 1, IdleTTL: 8 * diffUnit},
		Jobs: []diffJob{
			{Job: Job{Key: "z"}, At: 0 * diffUnit, Dur: 1 * diffUnit, CancelAt: -1},  // j0
			{Job: Job{Key: "a"}, At: 2 * diffUnit, Dur: 10 * diffUnit, CancelAt: -1}, // j1
			{Job: Job{Key: "z"}, At: 9 * diffUnit, Dur: 1 * diffUnit, CancelAt: -1},  // j2
		},
	}, diffOptions{ref: true, stats: true, hook: true}},
	// And as seen by the reference: after j1's submission the scheduler no
	// longer knew key "z" (its flow was gone from s.keys), while the
	// reference had it back brand-new.
	"ForgottenKeyOrphaned": {&diffWorkload{
		Cfg: Config{IdleTTL: 8 * diffUnit},
		Jobs: []diffJob{
			{Job: Job{Key: "z"}, At: 0 * diffUnit, Dur: 1 * diffUnit, CancelAt: -1}, // j0
			{Job: Job{Key: "z"}, At: 9 * diffUnit, Dur: 1 * diffUnit, CancelAt: -1}, // j1
		},
	}, diffOptions{ref: true}},
}

// TestDifferentialRegressions replays the regression workloads.
func TestDifferentialRegressions(t *testing.T) {
	for _, name := range slices.Sorted(maps.Keys(diffRegressions)) {
		t.Run(name, func(t *testing.T) {
			reg := diffRegressions[name]
			r := newDiffRunner(reg.w, reg.opts)
			if err := r.run(); err != nil {
				t.Fatal(r.report(err))
			}
		})
	}
}
