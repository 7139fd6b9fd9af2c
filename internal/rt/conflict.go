package rt

// Conflict groups. Two jobs conflict when their types share a non-empty
// TypeConfig.ConflictGroup and the jobs share an ID: at most one of them
// runs at a time (say, never two git operations on one repository).
// A job blocked by a conflict waits without holding a slot and blocks no
// one behind it; it is looked at again when the job holding its resource
// ends. Snapshot reports such a job as Parked.
