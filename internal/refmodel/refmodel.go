// Package refmodel is an executable restatement of fairsched's scheduling
// contract (docs/design.md, Hard limits to Fair share and cost), written to be read rather than to be
// fast. It is the oracle of the differential tests: the real scheduler and
// this model are fed the same events and must start the same jobs, at the
// same virtual instants, in the same order.
//
// The rules, as the model applies them:
//
//   - After every event (a submission, a finish, a cancellation, a key
//     change) the model dispatches: it starts the first admissible pending
//     job by the order below, and repeats until no pending job is
//     admissible.
//   - Admissible: below MaxConcurrency, below the job's tier cap, type cap
//     and key cap (0 means none), and no running job has the same ID and
//     the same non-empty conflict group.
//   - Order: urgent jobs (uncapped score at or above the urgent
//     threshold, as a base at or above it is from submission) by score
//     then submission; then the jobs of keys running fewer jobs under
//     their reservation than MinSlots, the key furthest below first (ties
//     by name), within a key by tier, then
//     effective priority, then submission; then every job by tier, its
//     flow's virtual time V, the flow's stamp, effective priority and
//     submission. A job started by the reservation step is not charged;
//     any other is charged its cost estimate over its key's weight, and
//     the charge is corrected to the observed time when it ends.
//   - A flow (tier, key) is active while it has pending or running jobs.
//     Each tier has a floor: when a flow becomes active the floor rises to
//     the lowest settled V of the active flows and the flow's V to the
//     floor; when it goes idle the floor rises to the lowest settled V of
//     the active flows including itself. Settled V leaves out what running
//     jobs were charged at their type's default cost, before their
//     (type, ID) was ever observed.
//   - Time (docs/design.md, Delays and start deadlines): a job with a NotBefore later than its
//     submission is delayed: counted by MaxQueue and MaxPending, but
//     outside the order and fair share until Due releases it at that
//     time, when its flow activates as for a submission and its aging
//     clock starts. A job not started by its start deadline (the earlier
//     of StartBy and its type's StartTimeout after submission) ends at
//     that time. What falls due at one instant is applied by time, then
//     submission, a job's release before its deadline; one whose deadline
//     is not after its submission and NotBefore is refused. A failed
//     attempt that is retried is accounted as a finish, and the job is
//     delayed until its backoff ends, keeping its number, its aging clock
//     and its deadline. A type's disable policy refuses the submissions
//     of a (type, ID) whose attempts failed Failures times within Window,
//     for For.
//   - Pause (pause.go): a job whose key or type is paused, and which is
//     neither running nor delayed, is set aside as a delayed job is, and
//     its aging clock stands still until both are resumed; then it joins
//     the queue as a released job does, its aging clock moved on by the
//     time it stood.
//   - Dependencies (deps.go): a job that runs after jobs not yet ended is
//     set aside, its aging clock running, until they complete; if one does
//     not, it ends without running, and so do the jobs after it.
//   - Duplicates: a duplicate that joins a waiting job raises its base
//     priority (Raise); one that supersedes replaces it (Supersede).
//   - Rate limits (ratelimit.go): a job whose key's or type's token bucket
//     has no token at now is not eligible; a job that starts takes one
//     from each.
//   - Replicas (replicas.go): once one is set, a job starts only if a
//     known replica it may run on (its own, for a job bound to one; else
//     one with a handler for its type) runs fewer jobs than its capacity,
//     and runs on the first such replica by name. It is a hard limit,
//     looked at after the others and before named resources.
//   - Named resources (resources.go): a job starts only when every
//     resource it needs has its units free and is not claimed by another
//     job; the first job by the order that finds one short, passing every
//     other limit, claims it until it starts or leaves the queue. A job
//     behind it may still take a claimed resource's free units (backfill)
//     if, by its cost estimate, it ends by the time the running jobs'
//     estimated ends free the claimant's units. The jobs the order
//     reaches that may not are skipped, up to BackfillLookahead per
//     resource, and the next one stops this; both until units of the
//     resource are released or its claim ends.
//   - Cost estimates are an exponential moving average per (type, ID) of
//     observed durations, from the type's default cost. Unconfigured keys
//     other than "" idle for IdleTTL are forgotten at the next accepted
//     submission, as are estimates not updated for as long.
//
// The model keeps as little state as the contract allows. Everything that
// can be derived from the set of pending and running jobs (running counts,
// which flows are active, how many jobs a key runs under its reservation)
// is recomputed by scanning that set whenever it is needed, so there is no
// bookkeeping to get wrong. Each dispatch computes the full sort key of
// every pending job, sorts, and starts the first admissible one. That is
// O(n log n) per start, which is fine for the small workloads of a
// differential test.
//
// The only state carried from event to event is what the contract itself
// says persists: each flow's virtual time, tie-break stamp and the part of
// its virtual time that is default-cost guesses for running jobs, each
// tier's virtual-time floor, the learned cost estimates, the key
// configurations and when each idle key went idle.
//
// The model does not import fairsched: it is an independent statement of
// the same rules, with its own configuration types. Time is an int64 count
// of microseconds since the scheduler's epoch; there is no clock and no
// goroutine.
package refmodel

import (
	"cmp"
	"slices"
	"time"
)

