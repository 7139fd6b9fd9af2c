package fairsched

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/rt"
)

// Tier is a coarse class of service. Work of a higher tier is always
// considered before work of a lower one; each tier may have a concurrency
// cap (Config.TierLimits). Any int is a valid tier.
type Tier int

// The two tiers most services need.
const (
	Background Tier = 0
	Foreground Tier = 1
)

// String returns "background" or "foreground" for those two tiers, and
// the number for any other: the tier label of the Prometheus metrics.
func (t Tier) String() string {
	switch t {
	case Background:
		return "background"
	case Foreground:
		return "foreground"
	}
	return strconv.Itoa(int(t))
}

// TypeConfig configures a job type. The zero value is a type in the
// Background tier with no cap, no conflict group, the scheduler's default
// cost and priority.
type TypeConfig struct {
	// Tier of every job of this type.
	Tier Tier
	// MaxConcurrency caps the running jobs of this type; 0 means no cap.
	MaxConcurrency int
	// ConflictGroup, when not empty, makes two jobs of types in the same
	// group and with the same ID mutually exclusive: they never run at the
	// same time. Groups match exactly; a name with a leading or trailing
	// space, or not valid UTF-8, is refused.
	ConflictGroup string
	// DefaultCost is the estimated slot time of a job of this type before
	// its (type, ID) has been observed; 0 means Config.DefaultCost. Fair
	// share charges a key this much when such a job starts and corrects the
	// charge to the time the job took when it ends, so a default far from
	// the truth skews shares only while jobs run; set it near the type's
	// usual duration (milliseconds for HTTP requests, not the one second of
	// Config.DefaultCost). It stays the estimate of every (type, ID) not
	// yet observed, whatever the type's other IDs took: the order's costs
	// are learned per (type, ID) only. Wait estimates (EstimateWait) use
	// the type's typical duration instead, learned from all its jobs
	// from this value on.
	DefaultCost time.Duration
	// DefaultPriority is used for jobs that set no priority; 0 means
	// PriorityNormal, negative means 0.
	DefaultPriority int
	// StartTimeout is the start deadline of the type's jobs, counted from
	// submission: a job not started that long after it was submitted ends
	// with an error matching ErrStartDeadline (see Job.StartBy, which may
	// set an earlier one). 0 means none.
	StartTimeout time.Duration
	// Retry says how failed attempts are retried; the zero value: never.
	Retry RetryPolicy
	// Rate limits how fast the type's jobs start; the zero value: no limit.
	Rate RateLimit
	// Duplicates says what a submission does when a job of the same type
	// and ID waits already: run as a job of its own (the zero value), or
	// Supersede it.
	Duplicates DuplicatePolicy
	// Needs are the units of named resources (Config.Resources) each of
	// its jobs needs while it runs; a job's own Job.Needs replace them.
	Needs map[string]int
	// Disable turns away a (type, ID) pair whose attempts keep failing;
	// the zero value: never.
	Disable DisablePolicy
}

// KeyConfig configures a fairness key. The zero value means the defaults:
// weight 1, no reservation, no cap, no pending limit.
type KeyConfig struct {
	// Weight is the key's relative share of capacity within a tier; 0 means
	// 1. Otherwise it must be at least MinWeight.
	Weight float64
	// MinSlots is a reservation: up to this many of the key's jobs start
	// ahead of fair share and are not charged to its fair-share clock.
	MinSlots int
	// MaxConcurrency caps the key's running jobs; 0 means no cap.
	MaxConcurrency int
	// MaxPending caps the key's queued jobs; a Submit or RunSync past it
	// fails with ErrQueueFull for this key only. 0 means no limit.
	MaxPending int
	// Rate limits how fast the key's jobs start; the zero value: no limit.
	Rate RateLimit
}

