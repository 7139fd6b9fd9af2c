package fairsched

import (
	"context"
	"unsafe"

	"github.com/fairsched/fairsched/internal/rt"
)

// Batches (docs/design.md, Calling it). SubmitMany decides together what
// arrives together: one lock acquisition, one clock reading and one check
// of the queue's limits for the whole batch, then each job placed as
// Submit places it. It is not a tier of its own: its jobs are in the
// order exactly where the same Submits, one after the other at that
// instant, would have put them.

// SubmitParams is one job for SubmitMany: its description and its
// function, as Submit takes them.
type SubmitParams struct {
	Job Job
	Fn  func(context.Context) error
}

// MaxBatch is the most jobs SubmitMany takes in one call. It holds the
// scheduler's lock for the whole batch, O(log n) per job as a Submit
// does, and this bounds how long other callers and the dispatcher wait
// for it. Split a larger batch: each part is all or none.
const MaxBatch = rt.MaxBatch

// SubmitMany submits jobs together, all or none, and returns their
// Handles, in order: Submit for many jobs at the cost of one decision.
// Each job is placed, and numbered (Handle.Seq), as if Submit had been
// called for each, in slice order, at one instant: one may start at once,
// another wait behind it, exactly as those Submits would have it. ctx is
// every job's, as Submit's is.
//
// What Submit does with a job, SubmitMany does with each, in order:
//   - A duplicate joins or supersedes (TypeConfig.Duplicates) as a
//     Submit at that point would: the job of its type and ID queued
//     before the call, or an earlier job of the same batch. Of two
//     duplicates in one batch whose type joins, the second joins the
//     first; whose type supersedes, the second replaces the first, which
//     ends with an error matching ErrSuperseded.
//   - Job.After names jobs submitted before the call, by their Handles;
//     a job of the same batch has no Handle yet, so it cannot be named.
//     To chain jobs, submit the later ones in a call of their own.
//   - A ctx that descends from a running job's context makes each job
//     that job's child, with its priority, as Submit does.
//
// All or none: SubmitMany fails, submitting nothing, if one job is
// refused for what it is (a nil function, an unknown type, a disabled
// (type, ID) pair, a start deadline it cannot meet, resources it cannot
// have, a bad Job.After), with a *BatchError naming the first such job
// and wrapping the error Submit would have returned for it; with a
// *QueueFullError if the batch does not fit the queue's limits; with
// ErrClosed after Shutdown or Close; and with an error matching
// ErrBatchTooLarge for more than MaxBatch jobs. Every job of the batch is
// checked as a job of its own, even one that would join another. The
// queue's limits are checked once, for the batch as a whole: MaxQueue
// and each key's MaxPending must have room for every job of it as a
// pending job, even for those that would join another or start at once.
// A batch refused by the limits or by closing counts as that many
// rejections in Stats, and one refused for one job as that job's, as
// Submit would count it.
//
// On a replica (Config.Replica) the leader checks the cluster's queue
// limits for the batch as a whole, and SubmitMany returns once it has
// admitted or refused it: a round trip to the leader, as Submit's.
//
// SubmitMany holds the scheduler's lock while it submits the batch, as
// long as that many Submits would hold it in all, without the lock's
// hand-overs between them; MaxBatch bounds it. The batch's records are
// allocated together, one allocation where Submits make one each: so a
// Handle kept, or a job of the batch that has not ended, keeps every
// record of the batch in memory (about 150 bytes a job). A nil ctx is a
// programming error: SubmitMany panics, naming it. An empty batch
// returns no Handles and no error.
func (s *Scheduler) SubmitMany(ctx context.Context, jobs []SubmitParams) ([]Handle, error) {
	hs, err := s.rt.SubmitMany(ctx, submitParamsOf(jobs))
	return handlesOf(hs), err
}

// submitParamsOf reads a batch as the run-time layer's, without a copy:
// SubmitParams is laid out as rt.SubmitParams (TestRuntimeMirrors).
func submitParamsOf(jobs []SubmitParams) []rt.SubmitParams {
	return unsafe.Slice((*rt.SubmitParams)(unsafe.Pointer(unsafe.SliceData(jobs))), len(jobs))
}

// handlesOf reads the run-time layer's handles as the API's, without a
// copy: a Handle is an rt.Handle and nothing more.
func handlesOf(hs []rt.Handle) []Handle {
	return unsafe.Slice((*Handle)(unsafe.Pointer(unsafe.SliceData(hs))), len(hs))
}
