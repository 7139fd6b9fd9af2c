package rt

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/store"
)

// Schedule is the run-time layer's side of the API's Schedule, which documents
// it.
type Schedule interface {
	Next(t time.Time) time.Time
}

// errNilSchedule is the error of Schedule given no schedule.
var errNilSchedule = errors.New("fairsched: the schedule is nil")

// Periodic is a periodic job started by Scheduler.Schedule. Its methods
// are safe for concurrent use.
type Periodic struct {
	s    *Runtime
	spec Schedule
	job  Job
	fn   func(context.Context) error
	ctx  context.Context // its occurrences' contexts carry its values

	// durable is set for a schedule of durable jobs (ScheduleDurable).
	durable *durableSchedule

	// Guarded by s.mu.
	stop    func() bool // the clock timer of the next occurrence; nil once stopped
	next    time.Time   // the time of that occurrence
	last    Handle      // the latest occurrence submitted
	writing bool        // a durable occurrence is being stored: it is the latest
	skipped uint64
}

// Schedule is the API's Scheduler.Schedule, which documents it.
func (s *Runtime) Schedule(ctx context.Context, spec Schedule, job Job, fn func(context.Context) error) (*Periodic, error) {
	if ctx == nil {
		panic("fairsched: Schedule with a nil context")
	}
	switch {
	case spec == nil:
		return nil, errNilSchedule
	case fn == nil:
		return nil, ErrNilFunc
	}
	first := spec.Next(s.clock.Now()) // the user's code: outside the lock
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil, ErrClosed
	}
	if _, ok := s.decider().TypeTier(job.Type); !ok {
		return nil, errUnknownType(job.Type)
	}
	p := &Periodic{s: s, spec: spec, job: job, fn: fn, ctx: ctx}
	if s.periodic == nil {
		s.periodic = make(map[interface{ stopLocked() }]struct{})
	}
	s.periodic[p] = struct{}{}
	p.armNextLocked(first)
	return p, nil
}

// armNextLocked sets the clock timer for the occurrence at next, or ends
// the schedule if next is zero (there is none). next comes from
// spec.Next, which is called without the lock: it is the user's code.
func (p *Periodic) armNextLocked(next time.Time) {
	if next.IsZero() {
		p.stopLocked()
		return
	}
	p.armAtLocked(next)
}

// armAtLocked sets the clock timer for the occurrence at next.
func (p *Periodic) armAtLocked(next time.Time) {
	p.next = next
	p.stop = p.s.clock.AfterFunc(next.Sub(p.s.clock.Now()), func() { p.occur(next) })
}

