package engine

// sortedRun holds queued jobs of a lane's fixed phase that arrived in
// increasing fixed order, which is how they usually arrive: a job of the
// same or lower priority than the last one. Such a run is already sorted,
// so it needs no heap: push and pop are O(1) where a heap pays O(log n)
// moves, each touching a job record. A job that would break the order goes
// to the lane's fixed heap instead, and the lane's first job is the better
// of the two fronts.
//
// A job leaving from the middle (cancelled, or its grace ended out of
// order) leaves a hole, skipped when the front reaches it. Holes and the
// consumed prefix are dropped once they are more than half of the buffer,
// so the buffer stays within twice the jobs in it, plus 64: amortised O(1).
//
// Invariants: the keys of buf[head:], holes included, strictly increase;
// buf[head] is a job unless the run is empty; a job in the run has
// heap == inRun and idx == its position in buf; first == buf[head], or
// zero when the run is empty.
type sortedRun struct {
	buf   []runEntry
	head  int
	holes int // holes in buf[head:]
	// first is a copy of the front entry, so that comparing a lane's
	// candidates reads the lane, not its (possibly cold) buffer.
	first runEntry
}

type runEntry struct {
	key uint64 // the job's fixedOrder
	j   *Job   // nil for a hole
}

// len returns the number of jobs in the run. O(1).
func (r *sortedRun) len() int { return len(r.buf) - r.head - r.holes }

// accepts reports whether a job with this key can join the run's end.
func (r *sortedRun) accepts(key uint64) bool {
	return r.head == len(r.buf) || key > r.buf[len(r.buf)-1].key
}

// push appends j, whose key accepts said yes to. O(1) amortised.
func (r *sortedRun) push(key uint64, j *Job) {
	j.heap, j.idx = inRun, int32(len(r.buf))
	if r.head == len(r.buf) {
		r.first = runEntry{key, j}
	}
	r.buf = append(r.buf, runEntry{key, j})
}

// front returns the first job and its key, if any. O(1).
func (r *sortedRun) front() (*Job, uint64, bool) {
	if r.head == len(r.buf) {
		return nil, 0, false
	}
	return r.first.j, r.first.key, true
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
