package fairsched

import (
	"fmt"
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
	for _, name := range sortedKeys(needs) {
		if u := needs[name]; u <= 0 {
			return fmt.Errorf("fairsched: %s needs %d units of %q; a need must be positive", what, u, name)
		}
	}
	return nil
}

// validateResources checks the resources and the types' needs of them.
func (c *Config) validateResources() []error {
	var errs []error
	for _, name := range sortedKeys(c.Resources) {
		if n := c.Resources[name]; n < 0 {
			errs = append(errs, fmt.Errorf("fairsched: Resources[%q] is %d; a capacity must not be negative", name, n))
		}
	}
	for _, tname := range sortedKeys(c.Types) {
		needs := c.Types[tname].Needs
		for _, r := range sortedKeys(needs) {
			capacity, ok := c.Resources[r]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("fairsched: job type %q needs resource %q, which Config.Resources does not have", tname, r))
			case needs[r] > capacity:
				errs = append(errs, fmt.Errorf("fairsched: job type %q needs %d units of %q, which has %d", tname, needs[r], r, capacity))
			}
		}
	}
	return errs
}

// SetResource changes the capacity of a named resource of
// Config.Resources. Jobs running keep their units (a lowered capacity may
// be exceeded until they end; nothing new starts meanwhile); jobs waiting
// are looked at again, and a waiting job that needs more than the new
// capacity waits until it grows. It fails, changing nothing, if the
// resource is not configured or the capacity is negative.
func (s *Scheduler) SetResource(name string, capacity int) error {
	if capacity < 0 {
		return fmt.Errorf("fairsched: resource %q: capacity %d; it must not be negative", name, capacity)
	}
	return s.rt.SetResource(name, capacity)
}

// ResourceStats describes one named resource.
type ResourceStats struct {
	Name     string
	Capacity int
	InUse    int // units held by running jobs
}