// occur submits the occurrence due at at, unless its predecessor has not
// ended, and sets the timer for the next.
func (p *Periodic) occur(at time.Time) {
	s := p.s
	next := p.spec.Next(at) // the user's code: outside the lock
	if p.durable != nil && p.durable.shared != nil {
		// A shared schedule fires a stored time however late, as the one
		// occurrence of all that fell due: the next is after now.
		if now := s.clock.Now(); !next.IsZero() && !next.After(now) {
			next = p.spec.Next(now)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.stop == nil {
		return // stopped meanwhile
	}
	if p.writing || p.last.t != nil && !p.last.t.ended() {
		p.skipped++
		s.skippedOccurrences++
		if p.durable != nil && p.durable.shared == nil && !p.writing {
			p.saveLocked(next) // else once the write ends, after it
		}
	} else if p.durable != nil && p.durable.shared != nil {
		p.occurSharedLocked(at, next)
	} else if p.durable != nil {
		p.occurDurableLocked(next)
	} else {
		t := newSubmitTask(p.ctx, p.fn)
		job := p.job
		now := s.nowLocked()
		if err := s.enqueueLocked(t, &job, now); err == nil {
			p.last = s.handleLocked(t)
			s.launchLocked(t, now)
		} else {
			p.skipped++ // refused: a full queue, say
			s.skippedOccurrences++
		}
	}
	p.armNextLocked(next)
}

// Stop is the API's Periodic.Stop, which documents it.
func (p *Periodic) Stop() {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	p.stopLocked()
}

func (p *Periodic) stopLocked() {
	if p.stop != nil {
		p.stop()
		p.stop = nil
	}
	delete(p.s.periodic, p)
}

// Last returns the latest occurrence submitted, or the zero Handle.
func (p *Periodic) Last() Handle {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return p.last
}

// Skipped returns how many occurrences were skipped because their
// predecessor had not ended, or the queue refused them.
func (p *Periodic) Skipped() uint64 {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return p.skipped
}

// stopSchedulesLocked ends every schedule: Shutdown and Close.
func (s *Runtime) stopSchedulesLocked() {
	for p := range s.periodic {
		p.stopLocked()
	}
}

// Durable schedules. A schedule of durable jobs has a name, under which
// the Store keeps its next time and its latest occurrence, so that the
// code that starts the schedule again after a restart (ScheduleDurable
// with the same name) neither repeats an occurrence that was enqueued nor
// loses the one that fell due while no process ran: that one is enqueued
// at once, once.

// errDurableScheduleOnReplica refuses a durable schedule on a replica
// whose store cannot swap a state (store.Swapper): every replica that
// starts it would enqueue each occurrence.
var errDurableScheduleOnReplica = errors.New("fairsched: this replica's store cannot share a durable schedule with the other replicas (each would enqueue every occurrence): enqueue the occurrences from one process")

// durableSchedule is what a schedule of durable jobs adds to a Periodic.
type durableSchedule struct {
	name string
	args any
	// shared is set on a replica: the replicas that keep the schedule
	// share its state in the store (shared.go).
	shared store.Swapper
}

// ScheduleState is what the Store keeps of a schedule.
type ScheduleState struct {
	Next int64 `json:"next"`           // the next occurrence, µs since the Unix epoch; 0: none
	Last int64 `json:"last,omitempty"` // the latest occurrence's job ID
}

func ScheduleStateName(name string) string { return "schedule:" + name }

// ScheduleDurable is the API's Scheduler.ScheduleDurable, which documents it.
func (s *Runtime) ScheduleDurable(ctx context.Context, name string, spec Schedule, job Job, args any) (*Periodic, error) {
	if ctx == nil {
		panic("fairsched: ScheduleDurable with a nil context")
	}
	d := s.durable
	switch {
	case d == nil:
		return nil, errors.New("fairsched: ScheduleDurable needs a Store in Config")
	case spec == nil:
		return nil, errNilSchedule
	case name == "":
		return nil, errors.New("fairsched: ScheduleDurable needs a name")
	}
	var shared store.Swapper
	if s.remote != nil {
		var ok bool
		if shared, ok = d.st.(store.Swapper); !ok {
			return nil, errDurableScheduleOnReplica
		}
	}
	if _, err := d.record(&EnqueueParams{Job: job, Args: args}); err != nil {
		return nil, err
	}
	_, saved, err := readSchedule(ctx, d.st, ScheduleStateName(name))
	if err != nil {
		return nil, err
	}
	first := spec.Next(s.clock.Now()) // the user's code: outside the lock
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil, ErrClosed
	}
	p := &Periodic{s: s, spec: spec, job: job, ctx: ctx, durable: &durableSchedule{name: name, args: args, shared: shared}}
	if saved.Last != 0 {
		p.last = s.findDurableLocked(saved.Last) // still queued or running: later occurrences wait for it
	}
	if s.periodic == nil {
		s.periodic = make(map[interface{ stopLocked() }]struct{})
	}
	s.periodic[p] = struct{}{}
	now := s.clock.Now()
	switch {
	case saved.Next == 0:
		p.armNextLocked(first)
	case shared != nil:
		// The stored time, even past: the replicas fire the occurrence
		// it names, and one of them enqueues it (sharedschedule.go).
		p.armAtLocked(time.UnixMicro(saved.Next))
	case saved.Next <= now.UnixMicro():
		p.armAtLocked(now) // fell due while no one ran it
	default:
		p.armAtLocked(time.UnixMicro(saved.Next))
	}
	return p, nil
}

// findDurableLocked returns a Handle of the durable job id if it waits or
// runs here, and the zero Handle otherwise. O(n): once per schedule, as
// it starts.
func (s *Runtime) findDurableLocked(id int64) Handle {
	var h Handle
	s.decider().Each(func(j *engine.Job, _ bool) {
		if dt := s.durable.of(taskOf(j)); dt != nil && dt.id == id && h.t == nil {
			h = Handle{t: &dt.task}
		}
	})
	return h
}

// occurDurableLocked enqueues the occurrence due now, on a goroutine of
// the Scheduler's since the write must not hold the lock. The occurrence
// after it, next, is armed by the caller at once, not once the write
// ends: its time is known now, and a clock that has moved past it by then
// would fire it late (a test clock, not until it moves again). Until the
// write ends, the occurrence being written is the latest: one that falls
// due meanwhile is skipped.
func (p *Periodic) occurDurableLocked(next time.Time) {
	s := p.s
	p.writing = true
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		// The schedule's next time and latest occurrence are written in
		// the occurrence's transaction: a crash cannot leave the one
		// without the other.
		state := &store.StateWrite{Name: ScheduleStateName(p.durable.name), Value: func(jobs []*store.Job) []byte {
			return ScheduleState{Last: jobs[0].ID}.at(next)
		}}
		// The occurrence is the latest from the instant it is queued,
		// under the lock that queues it: before it can end.
		_, err := s.enqueueOne(context.Background(), EnqueueParams{Job: p.job, Args: p.durable.args}, state, func(hs []Handle) {
			p.wroteLocked(next, hs[0])
		})
		if err == nil {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if errors.Is(err, ErrClosed) {
			p.writing = false
			return // not recorded: the next start enqueues it
		}
		p.skipped++
		s.skippedOccurrences++
		p.wroteLocked(time.Time{}, p.last)
	}()
}

// wroteLocked ends the write of an occurrence whose transaction recorded
// the schedule's next time as next (zero: it recorded nothing), leaving
// last the latest occurrence. If the schedule moved on meanwhile (an
// occurrence skipped during the write), its state is recorded again, after
// the transaction.
func (p *Periodic) wroteLocked(next time.Time, last Handle) {
	p.writing = false
	p.last = last
	if p.stop != nil && !p.next.Equal(next) {
		p.saveLocked(p.next)
	}
}

// saveLocked records the schedule: its next occurrence, and its latest.
func (p *Periodic) saveLocked(next time.Time) {
	p.s.durable.st.PutState(ScheduleStateName(p.durable.name), ScheduleState{Last: p.last.ID()}.at(next))
}

// at returns the encoded state with its next time next (zero: none).
func (st ScheduleState) at(next time.Time) []byte {
	if !next.IsZero() {
		st.Next = next.UnixMicro()
	}
	b, _ := json.Marshal(st) // integers only: cannot fail
	return b
}
