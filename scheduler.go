package fairsched

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/fairsched/fairsched/internal/clock"
	"github.com/fairsched/fairsched/internal/iheap"
)

// ErrClosed is returned for work submitted after Shutdown or Close began,
// and is the error of queued jobs that Close discarded.
var ErrClosed = errors.New("fairsched: scheduler closed")

// ErrQueueFull is matched (errors.Is) by the *QueueFullError a submission
// gets when it would pass MaxQueue or its key's MaxPending. A service maps
// it to HTTP 429 with a Retry-After header.
var ErrQueueFull = errors.New("fairsched: queue full")

// QueueFullError reports which admission limit a submission hit. The
// submission changed nothing.
type QueueFullError struct {
	Key   string // the fairness key, when its own pending limit was hit
	Limit int    // the limit
	Size  int    // jobs pending under that limit
}

func (e *QueueFullError) Error() string {
	if e.Key != "" {
		return fmt.Sprintf("fairsched: queue full: key %q has %d pending jobs (limit %d)", e.Key, e.Size, e.Limit)
	}
	return fmt.Sprintf("fairsched: queue full: %d pending jobs (limit %d)", e.Size, e.Limit)
}

// Is makes errors.Is(err, ErrQueueFull) true.
func (e *QueueFullError) Is(target error) bool { return target == ErrQueueFull }

// PanicError is the error of a job whose function panicked. The slot is
// released and the scheduler carries on.
type PanicError struct {
	Value any    // what was passed to panic
	Stack []byte // the goroutine's stack at the panic
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("fairsched: job panicked: %v\n%s", e.Value, e.Stack)
}

// Scheduler decides which job runs next: bounded concurrency, tiers,
// fair share between keys by learned cost, priorities with aging, type and
// key caps and conflict exclusion, by the one order of doc.go. Create one
// with New; the zero value is not usable. A Scheduler is safe for
// concurrent use.
type Scheduler struct {
	cfg         Config
	clock       Clock
	realClock   bool // clock is the system clock: read it with time.Since
	epoch       time.Time
	aging       agingParams
	defaultCost float64 // seconds
	idleTTL     int64   // µs

	mu sync.Mutex
	// Guarded by mu.
	types     map[string]*typeState
	anyType   *typeState   // the default type, ""
	anyKey    *keyState    // the empty key, "": kept for good
	tiers     []*tierState // highest first
	keys      map[string]*keyState
	busy      []*keyState            // keys with work queued or running, in no order
	reserving []*keyState            // keys with MinSlots, by name
	keyParked iheap.Keyed[*keyState] // uncapped keys with parked jobs, by their first
	conflicts map[conflictKey]*conflictSlot
	costs     costTable
	grace     graceQueue
	running   []*job
	spare     []*job // ended RunSync records, for reuse
	idleHead  *keyState
	idleTail  *keyState
	seq       uint64
	stamp     uint64
	nrunning  int
	npending  int           // queued and parked
	nqueued   int           // visible in lanes
	closing   bool          // Shutdown or Close began: no new work
	closed    bool          // Close began: queued work discarded
	idle      chan struct{} // closed when nothing is pending or running, while closing
	counters  counters
	// Parked counts, for Stats.
	parkedConflict int
	parkedKey      int
	keysForgotten  uint64
	nconfigured    int // keys with configured set

	wg     sync.WaitGroup // job goroutines
	events *eventSink     // nil without Config.OnEvent
}

