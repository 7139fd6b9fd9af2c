package rt

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/fairsched/fairsched/internal/store"
)

// The cluster's dead jobs, on a replica. A durable job that fails for
// good dies in the leader's keeper, which records it in the database; a
// replica's own dead list holds only the closures it submitted. So a
// replica lists the database's dead jobs beside its own (DeadJobs), each
// under a sequence number of the replica's, which it keeps while the job
// is listed, so that RetryDead can name it; and RetryDead queues such a
// job again in the database (store.Reviver), for the leader of the moment
// to take as it takes a job a replica enqueued. The keeper then forgets
// it as dead (forgetRevivedLocked).

// clusterDead is what a replica keeps of the cluster's dead jobs it
// listed last. Guarded by Runtime.mu.
type clusterDead struct {
	byID  map[int64]uint64         // sequence numbers, by store ID
	bySeq map[uint64]clusterDeadID // store IDs and types, by sequence number
}

// clusterDeadID is a listed dead job's identity in the store, and its
// type (whose StartTimeout a retry's deadline follows).
type clusterDeadID struct {
	id  int64
	typ string
}

// reviver returns the store as a Reviver if the scheduler is a replica
// whose store can queue the cluster's dead jobs again; nil otherwise.
func (s *Runtime) reviver() store.Reviver {
	if s.remote == nil || s.durable == nil {
		return nil
	}
	r, _ := s.durable.st.(store.Reviver)
	return r
}

// clusterDeadJobs returns the cluster's dead durable jobs as the database
// has them, newest first, at most the dead list's limit, each numbered
// for RetryDead. It reads the database without the lock. A read that
// fails is logged, and lists none.
func (s *Runtime) clusterDeadJobs() []DeadJob {
	limit := s.dead.limit // set by New, then read-only
	if limit < 0 {
		return nil
	}
	var stored []*store.Job
	err := s.durable.st.Dead(context.Background(), limit, func(j *store.Job) error {
		stored = append(stored, j)
		return nil
	})
	if err != nil {
		if s.cfg.Logger != nil {
			s.cfg.Logger.Error("fairsched: reading the cluster's dead jobs", "err", err)
		}
		return nil
	}
	out := make([]DeadJob, len(stored))
	s.mu.Lock()
	defer s.mu.Unlock()
	was := s.clusterDead
	s.clusterDead = clusterDead{byID: make(map[int64]uint64, len(stored)), bySeq: make(map[uint64]clusterDeadID, len(stored))}
	for i, j := range stored {
		seq, ok := was.byID[j.ID]
		if !ok {
			seq = s.eng.TakeSeq()
		}
		s.clusterDead.byID[j.ID], s.clusterDead.bySeq[seq] = seq, clusterDeadID{j.ID, j.Type}
		out[i] = DeadJob{Seq: seq, Job: storedDesc(j), Err: errorOf(j.Err), Attempts: attemptsOfStored(j).list,
			Died: time.UnixMicro(j.Finished)}
	}
	return out
}

// mergeDead merges own and cluster, each newest first, into one list
// newest first, at most limit long.
func mergeDead(own, cluster []DeadJob, limit int) []DeadJob {
	out := append(own, cluster...)
	slices.SortStableFunc(out, func(a, b DeadJob) int { return b.Died.Compare(a.Died) })
	return out[:min(len(out), limit)]
}

// reviveLocked queues the cluster's dead job listed as seq again, in the
// database, and returns its Handle (its ID; it follows the end in the
// store, elsewhere.go); ok is false if seq is not one of the cluster's dead
// jobs last listed. It lets go of the lock while it writes.
func (s *Runtime) reviveLocked(seq uint64) (h Handle, ok bool, err error) {
	d, ok := s.clusterDead.bySeq[seq]
	if !ok {
		return Handle{}, false, nil
	}
	now := s.nowLocked()
	var startBy int64
	if dl := s.decider().DeadlineOf(d.typ, 0, now); dl != 0 {
		startBy = s.wallOf(dl)
	}
	submitted := s.wallOf(now)
	s.mu.Unlock()
	revived, err := s.reviver().Revive(context.Background(), d.id, submitted, startBy)
	s.mu.Lock()
	switch {
	case err != nil:
		return Handle{}, true, err
	case !revived: // retried already, here or on another replica, or pruned
		return Handle{}, true, fmt.Errorf("%w: %d (job %d is no longer dead)", ErrNotDead, seq, d.id)
	}
	if s.clusterDead.byID[d.id] == seq {
		delete(s.clusterDead.byID, d.id)
		delete(s.clusterDead.bySeq, seq)
	}
	return Handle{elsewhere: d.id, end: s.newEndWait(d.id)}, true, nil
}

// forgetRevivedLocked takes durable job id out of a keeper's dead list:
// a replica queued it again (Reviver), and it arrived.
func (s *Runtime) forgetRevivedLocked(id int64) {
	if i := slices.IndexFunc(s.dead.list, func(d *deadRecord) bool { return d.durableID == id }); i >= 0 {
		s.dead.list = slices.Delete(s.dead.list, i, i+1)
	}
}
