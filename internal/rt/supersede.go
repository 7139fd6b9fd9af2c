package rt

import (
	"fmt"
)

// DuplicatePolicy is a type's duplicate policy, numbered as the API's.
type DuplicatePolicy uint8

// The duplicate policies (see the API's documentation of each).
const (
	AllowDuplicates DuplicatePolicy = iota
	Supersede
	JoinQueued
	JoinRunning
)

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
func (d *duplicates) note(name string, c Type) {
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
func (s *Runtime) acceptedDupLocked(t *task, now int64) {
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
func (s *Runtime) dupStartedLocked(t *task) {
	if key := keyOf(t); s.dups.current[key] == t && s.dups.policy[key.typ] != JoinRunning {
		delete(s.dups.current, key)
	}
}

// dupEndedLocked closes t to its duplicates as it ends, and lets its
// joiners go.
func (s *Runtime) dupEndedLocked(t *task) {
	if key := keyOf(t); s.dups.current[key] == t {
		delete(s.dups.current, key)
	}
	if js := s.dups.joiners[t]; js != nil {
		delete(s.dups.joiners, t)
		close(js.done)
	}
}
