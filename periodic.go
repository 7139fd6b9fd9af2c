package fairsched

import (
	"context"
	"time"

	"github.com/fairsched/fairsched/internal/rt"
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

// Every returns a Schedule of an occurrence every d, the first d after the
// schedule starts. It panics if d is not positive.
func Every(d time.Duration) Schedule {
	if d <= 0 {
		panic("fairsched: Every with a duration that is not positive")
	}
	return every(d)
}

type every time.Duration

func (e every) Next(t time.Time) time.Time { return t.Add(time.Duration(e)) }

// Periodic is a periodic job started by Scheduler.Schedule. Its methods
// are safe for concurrent use.
type Periodic struct {
	p *rt.Periodic
}

// Schedule submits job, with fn, at each time spec gives, from now on:
// each occurrence is a new Submit job, with a fresh aging clock, whose
// context carries ctx's values. An occurrence whose predecessor has not
// ended (it is queued, backing off or running) is skipped and counted,
// so a slow job never piles up copies nor overlaps itself. Stop, Shutdown
// and Close end the schedule. Schedule fails with ErrClosed after
// Shutdown or Close, if spec or fn is nil, or as Submit does for job's
// type; a nil ctx panics.
func (s *Scheduler) Schedule(ctx context.Context, spec Schedule, job Job, fn func(context.Context) error) (*Periodic, error) {
	p, err := s.rt.Schedule(ctx, spec, *jobOf(&job), fn)
	if err != nil {
		return nil, err
	}
	return &Periodic{p}, nil
}

// Stop ends the schedule: no occurrence starts after it returns. An
// occurrence already submitted goes on. Stop is safe to call more than
// once.
func (p *Periodic) Stop() {
	p.p.Stop()
}

// Last returns the latest occurrence submitted, or the zero Handle.
func (p *Periodic) Last() Handle {
	return Handle{p.p.Last()}
}

// Skipped returns how many occurrences were skipped because their
// predecessor had not ended, or the queue refused them.
func (p *Periodic) Skipped() uint64 {
	return p.p.Skipped()
}

// Durable schedules. A schedule of durable jobs has a name, under which
// the Store keeps its next time and its latest occurrence, so that the
// code that starts the schedule again after a restart (ScheduleDurable
// with the same name) neither repeats an occurrence that was enqueued nor
// loses the one that fell due while no process ran: that one is enqueued
// at once, once.

// ScheduleDurable is Schedule for durable jobs: at each time spec gives,
// it enqueues job with args (Enqueue), unless the previous occurrence has
// not ended, which is skipped and counted. name identifies the schedule
// in the Store, which keeps its next time and its latest occurrence:
// started again with the same name after a restart, the schedule goes on
// where it was, and an occurrence that fell due while no Scheduler ran is
// enqueued at once (one, however many fell due). Occurrences are enqueued
// as Enqueue does, on a goroutine of the Scheduler's; one that fails to
// be stored is skipped and counted. It fails as Schedule does, and as
// Enqueue does for job and args.
//
// On a replica (Config.Replica), every replica that calls ScheduleDurable
// with the same name keeps one schedule: each occurrence is enqueued once,
// by one of them (the store settles which), and skipped while the
// previous occurrence has not ended, wherever it runs. Stop ends it on
// the calling replica only.
func (s *Scheduler) ScheduleDurable(ctx context.Context, name string, spec Schedule, job Job, args any) (*Periodic, error) {
	p, err := s.rt.ScheduleDurable(ctx, name, spec, *jobOf(&job), args)
	if err != nil {
		return nil, err
	}
	return &Periodic{p}, nil
}
