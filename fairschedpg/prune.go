package fairschedpg

import (
	"sync"
	"time"
)

// Retention. Finished jobs are deleted once older than Options.Retention,
// dead ones once older than Options.DeadRetention, by a goroutine of the
// Store's, in batches of pruneBatch: each batch is one request of the
// writer among the others, so pruning a backlog never holds its rows'
// locks for long, and jobs keep being written between its batches.

// pruneBatch is the most jobs one prune request deletes.
const pruneBatch = 1000

// pruner deletes old jobs, every interval, until stopped.
type pruner struct {
	w              *writer
	keep, keepDead time.Duration // < 0, 0: never
	quit           chan struct{}
	wg             sync.WaitGroup
}

func startPruner(w *writer, keep, keepDead time.Duration) *pruner {
	p := &pruner{w: w, keep: keep, keepDead: keepDead, quit: make(chan struct{})}
	if keep < 0 && keepDead <= 0 {
		return p // nothing ever pruned
	}
	p.wg.Add(1)
	go p.loop(pruneInterval(keep, keepDead))
	return p
}

// pruneInterval is a tenth of the shortest retention, between a second and
// a minute: jobs are deleted at most about 10% later than their time.
func pruneInterval(keep, keepDead time.Duration) time.Duration {
	shortest := keep
	if shortest < 0 || keepDead > 0 && keepDead < shortest {
		shortest = keepDead
	}
	return min(max(shortest/10, time.Second), time.Minute)
}

func (p *pruner) loop(every time.Duration) {
	defer p.wg.Done()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			p.prune(time.Now())
		case <-p.quit:
			return
		}
	}
}

func (p *pruner) stop() {
	close(p.quit)
	p.wg.Wait()
}

// prune deletes, batch by batch, the jobs past their retention at now,
// and returns how many; it stops at the first error, or when p is
// stopped.
func (p *pruner) prune(now time.Time) (int64, error) {
	r := &request{kind: reqPrune}
	if p.keep >= 0 {
		r.op.At = now.Add(-p.keep).UnixMicro()
	}
	if p.keepDead > 0 {
		r.op.NotBefore = now.Add(-p.keepDead).UnixMicro()
	}
	var total int64
	for {
		if err := p.w.do(r); err != nil {
			return total, err
		}
		total += r.pruned
		select {
		case <-p.quit:
			return total, nil
		default:
		}
		if r.pruned < pruneBatch {
			return total, nil
		}
	}
}
