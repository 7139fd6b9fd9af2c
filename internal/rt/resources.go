package rt

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/fairsched/fairsched/internal/engine"
)

// Named resources (Config.Resources) are a hard limit like the caps
// (docs/design.md, Named resources): a pool of units, such as database
// connections, GPU memory in gigabytes or an API's concurrent-call quota,
// shared by job types that need some of it (TypeConfig.Needs, or a job's
// own Job.Needs). A job starts only when every resource it needs has its
// units free, and it waits without a slot and without blocking jobs that
// need other resources.
//
// A large job is not starved by a stream of small ones: the first job in
// the order (docs/design.md, The order) that finds a resource short of
// its units claims it, and the resource's units are then held for it
// until it starts (or leaves the queue); no slot is held. Held units do
// not sit idle while a smaller job can use them without delaying it
// (backfill, as batch schedulers do): the held job could start, by the
// estimates, when the running jobs that hold its units end, each at its
// start plus its estimated cost; a job behind it may take the free units
// if it fits in them and, by its own estimated cost, ends by then. The estimates are the ones fair share uses: the
// learned cost of the job's type and ID, or its type's DefaultCost before
// one is learned. The jobs that need the held units are tried in order.
// One that may not take them (too long, or needing more units than are
// free) is passed over until some of the units are released, and the
// jobs behind it are tried: up to Config.BackfillLookahead of them per
// resource (DefaultBackfillLookahead unless set), as batch schedulers
// bound the jobs their backfill looks at. The next one that may not take
// them stops the others until units are released, so that each release
// costs O(BackfillLookahead log n) however many jobs wait. Held units
// thus sit idle only when none of the first BackfillLookahead+1 jobs
// waiting for them fits.
//
// The bound is on what happens: the held job waits at most for the jobs
// ahead of it in the order, then for the later of the release of the
// units in use when it claimed and its estimated start, plus the longest
// overrun of a job let past it. A job let past that runs longer than its
// estimate delays the held job by at most that overrun, and one that ends
// within it not at all.

// DefaultBackfillLookahead is how many waiting jobs that cannot use a
// resource's held units backfill passes over, per resource, when
// Config.BackfillLookahead is 0.
const DefaultBackfillLookahead = 16

// validateNeeds says what is wrong with needs, of what.
func validateNeeds(what string, needs map[string]int) error {
	for _, name := range slices.Sorted(maps.Keys(needs)) {
		if u := needs[name]; u <= 0 {
			return fmt.Errorf("fairsched: %s needs %d units of %q; a need must be positive", what, u, name)
		}
	}
	return nil
}

// ownNeeds returns a job's own needs (Job.Needs) for the engine: nil for
// nil (its type's), none for an empty map (none, in place of its type's).
func ownNeeds(needs map[string]int) []engine.Need {
	if needs == nil {
		return nil
	}
	if own := EngineNeeds(needs); own != nil {
		return own
	}
	return []engine.Need{}
}

// needsOf returns the needs j has in place of its type's, as Job.Needs
// gives them: nil for its type's.
func (s *Runtime) needsOf(j *engine.Job) map[string]int {
	var own []engine.Need
	var ok bool
	if s.remote != nil { // the record is held: its needs are the Remote's to tell
		own, ok = s.remote.OwnNeeds(j)
	} else {
		own, ok = s.eng.OwnNeeds(j)
	}
	if !ok {
		return nil
	}
	m := make(map[string]int, len(own))
	for _, n := range own {
		m[n.Resource] = n.Units
	}
	return m
}

// EngineNeeds returns needs for the engine, sorted by resource name.
func EngineNeeds(needs map[string]int) []engine.Need {
	if len(needs) == 0 {
		return nil
	}
	out := make([]engine.Need, 0, len(needs))
	for name, u := range needs {
		out = append(out, engine.Need{Resource: name, Units: u})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Resource < out[j].Resource })
	return out
}
