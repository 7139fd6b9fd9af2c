package fairsched

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"time"
)

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
		edit(func(c *diffWorkload) { c.deleteJob(i) })
	}
	for i, j := range w.Jobs {
		if len(j.After) > 0 {
			edit(func(c *diffWorkload) { c.Jobs[i].After = nil })
		}
		if j.Batch != 0 {
			edit(func(c *diffWorkload) { c.Jobs[i].Batch = 0 })
		}
	}
	for i := range w.Changes {
		edit(func(c *diffWorkload) { c.Changes = slices.Delete(c.Changes, i, i+1) })
	}
	for i := range w.Replicas {
		edit(func(c *diffWorkload) { c.Replicas = slices.Delete(c.Replicas, i, i+1) })
	}
	for i, j := range w.Jobs {
		if j.Replica != "" {
			edit(func(c *diffWorkload) { c.Jobs[i].Replica = "" })
		}
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
			if !reflect.DeepEqual(z, tc) {
				edit(func(c *diffWorkload) { c.Cfg.Types[name] = z })
			}
		}
	}
	if w.Periodic != nil {
		edit(func(c *diffWorkload) { c.Periodic = nil })
		if w.Periodic.Stop > w.Periodic.Start {
			edit(func(c *diffWorkload) { c.Periodic.Stop -= diffUnit })
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
	c := &diffWorkload{Cfg: w.Cfg, Jobs: slices.Clone(w.Jobs), Changes: slices.Clone(w.Changes), Replicas: slices.Clone(w.Replicas)}
	if w.Periodic != nil {
		p := *w.Periodic
		c.Periodic = &p
	}
	c.Cfg.TierLimits = maps.Clone(w.Cfg.TierLimits)
	c.Cfg.Resources = maps.Clone(w.Cfg.Resources)
	c.Cfg.Types = maps.Clone(w.Cfg.Types)
	c.Cfg.Keys = maps.Clone(w.Cfg.Keys)
	return c
}

// deleteJob deletes job i; the jobs that ran after it no longer do, and
// the indices of the jobs after it move down by one.
func (w *diffWorkload) deleteJob(i int) {
	w.Jobs = slices.Delete(w.Jobs, i, i+1)
	for k := range w.Jobs {
		var after []int
		for _, a := range w.Jobs[k].After {
			switch {
			case a < i:
				after = append(after, a)
			case a > i:
				after = append(after, a-1)
			}
		}
		w.Jobs[k].After = after
	}
}

// goString renders the workload as a Go expression of this package.
