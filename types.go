package fairsched

import "errors"

// ErrUnknownType is returned, wrapped with the type's name, for a job whose
// type was never registered.
var ErrUnknownType = errors.New("fairsched: unknown job type")

// RegisterType registers a job type. Registering a name again with the same
// configuration does nothing; with a different one it fails with an error
// and changes nothing (types are part of the scheduler's shape, so change
// them by building a new Scheduler).
func (s *Scheduler) RegisterType(name string, c TypeConfig) error {
	if err := c.validate(name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return s.eng.RegisterType(name, c.engine())
}
