package fairsched

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

// Queue returns a page of the jobs running and waiting: from position
// offset (0 is the first), at most limit of them, as JobInfo (with what
// each waiting job waits for, as in Snapshot).
//
// Running jobs come first, by Seq. Waiting jobs follow in the order the
// dispatcher ranks them now: the urgent jobs (aged past the urgent
// threshold, highest score first), then the jobs of keys below their
// MinSlots, then by tier, their key's virtual time in the tier, then
// effective priority, then submission. That is the order the dispatcher
// would consider them in if every slot were free and no limit bound, and
// if no start moved a key's virtual time; each start charges its key, so
// in practice keys take turns where the listing shows one key's jobs
// together. The first jobs of each key are in their exact order. Jobs
// held by a limit (a cap, a conflict, a resource, a rate limit) are
// listed where the order puts them, with Waiting saying what holds them.
// The jobs of paused keys and types come last, by key, then type, in no
// order within one: they have none until their pause ends.
//
// The scheduler keeps no index of its queue in submission order: Queue
// walks the orders the dispatcher keeps, merging them lazily, so it holds
// the scheduler's lock for O(r) for the r running jobs (bounded by the
// slots; it sorts them once it has let the lock go) plus O(m log m) for
// the m = offset+limit jobs it lists or passes over, plus the lanes of
// the keys at their cap and of the conflicts held, however long the queue
// is. Under the lock it copies what each job listed shows; it builds the
// JobInfos after. A page near the front, such as an admin page polls,
// costs about as much with a million jobs queued as with a hundred; a
// deep page costs what it passes over (the paused jobs cost only the
// paused keys and the types to pass over). Snapshot, which lists every
// job, sorts the whole queue under the lock.
func (s *Scheduler) Queue(offset, limit int) QueuePage {
	p := s.rt.Queue(offset, limit)
	return QueuePage{Running: p.Running, Waiting: p.Waiting, Paused: p.Paused, Aside: p.Aside, Jobs: jobInfos(p.Jobs)}
}