// Config mirrors the fields of fairsched.Config that decide the order.
type Config struct {
	MaxConcurrency int // 0: no global limit
	MaxQueue       int // 0: unlimited
	TierLimits     map[int]int
	// Types are the registered job types. The type "" is always present
	// with the zero Type unless given here.
	Types       map[string]Type
	Keys        map[string]Key // configured keys: never forgotten, nor is ""
	DefaultKey  Key            // every other key but "", whose default is the zero Key
	Aging       Aging
	CostAlpha   float64        // 0: 0.3
	DefaultCost time.Duration  // 0: one second
	IdleTTL     time.Duration  // 0: ten minutes
	Resources   map[string]int // named resources' capacities (resources.go)
	// BackfillLookahead is how many jobs that may not take a claimed
	// resource's units are skipped, per resource, before the next stops
	// its backfill (resources.go); 0: 16, negative: none.
	BackfillLookahead int
}

// Type mirrors fairsched.TypeConfig.
type Type struct {
	Tier            int
	MaxConcurrency  int
	ConflictGroup   string
	DefaultCost     time.Duration
	DefaultPriority int
	StartTimeout    time.Duration // 0: none
	Disable         Disable
	Rate            Rate
	Needs           map[string]int // units of named resources its jobs need
}

// Disable mirrors fairsched.DisablePolicy: after Failures failed attempts
// of one (type, ID) at times in (now - Window, now], its submissions are
// refused until now + For (0: for good).
type Disable struct {
	Failures    int
	Window, For time.Duration
}

// Key mirrors fairsched.KeyConfig.
type Key struct {
	Weight         float64 // 0: 1
	MinSlots       int
	MaxConcurrency int
	MaxPending     int
	Rate           Rate
}

// Aging mirrors fairsched.AgingConfig.
type Aging struct {
	GracePeriod     time.Duration
	Interval        time.Duration
	Step            int
	MaxEffective    int // 0: 100
	UrgentThreshold int // 0: never urgent
}

// Job mirrors fairsched.Job, its times in µs since the epoch (0: none).
type Job struct {
	Type, ID, Key      string
	Priority           int
	NotBefore, StartBy int64
	After              []uint64       // the jobs it runs after, by number (deps.go)
	Needs              map[string]int // its own needs of resources; nil: its type's
	Replica            string         // the replica it is bound to; "": none (replicas.go)
}

// Kind is the step of the order that started a job.
type Kind int

// The steps, numbered so that an earlier step has a higher Kind.
const (
	Fair     Kind = iota // fair share: charged to its flow
	Reserved             // under its key's MinSlots: not charged
	Urgent               // urgent (score at the threshold, or base at or above it): charged
)

func (k Kind) String() string {
	switch k {
	case Reserved:
		return "reserved"
	case Urgent:
		return "urgent"
	}
	return "fair"
}

// Start records one job start.
type Start struct {
	Seq     uint64
	At      int64 // µs
	Kind    Kind
	Replica string // the replica it runs on; "" while none was ever set
}

// FlowID names a flow: one key's share of one tier.
type FlowID struct {
	Key  string
	Tier int
}

// Model is the reference scheduler. Create one with New.
type Model struct {
	cfg     Config
	alpha   float64 // cost smoothing
	defCost float64 // seconds
	ttl     int64   // µs

	seq   uint64 // last submission number handed out
	stamp uint64 // last flow stamp handed out
	jobs  []*job // pending and running, in submission order
	keys  map[string]*key
	floor map[int]float64 // per tier; absent means 0
	costs map[costID]*cost
	// The disable policy: each (type, ID)'s recent failed attempts, and
	// the pairs disabled, until when (0: for good).
	failures map[costID][]int64
	disabled map[costID]int64
	// The keys and job types paused (pause.go), by name.
	pausedKeys, pausedTypes map[string]bool
	// The job types' token buckets (ratelimit.go), by name.
	typeBuckets map[string]*bucket
	// completed says, for each job that ended, whether it completed; unrun
	// are the jobs that ended because one they run after did not, not yet
	// taken (deps.go).
	completed map[uint64]bool
	unrun     []uint64
	// The resources' capacities in force, the job each is claimed for,
	// and those whose backfill is stopped, by name; how many jobs
	// backfilled, and how many of them past a skipped job (resources.go).
	capacities map[string]int
	claimant   map[string]uint64
	stopped    map[string]bool
	backfilled int
	passed     int // of them, while a job that needs the resource was skipped
	// The known replicas by name, whether one was ever set, and how many
	// times the order passed over a job for lack of a free one
	// (replicas.go).
	replicas    map[string]*replica
	replicated  bool
	replicaHeld int

	starts []Start // not yet taken by TakeStarts
}

