package refmodel

// Order returns the pending jobs outside every set-aside state (not
// delayed, paused or blocked), by number, in the order pick ranks them at
// now, each at its first place: the urgent jobs, then the jobs of keys
// below their reservation, then every job by fair share. It ignores
// every limit: the order the dispatcher would consider them in if every
// slot were free, before any start moved a virtual time.
func (m *Model) Order(now int64) []uint64 {
	var out []uint64
	seen := map[*job]bool{}
	for _, c := range m.candidates(now) {
		if !seen[c.j] {
			seen[c.j] = true
			out = append(out, c.j.seq)
		}
	}
	return out
}
