package rt

import (
	"errors"
	"time"
	"unsafe"

	"github.com/fairsched/fairsched/internal/engine"
)

// A job as the run-time layer is given it: its description, the API's
// Job read in place, and the Handle that refers to it once admitted.

// Job is the API's Job, read in place (the API's jobOf): the same fields,
// in the same order, of the same layout (TestRuntimeMirrors in the API's
// tests); its first four are the engine's Desc (descOf).
type Job struct {
	Type, ID, Key      string
	Priority           int
	NotBefore, StartBy time.Time
	After              []Handle
	Needs              map[string]int
}

// descOf returns the engine's description of job: the same fields, laid
// out alike (TestDescMirrorsJob), so no copy is made.
func descOf(job *Job) *engine.Desc { return (*engine.Desc)(unsafe.Pointer(job)) }

// priorityLowest is the API's PriorityLowest: the priority 0, asked for
// (0 itself means "not set").
const priorityLowest = -1

// Tier numbers a tier, as the API's Tier does.
type Tier = int

// Handle is the run-time layer's side of the API's Handle, which documents
// it.
type Handle struct {
	t *task   // a Submit job's record, never reused while a Handle may hold it
	w *joiner // for a job of a type that joins duplicates: the submission it stands for
	// elsewhere is the ID of a durable job a replica enqueued, which the
	// leader keeps (t is nil), and end what the replica learns of its end
	// (elsewhere.go).
	elsewhere int64
	end       *endWait
}

// errNoJob is the error of the zero Handle.
var errNoJob = errors.New("fairsched: the zero Handle refers to no job")

// Seq returns the job's sequence number: unique in its Scheduler, in
// submission order, and the Seq of its Events and Snapshot entries.
func (h Handle) Seq() uint64 {
	if h.t == nil {
		return 0
	}
	return h.t.rec.Seq()
}