type job struct {
	seq     uint64
	typName string
	typ     Type
	id      string
	key     *key
	base    int   // clamped base priority
	sub     int64 // submission time; for a delayed job, when it joined the queue
	// delayed until notBefore: outside the order and fair share (not
	// pending for them), but counted by the admission limits.
	delayed   bool
	notBefore int64
	// paused while its key or type is paused (pause.go): outside the
	// order and fair share like a delayed job.
	paused bool
	// standing: its aging clock stands still since stoodSince, as it waits
	// (queued, delayed by a retry's backoff, blocked or paused) while its
	// key or type is paused (docs/design.md, Aging).
	standing   bool
	stoodSince int64
	// after are the jobs it runs after that have not ended; blocked: set
	// aside until they complete (deps.go).
	after    []uint64
	blocked  bool
	needs    map[string]int // units of resources it needs (resources.go)
	skipped  string         // the claimed resource whose backfill skipped it; "": none (resources.go)
	end      int64          // running: its start plus its cost estimate then, µs (resources.go)
	replica  string         // the replica it is bound to; "": none (replicas.go)
	on       string         // running: the replica it runs on; "": none (replicas.go)
	retry    bool           // delayed by a retry's backoff: it keeps its aging clock
	deadline int64          // start deadline; 0: none
	running  bool
	kind     Kind
	start    int64
	est      float64 // cost estimate charged at start, seconds
	guess    float64 // est if it was the type's default cost, else 0
	w        float64 // key weight at start
}

type key struct {
	name       string
	cfg        Key // Weight resolved to > 0
	configured bool
	flows      map[int]*flow // by tier
	idleSince  int64         // when its last job ended
	bucket     bucket        // its rate limit's state (ratelimit.go)
}

type flow struct {
	v     float64 // virtual time
	stamp uint64  // tie-break: when v was last set
	// guessed is the part of v charged for running jobs at their type's
	// default cost, before their (type, ID) had any observation. The
	// settled virtual time v - guessed is what the tier's floor follows.
	guessed float64
}

func (f *flow) settled() float64 { return f.v - f.guessed }

type costID struct{ typ, id string }

type conflictID struct{ group, id string }

type cost struct {
	seconds  float64
	lastUsed int64
}

// New returns a model of a scheduler configured by cfg. It does not
// validate cfg: the real scheduler does that.
func New(cfg Config) *Model {
	m := &Model{
		cfg:      cfg,
		alpha:    cfg.CostAlpha,
		defCost:  cfg.DefaultCost.Seconds(),
		ttl:      cfg.IdleTTL.Microseconds(),
		keys:     map[string]*key{},
		floor:    map[int]float64{},
		costs:    map[costID]*cost{},
		failures: map[costID][]int64{},
		disabled: map[costID]int64{},
	}
	if m.alpha == 0 {
		m.alpha = 0.3
	}
	if cfg.DefaultCost == 0 {
		m.defCost = 1
	}
	if cfg.IdleTTL == 0 {
		m.ttl = (10 * time.Minute).Microseconds()
	}
	for name, kc := range cfg.Keys {
		k := m.newKey(name)
		k.cfg, k.configured = resolve(kc), true
	}
	return m
}

func resolve(c Key) Key {
	if c.Weight == 0 {
		c.Weight = 1
	}
	return c
}

func clamp(p int) int { return min(max(p, 0), 100) }

// defaultOf returns the configuration of a key nothing else configures:
// DefaultKey, but the zero Key for the empty key, the service's own work.
func (m *Model) defaultOf(name string) Key {
	if name == "" {
		return resolve(Key{})
	}
	return resolve(m.cfg.DefaultKey)
}

func (m *Model) newKey(name string) *key {
	k := &key{name: name, cfg: m.defaultOf(name), flows: map[int]*flow{}}
	m.keys[name] = k
	return k
}

func (m *Model) typeOf(name string) (Type, bool) {
	t, ok := m.cfg.Types[name]
	if !ok && name == "" {
		return Type{}, true
	}
	return t, ok
}

// Submit offers a job at now. It returns the job's submission number, or
// false if the job was rejected (unknown type, MaxQueue or the key's
// MaxPending), in which case nothing changed. Then it dispatches.
func (m *Model) Submit(now int64, d Job) (uint64, bool) {
	seq, ok := m.submit(now, d)
	if ok {
		m.dispatch(now)
	}
	return seq, ok
}

// Supersede offers d at now, as Submit does, replacing the waiting job
// old (0: none) if d is accepted: old leaves the queue as if cancelled,
// after d joins it. Then it dispatches.
func (m *Model) Supersede(now int64, old uint64, d Job) (uint64, bool) {
	seq, ok := m.submit(now, d)
	if !ok {
		return 0, false
	}
	if j := m.find(old); j != nil && !j.running {
		m.drop(j, now)
		m.settleDeps(j, false, now)
	}
	m.dispatch(now)
	return seq, true
}

// Disabled reports whether the pair (typ, id) is disabled at now: its
// submissions are refused, and join no job either.
func (m *Model) Disabled(now int64, typ, id string) bool {
	until, off := m.disabled[costID{typ, id}]
	return off && (until == 0 || now < until)
}

// acceptable returns, for job d submitted at now, its type, start
// deadline and needs, and false if it is refused for what it is: its
// type, its pair disabled, a deadline it cannot meet, needs that do not
// fit. The queue's limits are not looked at.
func (m *Model) acceptable(now int64, d Job) (t Type, deadline int64, needs map[string]int, ok bool) {
	t, ok = m.typeOf(d.Type)
	if !ok {
		return t, 0, nil, false
	}
	if m.Disabled(now, d.Type, d.ID) {
		return t, 0, nil, false
	}
	// The start deadline: the earlier of StartBy and the type's
	// StartTimeout from now. One that cannot be met is refused.
	deadline = d.StartBy
	if to := t.StartTimeout.Microseconds(); to > 0 && (deadline == 0 || now+to < deadline) {
		deadline = now + to
	}
	if deadline > 0 && deadline <= max(now, d.NotBefore) {
		return t, 0, nil, false
	}
	needs = t.Needs
	if d.Needs != nil {
		needs = d.Needs
	}
	for r, u := range needs {
		if c, ok := m.capacity()[r]; !ok || u > c {
			return t, 0, nil, false
		}
	}
	return t, deadline, needs, true
}

