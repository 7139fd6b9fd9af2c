package rt

import (
	"cmp"
	"slices"
	"sync"

	"github.com/fairsched/fairsched/internal/decide"
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
	l := &c.Listing
	p.Jobs = make([]JobInfo, 0, len(l.Jobs)+min(len(l.Running), limit))
	if len(l.Running) > 0 {
		for i := range l.Running {
			c.bySeq = append(c.bySeq, &l.Running[i])
		}
		slices.SortFunc(c.bySeq, func(a, b *decide.JobFacts) int { return cmp.Compare(a.Seq, b.Seq) })
		for _, f := range c.bySeq[offset : offset+min(limit, len(c.bySeq)-offset)] {
			p.Jobs = append(p.Jobs, s.info(f, &l.Rule))
		}
	}
	for i := range l.Jobs {
		p.Jobs = append(p.Jobs, s.info(&l.Jobs[i], &l.Rule))
	}
	c.release()
	return p
}

// pageCopy is what Queue copies under the lock, the decisions' listing
// of the page (all the running jobs, to sort by Seq once the lock is let
// go: the slots bound them), and its buffer for that sort.
type pageCopy struct {
	decide.Listing
	bySeq []*decide.JobFacts // the running jobs sorted, once the lock is let go
}

// pageCopies keeps pageCopy buffers for the next Queue, so that a page
// allocates nothing while it holds the lock.
var pageCopies = sync.Pool{New: func() any { return new(pageCopy) }}

// pageKept is the most jobs a pageCopy's buffers keep for the next page.
const pageKept = 1 << 12

// release clears c (its strings) and puts it back in pageCopies, unless
// it grew past pageKept.
func (c *pageCopy) release() {
	clear(c.Running)
	clear(c.Jobs)
	clear(c.bySeq)
	c.Running, c.Jobs, c.bySeq = c.Running[:0], c.Jobs[:0], c.bySeq[:0]
	if cap(c.Running) <= pageKept && cap(c.Jobs) <= pageKept {
		pageCopies.Put(c)
	}
}

// copyPageLocked copies into c the facts of the jobs of the page at
// offset, at most limit, at now, and into p the counts.
func (s *Runtime) copyPageLocked(c *pageCopy, p *QueuePage, offset, limit int, now int64) {
	s.decider().Page(&c.Listing, offset, limit, now)
	s.noHandlerLocked(c.Jobs)
	e := &c.Summary
	*p = QueuePage{Running: e.Running, Waiting: e.Pending, Paused: e.Paused, Aside: e.Delayed + e.Blocked}
}
