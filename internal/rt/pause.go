package rt

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fairsched/fairsched/internal/engine"
)

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
