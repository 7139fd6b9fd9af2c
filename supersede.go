package fairsched

import (
	"errors"
	"fmt"
)

// DuplicatePolicy says what a submission does when a job of the same
// type and ID (SPEC section 10: a job is identified by its type and ID)
// is already waiting (TypeConfig.Duplicates).
type DuplicatePolicy uint8

const (
	// AllowDuplicates, the zero value: every submission is a job of its
	// own.
	AllowDuplicates DuplicatePolicy = iota
	// Supersede: a new submission replaces the job of its type and ID that
	// is waiting (queued, delayed, paused, or waiting for a dependency);
	// that one ends with an error matching ErrSuperseded. The new job has
	// an aging clock of its own. A job that has started is not replaced.
	// The new submission is admitted by the queue's limits as any other,
	// before the one it replaces leaves.
	Supersede
	// JoinQueued: a new submission joins the job of its type and ID that
	// waits, instead of making a second job: Submit returns a Handle on
	// that job, RunSync waits for it and returns its error without
	// calling its own function. The job runs once, at the highest priority
	// of those who joined, charged to the key that submitted it first;
	// the joiner's other fields are ignored. A joiner whose Handle or
	// context is cancelled detaches alone; the job is cancelled when no
	// one is left attached, and if the submission whose function it would
	// run detaches while it waits, it runs the earliest joiner's still
	// attached (a RunSync joiner's on that caller's goroutine).
	JoinQueued
	// JoinRunning: as JoinQueued, and a job that runs is joined too.
	JoinRunning
)

// ErrSuperseded is matched (errors.Is) by the error of a job replaced by
// a newer submission of its type and ID (DuplicatePolicy Supersede).
var ErrSuperseded = errors.New("fairsched: superseded by a newer submission of the same type and ID")

// dupKey is a job's identity for its type's DuplicatePolicy.
type dupKey struct{ typ, id string }

// supersedes holds what the Supersede policies keep: the types that
// supersede, and the job of each (type, ID) that a newer submission would
// replace.
type supersedes struct {
	types   map[string]bool
	waiting map[dupKey]*task
	total   uint64 // jobs superseded
}

// note records the types whose policy is Supersede.
func (p *supersedes) note(name string, c TypeConfig) {
	if c.Duplicates == Supersede {
		if p.types == nil {
			p.types = make(map[string]bool)
			p.waiting = make(map[dupKey]*task)
		}
		p.types[name] = true
	}
}

// supersedeLocked ends the job that t, just accepted at now, replaces, and
// records t as the one to replace next if it waits.
func (s *Scheduler) supersedeLocked(t *task, now int64) {
	key := dupKey{t.rec.Type(), t.rec.ID()}
	if old := s.superseding.waiting[key]; old != nil && old.rec.Waiting() {
		s.superseding.total++
		// No dispatch here: the submission dispatches next.
		s.endQueuedLocked(old, fmt.Errorf("%w: job %d replaced by job %d", ErrSuperseded, old.rec.Seq(), t.rec.Seq()), now)
	}
	if t.rec.Waiting() {
		s.superseding.waiting[key] = t
	}
}

// dupStartedLocked does what the duplicate policies do as t starts: it can
// no longer be superseded, nor, under JoinQueued, joined.
func (s *Scheduler) dupStartedLocked(t *task) {
	if s.joining.policy != nil {
		s.joinStartedLocked(t)
	}
	if s.superseding.types != nil {
		s.forgetWaitingLocked(t)
	}
}

// dupEndedLocked does what the duplicate policies do as t ends.
func (s *Scheduler) dupEndedLocked(t *task) {
	if s.joining.policy != nil {
		s.joinEndedLocked(t)
	}
	if s.superseding.types != nil {
		s.forgetWaitingLocked(t)
	}
}

// forgetWaitingLocked forgets t as the job of its type and ID to replace:
// it started or ended.
func (s *Scheduler) forgetWaitingLocked(t *task) {
	key := dupKey{t.rec.Type(), t.rec.ID()}
	if s.superseding.waiting[key] == t {
		delete(s.superseding.waiting, key)
	}
}