// New returns a Scheduler configured by cfg, or an error naming every
// problem with cfg.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Scheduler{
		cfg:         cfg,
		clock:       cfg.Clock,
		aging:       newAgingParams(cfg.Aging),
		defaultCost: defaultCost.Seconds(),
		idleTTL:     defaultIdleTTL.Microseconds(),
		types:       make(map[string]*typeState),
		keys:        make(map[string]*keyState),
		conflicts:   make(map[conflictKey]*conflictSlot),
	}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	_, s.realClock = s.clock.(clock.Real)
	s.epoch = s.clock.Now()
	alpha := cfg.CostAlpha
	if alpha == 0 {
		alpha = defaultAlpha
	}
	s.costs = newCostTable(alpha)
	if cfg.DefaultCost > 0 {
		s.defaultCost = cfg.DefaultCost.Seconds()
	}
	if cfg.IdleTTL > 0 {
		s.idleTTL = cfg.IdleTTL.Microseconds()
	}
	s.keyParked = iheap.NewKeyed(func(k *keyState, i int) { k.kpIdx = i })
	for t := range cfg.TierLimits {
		s.tierLocked(t)
	}
	if err := s.registerTypeLocked("", TypeConfig{}); err != nil {
		return nil, err
	}
	s.anyType = s.types[""]
	for _, name := range sortedKeys(cfg.Types) {
		if err := s.registerTypeLocked(name, cfg.Types[name]); err != nil {
			return nil, err
		}
	}
	for _, name := range sortedKeys(cfg.Keys) {
		k := s.keyLocked(name)
		k.cfg, k.configured = resolveKey(cfg.Keys[name]), true
		s.nconfigured++
	}
	s.anyKey = s.keyLocked("")
	s.anyKey.pinned = true
	s.rebuildReservingLocked()
	if cfg.OnEvent != nil {
		s.events = newEventSink(cfg.OnEvent, cfg.EventBuffer, cfg.Logger)
	}
	return s, nil
}

// nowLocked returns the scheduler's time in µs since its epoch. With the
// system clock it reads only the monotonic clock (time.Since on a reading
// that carries one), which costs half of time.Now.
func (s *Scheduler) nowLocked() int64 {
	if s.realClock {
		return time.Since(s.epoch).Microseconds()
	}
	return s.clock.Now().Sub(s.epoch).Microseconds()
}

// RunSync waits until the job may start, runs fn on the calling goroutine
// and returns its error. If ctx ends while the job is queued, the job
// leaves the queue at once and ctx.Err() is returned; fn is not called and
// no slot stays taken. fn receives a context that ends when ctx does or
// when Close cancels running work. A panic in fn is recovered and returned
// as a *PanicError; if fn calls runtime.Goexit, the job still ends and
// gives its slot back.
//
// RunSync fails at once, changing nothing, with ErrClosed after Shutdown or
// Close, with an error wrapping ErrUnknownType, or with a *QueueFullError.
func (s *Scheduler) RunSync(ctx context.Context, desc Job, fn func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	jc := &jobContext{parent: ctx}
	s.mu.Lock()
	j := s.newSyncJobLocked(fn, jc)
	now := s.nowLocked()
	if err := s.enqueueLocked(j, desc, now); err != nil {
		s.recycleLocked(j)
		s.mu.Unlock()
		return err
	}
	if j.state != stateRunning {
		j.wake = make(chan struct{})
		s.dispatchLocked(now, false)
	}
	if j.state == stateRunning {
		s.mu.Unlock()
	} else {
		ready := j.wake
		s.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
		}
		s.mu.Lock()
		switch j.state {
		case stateQueued, stateParked:
			s.removeQueuedLocked(j, ctx.Err(), s.nowLocked())
			s.mu.Unlock()
			return ctx.Err()
		case stateDone: // discarded by Close
			s.mu.Unlock()
			return j.err
		}
		if err := ctx.Err(); err != nil {
			// Started just as the caller gave up: give the slot back.
			s.finishLocked(j, err, false, s.nowLocked())
			s.dispatchLocked(s.nowLocked(), false)
			s.mu.Unlock()
			return err
		}
		s.mu.Unlock()
	}
	err := s.call(j)
	jc.end()
	s.mu.Lock()
	now = s.nowLocked()
	s.finishLocked(j, err, true, now)
	if s.npending > 0 {
		s.dispatchLocked(now, false)
	}
	s.recycleLocked(j)
	s.mu.Unlock()
	return err
}

// maxSpareJobs bounds the records kept for reuse by RunSync: enough for
// the callers running at once in a busy service, about 10 kB in all.
const maxSpareJobs = 64

// newSyncJobLocked returns a record for a RunSync job, reusing one when it
// can: the record never leaves the scheduler, so reuse is safe, and it
// spares the allocation that dominates an uncontended RunSync.
func (s *Scheduler) newSyncJobLocked(fn func(context.Context) error, ctx *jobContext) *job {
	var j *job
	if n := len(s.spare); n > 0 {
		j = s.spare[n-1]
		s.spare[n-1] = nil
		s.spare = s.spare[:n-1]
	} else {
		j = new(job)
	}
	j.fn, j.sync, j.ctx = fn, true, ctx
	return j
}