// submit is Submit without the dispatch.
func (m *Model) submit(now int64, d Job) (uint64, bool) {
	t, deadline, needs, ok := m.acceptable(now, d)
	if !ok {
		return 0, false
	}
	if m.cfg.MaxQueue > 0 && m.count(func(j *job) bool { return !j.running }) >= m.cfg.MaxQueue {
		return 0, false
	}
	if k := m.keys[d.Key]; k != nil && k.cfg.MaxPending > 0 &&
		m.count(func(j *job) bool { return !j.running && j.key == k }) >= k.cfg.MaxPending {
		return 0, false
	}
	m.forget(now)
	k := m.keys[d.Key]
	if k == nil {
		k = m.newKey(d.Key)
	}
	base := d.Priority
	if base == 0 {
		base = t.DefaultPriority
		if base == 0 {
			base = 50
		}
	}
	if k.flows[t.Tier] == nil {
		// A brand-new flow starts at its tier's floor.
		k.flows[t.Tier] = &flow{v: m.floor[t.Tier]}
	}
	m.seq++
	j := &job{seq: m.seq, typName: d.Type, typ: t, id: d.ID, key: k, base: clamp(base), sub: now, deadline: deadline, needs: needs,
		replica: d.Replica}
	// Its own gates, in order: a job it runs after that did not complete
	// ends it at once; then a not-before time, dependencies left, a pause.
	if !m.link(j, d.After) {
		j.blocked = true
		m.jobs = append(m.jobs, j)
		m.unrunBy(j, now)
		return m.seq, true
	}
	if d.NotBefore > now {
		// Delayed: it joins the queue at NotBefore (Due).
		j.delayed, j.notBefore = true, d.NotBefore
		m.jobs = append(m.jobs, j)
		return m.seq, true
	}
	if len(j.after) > 0 {
		// It waits for its dependencies, set aside.
		j.blocked = true
		m.standIfPaused(j, now)
		m.jobs = append(m.jobs, j)
		return m.seq, true
	}
	if m.pausedFor(j) {
		// Paused: it joins the queue when its key and type are resumed.
		j.paused = true
		m.standIfPaused(j, now)
		m.jobs = append(m.jobs, j)
		return m.seq, true
	}
	m.join(j, now, now)
	m.jobs = append(m.jobs, j)
	return m.seq, true
}

// join makes j's flow active, if it was not, as j joins the queue at
// now; its aging clock starts at sub, unless it is a retry's.
func (m *Model) join(j *job, sub, now int64) {
	k, t := j.key, j.typ
	if !j.retry {
		j.sub = sub
	}
	f := k.flows[t.Tier]
	if !m.active(k, t.Tier) {
		// A returning flow re-enters at the tier's floor, raised to the
		// minimum settled virtual time of the active flows, or keeps its
		// own V if higher.
		if v, ok := m.minSettled(t.Tier); ok {
			m.floor[t.Tier] = max(m.floor[t.Tier], v)
		}
		f.v = max(f.v, m.floor[t.Tier])
		m.restamp(f)
	}
}

// NextDue returns the earliest time something falls due after now: a
// delayed job's NotBefore, a start deadline of a job not started, or the
// next token of a rate limit that has none at now.
func (m *Model) NextDue(now int64) (int64, bool) {
	due, ok := m.nextToken(now)
	for _, j := range m.jobs {
		for _, at := range []int64{j.releaseAt(), j.deadlineAt()} {
			if at > 0 && (!ok || at < due) {
				due, ok = at, true
			}
		}
	}
	return due, ok
}

func (j *job) releaseAt() int64 {
	if j.delayed {
		return j.notBefore
	}
	return 0
}

func (j *job) deadlineAt() int64 {
	if j.running {
		return 0
	}
	return j.deadline
}

// Due applies, at now, what has fallen due: in order of time, then of
// submission, a delayed job's release before its own deadline, delayed
// jobs join the queue and jobs not started by their deadline end. It
// returns the expired jobs' numbers. Then it dispatches.
func (m *Model) Due(now int64) []uint64 {
	var expired []uint64
	for {
		var next *job
		var at int64
		release := false
		for _, j := range m.jobs { // submission order: the first at the earliest time
			if r := j.releaseAt(); r > 0 && r <= now && (next == nil || r < at) {
				next, at, release = j, r, true
			}
			if d := j.deadlineAt(); d > 0 && d <= now && (next == nil || d < at) {
				next, at, release = j, d, false
			}
		}
		if next == nil {
			break
		}
		if release {
			if len(next.after) > 0 {
				// Its dependencies first: its aging clock runs meanwhile.
				if !next.retry {
					next.sub = next.notBefore
				}
				next.delayed, next.retry, next.blocked = false, false, true
				m.standIfPaused(next, next.notBefore)
				continue
			}
			if m.pausedFor(next) {
				// Its aging clock stands from its release (a retry's stood
				// already, since its key or type was paused).
				if !next.retry {
					next.sub = next.notBefore
				}
				next.delayed, next.retry = false, false
				next.paused = true
				m.standIfPaused(next, next.notBefore)
				continue
			}
			m.join(next, next.notBefore, now) // while it is still delayed: not yet active
			next.delayed, next.retry = false, false
			continue
		}
		expired = append(expired, next.seq)
		m.drop(next, now)
		m.settleDeps(next, false, now)
	}
	m.dispatch(now)
	return expired
}