// AgingConfig raises the priority of waiting jobs so that none starves.
// Aging is off when Step or Interval is zero.
//
// A job's score after waiting w is its base priority while w < GracePeriod,
// then base + Step*(w-GracePeriod)/Interval, continuous in time. Its
// effective priority, which orders work within a key, is
//
//	max(base, min(score, MaxEffective))
//
// the score capped at MaxEffective: the ceiling caps what aging adds, and
// never lowers a base above it. A job whose uncapped score reaches
// UrgentThreshold is urgent, and so is a job whose base priority is at or
// above it, from its submission, grace period or not: urgent jobs go
// before tiers, weights and reservations, never past a hard limit,
// highest score first, then the oldest. Every job therefore starts within
//
//	GracePeriod + (UrgentThreshold - base)/Step*Interval
//
// (nothing, for a base at or above the threshold) plus the time for a
// slot it can use to free, as long as urgent work does not pile up faster
// than it is served (urgent jobs go by score, so an urgent job of higher
// priority goes first); bound the queue with MaxQueue or MaxPending for
// the guarantee to hold under overload.
type AgingConfig struct {
	// GracePeriod is how long a job waits before it starts to age.
	GracePeriod time.Duration
	// Interval and Step: the score rises by Step every Interval.
	Interval time.Duration
	Step     int
	// MaxEffective is the ceiling of the effective priority; 0 means 100.
	MaxEffective int
	// UrgentThreshold is the score at which a job becomes urgent; 0 means
	// jobs never become urgent (and the starvation bound does not hold
	// across keys and tiers). A job whose base priority is at or above it
	// is urgent from its submission, in its grace period too: it goes
	// before tiers, weights and reservations at once. It may exceed 100,
	// and usually should, unless that is wanted: above 100, only jobs
	// that have waited longer than their grace period become urgent.
	UrgentThreshold int
}

// Enabled reports whether aging is on.
func (a AgingConfig) Enabled() bool { return a.Step != 0 && a.Interval != 0 }

// MaxWait returns the longest time a job of priority base waits before it
// is urgent (0 for a base at or above UrgentThreshold), or false if no job
// ever becomes urgent under this config.
func (a AgingConfig) MaxWait(base int) (time.Duration, bool) {
	if !a.Enabled() || a.UrgentThreshold == 0 {
		return 0, false
	}
	base = clampPriority(base)
	steps := a.UrgentThreshold - base
	if steps <= 0 {
		return 0, true // urgent from its submission
	}
	// Ceiling division: the job is urgent once the whole step is reached.
	d := time.Duration((int64(steps)*int64(a.Interval) + int64(a.Step) - 1) / int64(a.Step))
	return a.GracePeriod + d, true
}

