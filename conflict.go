package fairsched

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Conflict groups. Two jobs conflict when their types share a non-empty
// TypeConfig.ConflictGroup and the jobs share an ID: at most one of them
// runs at a time (say, never two git operations on one repository).
// A job blocked by a conflict waits without holding a slot and blocks no
// one behind it; it is looked at again when the job holding its resource
// ends. Snapshot reports such a job as Parked.

// validateConflictGroup says what is wrong with the conflict group of job
// type name. Groups are matched exactly, so a group that differs from
// another by a space only would silently exclude nothing: such a name is
// refused rather than taken as a group of its own.
func validateConflictGroup(name, group string) error {
	switch {
	case !utf8.ValidString(group):
		return fmt.Errorf("fairsched: job type %q: ConflictGroup %q is not valid UTF-8", name, group)
	case strings.TrimSpace(group) != group:
		return fmt.Errorf("fairsched: job type %q: ConflictGroup %q has a leading or trailing space", name, group)
	}
	return nil
}
