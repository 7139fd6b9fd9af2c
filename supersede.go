package fairsched

import (
	"errors"
	"fmt"
)

// DuplicatePolicy says what a submission does when a job of the same
// type and ID (docs/design.md, Vocabulary: a job is identified by its type and ID)
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

// duplicates holds what the duplicate policies keep: each type's policy,
// and, for each (type, ID), the job a new submission meets (joins, or
// replaces): the latest accepted while it waits, or, under JoinRunning,
// until it ends.
type duplicates struct {
	policy     map[string]DuplicatePolicy // the types that have one; nil: none has
	current    map[dupKey]*task
	joiners    map[*task]*joined // of each job that duplicates may join (join.go)
	joins      uint64            // submissions that joined a job
	superseded uint64            // jobs replaced
}

// note records type name's policy, if it has one.
func (d *duplicates) note(name string, c TypeConfig) {
	if c.Duplicates == AllowDuplicates {
		return
	}
	if d.policy == nil {
		d.policy = make(map[string]DuplicatePolicy)
		d.current = make(map[dupKey]*task)
		d.joiners = make(map[*task]*joined)
	}
	d.policy[name] = c.Duplicates
}

// keyOf returns t's identity for its type's policy.
func keyOf(t *task) dupKey { return dupKey{t.rec.Type(), t.rec.ID()} }

// acceptedDupLocked applies t's type's policy to t, just accepted at now:
// under Supersede it ends the job t replaces; and t becomes the job its
// duplicates meet, if it waits (or, under JoinRunning, runs).
func (s *Scheduler) acceptedDupLocked(t *task, now int64) {
	p := s.dups.policy[t.rec.Type()]
	if p == AllowDuplicates {
		return
	}
	key := keyOf(t)
	if old := s.dups.current[key]; p == Supersede && old != nil && old.rec.Waiting() {
		s.dups.superseded++
		// No dispatch here: the submission dispatches next.
		s.endQueuedLocked(old, fmt.Errorf("%w: job %d replaced by job %d", ErrSuperseded, old.rec.Seq(), t.rec.Seq()), now)
	}
	if t.rec.Waiting() || p == JoinRunning && t.rec.Running() {
		s.dups.current[key] = t
	}
}

// dupStartedLocked closes t to its duplicates as it starts, unless its
// type joins running jobs.
func (s *Scheduler) dupStartedLocked(t *task) {
	if key := keyOf(t); s.dups.current[key] == t && s.dups.policy[key.typ] != JoinRunning {
		delete(s.dups.current, key)
	}
}

// dupEndedLocked closes t to its duplicates as it ends, and lets its
// joiners go.
func (s *Scheduler) dupEndedLocked(t *task) {
	if key := keyOf(t); s.dups.current[key] == t {
		delete(s.dups.current, key)
	}
	if js := s.dups.joiners[t]; js != nil {
		delete(s.dups.joiners, t)
		close(js.done)
	}
}
