package fairsched

import (
	"time"
	"unsafe"

	"github.com/fairsched/fairsched/internal/rt"
)

// The queue, as a user sees it: a job's description, its priority, and
// Snapshot of what waits and what runs.

// Job describes one unit of work. The zero Job is valid: the default type,
// no ID, the empty fairness key and the default priority.
type Job struct {
	// Type names a registered job type; "" is the default type, which is
	// always registered: in the Background tier unless Config.Types[""]
	// says otherwise, so a Job that names no type is background work.
	Type string
	// ID is the resource the job acts on (a repository, a file, a tenant's
	// index). Conflict exclusion and cost estimates are keyed by it.
	ID string
	// Key is the fairness key: who the work is for (a client address, a
	// tenant). Capacity is shared fairly between keys. The empty key is
	// the service's own work; Config.DefaultKey does not apply to it.
	Key string
	// Priority orders work within one fairness key, 0..100, higher first;
	// values outside are clamped.
	//
	// Beware: 0 does not mean priority 0. It means "not set": the job gets
	// its type's DefaultPriority, or PriorityNormal (50). For the lowest
	// priority, 0, write PriorityLowest (or any negative number).
	// Snapshot's BasePriority shows the priority a job got.
	Priority int
	// NotBefore delays the job: it is accepted and counts against the
	// queue's limits at once, but it is not in the queue, and holds no
	// place in fair share, until then. Its aging clock starts then. The
	// zero time, or a time already past, means no delay.
	NotBefore time.Time
	// StartBy is the job's start deadline: if it has not started by then,
	// it ends with an error matching ErrStartDeadline, at that instant,
	// wherever it waits. Its type's StartTimeout, counted from submission,
	// may set an earlier one. The zero time means none. A deadline that is
	// not after the submission and NotBefore is refused at submission,
	// with an error matching ErrStartDeadline.
	StartBy time.Time
	// After are jobs of this scheduler that this one runs after: it waits,
	// holding nothing and out of fair share (its aging clock runs, except
	// while its key or type is paused), until
	// every one of them has completed. If one does not complete (it fails
	// for good, is cancelled, or misses its start deadline) the job ends
	// without running, with a *DependencyError that names it and wraps its
	// error, and so do the jobs after it, down the chain. A job that will
	// be retried has not failed yet; one that has ended already is taken
	// as it ended. A job can only run after jobs submitted before it, so
	// no cycle can form. On a replica (Config.Replica), a durable job may
	// run after durable jobs enqueued on any replica of the cluster, by
	// their Handles; a Submit or RunSync job may run after that replica's
	// own Submit jobs. It waits in its replica, counted against the
	// cluster's queue limits, until they end; such a job must be
	// submitted alone, not in a SubmitMany batch.
	After []Handle
	// Needs are the units of named resources (Config.Resources) the job
	// needs while it runs, in place of its type's TypeConfig.Needs; nil:
	// its type's, an empty map: none. A job that needs a resource not
	// configured, or more units than it has, is refused, with
	// ErrUnknownResource or ErrTooMuch. A durable job's are stored with it.
	Needs map[string]int
}

// Priorities run from 0 to 100, higher first. Values outside the range are
// clamped. In Job.Priority and TypeConfig.DefaultPriority the value 0 means
// "not set" (use the default), so the lowest priority is asked for with
// PriorityLowest, or any negative value, which clamps to 0.
const (
	PriorityCritical = 100
	PriorityHigh     = 80
	PriorityNormal   = 50 // the default
	PriorityLow      = 20
	PriorityLowest   = -1 // clamps to 0
)

// JobInfo describes a pending or running job in a Snapshot.
type JobInfo struct {
	Seq               uint64 // submission order
	Type, ID, Key     string
	Tier              Tier
	BasePriority      int // as resolved: a Job's Priority, or its type's default, clamped
	EffectivePriority int
	Urgent            bool
	Running           bool
	Parked            bool // waiting on a conflict or its key's cap
	// Waiting is what holds a job that has not started; WaitingOn is, for
	// WaitConflict, the Seq of the running job that holds the conflict,
	// for WaitDependency that of the earliest submitted job it still waits
	// for; WaitingFor is, for WaitResource, the resource.
	Waiting    WaitReason
	WaitingOn  uint64
	WaitingFor string
	Wait       time.Duration // submission to start, or to now if pending
	Submitted  time.Time
}

// Snapshot lists every pending and running job, running first, then in
// submission order. It takes the lock for O(n log n) time: for debugging
// and admin pages, not for hot paths.
func (s *Scheduler) Snapshot() []JobInfo {
	return jobInfos(s.rt.Snapshot())
}

// EstimateWait estimates how long a job described by job would wait for a
// slot if it were submitted now: 0 if it would start at once. A service
// that refuses work tells the client when to come back with it
// (Retry-After); a *QueueFullError carries the same estimate.
//
// The estimate is the work ahead of the job, in its types' learned
// typical durations, served at the rate of the slowest limit it is
// under: the slots (after higher tiers, and within its tier at its key's
// weighted share), its tier's, type's and key's caps, and a conflict
// lock on its ID held by a running job. It grows with the queue ahead of
// the job and shrinks as the queue drains, but ignores aging,
// reservations and work submitted later: an estimate, not a promise. A
// job delayed by NotBefore waits at least until then. A paused key or type
// is estimated as if it were resumed now: its pause has no end the
// scheduler could know.
// O(types + tiers); it errors, wrapping ErrUnknownType, for a type not
// registered.
func (s *Scheduler) EstimateWait(job Job) (time.Duration, error) {
	return s.rt.EstimateWait(jobOf(&job))
}

// jobOf reads a Job as the run-time layer's rt.Job: the same fields, laid
// out alike (TestRuntimeMirrors), so that a job crosses without a copy,
// its After included (a Handle is an rt.Handle and nothing more).
func jobOf(job *Job) *rt.Job { return (*rt.Job)(unsafe.Pointer(job)) }

// jobFrom reads an rt.Job as a Job: jobOf's inverse.
func jobFrom(job *rt.Job) *Job { return (*Job)(unsafe.Pointer(job)) }

// jobInfoOf returns the run-time layer's description of a job as the
// API's.
func jobInfoOf(i *rt.JobInfo) JobInfo {
	return JobInfo{
		Seq: i.Seq, Type: i.Type, ID: i.ID, Key: i.Key, Tier: Tier(i.Tier),
		BasePriority: i.BasePriority, EffectivePriority: i.EffectivePriority,
		Urgent: i.Urgent, Running: i.Running, Parked: i.Parked,
		Waiting: WaitReason(i.Waiting), WaitingOn: i.WaitingOn, WaitingFor: i.WaitingFor,
		Wait: i.Wait, Submitted: i.Submitted,
	}
}

// jobInfos is jobInfoOf for a list.
func jobInfos(list []rt.JobInfo) []JobInfo {
	return convertAll(list, func(i rt.JobInfo) JobInfo { return jobInfoOf(&i) })
}

// convertAll returns list with each element converted by f; nil for nil.
func convertAll[A, B any](list []A, f func(A) B) []B {
	if list == nil {
		return nil
	}
	out := make([]B, len(list))
	for i, a := range list {
		out[i] = f(a)
	}
	return out
}
