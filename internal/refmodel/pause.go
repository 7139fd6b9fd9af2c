package refmodel

// Pausing keys and job types (docs/design.md, Pause).

// pausedFor reports whether j's key or type is paused.
func (m *Model) pausedFor(j *job) bool {
	return m.pausedKeys[j.key.name] || m.pausedTypes[j.typName]
}

// aside reports whether j is outside the order and fair share: delayed,
// paused or blocked by a dependency.
func (j *job) aside() bool { return j.delayed || j.paused || j.blocked }

// PauseKey pauses a key, known or not, from now: its waiting jobs, and
// those submitted later, are set aside until it is resumed. Then it
// dispatches.
func (m *Model) PauseKey(now int64, name string) {
	if m.pausedKeys == nil {
		m.pausedKeys = map[string]bool{}
	}
	m.pausedKeys[name] = true
	m.standClocks(now)
	m.pauseWaiting(now)
}

// PauseType pauses a job type as PauseKey does a key. Then it dispatches.
func (m *Model) PauseType(now int64, name string) {
	if m.pausedTypes == nil {
		m.pausedTypes = map[string]bool{}
	}
	m.pausedTypes[name] = true
	m.standClocks(now)
	m.pauseWaiting(now)
}

// ResumeKey resumes a key; its paused jobs whose type is not paused join
// the queue, in submission order. Then it dispatches.
func (m *Model) ResumeKey(now int64, name string) {
	delete(m.pausedKeys, name)
	m.standClocks(now)
	m.resumeWaiting(now)
}

// ResumeType resumes a job type as ResumeKey does a key.
func (m *Model) ResumeType(now int64, name string) {
	delete(m.pausedTypes, name)
	m.standClocks(now)
	m.resumeWaiting(now)
}

// pauseWaiting sets aside, in submission order, the queued jobs whose key
// or type is paused: each leaves its flow as an ended job does.
func (m *Model) pauseWaiting(now int64) {
	for _, j := range m.jobs {
		if j.running || j.aside() || !m.pausedFor(j) {
			continue
		}
		j.paused, j.skipped = true, "" // it leaves whatever held it
		m.unclaim(j)
		m.ended(j, now)
	}
	m.dispatch(now)
}

// resumeWaiting brings back, in submission order, the paused jobs whose
// key and type are no longer paused: each joins the queue as a released
// job does, its aging clock moved on by the time it stood (standClocks).
func (m *Model) resumeWaiting(now int64) {
	for _, j := range m.jobs {
		if !j.paused || m.pausedFor(j) {
			continue
		}
		m.join(j, j.sub, now) // while it is still paused: not yet active
		j.paused = false
	}
	m.dispatch(now)
}

// standClocks stops, at now, the aging clock of every waiting job whose
// key or type is now paused, and moves on the submission time of every
// one whose key and type no longer are by the time its clock stood: the
// clock of a waiting job stands still while its key or type is paused,
// whatever holds it (docs/design.md, Aging). A running job is not waiting, and
// a delayed job's clock starts at its NotBefore.
func (m *Model) standClocks(now int64) {
	for _, j := range m.jobs {
		if j.running || j.delayed && !j.retry {
			continue
		}
		switch paused := m.pausedFor(j); {
		case paused && !j.standing:
			j.standing, j.stoodSince = true, now
		case !paused && j.standing:
			j.sub += now - j.stoodSince
			j.standing = false
		}
	}
}

// standIfPaused stops j's aging clock at at if j, which has just begun to
// wait with its clock running, has its key or type paused.
func (m *Model) standIfPaused(j *job, at int64) {
	if m.pausedFor(j) && !j.standing {
		j.standing, j.stoodSince = true, at
	}
}