// recycleLocked keeps an ended RunSync job's record for reuse. Nothing
// else holds it: an ending job leaves the grace queue (endLocked).
func (s *Scheduler) recycleLocked(j *job) {
	if len(s.spare) == maxSpareJobs {
		return
	}
	*j = job{}
	s.spare = append(s.spare, j)
}

// Submit queues the job and returns at once with a Handle to wait on or
// cancel it; fn runs on a goroutine the scheduler owns, with a context
// that Handle.Cancel and Close cancel. A panic in fn is recovered and
// becomes the job's error, a *PanicError.
//
// Submit fails at once, changing nothing, with ErrClosed after Shutdown or
// Close, with an error wrapping ErrUnknownType, or with a *QueueFullError.
func (s *Scheduler) Submit(desc Job, fn func(context.Context) error) (*Handle, error) {
	j := newSubmitJob(fn)
	s.mu.Lock()
	now := s.nowLocked()
	if err := s.enqueueLocked(j, desc, now); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	if j.state == stateRunning {
		s.wg.Add(1)
		go s.work(j)
	} else {
		s.dispatchLocked(now, false)
	}
	s.mu.Unlock()
	return (*Handle)(j), nil
}

// enqueueLocked admits a job to the queue, or starts it at once when
// nothing else is pending and it is admissible (then the order has nothing
// to decide). On error nothing has changed.
func (s *Scheduler) enqueueLocked(j *job, desc Job, now int64) error {
	t := s.anyType
	if desc.Type != "" {
		var err error
		if t, err = s.typeLocked(desc.Type); err != nil {
			return s.rejectLocked(desc, nil, err, now)
		}
	}
	if s.closing {
		return s.rejectLocked(desc, t, ErrClosed, now)
	}
	if s.cfg.MaxQueue > 0 && s.npending >= s.cfg.MaxQueue {
		return s.rejectLocked(desc, t, &QueueFullError{Limit: s.cfg.MaxQueue, Size: s.npending}, now)
	}
	// Peek at the key: a refused submission must not create one.
	k := s.anyKey
	if desc.Key != "" {
		k = s.keys[desc.Key]
	}
	if k != nil && k.cfg.MaxPending > 0 && k.pending >= k.cfg.MaxPending {
		return s.rejectLocked(desc, t, &QueueFullError{Key: desc.Key, Limit: k.cfg.MaxPending, Size: k.pending}, now)
	}
	// Forget what has been idle too long, then take the key's record: a
	// key past its TTL comes back brand-new, not as its forgotten record.
	stale := k != nil && k.idle && now-k.idleSince >= s.idleTTL
	s.forgetLocked(now)
	if k == nil || stale {
		k = s.keyLocked(desc.Key)
	}
	s.unidleLocked(k)
	j.id = desc.ID
	j.base = uint8(t.priority)
	if desc.Priority != 0 {
		j.base = uint8(clampPriority(desc.Priority))
	}
	s.seq++
	j.seq, j.sub, j.uidx = s.seq, now, -1
	l := s.laneLocked(t, k)
	j.lane = l
	f := l.flow
	if f.pending == 0 && f.running == 0 {
		s.activateLocked(f)
	}
	s.npending++
	k.pending++
	f.pending++
	t.pending++
	s.recordSubmitLocked(j, now)
	if k.pending == 1 && k.running == 0 {
		s.busyLocked(k)
		s.emitAllocationLocked(k, ReasonRebalance) // the key has work again
	}
	if s.npending == 1 && s.keyParked.Len() == 0 && s.admissibleLocked(j) {
		// Nothing else waits: the order has nothing to decide.
		s.startLocked(j, s.kindOfLoneLocked(j, now), now)
		return nil
	}
	s.showLocked(j, now)
	if s.aging.on && s.aging.grace > 0 {
		s.grace.push(j)
	}
	return nil
}

// admissibleLocked reports whether j passes every hard limit now.
func (s *Scheduler) admissibleLocked(j *job) bool {
	return !s.full() && !j.lane.typ.blocked() && !j.lane.key.atCap() && s.conflictLocked(j) == nil
}

