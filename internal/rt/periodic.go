package rt

import (
	"context"
	"errors"
	"time"

	"github.com/fairsched/fairsched/internal/engine"
)

// Schedule gives the times of a periodic job's occurrences: Next returns
// the first occurrence after t, or the zero time for none (the schedule
// then ends). A parsed cron expression of the usual Go cron libraries has
// this method already. The Scheduler calls Next from one goroutine at a
// time per schedule, and never with its lock held, so Next may call the
// Scheduler.
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

// Schedule submits job, with fn, at each time spec gives, from now on:
// each occurrence is a new Submit job, with a fresh aging clock, whose
// context carries ctx's values. An occurrence whose predecessor has not
// ended (it is queued, backing off or running) is skipped and counted,
// so a slow job never piles up copies nor overlaps itself. Stop, Shutdown
// and Close end the schedule. Schedule fails with ErrClosed after
// Shutdown or Close, if spec or fn is nil, or as Submit does for job's
// type; a nil ctx panics.
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
	if !s.eng.Accepting() {
		return nil, ErrClosed
	}
	if _, ok := s.eng.TypeTier(job.Type); !ok {
		return nil, errUnknownType(job.Type)
	}
	p := &Periodic{s: s, spec: spec, job: job, fn: fn, ctx: ctx}
	if s.periodic == nil {
		s.periodic = make(map[*Periodic]struct{})
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.stop == nil {
		return // stopped meanwhile
	}
	if p.writing || p.last.t != nil && p.last.t.rec.State() != engine.StateDone {
		p.skipped++
		s.skippedOccurrences++
		if p.durable != nil && !p.writing {
			p.saveLocked(next) // else once the write ends, after it
		}
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

// Stop ends the schedule: no occurrence starts after it returns. An
// occurrence already submitted goes on. Stop is safe to call more than
// once.
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