// forget drops the unconfigured keys that have been idle for IdleTTL and
// the cost estimates not updated for as long. The empty key, the one
// background work uses, is kept for good like a configured one.
func (m *Model) forget(now int64) {
	for name, k := range m.keys {
		if !k.configured && name != "" && !m.busy(k) && now-k.idleSince >= m.ttl {
			delete(m.keys, name)
		}
	}
	for id, c := range m.costs {
		if now-c.lastUsed >= m.ttl {
			delete(m.costs, id)
		}
	}
}

// Finish ends the running job seq at now, after it ran since its start.
// Then it dispatches.
func (m *Model) Finish(now int64, seq uint64) { m.finish(now, seq, true) }

// Stop ends the running job seq at now as Finish does, but it did not
// complete (it was cancelled as it ran): the jobs that run after it will
// not run. Then it dispatches.
func (m *Model) Stop(now int64, seq uint64) { m.finish(now, seq, false) }

func (m *Model) finish(now int64, seq uint64, completed bool) {
	j := m.find(seq)
	if j == nil || !j.running {
		panic("refmodel: Finish of a job that is not running")
	}
	m.remove(j)
	m.released(j)
	m.account(j, now)
	m.ended(j, now)
	m.settleDeps(j, completed, now)
	m.dispatch(now)
}

// account settles the attempt of j that ends at now, once j no longer
// runs: the charge is corrected from the estimate to the time used (the
// guess, if any, is settled) and the cost of its (type, ID) learnt.
func (m *Model) account(j *job, now int64) {
	dur := float64(now-j.start) / 1e6
	if j.kind != Reserved {
		m.charge(j.key.flows[j.typ.Tier], dur-j.est, -j.guess, j.w)
	}
	prev := m.estimate(j)
	m.costs[costID{j.typName, j.id}] = &cost{seconds: m.alpha*dur + (1-m.alpha)*prev, lastUsed: now}
}

// Fail ends the running job seq at now as Finish does, its last attempt
// failed, which counts for its type's disable policy.
func (m *Model) Fail(now int64, seq uint64) {
	if j := m.find(seq); j != nil {
		m.failed(j, now)
	}
	m.finish(now, seq, false)
}

// failed counts a failed attempt of j at now and disables its (type, ID)
// if that makes its type's Failures within Window.
func (m *Model) failed(j *job, now int64) {
	p := j.typ.Disable
	if p.Failures == 0 {
		return
	}
	id := costID{j.typName, j.id}
	var times []int64
	for _, at := range m.failures[id] {
		if at > now-p.Window.Microseconds() {
			times = append(times, at)
		}
	}
	times = append(times, now)
	if len(times) < p.Failures {
		m.failures[id] = times
		return
	}
	delete(m.failures, id)
	m.disabled[id] = 0
	if p.For > 0 {
		m.disabled[id] = now + p.For.Microseconds()
	}
}

// Retry ends the failed attempt of the running job seq at now, as Finish
// does, and puts the job back, delayed until notBefore: it keeps its
// number, its aging clock and its start deadline. The failure counts for
// its type's disable policy. Then it dispatches.
func (m *Model) Retry(now int64, seq uint64, notBefore int64) {
	j := m.find(seq)
	if j == nil || !j.running {
		panic("refmodel: Retry of a job that is not running")
	}
	m.failed(j, now)
	m.released(j)
	j.running, j.delayed, j.retry, j.notBefore, j.on = false, true, true, notBefore, ""

	m.standIfPaused(j, now)
	m.account(j, now)
	m.ended(j, now)
	m.dispatch(now)
}

// Cancel takes the pending job seq out of the queue at now and reports
// whether it was pending. Then it dispatches.
func (m *Model) Cancel(now int64, seq uint64) bool {
	j := m.find(seq)
	if j == nil || j.running {
		return false
	}
	m.drop(j, now)
	m.settleDeps(j, false, now)
	m.dispatch(now)
	return true
}

// drop takes out a job that did not start. One set aside was in no flow,
// so only its key's idleness follows.
func (m *Model) drop(j *job, now int64) {
	m.remove(j)
	m.unclaim(j)
	if !j.aside() {
		m.ended(j, now)
	} else if !m.busy(j.key) {
		j.key.idleSince = now
	}
}

// SetKeyWeight changes a key's weight from now on; charges already made
// are not rescaled. The key becomes configured. Then it dispatches.
func (m *Model) SetKeyWeight(now int64, name string, w float64) {
	k := m.keyToConfigure(now, name)
	k.cfg.Weight, k.configured = w, true
	m.dispatch(now)
}