// Clock is the scheduler's time source: it reads the time and runs a
// function at a time. Durations are measured between its readings, so it
// must never run backwards. AfterFunc runs f once d has passed (on a
// goroutine of the clock's, as time.AfterFunc does, or, for a test clock,
// when the test moves time past it) and returns a function that cancels it
// and reports whether it did so before f started, as context.AfterFunc's
// stop does.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Config configures a Scheduler. Every field is optional; the zero Config is
// a scheduler with no limits at all, in which every job starts at once.
type Config struct {
	// MaxConcurrency is the number of slots: no job starts while as many
	// run. 0 means no global limit. SetMaxConcurrency changes it at run
	// time.
	MaxConcurrency int
	// MaxQueue bounds the pending jobs. A submission past it fails with
	// ErrQueueFull and changes nothing. 0 means unlimited.
	MaxQueue int
	// TierLimits caps the running jobs of a tier. Caps are not
	// reservations: capacity another tier leaves idle is used.
	TierLimits map[Tier]int
	// Types registers job types at construction; see also RegisterType.
	// Names must be valid UTF-8 (they are metric labels). The default
	// type "", of jobs that name none, is always there: with the zero
	// TypeConfig (the Background tier), or with Types[""] if it is set.
	// Requests are foreground work: give them a type of their own in the
	// Foreground tier and name it in their jobs (fairschedhttp's
	// middleware does, with fairschedhttp.RequestType), rather than move
	// the default type, and with it the service's unnamed background
	// work, to the foreground.
	Types map[string]TypeConfig
	// Resources gives named resources their capacities in units; job
	// types (TypeConfig.Needs) and jobs (Job.Needs) need units of them,
	// and a job starts only when all its units are free. The units are
	// held for the first job in order that is short of them, and a
	// smaller job behind it may use them only if, by its estimated cost,
	// it ends before the held job could start (backfill): a job let past
	// that runs longer than its estimate delays the held job by at most
	// that overrun. Backfill looks past up to BackfillLookahead jobs
	// that may not use the held units. See SetResource.
	Resources map[string]int
	// BackfillLookahead is how far backfill looks past the waiting jobs
	// that cannot use a resource's held units: up to this many of them
	// per resource are passed over, and the jobs behind them tried,
	// before the rest wait for units of it to be released. 0 means
	// DefaultBackfillLookahead; a negative number passes over none, so
	// the first job that cannot use the units stops the others. A larger
	// one leaves held units idle less often, for more work at each
	// release of units: O(BackfillLookahead log n).
	BackfillLookahead int
	// Keys configures fairness keys by name. Configured keys may carry
	// reservations and are never forgotten, until ResetKey or ResetKeys
	// unconfigures them. Keys[""] configures the empty key, of jobs that
	// name none: usually the service's own background work.
	Keys map[string]KeyConfig
	// DefaultKey is the configuration of every non-empty key not in Keys:
	// the clients, typically. It does not apply to the empty key, whose
	// configuration is Keys[""], or the zero KeyConfig (weight 1, no cap,
	// no pending limit) if that is not set: a DefaultKey.MaxPending meant
	// for one client's flood does not bound the service's own work.
	// DefaultKey may not reserve slots.
	DefaultKey KeyConfig
	// Aging configures priority aging; off by default.
	Aging AgingConfig
	// CostAlpha is the smoothing factor of the cost estimates, in (0, 1];
	// 0 means 0.3. A new observation o moves an estimate e to
	// CostAlpha*o + (1-CostAlpha)*e.
	CostAlpha float64
	// DefaultCost is the cost of a job whose type sets none and whose
	// (type, ID) has not been observed; 0 means one second, which suits
	// background work better than requests: see TypeConfig.DefaultCost.
	DefaultCost time.Duration
	// IdleTTL is how long the scheduler remembers an idle fairness key
	// (its virtual time) and a cost estimate that has not been used; 0
	// means ten minutes. Configured keys are never forgotten.
	IdleTTL time.Duration
	// Clock is the time source; nil means the system clock. Tests may give
	// a fairschedtest.Clock, which moves only when told to.
	Clock Clock
	// OnEvent, if set, receives every Event, on a goroutine of the
	// scheduler's, never under its lock; see Event.
	OnEvent func(Event)
	// EventBuffer is how many events may wait for OnEvent before further
	// ones are dropped (and counted in Stats.EventsDropped); 0 means 4096.
	EventBuffer int
	// Logger receives the scheduler's own rare messages; nil means none.
	Logger *slog.Logger
	// DeadJobs is how many dead jobs (Submit jobs that failed for good)
	// the scheduler keeps for DeadJobs and RetryDead, the oldest dropped
	// first; 0 means 100, and a negative number keeps none.
	DeadJobs int
	// Store keeps durable jobs (Enqueue) so that they survive a restart:
	// New gives back every unfinished job the store holds. nil: no
	// durable jobs. The Scheduler does not close it.
	Store Store
	// Handlers are the handlers of the durable job types (AddHandler);
	// they need a Store. A type of theirs that Types does not name is
	// registered with the zero TypeConfig.
	Handlers *Handlers
	// Replica, if set, makes the scheduler one replica of several that
	// share Store's database and behave as one scheduler (see Replica).
	// nil: the scheduler is alone.
	Replica *Replica

	signals *rt.Signals // the package's tests only
}

