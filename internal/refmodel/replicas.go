package refmodel

import "slices"

// Replicas (internal/engine, doc.go: Replicas): many processes run one scheduler's
// jobs, each a replica with a capacity and the job types it has handlers
// for. Once a replica was ever set, and not before:
//
//   - a job bound to a replica (Job.Replica) may run only on it, whatever
//     its type; any other job on every known replica whose types include
//     its type;
//   - a job starts only if one of the known replicas it may run on runs
//     fewer jobs than its capacity, and runs on the first of them by name
//     (packing);
//   - a replica runs every job started on it whose attempt has not ended,
//     bound or not, whether it is still known or was removed since.
//
// It is a hard limit: the order passes over a job no replica can take
// now, as over a job at its key's cap.

// replica is a known replica's configuration.
type replica struct {
	capacity int
	types    map[string]bool // nil: every type
}

// SetReplica makes replica name known, with capacity and the job types
// it has handlers for (nil: every type), or changes them. Then it
// dispatches. It reports false, changing nothing, for the name "", which
// is no replica.
func (m *Model) SetReplica(now int64, name string, capacity int, types []string) bool {
	if name == "" {
		return false // "" is no replica
	}
	if m.replicas == nil {
		m.replicas = map[string]*replica{}
	}
	r := &replica{capacity: capacity}
	if types != nil {
		r.types = map[string]bool{}
		for _, t := range types {
			r.types[t] = true
		}
	}
	m.replicas[name], m.replicated = r, true
	m.dispatch(now)
	return true
}

// RemoveReplica forgets replica name and reports whether it was known.
// Then it dispatches.
func (m *Model) RemoveReplica(now int64, name string) bool {
	_, ok := m.replicas[name]
	delete(m.replicas, name)
	m.dispatch(now)
	return ok
}

// mayRunOn returns the names of the known replicas j may run on, sorted.
func (m *Model) mayRunOn(j *job) []string {
	var out []string
	for name, r := range m.replicas {
		if j.replica == name || j.replica == "" && (r.types == nil || r.types[j.typName]) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// freeReplica returns the first replica by name that j may run on and
// that runs fewer jobs than its capacity.
func (m *Model) freeReplica(j *job) (string, bool) {
	for _, name := range m.mayRunOn(j) {
		if m.count(func(r *job) bool { return r.running && r.on == name }) < m.replicas[name].capacity {
			return name, true
		}
	}
	return "", false
}

// hasReplica reports whether j may start as far as replicas go.
func (m *Model) hasReplica(j *job) bool {
	if !m.replicated {
		return true
	}
	_, ok := m.freeReplica(j)
	return ok
}

// replicaWhy returns why j waits for a replica, if it does.
func (m *Model) replicaWhy(j *job) (Why, bool) {
	switch {
	case !m.replicated:
		return WhyTurn, false
	case len(m.mayRunOn(j)) == 0:
		return WhyNoReplica, true
	}
	if _, ok := m.freeReplica(j); !ok {
		return WhyReplicasFull, true
	}
	return WhyTurn, false
}

// ReplicaHeld returns how many times the order passed over a job that
// passed every other limit for lack of a free replica.
func (m *Model) ReplicaHeld() int { return m.replicaHeld }
