package fairsched

import (
	"errors"
	"fmt"
	"sort"

	"github.com/fairsched/fairsched/internal/iheap"
)

// ErrUnknownType is returned, wrapped with the type's name, for a job whose
// type was never registered.
var ErrUnknownType = errors.New("fairsched: unknown job type")

// typeState is one registered job type.
type typeState struct {
	name     string
	cfg      TypeConfig
	tier     *tierState
	priority int     // default priority, clamped
	cost     float64 // default cost, seconds
	// blankCost is the learnt estimate for jobs without an ID, also in
	// the cost table's map; nil when there is none.
	blankCost *estimate
	running   int
	pending   int

	// lanes holds the ready lanes of this type (queued jobs, key below its
	// cap) in fair order: by their flow's virtual time.
	lanes iheap.Keyed[*lane]
	// aged holds this type's queued jobs past their grace period in urgent
	// order; kept only when jobs can become urgent.
	aged iheap.Keyed[*job]

	stats typeCounters
}

func (t *typeState) atCap() bool {
	return t.cfg.MaxConcurrency > 0 && t.running >= t.cfg.MaxConcurrency
}

// blocked reports whether a job of this type cannot start because of a type
// or tier cap.
func (t *typeState) blocked() bool { return t.atCap() || t.tier.atCap() }

// RegisterType registers a job type. Registering a name again with the same
// configuration does nothing; with a different one it fails with an error
// and changes nothing (types are part of the scheduler's shape, so change
// them by building a new Scheduler).
func (s *Scheduler) RegisterType(name string, c TypeConfig) error {
	if err := c.validate(name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return s.registerTypeLocked(name, c)
}

func (s *Scheduler) registerTypeLocked(name string, c TypeConfig) error {
	if t := s.types[name]; t != nil {
		switch {
		case t.cfg == c:
			return nil
		case name == "":
			return errors.New(`fairsched: job type "": the default job type cannot be configured; give the type a name`)
		}
		return fmt.Errorf("fairsched: job type %q is already registered with a different configuration", name)
	}
	t := &typeState{
		name:     name,
		cfg:      c,
		tier:     s.tierLocked(c.Tier),
		priority: PriorityNormal,
		cost:     s.defaultCost,
		lanes:    iheap.NewKeyed(func(l *lane, i int) { l.tyIdx = i }),
		aged:     iheap.NewKeyed(jobSetUIdx),
	}
	if c.DefaultPriority != 0 {
		t.priority = clampPriority(c.DefaultPriority)
	}
	if c.DefaultCost > 0 {
		t.cost = c.DefaultCost.Seconds()
	}
	t.tier.types = append(t.tier.types, t)
	sort.Slice(t.tier.types, func(i, j int) bool { return t.tier.types[i].name < t.tier.types[j].name })
	s.types[name] = t
	return nil
}

// tierLocked returns tier level, creating it; tiers are kept highest first.
func (s *Scheduler) tierLocked(level Tier) *tierState {
	for _, t := range s.tiers {
		if t.level == level {
			return t
		}
	}
	t := &tierState{
		level:  level,
		limit:  s.cfg.TierLimits[level],
		active: iheap.NewKeyed(func(f *flow, i int) { f.actIdx = i }),
	}
	s.tiers = append(s.tiers, t)
	sort.Slice(s.tiers, func(i, j int) bool { return s.tiers[i].level > s.tiers[j].level })
	return t
}

func (s *Scheduler) typeLocked(name string) (*typeState, error) {
	if t := s.types[name]; t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownType, name)
}