// validate reports the first problem with c in plain English, or nil.
func (c *Config) validate() error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("fairsched: "+format, args...))
	}
	if c.MaxConcurrency < 0 {
		add("MaxConcurrency is %d; it must be 0 (no limit) or positive", c.MaxConcurrency)
	}
	if c.MaxQueue < 0 {
		add("MaxQueue is %d; it must be 0 (unlimited) or positive", c.MaxQueue)
	}
	for _, t := range sortedTiers(c.TierLimits) {
		if n := c.TierLimits[t]; n < 0 {
			add("TierLimits[%d] is %d; a tier cap must be 0 (no cap) or positive", t, n)
		}
	}
	for _, name := range sortedKeys(c.Types) {
		if err := c.Types[name].validate(name); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, c.validateResources()...)
	reserved := 0
	for _, name := range sortedKeys(c.Keys) {
		kc := c.Keys[name]
		if err := kc.validate(fmt.Sprintf("Keys[%q]", name)); err != nil {
			errs = append(errs, err)
		}
		reserved += kc.MinSlots
	}
	if err := c.DefaultKey.validate("DefaultKey"); err != nil {
		errs = append(errs, err)
	}
	if c.DefaultKey.MinSlots != 0 {
		add("DefaultKey.MinSlots is %d; reservations are only for keys named in Keys", c.DefaultKey.MinSlots)
	}
	if c.MaxConcurrency > 0 && reserved > c.MaxConcurrency {
		add("the keys' MinSlots add up to %d, more than MaxConcurrency %d", reserved, c.MaxConcurrency)
	}
	if err := c.Aging.validate(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.validateCosts()...)
	if c.EventBuffer < 0 {
		add("EventBuffer is %d; it must not be negative", c.EventBuffer)
	}
	durable := c.Handlers != nil && len(c.Handlers.m) > 0
	if durable && c.Store == nil {
		add("Handlers are set without a Store: durable jobs need one")
	}
	if c.Replica != nil {
		if err := c.Replica.validate(c.Store); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (tc TypeConfig) validate(name string) error {
	var errs []error
	if !utf8.ValidString(name) {
		errs = append(errs, fmt.Errorf("fairsched: job type %q: the name is not valid UTF-8", name))
	}
	if tc.MaxConcurrency < 0 {
		errs = append(errs, fmt.Errorf("fairsched: job type %q: MaxConcurrency is %d; it must be 0 (no cap) or positive", name, tc.MaxConcurrency))
	}
	if err := validateConflictGroup(name, tc.ConflictGroup); err != nil {
		errs = append(errs, err)
	}
	if tc.DefaultCost < 0 {
		errs = append(errs, fmt.Errorf("fairsched: job type %q: DefaultCost is %v; it must not be negative", name, tc.DefaultCost))
	}
	if tc.StartTimeout < 0 {
		errs = append(errs, fmt.Errorf("fairsched: job type %q: StartTimeout is %v; it must be 0 (none) or positive", name, tc.StartTimeout))
	}
	if err := tc.Retry.validate(name); err != nil {
		errs = append(errs, err)
	}
	if err := tc.Disable.validate(name); err != nil {
		errs = append(errs, err)
	}
	if err := tc.Rate.validate(fmt.Sprintf("job type %q", name)); err != nil {
		errs = append(errs, err)
	}
	if err := validateNeeds(fmt.Sprintf("job type %q", name), tc.Needs); err != nil {
		errs = append(errs, err)
	}
	if tc.Duplicates > JoinRunning {
		errs = append(errs, fmt.Errorf("fairsched: job type %q: Duplicates is %d, not a DuplicatePolicy", name, tc.Duplicates))
	}
	return errors.Join(errs...)
}

func (kc KeyConfig) validate(what string) error {
	var errs []error
	if kc.Weight != 0 {
		if problem := weightProblem(kc.Weight); problem != "" {
			errs = append(errs, fmt.Errorf("fairsched: %s.Weight is %v; it %s (or 0 for the default 1)", what, kc.Weight, problem))
		}
	}
	if kc.MinSlots < 0 {
		errs = append(errs, fmt.Errorf("fairsched: %s.MinSlots is %d; it must not be negative", what, kc.MinSlots))
	}
	if kc.MaxConcurrency < 0 {
		errs = append(errs, fmt.Errorf("fairsched: %s.MaxConcurrency is %d; it must be 0 (no cap) or positive", what, kc.MaxConcurrency))
	}
	if kc.MaxConcurrency > 0 && kc.MinSlots > kc.MaxConcurrency {
		errs = append(errs, fmt.Errorf("fairsched: %s.MinSlots %d is more than its MaxConcurrency %d", what, kc.MinSlots, kc.MaxConcurrency))
	}
	if kc.MaxPending < 0 {
		errs = append(errs, fmt.Errorf("fairsched: %s.MaxPending is %d; it must be 0 (no limit) or positive", what, kc.MaxPending))
	}
	if err := kc.Rate.validate(what); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (a AgingConfig) validate() error {
	if a == (AgingConfig{}) {
		return nil
	}
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("fairsched: Aging."+format, args...))
	}
	switch {
	case a.Step == 0 && a.Interval != 0:
		add("Interval is set but Step is 0; set both to age, or neither")
	case a.Step != 0 && a.Interval == 0:
		add("Step is set but Interval is 0; set both to age, or neither")
	}
	if a.Step < 0 || a.Step > 100 {
		add("Step is %d; it must be between 1 and 100", a.Step)
	}
	if a.Interval < 0 || (a.Interval > 0 && a.Interval < time.Microsecond) {
		add("Interval is %v; it must be at least 1µs", a.Interval)
	}
	if a.GracePeriod < 0 {
		add("GracePeriod is %v; it must not be negative", a.GracePeriod)
	}
	if a.MaxEffective < 0 || a.MaxEffective > 100 {
		add("MaxEffective is %d; it must be between 1 and 100 (0 means 100)", a.MaxEffective)
	}
	if a.UrgentThreshold < 0 || a.UrgentThreshold > 10000 {
		add("UrgentThreshold is %d; it must be between 1 and 10000 (0 means never urgent)", a.UrgentThreshold)
	}
	if !a.Enabled() && (a.MaxEffective != 0 || a.UrgentThreshold != 0 || a.GracePeriod != 0) && len(errs) == 0 {
		add("is partly set but Step and Interval are 0, so nothing would age")
	}
	return errors.Join(errs...)
}