// SetKey replaces a key's configuration from now on; the key becomes
// configured. It reports false, changing nothing, if the keys' MinSlots
// would add up to more than MaxConcurrency. Then it dispatches.
func (m *Model) SetKey(now int64, name string, c Key) bool {
	if m.cfg.MaxConcurrency > 0 {
		total := c.MinSlots
		for other, k := range m.keys {
			if other != name {
				total += k.cfg.MinSlots
			}
		}
		if total > m.cfg.MaxConcurrency {
			return false
		}
	}
	k := m.keyToConfigure(now, name)
	k.cfg, k.configured = resolve(c), true
	m.dispatch(now)
	return true
}

// keyToConfigure returns the key a configuration change applies to: a key
// unconfigured and idle for IdleTTL is as good as forgotten, so it is
// configured afresh, like a key never seen.
func (m *Model) keyToConfigure(now int64, name string) *key {
	k := m.keys[name]
	if k != nil && !k.configured && name != "" && !m.busy(k) && now-k.idleSince >= m.ttl {
		delete(m.keys, name)
		k = nil
	}
	if k == nil {
		k = m.newKey(name)
	}
	return k
}

// ResetKeys returns every key to the default configuration, unconfigured:
// a key with nothing pending or running is idle from now (unless it
// already was), and may be forgotten again. Virtual times are kept. Then
// it dispatches.
func (m *Model) ResetKeys(now int64) {
	for _, k := range m.keys {
		if k.configured && !m.busy(k) {
			k.idleSince = now
		}
		k.cfg, k.configured = m.defaultOf(k.name), false
	}
	m.dispatch(now)
}

// typeCap returns the cap in force on a job type's running jobs.
func (m *Model) typeCap(name string) int {
	t, _ := m.typeOf(name)
	return t.MaxConcurrency
}

// SetMaxConcurrency changes the number of slots and reports whether it
// did: not if the keys' MinSlots would add up to more. Then it dispatches.
func (m *Model) SetMaxConcurrency(now int64, n int) bool {
	if n > 0 {
		total := 0
		for _, k := range m.keys {
			total += k.cfg.MinSlots
		}
		if total > n {
			return false
		}
	}
	m.cfg.MaxConcurrency = n
	m.dispatch(now)
	return true
}

// SetTierLimit changes a tier's cap, then dispatches.
func (m *Model) SetTierLimit(now int64, tier, n int) {
	limits := map[int]int{}
	for t, c := range m.cfg.TierLimits {
		limits[t] = c
	}
	limits[tier] = n
	m.cfg.TierLimits = limits
	m.dispatch(now)
}

// SetTypeLimit changes a job type's cap and reports whether the type is
// registered, then dispatches.
func (m *Model) SetTypeLimit(now int64, name string, n int) bool {
	t, ok := m.typeOf(name)
	if !ok {
		return false
	}
	t.MaxConcurrency = n
	types := map[string]Type{}
	for k, v := range m.cfg.Types {
		types[k] = v
	}
	types[name] = t
	m.cfg.Types = types
	m.dispatch(now)
	return true
}

// ResetKey returns one key to its default, unconfigured, as ResetKeys does
// every key, then dispatches. A key it does not know is left unknown.
func (m *Model) ResetKey(now int64, name string) {
	if k := m.keys[name]; k != nil {
		if k.configured && !m.busy(k) {
			k.idleSince = now
		}
		k.cfg, k.configured = m.defaultOf(name), false
	}
	m.dispatch(now)
}

// ended applies what happens when a job leaves the pending and running
// set: its flow deactivates if it has nothing left, raising the tier's
// floor to the minimum settled V of the active flows including itself,
// and its key starts to idle.
func (m *Model) ended(j *job, now int64) {
	tier := j.typ.Tier
	if !m.active(j.key, tier) {
		v := j.key.flows[tier].settled()
		if w, ok := m.minSettled(tier); ok {
			v = min(v, w)
		}
		m.floor[tier] = max(m.floor[tier], v)
	}
	if !m.busy(j.key) {
		j.key.idleSince = now
	}
}

// TakeStarts returns the starts since the last call, in start order.
func (m *Model) TakeStarts() []Start {
	s := m.starts
	m.starts = nil
	return s
}

// Pending and Running count the jobs in each state.
func (m *Model) Pending() int { return m.count(func(j *job) bool { return !j.running }) }
func (m *Model) Running() int { return m.count(func(j *job) bool { return j.running }) }

// VirtualTimes returns the virtual time of every flow the model remembers.
func (m *Model) VirtualTimes() map[FlowID]float64 {
	out := map[FlowID]float64{}
	for _, k := range m.keys {
		for tier, f := range k.flows {
			out[FlowID{k.name, tier}] = f.v
		}
	}
	return out
}

// EstimateID names a cost estimate: a job type and a job ID.
type EstimateID struct{ Type, ID string }

// Estimates returns the learned cost estimates, in seconds.
func (m *Model) Estimates() map[EstimateID]float64 {
	out := map[EstimateID]float64{}
	for id, c := range m.costs {
		out[EstimateID{id.typ, id.id}] = c.seconds
	}
	return out
}

