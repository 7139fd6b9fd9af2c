package engine

import "github.com/fairsched/fairsched/internal/iheap"

// The urgent order: highest score first, then the oldest. A job is urgent
// once its uncapped score reaches the urgent threshold, and from its
// submission when its base priority is at or above it, grace period or
// not (docs/design.md, aging).
//
// Past its grace period a job's scaled score is A + Step*(now - G)
// (aging.go): aged jobs all rise at one rate, so a heap keyed by A holds
// them in urgent order at every instant, and its top is the first to
// reach the threshold. In its grace period a job's score is its base,
// which stands still while the aged scores rise, so no time-invariant key
// places it among them. The jobs in their grace period that are urgent
// already, those based at or above the threshold, are therefore kept
// apart in an order that does not move either, by base then submission,
// and the two orders are merged at their tops at the instant of asking.
// A job moves from the one to the other when its grace ends, as every
// phase change of a lane is made (endGraceOf, regrace). A job in its grace
// period below the threshold is in neither: it cannot be urgent before its
// grace ends, and filing it costs one comparison.

// urgentSet holds, in urgent order, the pending jobs of a type (queued)
// or of a wait lane (held) that are urgent or may become so by aging:
// those past their grace period in aged, those in it based at or above
// the threshold in fresh. It is empty when no job can be urgent. A job's
// handle in it is its uidx: h in aged, -2-h in fresh, -1 in neither.
type urgentSet struct {
	aged  iheap.Keyed[*Job] // by agedOrder
	fresh iheap.Keyed[*Job] // by fixedOrder, in Hi
}

func newUrgentSet() urgentSet {
	return urgentSet{aged: iheap.NewKeyed(jobSetUIdx), fresh: iheap.NewKeyed(jobSetFreshIdx)}
}

// jobSetFreshIdx keeps j's handle h in a fresh heap in its uidx, below -1
// (h = -1, as j leaves: -1).
func jobSetFreshIdx(j *Job, h int) { j.uidx = int32(-2 - h) }

// freshIdx returns j's handle in its fresh heap; j.uidx < -1.
func (j *Job) freshIdx() int { return int(-2 - j.uidx) }

// mayBeUrgent reports whether j, pending at now, belongs in an urgent
// set: jobs can be urgent, and it is past its grace period or based at or
// above the threshold. Inlined, so that the callers spare a job that does
// not belong there the call of file.
func (p *agingParams) mayBeUrgent(j *Job, now int64) bool {
	return p.urgentOn() && (int64(j.base) >= p.urgent || p.pastGrace(j.sub, now))
}

// file adds j, pending at now, to u, where it belongs (mayBeUrgent).
// O(log n).
func (u *urgentSet) file(p *agingParams, j *Job, now int64) {
	if p.pastGrace(j.sub, now) {
		u.aged.Push(j.agedOrder(), j)
	} else {
		u.fresh.Push(iheap.Key{Hi: j.fixedOrder()}, j)
	}
}

// unfile takes j out of u, where it is (j.uidx != -1). O(log n).
func (u *urgentSet) unfile(j *Job) {
	if j.uidx >= 0 {
		u.aged.Remove(int(j.uidx))
	} else {
		u.fresh.Remove(j.freshIdx())
	}
}

// first returns u's most urgent job at now and its rank, or nil if none
// is urgent. O(1).
func (u *urgentSet) first(p *agingParams, now int64) (*Job, rank) {
	var best *Job
	var br rank
	if j, key, ok := u.aged.TopKey(); ok {
		best, br = p.agedUrgent(j, key, now)
	}
	if j, key, ok := u.fresh.TopKey(); ok {
		if r := p.fixedRank(key.Hi); best == nil || r.before(br) {
			best, br = j, r
		}
	}
	return best, br
}

// agedUrgent returns j, an aged job filed under key (its agedOrder), and
// its rank at now if it is urgent then, or nil.
func (p *agingParams) agedUrgent(j *Job, key iheap.Key, now int64) (*Job, rank) {
	if s := p.agedScore(agedKeyOf(key), now); s >= p.urgent*p.interval {
		return j, rank{s, key.Lo}
	}
	return nil, rank{}
}
