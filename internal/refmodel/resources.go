package refmodel

import "slices"

// Named resources (docs/design.md, Named resources): a job needs units of
// resources (its own needs, or its type's) and starts only when each has
// them free. The first job by the order that finds a resource short of
// its units, passes every other limit and needs no resource another job
// claims, claims every resource it needs: its free
// units are then held for that job alone until it starts or leaves the
// queue. A job that needs more than a resource's capacity claims nothing.
// A capacity change ends the claims of the resource's claimant.

// SetResource changes a resource's capacity from now, ends every claim of
// the job that claims it, and reports whether it is configured. Then it
// dispatches.
func (m *Model) SetResource(now int64, name string, capacity int) bool {
	if _, ok := m.cfg.Resources[name]; !ok {
		return false
	}
	m.capacity()[name] = capacity
	if c := m.claimant[name]; c != 0 {
		for r, x := range m.claimant {
			if x == c {
				delete(m.claimant, r)
			}
		}
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
// take the units it needs now. If not, and it needs no more than any
// capacity and no resource another job claims, it claims every resource
// it needs.
func (m *Model) takeResources(j *job) bool {
	names := needNames(j)
	for _, r := range names {
		if c := m.claimant[r]; j.needs[r] > m.capacity()[r] || c != 0 && c != j.seq {
			return false
		}
	}
	short := false
	for _, r := range names {
		short = short || m.free(r) < j.needs[r]
	}
	if !short {
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

// unclaim ends j's claims: it started or left the queue.
func (m *Model) unclaim(j *job) {
	for r, c := range m.claimant {
		if c == j.seq {
			delete(m.claimant, r)
		}
	}
}

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
