package refmodel

// Admits says whether jobs, submitted together at now (SubmitMany), are
// taken in: all or none. It returns the index of the first job refused
// for what it is, as Submit would refuse it alone; or -1 and whether the
// batch fits the queue's limits, where every job of it counts as one more
// pending job (even one that would join another or start at once):
// MaxQueue for the batch, each key's MaxPending for its jobs. Admitted,
// the jobs are submitted one after the other at now, each as Submit (or
// Supersede, or a join's Raise) would take it in. Admits changes nothing.
func (m *Model) Admits(now int64, jobs []Job) (bad int, fits bool) {
	for i, d := range jobs {
		if _, _, _, ok := m.acceptable(now, d); !ok {
			return i, false
		}
	}
	pending := m.count(func(j *job) bool { return !j.running })
	if m.cfg.MaxQueue > 0 && pending+len(jobs) > m.cfg.MaxQueue {
		return -1, false
	}
	perKey := map[string]int{}
	for _, d := range jobs {
		perKey[d.Key]++
	}
	for name, n := range perKey {
		cfg := m.defaultOf(name)
		k := m.keys[name]
		if k != nil {
			cfg = k.cfg
		}
		if cfg.MaxPending > 0 && m.count(func(j *job) bool { return !j.running && j.key == k && k != nil })+n > cfg.MaxPending {
			return -1, false
		}
	}
	return -1, true
}
