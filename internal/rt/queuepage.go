package rt

import (
	"cmp"
	"slices"
	"sync"

	"github.com/fairsched/fairsched/internal/engine"
)

// QueuePage is one page of the jobs running and waiting (Queue), and the
// counts it pages through, taken together at one instant.
type QueuePage struct {
	// Jobs are the page's jobs: the running jobs first, by Seq, then the
	// waiting jobs in the order they would be considered to start, then
	// the paused jobs.
	Jobs []JobInfo
	// Running, Waiting and Paused count the jobs the listing pages
	// through: running; waiting in the order (queued, or parked on a
	// conflict or their key's cap); and set aside by a pause of their key
	// or type. Offsets run from 0 to Running+Waiting+Paused.
	Running, Waiting, Paused int
	// Aside counts the jobs not started that the listing leaves out, as
	// they are in no order until their time comes: delayed by their
	// NotBefore or a retry's backoff, or waiting for jobs they run after.
	// Stats.Waiting tells them apart; Snapshot lists them.
	Aside int
}

// Queue is the API's Scheduler.Queue, which documents it.
func (s *Runtime) Queue(offset, limit int) QueuePage {
	offset, limit = max(offset, 0), max(limit, 0)
	c := pageCopies.Get().(*pageCopy)
	var p QueuePage
	s.mu.Lock()
	s.copyPageLocked(c, &p, offset, limit, s.nowLocked())
	s.mu.Unlock()
	p.Jobs = make([]JobInfo, 0, len(c.jobs)+min(len(c.running), limit))
	if len(c.running) > 0 {
		for i := range c.running {
			c.bySeq = append(c.bySeq, &c.running[i])
		}
		slices.SortFunc(c.bySeq, func(a, b *jobFacts) int { return cmp.Compare(a.seq, b.seq) })
		for _, f := range c.bySeq[offset : offset+min(limit, len(c.bySeq)-offset)] {
			p.Jobs = append(p.Jobs, s.info(f, &c.rule))
		}
	}
	for i := range c.jobs {
		p.Jobs = append(p.Jobs, s.info(&c.jobs[i], &c.rule))
	}
	c.release()
	return p
}

// pageCopy is what Queue copies under the lock: the facts of the running
// jobs, all of them, to sort by Seq once the lock is let go (the slots
// bound them), and of the waiting and paused jobs of the page, in order.
type pageCopy struct {
	running, jobs []jobFacts
	rule          engine.AgingRule
	bySeq         []*jobFacts // the running jobs sorted, once the lock is let go
}

// pageCopies keeps pageCopy buffers for the next Queue, so that a page
// allocates nothing while it holds the lock.
var pageCopies = sync.Pool{New: func() any { return new(pageCopy) }}

// pageKept is the most jobs a pageCopy's buffers keep for the next page.
const pageKept = 1 << 12

// release clears c (its strings) and puts it back in pageCopies, unless
// it grew past pageKept.
func (c *pageCopy) release() {
	clear(c.running)
	clear(c.jobs)
	clear(c.bySeq)
	c.running, c.jobs, c.bySeq = c.running[:0], c.jobs[:0], c.bySeq[:0]
	if cap(c.running) <= pageKept && cap(c.jobs) <= pageKept {
		pageCopies.Put(c)
	}
}

// next returns a place for one more job at the end of *list, which
// factsLocked fills whole: not cleared when the buffer has room.
func (c *pageCopy) next(list *[]jobFacts) *jobFacts {
	l := *list
	if len(l) < cap(l) {
		l = l[:len(l)+1]
	} else {
		l = append(l, jobFacts{})
	}
	*list = l
	return &l[len(l)-1]
}

// copyPageLocked copies into c the facts of the jobs of the page at
// offset, at most limit, at now, and into p the counts.
func (s *Runtime) copyPageLocked(c *pageCopy, p *QueuePage, offset, limit int, now int64) {
	c.running, c.jobs = c.running[:0], c.jobs[:0]
	c.rule = s.eng.AgingRule()
	e := s.eng.Summary()
	*p = QueuePage{Running: e.Running, Waiting: e.Pending, Paused: e.Paused, Aside: e.Delayed + e.Blocked}
	if offset < p.Running && limit > 0 {
		s.eng.EachRunning(func(j *engine.Job) { s.factsLocked(c.next(&c.running), j, now) })
		limit -= min(limit, p.Running-offset)
	}
	add := func(j *engine.Job) { s.factsLocked(c.next(&c.jobs), j, now) }
	s.eng.EachInOrder(now, max(offset-p.Running, 0), limit, add)
	s.eng.EachPaused(max(offset-p.Running-p.Waiting, 0), limit-len(c.jobs), add)
}
