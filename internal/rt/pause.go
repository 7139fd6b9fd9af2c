package rt

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fairsched/fairsched/internal/engine"
)

// PauseKey pauses the fairness key name. Its queued jobs, and those
// submitted to it later, wait holding nothing, out of the order and out
// of fair share: for allocation the key counts as one with no work, so
// its share goes to the other keys at once. Its running jobs finish. A
// paused job's aging clock stands still, as does that of a job of the
// key backing off or waiting for jobs it runs after; its start deadline
// does not.
// A key the scheduler has not seen may be paused: the pause applies when
// it appears. Pausing a paused key does nothing.
//
// It takes the lock for O(m log n) time, for the key's m waiting jobs.
func (s *Runtime) PauseKey(name string) {
	s.changePauses(func(now int64) bool { s.eng.PauseKey(name, now); return true })
}

// ResumeKey resumes the fairness key name. Its waiting jobs whose type
// is not paused join the queue, and the key re-enters fair share as a key
// returning from idle does: at the lowest virtual time of the keys with
// work, or its own if that is higher. Resuming a key that is not paused
// does nothing.
//
// It takes the lock for O(m log n) time, for the key's m paused jobs.
func (s *Runtime) ResumeKey(name string) {
	s.changePauses(func(now int64) bool { s.eng.ResumeKey(name, now); return true })
}

// PauseType pauses the job type name, as PauseKey does a key: its queued
// jobs and those submitted later wait, holding nothing, until ResumeType.
// Its running jobs finish, and for allocation none of its jobs, waiting or
// running, is work of their key: a key whose only work is of the type
// counts as one with no work. A job waits while its key or its type is
// paused. It fails, changing
// nothing, if the type is not registered (the error wraps ErrUnknownType).
func (s *Runtime) PauseType(name string) error {
	if !s.changePauses(func(now int64) bool { return s.eng.PauseType(name, now) }) {
		return errUnknownType(name)
	}
	return nil
}

// ResumeType resumes the job type name, as ResumeKey does a key. It fails
// if the type is not registered (the error wraps ErrUnknownType), and for
// a type of durable jobs found in the Store without a handler here, whose
// jobs wait for a process that has one (WaitNoHandler).
func (s *Runtime) ResumeType(name string) error {
	if s.durable != nil && s.durable.orphans[name] > 0 {
		return fmt.Errorf("fairsched: job type %q has no handler: its durable jobs wait for a Scheduler with one", name)
	}
	if !s.changePauses(func(now int64) bool { return s.eng.ResumeType(name, now) }) {
		return errUnknownType(name)
	}
	return nil
}

// changeNow applies change to the engine at the scheduler's time, after
// what fell due by then, and dispatches if it reports that it changed
// something.
func (s *Runtime) changeNow(change func(now int64) bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	s.catchUpLocked(now)
	if !change(now) {
		return false
	}
	s.kickLocked()
	return true
}

// changePauses applies a change of pauses as changeNow does, and records
// the pauses in the Store, if the Scheduler has one.
func (s *Runtime) changePauses(change func(now int64) bool) bool {
	return s.changeNow(func(now int64) bool {
		if !change(now) {
			return false
		}
		if s.durable != nil {
			s.savePausesLocked()
		}
		return true
	})
}

// pauses is what the Store keeps of the pauses, so that a restart keeps
// them: the keys and types paused (the types held for want of a handler
// are not), and when each pause began, so that the aging clocks of the
// jobs they hold stand still from then, not from the restart (a state
// written before those times were kept has none: from the restart).
type pauses struct {
	Keys      []string         `json:"keys,omitempty"`
	Types     []string         `json:"types,omitempty"`
	KeySince  map[string]int64 `json:"key_since,omitempty"` // µs since the Unix epoch
	TypeSince map[string]int64 `json:"type_since,omitempty"`
	// Stood is the paused time of each job lane (a key's jobs of one
	// type) whose key or type was paused, up to the start of a pause in
	// progress (engine.Stoods), in the store's µs: a job still set aside
	// with its aging clock running at a restart moves its submission time
	// on by its lane's, less its own (store.Job.Stood).
	Stood []laneStood `json:"stood,omitempty"`
}

type laneStood struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Stood int64  `json:"stood"`
}

const pausesStateName = "pauses"

// savePausesLocked posts the pauses to the store.
func (s *Runtime) savePausesLocked() {
	p := pauses{Keys: s.eng.PausedKeys(), KeySince: map[string]int64{}, TypeSince: map[string]int64{}}
	for _, name := range p.Keys {
		p.KeySince[name] = s.wallOf(s.eng.KeyPausedSince(name))
	}
	for _, name := range s.eng.PausedTypes() {
		if s.durable.orphans[name] == 0 {
			p.Types = append(p.Types, name)
			p.TypeSince[name] = s.wallOf(s.eng.TypePausedSince(name))
		}
	}
	s.eng.Stoods(func(l engine.LaneStood) {
		p.Stood = append(p.Stood, laneStood{l.Key, l.Type, s.wallOf(l.Stood)})
	})
	b, _ := json.Marshal(p) // strings and numbers only: cannot fail
	s.durable.st.PutState(pausesStateName, b)
}

// loadPausesLocked pauses again, at now, what the store says was paused;
// a type no longer registered is left out.
func (s *Runtime) loadPausesLocked(now int64) error {
	b, err := s.durable.st.State(context.Background(), pausesStateName)
	if err != nil || b == nil {
		return err
	}
	var p pauses
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("fairsched: the store's pauses: %w", err)
	}
	for _, l := range p.Stood { // before the pauses, which the lanes' restored values count from
		s.eng.RestoreStood(engine.LaneStood{Key: l.Key, Type: l.Type, Stood: s.engineTimeOf(l.Stood)})
		if s.durable.stood == nil {
			s.durable.stood = make(map[laneName]int64)
		}
		s.durable.stood[laneName{l.Key, l.Type}] = l.Stood
	}
	since := func(at map[string]int64, name string) int64 {
		if t, ok := at[name]; ok {
			return s.engineTimeOf(t)
		}
		return now
	}
	for _, name := range p.Keys {
		s.eng.PauseKeySince(name, since(p.KeySince, name), now)
	}
	for _, name := range p.Types {
		s.eng.PauseTypeSince(name, since(p.TypeSince, name), now)
	}
	return nil
}
