package decide

import "github.com/fairsched/fairsched/internal/engine"

// JobFacts is what the decisions tell of one job at one instant: what a
// listing (Snapshot, Queue) shows of it, its times in the engine's µs.
// A job's record is reused once it ends, and a leader's records are in
// another process, so a listing is copied into facts, never handed out
// as records.
type JobFacts struct {
	Seq           uint64
	Type, ID, Key string
	Tier, Base    int
	Submitted     int64
	At            int64        // when its wait ends: its start, or the listing's instant
	Clock         engine.Clock // its aging clock, which the listing's AgingRule reads
	Why           engine.Why   // what holds it, if it waits
	On            uint64       // the job it waits for, for a conflict or a dependency
	Resource      string       // the resource it waits for
	Urgent        bool         // it started as urgent: for a running job
	Running       bool
	Parked        bool // on a conflict or its key's cap, with its gate shut
	KeyPaused     bool // Why is a pause, and its key's is one
}

// Listing is a listing of the decisions' jobs at one instant: the counts
// it pages through, the aging rule their effective priorities follow,
// and the facts of the jobs listed. Its slices are filled in place: a
// caller that keeps a Listing for the next one allocates only when a
// listing outgrows it.
type Listing struct {
	Summary engine.Summary
	Rule    engine.AgingRule
	// Running are the running jobs listed, in no order.
	Running []JobFacts
	// Jobs are the jobs listed that have not started: in the order they
	// would be considered to start, then the paused jobs, for a page; in
	// no order, for a snapshot.
	Jobs []JobFacts
}

// next returns a place for one more job at the end of *list, which the
// filler sets whole: not cleared when the buffer has room.
func next(list *[]JobFacts) *JobFacts {
	l := *list
	if len(l) < cap(l) {
		l = l[:len(l)+1]
	} else {
		l = append(l, JobFacts{})
	}
	*list = l
	return &l[len(l)-1]
}

// Page fills l with the jobs at offset of the listing that runs through
// the running jobs (all of them are copied once the page reaches them:
// the slots bound them, and the caller orders them), then the waiting
// jobs in the order they would be considered to start, then the paused
// jobs; at most limit of the last two.
func (l *Local) Page(li *Listing, offset, limit int, now int64) {
	e := l.e
	li.Running, li.Jobs = li.Running[:0], li.Jobs[:0]
	li.Rule, li.Summary = e.AgingRule(), e.Summary()
	running, waiting := li.Summary.Running, li.Summary.Pending
	if offset < running && limit > 0 {
		e.EachRunning(func(j *engine.Job) { l.facts(next(&li.Running), j, now) })
		limit -= min(limit, running-offset)
	}
	add := func(j *engine.Job) { l.facts(next(&li.Jobs), j, now) }
	e.EachInOrder(now, max(offset-running, 0), limit, add)
	e.EachPaused(max(offset-running-waiting, 0), limit-len(li.Jobs), add)
}

// Snapshot fills l with every job running and every job not started,
// delayed and blocked ones included.
func (l *Local) Snapshot(li *Listing, now int64) {
	e := l.e
	li.Running, li.Jobs = li.Running[:0], li.Jobs[:0]
	li.Rule, li.Summary = e.AgingRule(), e.Summary()
	e.EachRunning(func(j *engine.Job) { l.facts(next(&li.Running), j, now) })
	for _, j := range e.PendingJobs() {
		l.facts(next(&li.Jobs), j, now)
	}
}

// facts sets every field of *f to what j's listing shows at now. It
// writes each field where it lies, over whatever f held.
func (l *Local) facts(f *JobFacts, j *engine.Job, now int64) {
	e := l.e
	f.Seq, f.Type, f.ID, f.Key, f.Tier = j.Seq(), j.Type(), j.ID(), j.Key(), j.Tier()
	f.Base, f.Submitted = j.Base(), j.Submitted()
	if j.Running() {
		// Its effective priority is the one it started with; it waits
		// for nothing.
		f.At, f.Running, f.Parked = j.Started(), true, false
		f.Urgent = j.Kind() == engine.Urgent
		f.Clock = engine.Clock{Sub: f.Submitted, At: f.At, Started: true}
		f.Why, f.On, f.Resource, f.KeyPaused = 0, 0, "", false
		return
	}
	f.At, f.Running, f.Urgent = now, false, false
	f.Clock = e.AgingClock(j, now)
	f.Parked = e.Held(j)
	w := e.WhyWaiting(j)
	f.Why, f.On, f.Resource = w.Why, w.On, w.Resource
	f.KeyPaused = w.Why == engine.WhyPaused && e.KeyPaused(f.Key)
}
