package fairsched

import (
	"fmt"
	"strings"
	"time"
)

// report describes a failed run: the error, the workload as Go source (to
// paste into TestDifferentialRegressions), the events and both sequences.
func (r *diffRunner) report(err error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v\n\nworkload:\n%s\n\nevents:\n", err, r.orig.goString())
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
	field("Resources", c.Resources, len(c.Resources) == 0)
	field("BackfillLookahead", c.BackfillLookahead, c.BackfillLookahead == 0)
	b.WriteString("\t},\n\tJobs: []diffJob{\n")
	for i, j := range w.Jobs {
		var times string
		if j.Delay > 0 {
			times += fmt.Sprintf(", Delay: %d * diffUnit", j.Delay/diffUnit)
		}
		if j.StartWithin > 0 {
			times += fmt.Sprintf(", StartWithin: %d * diffUnit", j.StartWithin/diffUnit)
		}
		if j.Fails > 0 {
			times += fmt.Sprintf(", Fails: %d", j.Fails)
		}
		if len(j.After) > 0 {
			times += fmt.Sprintf(", After: %#v", j.After)
		}
		if j.Batch != 0 {
			times += fmt.Sprintf(", Batch: %d", j.Batch)
		}
		if j.Replica != "" {
			times += fmt.Sprintf(", Replica: %q", j.Replica)
		}
		needs := ""
		if j.Job.Needs != nil {
			needs = fmt.Sprintf(", Needs: %#v", j.Job.Needs)
		}
		fmt.Fprintf(&b, "\t\t{Job: Job{Type: %q, ID: %q, Key: %q, Priority: %d%s}, At: %d * diffUnit, Dur: %d * diffUnit, CancelAt: %s%s}, // j%d\n",
			j.Job.Type, j.Job.ID, j.Job.Key, j.Job.Priority, needs, j.At/diffUnit, j.Dur/diffUnit, diffUnitsString(j.CancelAt), times, i)
	}
	b.WriteString("\t},\n")
	if len(w.Changes) > 0 {
		b.WriteString("\tChanges: []diffKeyChange{\n")
		for _, c := range w.Changes {
			switch {
			case c.Reset:
				fmt.Fprintf(&b, "\t\t{At: %d * diffUnit, Reset: true},\n", c.At/diffUnit)
			case c.Limit != nil:
				fmt.Fprintf(&b, "\t\t{At: %d * diffUnit, Limit: %s},\n", c.At/diffUnit, c.Limit.goString())
			case c.Replica != nil:
				fmt.Fprintf(&b, "\t\t{At: %d * diffUnit, Replica: &%s},\n", c.At/diffUnit, c.Replica.goString())
			case c.Resource != nil:
				fmt.Fprintf(&b, "\t\t{At: %d * diffUnit, Resource: &diffResource{%q, %d}},\n", c.At/diffUnit, c.Resource.Name, c.Resource.N)
			case c.Pause != nil:
				fmt.Fprintf(&b, "\t\t{At: %d * diffUnit, Key: %q, Pause: %s},\n", c.At/diffUnit, c.Key, c.Pause.goString())
			case c.ResetKey:
				fmt.Fprintf(&b, "\t\t{At: %d * diffUnit, Key: %q, ResetKey: true},\n", c.At/diffUnit, c.Key)
			case c.Set != nil:
				fmt.Fprintf(&b, "\t\t{At: %d * diffUnit, Key: %q, Set: &%s},\n", c.At/diffUnit, c.Key,
					strings.ReplaceAll(fmt.Sprintf("%#v", *c.Set), "fairsched.", ""))
			default:
				fmt.Fprintf(&b, "\t\t{At: %d * diffUnit, Key: %q, Weight: %v},\n", c.At/diffUnit, c.Key, c.Weight)
			}
		}
		b.WriteString("\t},\n")
	}
	if len(w.Replicas) > 0 {
		b.WriteString("\tReplicas: []diffReplica{\n")
		for _, r := range w.Replicas {
			fmt.Fprintf(&b, "\t\t%s,\n", r.goString())
		}
		b.WriteString("\t},\n")
	}
	if p := w.Periodic; p != nil {
		fmt.Fprintf(&b, "\tPeriodic: &diffPeriodic{Job: Job{Key: %q, ID: %q, Priority: %d}, Start: %d * diffUnit, Every: %d * diffUnit, Dur: %d * diffUnit, Stop: %d * diffUnit},\n",
			p.Job.Key, p.Job.ID, p.Job.Priority, p.Start/diffUnit, p.Every/diffUnit, p.Dur/diffUnit, p.Stop/diffUnit)
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
