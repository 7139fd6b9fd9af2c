package rt

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/fairsched/fairsched/internal/decide"
)

// What an operator does at run time, by a job's number or a (type, ID)
// pair: cancel a job, list and retry the dead jobs, disable and enable
// pairs. Each takes the lock once.

// Cancel is the API's Scheduler.Cancel, which documents it.
func (s *Runtime) Cancel(seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.decider().Find(seq)
	if j == nil {
		return false
	}
	t := taskOf(j)
	switch {
	case t.waiting():
		s.cancelQueuedLocked(t, context.Canceled, s.nowLocked())
	case t.granted():
		t.ctx.cancel(context.Canceled)
	}
	return true
}

// DeadJobs returns the dead jobs the scheduler keeps, newest first; on a
// replica, the cluster's dead durable jobs too (clusterdead.go).
func (s *Runtime) DeadJobs() []DeadJob {
	var cluster []DeadJob
	if s.reviver() != nil {
		cluster = s.clusterDeadJobs()
	}
	s.mu.Lock()
	out := make([]DeadJob, len(s.dead.list))
	for i, d := range s.dead.list {
		out[len(out)-1-i] = d.info
		out[len(out)-1-i].Job.Needs = maps.Clone(d.info.Job.Needs) // the caller's to change
	}
	s.mu.Unlock()
	if len(cluster) == 0 {
		return out
	}
	return mergeDead(out, cluster, s.dead.limit)
}

// RetryDead is the API's Scheduler.RetryDead, which documents it.
func (s *Runtime) RetryDead(seq uint64) (Handle, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.dead.list, func(d *deadRecord) bool { return d.info.Seq == seq })
	if i < 0 {
		if s.reviver() != nil {
			if h, ok, err := s.reviveLocked(seq); ok { // one of the cluster's
				return h, err
			}
		}
		return Handle{}, fmt.Errorf("%w: %d", ErrNotDead, seq)
	}
	d := s.dead.list[i]
	t := newSubmitTask(d.parent, d.fn)
	a := &attempts{list: append([]AttemptInfo(nil), d.attempts.list...), parent: d.parent}
	a.allowed = len(a.list) + 1
	if d.durableID != 0 {
		t = s.requeueDurableLocked(d.durableID, len(a.list), a.allowed)
		a.parent = durableParent
	}
	t.err = a
	desc := d.info.Job
	now := s.nowLocked()
	if err := s.enqueueLocked(t, &desc, now); err != nil {
		return Handle{}, err
	}
	s.dead.list = slices.Delete(s.dead.list, i, i+1)
	h := s.handleLocked(t)
	s.launchLocked(t, now)
	return h, nil
}

// Enable enables the (type, ID) pair again, if it was disabled, and
// forgets its recent failures.
func (s *Runtime) Enable(typ, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.decider().Enable(decide.Pair{Type: typ, ID: id})
}

// Disable is the API's Scheduler.Disable, which documents it.
func (s *Runtime) Disable(typ, id string, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tier, ok := s.decider().TypeTier(typ)
	if !ok {
		return errUnknownType(typ)
	}
	now := s.nowLocked()
	span := decide.Span{Since: now}
	if d > 0 {
		span.Until = now + max(d.Microseconds(), 1)
	}
	s.decider().Disable(decide.Pair{Type: typ, ID: id}, span, now)
	if s.events != nil {
		s.events.send(Event{Kind: EventDisabled, Time: s.timeOf(now), Type: typ, ID: id, Tier: Tier(tier)})
	}
	return nil
}

// Disabled is the API's Scheduler.Disabled, which documents it.
func (s *Runtime) Disabled() []DisabledPair {
	s.mu.Lock()
	now := s.nowLocked()
	var spans []pairSpan
	s.disabling.pairs.Each(now, func(k decide.Pair, span decide.Span) { spans = append(spans, pairSpan{k, span}) })
	s.mu.Unlock()
	out := s.pairsOf(spans)
	slices.SortFunc(out, func(a, b DisabledPair) int { return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.ID, b.ID)) })
	return out
}

// DisabledSoonest is the API's Scheduler.DisabledSoonest, which documents it.
func (s *Runtime) DisabledSoonest(n int) (pairs []DisabledPair, total int) {
	if n <= 0 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return nil, s.disabling.pairs.Count(s.nowLocked())
	}
	s.mu.Lock()
	now := s.nowLocked()
	var top pairHeap // the n soonest so far, the latest at the root
	s.disabling.pairs.Each(now, func(k decide.Pair, span decide.Span) {
		total++
		ps := pairSpan{k, span}
		switch {
		case len(top) < n:
			heap.Push(&top, ps)
		case ps.before(top[0]):
			top[0] = ps
			heap.Fix(&top, 0)
		}
	})
	s.mu.Unlock()
	slices.SortFunc(top, func(a, b pairSpan) int {
		if a.before(b) {
			return -1
		}
		return 1
	})
	return s.pairsOf(top), total
}

// pairsOf describes spans as DisabledPairs. timeOf reads fields set by
// New only: it needs no lock.
func (s *Runtime) pairsOf(spans []pairSpan) []DisabledPair {
	if len(spans) == 0 {
		return nil
	}
	out := make([]DisabledPair, len(spans))
	for i, p := range spans {
		out[i] = DisabledPair{Type: p.k.Type, ID: p.k.ID, Since: s.timeOf(p.span.Since)}
		if p.span.Until != 0 {
			out[i].Until = s.timeOf(p.span.Until)
		}
	}
	return out
}
