package fairsched

import "github.com/fairsched/fairsched/internal/rt"

// DuplicatePolicy says what a submission does when a job of the same
// type and ID (docs/design.md, Vocabulary: a job is identified by its type and ID)
// is already waiting (TypeConfig.Duplicates).
type DuplicatePolicy uint8

const (
	// AllowDuplicates, the zero value: every submission is a job of its
	// own.
	AllowDuplicates = DuplicatePolicy(rt.AllowDuplicates)
	// Supersede: a new submission replaces the job of its type and ID that
	// is waiting (queued, delayed, paused, or waiting for a dependency);
	// that one ends with an error matching ErrSuperseded. The new job has
	// an aging clock of its own. A job that has started is not replaced.
	// The new submission is admitted by the queue's limits as any other,
	// before the one it replaces leaves.
	Supersede = DuplicatePolicy(rt.Supersede)
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
	JoinQueued = DuplicatePolicy(rt.JoinQueued)
	// JoinRunning: as JoinQueued, and a job that runs is joined too.
	JoinRunning = DuplicatePolicy(rt.JoinRunning)
)
