package refmodel

import (
	"cmp"
	"math"
	"slices"
)

// Named resources (docs/design.md, Named resources): a job needs units of
// resources (its own needs, or its type's) and starts only when each has
// them free.
//
// Holding units for a large job: the first job by the order that finds a
// resource short of its units, passes every other limit and needs no
// resource another job claims, claims every resource it needs. Their
// units are then held for it, the claimant, until it starts or leaves the
// queue; a job that needs more than a resource's capacity claims nothing.
// A capacity change ends the claims of the resource's claimant.
//
// Backfill: the claimant could start, by the estimates, at the earliest
// time by which every resource it needs has its units free if each
// running job ends at its start plus its cost estimate at its start. A
// job that needs a resource another job claims may take its units only
// if every resource it needs has its units free now and, by its cost
// estimate now, it ends by the start of each claimant of one of them.
//
// Lookahead, with K = BackfillLookahead: the jobs that need claimed
// resources are tried in the order, and each that may take their units
// starts. Of those that may not, the first K on a resource (the first of
// a job's claimed resources, by name) are skipped, and the jobs behind
// them are tried; the (K+1)-th stops the resource's backfill: no job but
// the claimant takes its units. Skipped jobs are not tried again, nor is
// a job that needs a stopped resource, until units of the resource are
// next released (a job that holds some ends) or its claim ends.

// SetResource changes a resource's capacity from now, ends every claim of
// the job that claims it, and reports whether it is configured. Then it
// dispatches.
func (m *Model) SetResource(now int64, name string, capacity int) bool {
	if _, ok := m.cfg.Resources[name]; !ok {
		return false
	}
	m.capacity()[name] = capacity
	if c := m.claimant[name]; c != 0 {
		m.unclaimSeq(c)
	}
	m.dispatch(now)
	return true
}

// capacity returns the resources' capacities in force.
func (m *Model) capacity() map[string]int {
	if m.capacities == nil {
		m.capacities = map[string]int{}
		for name, c := range m.cfg.Resources {
			m.capacities[name] = c
		}
	}
	return m.capacities
}

// needsOf returns the names of the resources j needs, sorted.
func needNames(j *job) []string {
	names := make([]string, 0, len(j.needs))
	for r := range j.needs {
		names = append(names, r)
	}
	slices.Sort(names)
	return names
}

// free returns the units of r no running job holds.
func (m *Model) free(r string) int {
	n := m.capacity()[r]
	for _, j := range m.jobs {
		if j.running {
			n -= j.needs[r]
		}
	}
	return n
}

// takeResources reports whether j, which passes every other limit, may
// take the units it needs now. If not: if it needs resources another job
// claims, and none is stopped, it is skipped on the first of them, or
// stops its backfill if BackfillLookahead jobs are skipped on it already;
// otherwise, if it needs no more than any capacity, it claims every
// resource it needs.
func (m *Model) takeResources(j *job, now int64) bool {
	if j.skipped != "" {
		return false
	}
	names := needNames(j)
	var claimed []string // by another job
	for _, r := range names {
		if j.needs[r] > m.capacity()[r] {
			return false
		}
		if c := m.claimant[r]; c != 0 && c != j.seq {
			if m.stopped[r] {
				return false
			}
			claimed = append(claimed, r)
		}
	}
	fits := true
	for _, r := range names {
		fits = fits && m.free(r) >= j.needs[r]
	}
	if len(claimed) > 0 {
		ends := now + micros(m.estimate(j))
		for _, r := range claimed {
			fits = fits && ends <= m.claimStart(m.find(m.claimant[r]))
		}
		if fits {
			m.backfilled++
			if slices.ContainsFunc(names, func(r string) bool { return m.skippedOn(r) > 0 }) {
				m.passed++
			}
			return true
		}
		if r := claimed[0]; m.skippedOn(r) < m.lookahead() {
			j.skipped = r
		} else {
			if m.stopped == nil {
				m.stopped = map[string]bool{}
			}
			m.stopped[r] = true
		}
		return false
	}
	if fits {
		return true
	}
	if m.claimant == nil {
		m.claimant = map[string]uint64{}
	}
	for _, r := range names {
		m.claimant[r] = j.seq
	}
	return false
}

// lookahead returns how many jobs may be skipped per resource.
func (m *Model) lookahead() int {
	switch n := m.cfg.BackfillLookahead; {
	case n == 0:
		return 16
	case n < 0:
		return 0
	default:
		return n
	}
}

// skippedOn returns how many jobs are skipped on resource r.
func (m *Model) skippedOn(r string) int {
	return m.count(func(j *job) bool { return j.skipped == r })
}

// claimStart returns when claimant c could start by the estimates: the
// earliest time by which every resource it needs has its units free, each
// running job ending at its expected end; math.MinInt64 if they are free
// now.
func (m *Model) claimStart(c *job) int64 {
	at := int64(math.MinInt64)
	for _, r := range needNames(c) {
		lack := c.needs[r] - m.free(r)
		if lack <= 0 {
			continue
		}
		var holders []*job
		for _, h := range m.jobs {
			if h.running && h.needs[r] > 0 {
				holders = append(holders, h)
			}
		}
		slices.SortFunc(holders, func(a, b *job) int { return cmp.Compare(a.end, b.end) })
		for _, h := range holders {
			if lack -= h.needs[r]; lack <= 0 {
				at = max(at, h.end)
				break
			}
		}
	}
	return at
}

// micros returns seconds in µs, rounded.
func micros(secs float64) int64 { return int64(math.Round(secs * 1e6)) }

// released resumes the backfill of the resources j held: its attempt
// ended.
func (m *Model) released(j *job) {
	for r := range j.needs {
		m.resume(r)
	}
}

// resume ends r's stopped backfill and its jobs' skips.
func (m *Model) resume(r string) {
	delete(m.stopped, r)
	for _, j := range m.jobs {
		if j.skipped == r {
			j.skipped = ""
		}
	}
}

// unclaim ends j's claims: it started or left the queue.
func (m *Model) unclaim(j *job) { m.unclaimSeq(j.seq) }

// unclaimSeq ends the claims of the job seq, and their resources'
// stopped backfill and skips.
func (m *Model) unclaimSeq(seq uint64) {
	for r, c := range m.claimant {
		if c == seq {
			delete(m.claimant, r)
			m.resume(r)
		}
	}
}

// Backfills returns how many times a job took units held for another.
func (m *Model) Backfills() int { return m.backfilled }

// BackfillsPast returns how many of those times the job passed a job
// skipped on one of the resources it needs.
func (m *Model) BackfillsPast() int { return m.passed }

// resourceWhy returns the first resource, by name, that keeps j from
// starting now, or "".
func (m *Model) resourceWhy(j *job) string {
	for _, r := range needNames(j) {
		c := m.claimant[r]
		if j.needs[r] > m.capacity()[r] || c != 0 && c != j.seq || m.free(r) < j.needs[r] {
			return r
		}
	}
	return ""
}