// kindOfLoneLocked says how a job with no competitor starts, by the same
// order as pickLocked: urgent, else under its key's reservation, else fair.
func (s *Scheduler) kindOfLoneLocked(j *job, now int64) startKind {
	switch {
	case s.aging.isUrgent(int(j.base), j.sub, now):
		return startUrgent
	case j.lane.key.cfg.MinSlots > j.lane.key.reserved:
		return startReserved
	}
	return startFair
}

// forgetLocked drops idle keys and unused cost estimates past IdleTTL.
func (s *Scheduler) forgetLocked(now int64) {
	if s.idleHead != nil {
		s.forgetIdleLocked(now)
	}
	s.costs.expire(now, s.idleTTL)
}

// errGoexit is the error of a job whose function called runtime.Goexit
// (t.FailNow in a test, say).
var errGoexit = errors.New("fairsched: job function called runtime.Goexit")

// call runs a job's function, turning a panic into a *PanicError. If the
// function calls runtime.Goexit, the goroutine is ending and nothing after
// call will run on it, so call itself ends the job and gives its slot back.
func (s *Scheduler) call(j *job) (err error) {
	returned := false
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
			return
		}
		if !returned {
			j.ctx.end()
			s.mu.Lock()
			now := s.nowLocked()
			s.finishLocked(j, errGoexit, true, now)
			s.dispatchLocked(now, false)
			s.mu.Unlock()
		}
	}()
	err = j.fn(j.ctx)
	returned = true
	return err
}

// work runs Submit jobs on a goroutine of the scheduler's: j, then any job
// the dispatcher hands back to it, until there is none.
func (s *Scheduler) work(j *job) {
	defer s.wg.Done()
	for j != nil {
		err := s.call(j)
		j.ctx.end()
		s.mu.Lock()
		now := s.nowLocked()
		s.finishLocked(j, err, true, now)
		j = nil
		if s.npending > 0 {
			j = s.dispatchLocked(now, true)
		}
		s.mu.Unlock()
	}
}

// Shutdown stops new work (which gets ErrClosed) and waits until every
// queued and running job has ended and the OnEvent hook has been given
// every event, then returns nil. Queued work still starts as usual. If ctx
// ends first, Shutdown returns ctx.Err() and leaves the remaining work
// running and the events being delivered; call Close to stop the work and
// release the scheduler's goroutines (Close still hands the hook the
// events already queued). Shutdown may be called more than once, and with
// Close, but not from a job or the OnEvent hook: it would wait for itself.
func (s *Scheduler) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	idle := s.idleChanLocked()
	s.mu.Unlock()
	select {
	case <-idle: // drained already: done, whatever ctx says
	default:
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.wg.Wait()
	return s.closeEvents(ctx)
}

// Close stops new work, ends every queued job with ErrClosed, cancels the
// contexts of running jobs and waits for them to return, and for the
// OnEvent hook to be given the events sent before (a hook that never
// returns keeps Close waiting, as a job that ignores its context does). It
// is safe to call more than once, but not from a job or the hook, for
// which it would wait. It returns nil.
func (s *Scheduler) Close() error {
	s.mu.Lock()
	s.closing, s.closed = true, true
	now := s.nowLocked()
	// Discard every queued job: visible in a lane, parked on its key's
	// cap, or waiting on a conflict. (Ending a job never deletes a key.)
	for _, k := range s.keys {
		for _, l := range k.lanes {
			for l.n > 0 {
				j, _ := l.head(&s.aging, now)
				s.removeQueuedLocked(j, ErrClosed, now)
			}
		}
		for k.parked.Len() > 0 {
			j, _ := k.parked.Top()
			s.removeQueuedLocked(j, ErrClosed, now)
		}
	}
	for _, sl := range s.conflicts {
		for len(sl.waiters) > 0 {
			s.removeQueuedLocked(sl.waiters[0], ErrClosed, now)
		}
	}
	for _, j := range s.running {
		j.ctx.cancel(context.Canceled)
	}
	idle := s.idleChanLocked()
	s.mu.Unlock()
	<-idle
	s.wg.Wait()
	return s.closeEvents(context.Background())
}

// idleChanLocked returns a channel closed once nothing is pending or
// running.
func (s *Scheduler) idleChanLocked() <-chan struct{} {
	if s.npending == 0 && s.nrunning == 0 {
		return closedChan
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	return s.idle
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