// dispatch starts the first admissible job by the order until there is
// none.
func (m *Model) dispatch(now int64) {
	for {
		j, kind, ok := m.pick(now)
		if !ok {
			return
		}
		m.start(j, kind, now)
	}
}

// sortKey places a pending job in one step of the order. Keys compare
// field by field; fields a step does not use are zero, and "highest first"
// fields are negated.
type sortKey struct {
	step  Kind    // Urgent, then Reserved, then Fair: highest Kind first
	a     int64   // urgent: -score (highest first); reserved: -deficit
	name  string  // reserved: the key's name
	tier  int     // reserved and fair: -tier
	v     float64 // fair: the flow's virtual time
	stamp uint64  // fair: the flow's stamp
	eff   int64   // reserved and fair: -effective priority
	seq   uint64  // oldest first
}

func (x sortKey) compare(y sortKey) int {
	return cmp.Or(
		cmp.Compare(y.step, x.step),
		cmp.Compare(x.a, y.a),
		cmp.Compare(x.name, y.name),
		cmp.Compare(x.tier, y.tier),
		cmp.Compare(x.v, y.v),
		cmp.Compare(x.stamp, y.stamp),
		cmp.Compare(x.eff, y.eff),
		cmp.Compare(x.seq, y.seq))
}

type candidate struct {
	j   *job
	key sortKey
}

// pick returns the first admissible job in the order of docs/design.md, The order.
// Every pending job is placed by fair share; an urgent one is also placed
// among the urgent jobs, and one of a key below its reservation among
// the reserved. All keys are computed at now, sorted, and the first
// admissible candidate wins.
func (m *Model) pick(now int64) (*job, Kind, bool) {
	order := m.candidates(now)
	u := m.usage()
	for _, c := range order {
		if !m.hasTokens(c.j, now) || !u.admits(m, c.j) {
			continue
		}
		if !m.hasReplica(c.j) {
			m.replicaHeld++
			continue
		}
		if m.takeResources(c.j, now) {
			return c.j, c.key.step, true
		}
	}
	return nil, Fair, false
}

// candidates places every pending job in the order, sorted: by fair
// share, and an urgent one also among the urgent jobs, one of a key below
// its reservation also among the reserved.
func (m *Model) candidates(now int64) []candidate {
	// How far each key is below its reservation: MinSlots minus its
	// running jobs that were started under it.
	deficit := map[*key]int{}
	for _, j := range m.jobs {
		if _, ok := deficit[j.key]; !ok {
			deficit[j.key] = j.key.cfg.MinSlots
		}
		if j.running && j.kind == Reserved {
			deficit[j.key]--
		}
	}
	var order []candidate
	for _, j := range m.jobs {
		if j.running || j.aside() {
			continue
		}
		eff := m.effective(j, now)
		// 1. Urgent: highest score first, then oldest.
		if m.urgent(j, now) {
			order = append(order, candidate{j, sortKey{step: Urgent, a: -m.scaledScore(j, now), seq: j.seq}})
		}
		// 2. Reservations: the key furthest below its MinSlots first, then
		// by name; within a key the highest tier, then the highest
		// effective priority, then the oldest.
		if d := deficit[j.key]; d > 0 {
			order = append(order, candidate{j, sortKey{step: Reserved, a: -int64(d), name: j.key.name,
				tier: -j.typ.Tier, eff: -eff, seq: j.seq}})
		}
		// 3. Fair share: the highest tier; within it the flow with the
		// lowest virtual time (ties to the earlier stamp); within the flow
		// the highest effective priority, then the oldest.
		f := j.key.flows[j.typ.Tier]
		order = append(order, candidate{j, sortKey{step: Fair, tier: -j.typ.Tier, v: f.v, stamp: f.stamp,
			eff: -eff, seq: j.seq}})
	}
	slices.SortFunc(order, func(x, y candidate) int { return x.key.compare(y.key) })
	return order
}

// usage counts the running jobs by what the hard limits cap.
type usage struct {
	all       int
	tier      map[int]int
	typ       map[string]int
	key       map[*key]int
	conflicts map[conflictID]bool // held
}

func (m *Model) usage() usage {
	u := usage{tier: map[int]int{}, typ: map[string]int{}, key: map[*key]int{}, conflicts: map[conflictID]bool{}}
	for _, r := range m.jobs {
		if !r.running {
			continue
		}
		u.all++
		u.tier[r.typ.Tier]++
		u.typ[r.typName]++
		u.key[r.key]++
		if g := r.typ.ConflictGroup; g != "" {
			u.conflicts[conflictID{g, r.id}] = true
		}
	}
	return u
}

// admits reports whether j passes every hard limit of docs/design.md, Hard limits.
func (u usage) admits(m *Model, j *job) bool {
	under := func(n, limit int) bool { return limit == 0 || n < limit }
	g := j.typ.ConflictGroup
	return under(u.all, m.cfg.MaxConcurrency) && under(u.tier[j.typ.Tier], m.cfg.TierLimits[j.typ.Tier]) &&
		under(u.typ[j.typName], m.typeCap(j.typName)) && under(u.key[j.key], j.key.cfg.MaxConcurrency) &&
		(g == "" || !u.conflicts[conflictID{g, j.id}])
}

