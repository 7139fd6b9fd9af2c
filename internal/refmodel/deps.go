package refmodel

import "slices"

// Dependencies (docs/design.md, Dependencies): a job may run after jobs submitted
// before it. It waits for them set aside, as a delayed job does, its
// aging clock running; when the last completes it joins the queue (or
// waits paused); if one ends any other way, it ends without running, and
// so do the jobs after it.

// link gives j the jobs of after that have not ended as dependencies, and
// reports false if one of them ended without completing.
func (m *Model) link(j *job, after []uint64) bool {
	ok := true
	for _, seq := range after {
		switch {
		case m.find(seq) != nil:
			j.after = append(j.after, seq)
		case !m.completed[seq]:
			ok = false
		}
	}
	return ok
}

// settleDeps records how j, which ended at now, ended, and moves on the
// jobs that run after it: in submission order, each goes on if it waits
// for nothing else, or, if j did not complete, ends without running.
func (m *Model) settleDeps(j *job, completed bool, now int64) {
	if m.completed == nil {
		m.completed = map[uint64]bool{}
	}
	m.completed[j.seq] = completed
	for _, d := range slices.Clone(m.jobs) {
		i := slices.Index(d.after, j.seq)
		if i < 0 || m.find(d.seq) == nil {
			continue
		}
		d.after = slices.Delete(d.after, i, i+1)
		switch {
		case !completed:
			m.unrunBy(d, now)
		case len(d.after) == 0 && d.blocked:
			if m.pausedFor(d) {
				d.blocked, d.paused = false, true // its clock stands already
				continue
			}
			m.join(d, d.sub, now) // while it is still blocked: not yet active
			d.blocked = false
		}
	}
}

// unrunBy ends j, which has not started, because a job it runs after did
// not complete.
func (m *Model) unrunBy(j *job, now int64) {
	m.unrun = append(m.unrun, j.seq)
	m.drop(j, now)
	m.settleDeps(j, false, now)
}

// TakeUnrun returns the numbers of the jobs that ended without running
// since the last call, because a job they run after did not complete.
func (m *Model) TakeUnrun() []uint64 {
	out := m.unrun
	m.unrun = nil
	return out
}
