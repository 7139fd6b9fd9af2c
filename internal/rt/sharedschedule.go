package rt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fairsched/fairsched/internal/store"
)

// Durable schedules on replicas. Every replica that calls ScheduleDurable
// with one name keeps the schedule, and its timer fires on each of them:
// the store's state of the schedule (its next time and latest occurrence)
// decides which one enqueues the occurrence. At the time it armed, a
// replica reads the state, and
//
//   - if its next time is another (a replica enqueued or skipped this
//     occurrence already, or the schedule was started elsewhere at another
//     time), it arms its timer at that time instead, and writes nothing;
//   - if its latest occurrence has not ended, it skips this one, by a swap
//     of the state to the next time, the latest unchanged;
//   - otherwise it enqueues the occurrence with a swap of the state to the
//     next time and the new job (store.Swapper.SwapInsert).
//
// A swap writes only if the state still holds what the replica read, so
// of the replicas that fire one occurrence, one writes: the others find
// the state moved and arm at its next time, which is the one they armed
// when every replica's schedule is the same. A write that fails counts the
// occurrence skipped and leaves the state as it was: the next firing on
// any replica finds the earlier time there, fires it at once, and so
// enqueues it late, once (as after a restart: one, however many fell due).

// occurSharedLocked settles the occurrence due at at of a schedule the
// replicas share, the one after it being next, on a goroutine of the
// Scheduler's: it reads and writes the store. Until it ends, the
// occurrence is the latest: one that falls due meanwhile is skipped here.
func (p *Periodic) occurSharedLocked(at, next time.Time) {
	s := p.s
	p.writing = true
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		r, err := p.swapOccurrence(at, next)
		s.mu.Lock()
		defer s.mu.Unlock()
		p.writing = false
		switch {
		case errors.Is(err, store.ErrClosed):
		case err != nil:
			p.skipped++
			s.skippedOccurrences++
			if s.cfg.Logger != nil {
				s.cfg.Logger.Error("fairsched: a durable schedule's occurrence was not enqueued", "schedule", p.durable.name, "err", err)
			}
		case r.enqueued != 0:
			p.last = Handle{elsewhere: r.enqueued, end: s.newEndWait(r.enqueued)}
		case r.skipped:
			p.skipped++
			s.skippedOccurrences++
		case p.stop == nil: // stopped meanwhile
		case r.next == 0: // the schedule has no more occurrences
			p.stopLocked()
		case p.next.UnixMicro() != r.next:
			p.stop()
			p.armAtLocked(time.UnixMicro(r.next))
		}
	}()
}

// sharedOutcome is what swapOccurrence did with one occurrence: enqueued
// it (the job's ID), skipped it, or found the schedule's next time moved
// to next (0: none).
type sharedOutcome struct {
	enqueued int64
	skipped  bool
	next     int64
}

// swapOccurrence enqueues or skips the occurrence due at at, if the
// store's state of the schedule still has it next, recording next after
// it.
func (p *Periodic) swapOccurrence(at, next time.Time) (sharedOutcome, error) {
	ctx := context.Background()
	d := p.s.durable
	name := ScheduleStateName(p.durable.name)
	old, saved, err := readSchedule(ctx, d.st, name)
	if err != nil {
		return sharedOutcome{}, err
	}
	if saved.Next != 0 && saved.Next != at.UnixMicro() {
		// Its next time is another. (None, 0: the schedule had ended, and
		// starts again from the time this replica armed, as after a
		// restart.)
		return sharedOutcome{next: saved.Next}, nil
	}
	moved := func() (sharedOutcome, error) { // the swap lost: where is the schedule now?
		_, now, err := readSchedule(ctx, d.st, name)
		return sharedOutcome{next: now.Next}, err
	}
	if saved.Last != 0 {
		state, _, found, err := d.st.Ended(ctx, saved.Last)
		if err != nil {
			return sharedOutcome{}, err
		}
		if found && !state.Finished() {
			value := ScheduleState{Last: saved.Last}.at(next)
			won, err := p.durable.shared.SwapInsert(ctx, &store.StateWrite{Name: name, Value: func([]*store.Job) []byte { return value }}, old)
			if err != nil || !won {
				if err != nil {
					return sharedOutcome{}, err
				}
				return moved()
			}
			return sharedOutcome{skipped: true}, nil
		}
	}
	job := p.job
	rec, err := d.record(&EnqueueParams{Job: job, Args: p.durable.args})
	if err == nil {
		p.s.mu.Lock()
		err = p.s.stampLocked(&job, rec, p.s.nowLocked()) // as Enqueue on a replica does
		p.s.mu.Unlock()
	}
	if err != nil {
		return sharedOutcome{}, err
	}
	state := &store.StateWrite{Name: name, Value: func(jobs []*store.Job) []byte {
		return ScheduleState{Last: jobs[0].ID}.at(next)
	}}
	won, err := p.durable.shared.SwapInsert(ctx, state, old, rec)
	switch {
	case err != nil:
		return sharedOutcome{}, err
	case !won:
		return moved()
	}
	return sharedOutcome{enqueued: rec.ID}, nil
}

// readSchedule reads the store's state of the schedule called name: its
// bytes, nil if there is none, and their value.
func readSchedule(ctx context.Context, st store.Store, name string) ([]byte, ScheduleState, error) {
	var saved ScheduleState
	b, err := st.State(ctx, name)
	if err != nil {
		return nil, saved, err
	}
	if b != nil {
		if err := json.Unmarshal(b, &saved); err != nil {
			return nil, saved, fmt.Errorf("fairsched: the store's schedule %q: %w", name, err)
		}
	}
	return b, saved, nil
}
