package fairsched

// RegisterType registers a job type. Registering a name again with the same
// configuration does nothing; with a different one it fails with an error
// and changes nothing (types are part of the scheduler's shape, so change
// them by building a new Scheduler). A replica of several (Config.Replica)
// registers no new type here: the leader decides by the types every
// replica has from Config.Types.
func (s *Scheduler) RegisterType(name string, c TypeConfig) error {
	if err := c.validate(name); err != nil {
		return err
	}
	return s.rt.RegisterType(name, c.runtime())
}
