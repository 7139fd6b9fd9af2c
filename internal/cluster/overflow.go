package cluster

import (
	"context"
	"time"
)

// The overflow hook. The leader samples, every Lease/5, how many jobs
// wait only because every replica that may run them runs its capacity
// (decide.Leader.WaitingForCapacity: not a limit, nor a pause, a time or
// a dependency, holds them), and calls Config.Overflow once they have
// done so at every sample for OverflowAfter, then at most once every
// OverflowEvery while it lasts. Best effort: a sample between two ends
// may miss a moment without such work, and a new leader starts counting
// afresh.

// overflow decides when the hook is due, from the samples it is given.
// The zero times mean never.
type overflow struct {
	after, every time.Duration
	since        time.Time // the first of the samples, in a row, that had jobs waiting for capacity
	fired        time.Time // the hook's last call
}

// observe notes that waiting jobs wait for capacity at now, and reports
// whether the hook is due.
func (o *overflow) observe(now time.Time, waiting int) bool {
	if waiting == 0 {
		o.since = time.Time{}
		return false
	}
	if o.since.IsZero() {
		o.since = now
	}
	if now.Sub(o.since) < o.after || !o.fired.IsZero() && now.Sub(o.fired) < o.every {
		return false
	}
	o.fired = now
	return true
}

// checkOverflow samples the jobs waiting for capacity, and calls the hook
// on a goroutine of its own if it is due.
func (l *leading) checkOverflow() {
	var waiting int
	due := false
	l.do(func(int64) {
		waiting = l.leader.WaitingForCapacity()
		l.mu.Lock()
		due = l.spill.observe(time.Now(), waiting)
		l.mu.Unlock()
	})
	if !due {
		return
	}
	n := l.n
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.OverflowEvery)
		defer cancel()
		if err := n.cfg.Overflow(ctx, waiting); err != nil {
			n.log.Warn("fairsched: the overflow hook failed", "replica", n.cfg.Name, "waiting", waiting, "err", err)
		}
	}()
}