// start gives j a slot. A job started under its key's reservation is not
// charged; any other is charged its estimated cost at the key's current
// weight.
func (m *Model) start(j *job, kind Kind, now int64) {
	j.running, j.kind, j.start = true, kind, now
	if m.replicated {
		j.on, _ = m.freeReplica(j)
	}
	j.end = now + micros(m.estimate(j))
	m.unclaim(j)
	m.takeTokens(j, now)
	if kind != Reserved {
		j.est, j.w, j.guess = m.estimate(j), j.key.cfg.Weight, 0
		f := j.key.flows[j.typ.Tier]
		if _, learned := m.costs[costID{j.typName, j.id}]; !learned {
			j.guess = j.est
		}
		m.charge(f, j.est, j.guess, j.w)
	}
	m.starts = append(m.starts, Start{Seq: j.seq, At: now, Kind: kind, Replica: j.on})
}

// estimate returns the learned cost of j's (type, ID) in seconds, or the
// default cost before the first observation.
func (m *Model) estimate(j *job) float64 {
	if c := m.costs[costID{j.typName, j.id}]; c != nil {
		return c.seconds
	}
	if j.typ.DefaultCost > 0 {
		return j.typ.DefaultCost.Seconds()
	}
	return m.defCost
}

// Aging, in integer arithmetic scaled by the interval I.

func (m *Model) agingOn() bool { return m.cfg.Aging.Step > 0 && m.cfg.Aging.Interval > 0 }

// scaledScore is the uncapped score times I: base while waited < G, then
// base + Step*(waited-G)/I.
func (m *Model) scaledScore(j *job, now int64) int64 {
	a := m.cfg.Aging
	i, g, waited := a.Interval.Microseconds(), a.GracePeriod.Microseconds(), now-j.sub
	if waited < g {
		return int64(j.base) * i
	}
	return int64(j.base)*i + int64(a.Step)*(waited-g)
}

// urgent reports whether j's uncapped score has reached the threshold: in
// its grace period too, when its base is at or above it.
func (m *Model) urgent(j *job, now int64) bool {
	a := m.cfg.Aging
	return m.agingOn() && a.UrgentThreshold > 0 &&
		m.scaledScore(j, now) >= int64(a.UrgentThreshold)*a.Interval.Microseconds()
}

// effective returns the effective priority, times I when aging is on: the
// score capped at MaxEffective, except that a base at or above the
// ceiling is kept.
func (m *Model) effective(j *job, now int64) int64 {
	if !m.agingOn() {
		return int64(j.base)
	}
	i := m.cfg.Aging.Interval.Microseconds()
	ceiling := int64(m.cfg.Aging.MaxEffective)
	if ceiling == 0 {
		ceiling = 100
	}
	if int64(j.base) >= ceiling {
		return int64(j.base) * i
	}
	return min(m.scaledScore(j, now), ceiling*i)
}

// Helpers over the job set.

func (m *Model) count(pred func(*job) bool) int {
	n := 0
	for _, j := range m.jobs {
		if pred(j) {
			n++
		}
	}
	return n
}

func (m *Model) find(seq uint64) *job {
	for _, j := range m.jobs {
		if j.seq == seq {
			return j
		}
	}
	return nil
}

func (m *Model) remove(j *job) {
	m.jobs = slices.DeleteFunc(m.jobs, func(x *job) bool { return x == j })
}

// busy reports whether k has pending or running jobs.
func (m *Model) busy(k *key) bool { return m.count(func(j *job) bool { return j.key == k }) > 0 }

// active reports whether the flow (k, tier) has pending or running jobs,
// the jobs set aside (delayed or paused) apart.
func (m *Model) active(k *key, tier int) bool {
	return m.count(func(j *job) bool { return j.key == k && j.typ.Tier == tier && !j.aside() }) > 0
}

// minSettled returns the lowest settled virtual time among the tier's
// active flows, or false if none is active.
func (m *Model) minSettled(tier int) (float64, bool) {
	v, ok := 0.0, false
	for _, j := range m.jobs {
		if j.typ.Tier == tier && !j.aside() {
			if f := j.key.flows[tier]; !ok || f.settled() < v {
				v, ok = f.settled(), true
			}
		}
	}
	return v, ok
}

// charge adds d slot-seconds at weight w to f's virtual time, of which
// guess are default-cost guesses (negative when they are settled). The
// guesses are added and taken back in the scheduler's order, and cleared
// when the flow runs nothing, so that both compute bit-identical floats.
func (m *Model) charge(f *flow, d, guess, w float64) {
	f.v += d / w
	f.guessed += guess / w
	if !m.running(f) {
		f.guessed = 0
	}
	m.restamp(f)
}

// running reports whether any job of flow f runs.
func (m *Model) running(f *flow) bool {
	for _, j := range m.jobs {
		if j.running && j.key.flows[j.typ.Tier] == f {
			return true
		}
	}
	return false
}

func (m *Model) restamp(f *flow) {
	m.stamp++
	f.stamp = m.stamp
}

// Raise raises the base priority of the waiting job seq to p (clamped),
// if that is higher: a duplicate joined it. Then it dispatches.
func (m *Model) Raise(now int64, seq uint64, p int) {
	if j := m.find(seq); j != nil && !j.running {
		j.base = max(j.base, clamp(p))
	}
	m.dispatch(now)
}
