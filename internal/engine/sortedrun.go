package engine

// sortedRun holds queued jobs of a lane that arrived in increasing fixed
// order and in submission time, which is how they usually arrive: a job
// of the same or lower priority than the last one, submitted after it.
// Such a run is already sorted, so it needs no heap: push and pop are O(1)
// where a heap pays O(log n) moves, each touching a job record. A job that
// would break the order goes to the lane's fixed heap instead, and the
// lane's first job is the best of the fronts.
//
// The run stays sorted as its jobs age: of two jobs in it, the earlier
// has the higher or equal base priority, the lower submission number,
// and was submitted no later, so its grace period ends first, its aged
// score is the higher from then on, it reaches the ceiling first, and
// ties go to it by its submission number, in every phase either is in
// (doc.go, "The sorted run"). So a job stays in the run when its grace
// period ends, and its rank is its phase's at the moment of asking
// (runRank), computed from its entry without touching its record.
//
// A job leaving from the middle (cancelled, or moved to a wait lane)
// leaves a hole, skipped when the front reaches it. Holes and the
// consumed prefix are dropped once they are more than half of the buffer,
// so the buffer stays within twice the jobs in it, plus 64: amortised O(1).
//
// Invariants: the keys of buf[head:], holes included, strictly increase,
// and so do their submission numbers, and their submission times do not
// decrease; buf[head] is a job unless the run is empty; a job in the run
// has heap == inRun, idx == its position in buf, and its fixedOrder and
// sub in its entry; first == buf[head], or zero when the run is empty.
type sortedRun struct {
	buf   []runEntry
	head  int
	holes int // holes in buf[head:]
	// first is a copy of the front entry, so that ranking a lane's
	// candidates reads the lane, not its buffer or its front job's record
	// (possibly cold, in a long queue).
	first runEntry
}

// runEntry is a job of a run, or a hole, which keeps the key and sub of
// the job that left it.
type runEntry struct {
	key uint64 // the job's fixedOrder
	sub int64  // the job's submission time
	j   *Job   // nil for a hole
}

// len returns the number of jobs in the run. O(1).
func (r *sortedRun) len() int { return len(r.buf) - r.head - r.holes }

// accepts reports whether a job with this key, submitted at sub, can
// join the run's end: its base is at most the last job's, and its
// submission number and time come after. A new job's always do; a job
// that comes back (retried, delayed, resumed) keeps its number.
func (r *sortedRun) accepts(key uint64, sub int64) bool {
	if r.head == len(r.buf) {
		return true
	}
	const seq = 1<<fixedSeqBits - 1
	last := &r.buf[len(r.buf)-1]
	return key > last.key && key&seq > last.key&seq && sub >= last.sub
}

// push appends j, whose key accepts said yes to. O(1) amortised.
func (r *sortedRun) push(key uint64, j *Job) {
	j.heap, j.idx = inRun, int32(len(r.buf))
	e := runEntry{key, j.sub, j}
	if r.head == len(r.buf) {
		r.first = e
	}
	r.buf = append(r.buf, e)
}

// front returns the first job and its entry, if any. O(1).
func (r *sortedRun) front() (*Job, runEntry, bool) {
	if r.head == len(r.buf) {
		return nil, runEntry{}, false
	}
	return r.first.j, r.first, true
}

// remove takes j out of the run. O(1) amortised.
func (r *sortedRun) remove(j *Job) {
	r.buf[j.idx].j = nil
	j.idx = -1
	r.holes++
	wasFront := r.first.j == j
	if wasFront {
		for r.head < len(r.buf) && r.buf[r.head].j == nil {
			r.buf[r.head] = runEntry{}
			r.head++
			r.holes--
		}
	}
	switch {
	case r.head == len(r.buf):
		r.buf, r.head, r.holes, r.first = r.buf[:0], 0, 0, runEntry{}
	case len(r.buf) > 64 && 2*r.len() < len(r.buf):
		r.compact()
	case wasFront:
		r.first = r.buf[r.head]
	}
}

// compact moves the jobs to the front of the buffer, dropping holes. O(n).
func (r *sortedRun) compact() {
	n := 0
	for _, e := range r.buf[r.head:] {
		if e.j != nil {
			e.j.idx = int32(n)
			r.buf[n] = e
			n++
		}
	}
	clear(r.buf[n:])
	r.buf, r.head, r.holes = r.buf[:n], 0, 0
	if cap(r.buf) > 64 && n < cap(r.buf)/4 {
		r.buf = append([]runEntry(nil), r.buf...)
	}
	r.first = r.buf[0] // a run is compacted only while it holds jobs
}

// eachUntil calls f for the jobs in the run, in order, until f returns
// false; it reports whether f never did.
func (r *sortedRun) eachUntil(f func(j *Job) bool) bool {
	for _, e := range r.buf[r.head:] {
		if e.j != nil && !f(e.j) {
			return false
		}
	}
	return true
}

// each calls f for every job in the run, in order.
func (r *sortedRun) each(f func(j *Job, key uint64)) {
	for _, e := range r.buf[r.head:] {
		if e.j != nil {
			f(e.j, e.key)
		}
	}
}