// weightProblem says what is wrong with a key weight, or "" if nothing.
func weightProblem(w float64) string {
	switch {
	case !(w > 0) || math.IsInf(w, 0):
		return "must be positive"
	case w < MinWeight:
		return fmt.Sprintf("must be at least %v", MinWeight)
	}
	return ""
}

// MinWeight is the smallest weight a key may have. A key's virtual time
// grows by cost/weight; below this, one job could push it past any other
// key's for good, or, for tiny enough weights, to infinity.
const MinWeight = 1e-9

func clampPriority(p int) int {
	switch {
	case p < 0:
		return 0
	case p > 100:
		return 100
	}
	return p
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedTiers(m map[Tier]int) []Tier {
	out := make([]Tier, 0, len(m))
	for t := range m {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// engine returns the configuration the engine decides with, defaults
// resolved. c is valid.
func (c *Config) engine() engine.Config {
	ec := engine.Config{
		DefaultType:    c.Types[""].engine(),
		MaxConcurrency: c.MaxConcurrency,
		MaxQueue:       c.MaxQueue,
		TierLimits:     make(map[int]int, len(c.TierLimits)),
		Keys:           make(map[string]engine.Key, len(c.Keys)),
		DefaultKey:     c.DefaultKey.engine(),
		Aging:          c.Aging.engine(),

		Resources: c.Resources,
	}
	for t, n := range c.TierLimits {
		ec.TierLimits[int(t)] = n
	}
	for name, kc := range c.Keys {
		ec.Keys[name] = kc.engine()
	}
	ec.CostAlpha, ec.DefaultCost, ec.IdleTTL = c.costs()
	switch {
	case c.BackfillLookahead == 0:
		ec.BackfillLookahead = DefaultBackfillLookahead
	case c.BackfillLookahead > 0:
		ec.BackfillLookahead = c.BackfillLookahead
	} // negative: none
	return ec
}

// engine returns the type's configuration for the engine.
func (tc TypeConfig) engine() engine.Type {
	return engine.Type{
		Tier:            int(tc.Tier),
		MaxConcurrency:  tc.MaxConcurrency,
		ConflictGroup:   tc.ConflictGroup,
		DefaultCost:     tc.DefaultCost.Seconds(),
		DefaultPriority: tc.DefaultPriority,
		StartTimeout:    tc.StartTimeout.Microseconds(),
		Rate:            tc.Rate.engine(),
		Needs:           rt.EngineNeeds(tc.Needs),
	}
}

// engine returns the aging configuration for the engine, in µs.
func (a AgingConfig) engine() engine.Aging {
	return engine.Aging{
		GracePeriod:     a.GracePeriod.Microseconds(),
		Interval:        a.Interval.Microseconds(),
		Step:            a.Step,
		MaxEffective:    a.MaxEffective,
		UrgentThreshold: a.UrgentThreshold,
	}
}

// runtime returns the configuration of the run-time layer: c, valid,
// with its defaults resolved.
func (c *Config) runtime() rt.Config {
	rc := rt.Config{
		Engine:      c.engine(),
		Types:       make(map[string]rt.TypeConfig, len(c.Types)),
		Clock:       c.Clock,
		EventBuffer: c.EventBuffer,
		Logger:      c.Logger,
		DeadJobs:    c.DeadJobs,
		Store:       c.Store,
		Errors:      runtimeErrors,
		Signals:     c.signals,
	}
	for name, tc := range c.Types {
		rc.Types[name] = tc.runtime()
	}
	if c.Replica != nil { // the Store is the replicas' meeting place, and their durable jobs'
		rc.Cluster = c.Replica.cluster(c.Store, c.Logger)
	}
	if c.Handlers != nil {
		rc.Handlers = c.Handlers.m
	}
	if hook := c.OnEvent; hook != nil {
		rc.OnEvent = func(e rt.Event) { hook(eventOf(&e)) }
	}
	return rc
}

// runtime returns the type's configuration for the run-time layer.
func (tc TypeConfig) runtime() rt.TypeConfig {
	return rt.TypeConfig{
		Engine:     tc.engine(),
		Retry:      rt.RetryPolicy(tc.Retry),
		Disable:    rt.DisablePolicy(tc.Disable),
		Duplicates: rt.DuplicatePolicy(tc.Duplicates),
	}
}
