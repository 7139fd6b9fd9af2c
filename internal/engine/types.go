package engine

import (
	"errors"
	"slices"
	"sort"
	"strconv"

	"github.com/fairsched/fairsched/internal/iheap"
)

// typeState is one registered job type.
type typeState struct {
	name     string
	cfg      Type
	tier     *tierState
	priority int     // default priority, clamped
	cost     float64 // default cost, seconds
	// typical is the moving average of the observed durations of all the
	// type's jobs, whatever their ID, from cost: for wait estimates only
	// (the order charges per (type, ID), docs/design.md, Fair share and cost).
	typical float64
	// blankCost is the learnt estimate for jobs without an ID, also in
	// the cost table's map; nil when there is none.
	blankCost *estimate
	running   int
	pending   int
	aside     int   // set aside (delayed, paused, blocked), not in pending
	limit     int   // cap on running jobs, 0: none; cfg.MaxConcurrency until SetTypeLimit
	paused    bool  // the type is paused (pause.go)
	pausedAt  int64 // when its pause began, while it is paused

	// lanes holds the ready lanes of this type (queued jobs, key below its
	// cap) in fair order: by their flow's virtual time, each filed at or
	// below its flow's place (charge), the first read with TopAt.
	lanes iheap.Keyed[*lane]
	// urgent holds this type's queued jobs that are or may become urgent,
	// in urgent order (urgent.go); kept only when jobs can become urgent.
	urgent urgentSet
	// openWaits and openFresh hold the attached wait lanes of this type
	// with aged waiters, by their most urgent one, and with waiters urgent
	// in their grace period, by their first one: the rest of the urgent
	// order.
	openWaits, openFresh iheap.Keyed[*waitLane]

	bucket bucket // its rate limit (ratelimit.go)
	needs  []need // units of resources its jobs need, by resource name (resources.go)
	// rgate holds its jobs bound to no replica that the order found with
	// no free replica to run on (replicas.go).
	rgate gate

	stats typeCounters

	// What only a pause reads.
	pausedJobs []*Job  // the jobs its pause set aside, Job.idx their positions
	all        []*lane // every lane of the type, lane.allIdx their positions

	// spare are the lanes of the type that idle keys offer to other keys,
	// the last offered last (spare.go), lane.spareIdx their positions.
	spare []*lane
}

func (t *typeState) atCap() bool {
	return t.limit > 0 && t.running >= t.limit
}

// closed reports whether the type is passed over: at its cap, or its
// token bucket empty.
func (t *typeState) closed() bool { return t.atCap() || t.bucket.empty }

// blocked reports whether a job of this type cannot start because of a type
// or tier cap, or the type's rate limit.
func (t *typeState) blocked() bool { return t.closed() || t.tier.atCap() }

// RegisterType registers a job type, valid. Registering a name again with
// the same configuration does nothing; with a different one it fails with
// an error and changes nothing.
func (e *Engine) RegisterType(name string, c Type) error { return e.registerType(name, c) }

func (e *Engine) registerType(name string, c Type) error {
	if t := e.types[name]; t != nil {
		switch {
		case sameType(t.cfg, c):
			return nil
		case name == "":
			return errors.New(`fairsched: job type "": the default job type is configured once, in Config.Types[""]`)
		}
		return errors.New("fairsched: job type " + strconv.Quote(name) + " is already registered with a different configuration")
	}
	var needs []need
	if len(c.Needs) > 0 {
		var unknown string
		if needs, unknown = e.resolveNeeds(c.Needs); unknown != "" {
			return errors.New("fairsched: job type " + strconv.Quote(name) + " needs resource " + strconv.Quote(unknown) + ", which Config.Resources does not have")
		}
	}
	t := &typeState{
		name:     name,
		cfg:      c,
		tier:     e.tierOf(c.Tier),
		priority: defaultPriority,
		limit:    c.MaxConcurrency,
		cost:     e.cfg.DefaultCost,
		lanes:    iheap.NewKeyed(func(l *lane, i int) { l.tyIdx = i }),
		urgent:   newUrgentSet(),
	}
	e.capped = e.capped || t.limit > 0
	t.openWaits = iheap.NewKeyed(func(w *waitLane, i int) { w.openIdx = i })
	t.openFresh = iheap.NewKeyed(func(w *waitLane, i int) { w.freshIdx = i })
	t.needs = needs
	t.bucket = bucket{idx: -1, typ: t}
	if c.Rate.Period > 0 {
		e.setRate(&t.bucket, c.Rate, 0)
	}
	if c.DefaultPriority != 0 {
		t.priority = clampPriority(c.DefaultPriority)
	}
	if c.DefaultCost > 0 {
		t.cost = c.DefaultCost
	}
	t.typical = t.cost
	t.tier.types = append(t.tier.types, t)
	sort.Slice(t.tier.types, func(i, j int) bool { return t.tier.types[i].name < t.tier.types[j].name })
	e.types[name] = t
	return nil
}

// tierOf returns tier level, creating it; tiers are kept highest first.
func (e *Engine) tierOf(level int) *tierState {
	for _, t := range e.tiers {
		if t.level == level {
			return t
		}
	}
	t := &tierState{
		level:  level,
		limit:  e.cfg.TierLimits[level],
		active: iheap.NewKeyed(func(f *flow, i int) { f.actIdx = i }),
	}
	e.capped = e.capped || t.limit > 0
	e.tiers = append(e.tiers, t)
	sort.Slice(e.tiers, func(i, j int) bool { return e.tiers[i].level > e.tiers[j].level })
	return t
}

// defaultPriority is the priority of a job that sets none, of a type that
// sets none.
const defaultPriority = 50

// sameType reports whether two type configurations are the same.
func sameType(a, b Type) bool {
	return a.Tier == b.Tier && a.MaxConcurrency == b.MaxConcurrency && a.ConflictGroup == b.ConflictGroup &&
		a.DefaultCost == b.DefaultCost && a.DefaultPriority == b.DefaultPriority &&
		a.StartTimeout == b.StartTimeout && a.Rate == b.Rate && slices.Equal(a.Needs, b.Needs)
}
