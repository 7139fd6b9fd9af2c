package engine

// graceQueue holds jobs in submission order from when they are queued
// until their grace period ends, so that the end of every job's grace is
// noticed in order, in O(1) per job. A job that starts or ends before then
// clears its entry, found through the number it keeps, leaving a hole: the
// queue holds pending jobs only, so no record outlives its job here. (A
// parked job keeps its entry until it starts, ends or its grace does.)
// Holes and entries at the front are dropped once they are more than half
// of the buffer; holes behind a live entry are compacted away once they
// are more than half of the entries. Both keep the buffer within a
// constant factor of the jobs in it: amortised O(1) per job.
//
// Entries are numbered in push order: buf[i] is entry base+i, and a job in
// the queue has inGrace set and at its entry's number. Dropping the
// consumed front changes base, not the jobs; only compaction renumbers.
type graceQueue struct {
	buf   []*Job // nil where a job left: a hole
	head  int    // buf[:head] is consumed
	base  int64  // the number of buf[0]
	holes int    // holes in buf[head:]
}

func (q *graceQueue) push(j *Job) {
	j.inGrace, j.at = true, q.base+int64(len(q.buf))
	q.buf = append(q.buf, j)
}

// popDue removes and returns the oldest entry if its grace period is over.
// It skips the holes at the front and drops the consumed front whether or
// not anything is due: when jobs end within their grace period while an
// older one waits, holes are all the front ever gets.
func (q *graceQueue) popDue(p *agingParams, now int64) *Job {
	for q.head < len(q.buf) && q.buf[q.head] == nil {
		q.head++
		q.holes--
	}
	q.dropFront()
	if q.head == len(q.buf) {
		return nil
	}
	j := q.buf[q.head]
	if !p.pastGrace(j.sub, now) {
		return nil
	}
	q.buf[q.head] = nil
	q.head++
	j.inGrace = false
	return j
}

// dropFront drops the consumed front once it is all of the buffer or more
// than half of a large one. Amortised O(1): each entry is copied at most
// once per drop of a front at least as long as what is copied.
func (q *graceQueue) dropFront() {
	switch {
	case q.head == len(q.buf):
		q.base += int64(len(q.buf))
		q.buf, q.head = q.buf[:0], 0
	case q.head > 1024 && q.head*2 > len(q.buf):
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.base += int64(q.head)
		q.buf, q.head = q.buf[:n], 0
	}
}

// leave clears the entry of j, which is starting or ending, if it has
// one. O(1), amortised.
func (q *graceQueue) leave(j *Job) {
	if !j.inGrace {
		return
	}
	q.buf[j.at-q.base] = nil
	j.inGrace = false
	q.holes++
	if q.holes > 64 && q.holes*2 > len(q.buf)-q.head {
		q.compact()
	}
}

// reset empties the queue.
func (q *graceQueue) reset() {
	if len(q.buf) == 0 {
		return // the common case: nothing waited
	}
	for _, j := range q.buf[q.head:] {
		if j != nil {
			j.inGrace = false
		}
	}
	clear(q.buf)
	q.base += int64(len(q.buf))
	q.buf, q.head, q.holes = q.buf[:0], 0, 0
}

// compact drops the holes, keeping the order, and renumbers the entries
// left. O(n).
func (q *graceQueue) compact() {
	n := 0
	for _, j := range q.buf[q.head:] {
		if j != nil {
			q.buf[n], j.at = j, q.base+int64(n)
			n++
		}
	}
	clear(q.buf[n:])
	q.buf, q.head, q.holes = q.buf[:n], 0, 0
}

// len returns the number of jobs in the queue. O(1).
func (q *graceQueue) len() int { return len(q.buf) - q.head - q.holes }
