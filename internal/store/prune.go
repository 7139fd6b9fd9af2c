package store

import (
	"sync"
	"time"
)

// Retention. A store deletes finished jobs once older than its retention,
// and dead ones once older than its dead jobs' retention, on a goroutine
// of a Pruner's, in batches of at most PruneBatch: each batch is one
// request of the store's writer among the others, so pruning a backlog
// never holds the store's locks for long, and jobs keep being written
// between its batches.

// PruneBatch is the most jobs one batch deletes.
const PruneBatch = 1000

// PruneFunc deletes at most PruneBatch jobs: finished ones that ended
// before finishedBefore and dead ones that died before deadBefore, both
// in µs since the epoch (0: none), and returns how many it deleted.
type PruneFunc func(finishedBefore, deadBefore int64) (int64, error)

// A Pruner deletes a store's old jobs through its PruneFunc, every
// interval, until stopped.
type Pruner struct {
	batch          PruneFunc
	keep, keepDead time.Duration // < 0, 0: never
	quit           chan struct{}
	wg             sync.WaitGroup
}

// StartPruner starts deleting, through batch, the finished jobs older
// than keep (negative: never) and the dead ones older than keepDead (0 or
// negative: never).
func StartPruner(batch PruneFunc, keep, keepDead time.Duration) *Pruner {
	p := &Pruner{batch: batch, keep: keep, keepDead: keepDead, quit: make(chan struct{})}
	if keep < 0 && keepDead <= 0 {
		return p // nothing ever pruned
	}
	p.wg.Add(1)
	go p.loop(PruneInterval(keep, keepDead))
	return p
}

// PruneInterval is a tenth of the shortest retention, between a second and
// a minute: jobs are deleted at most about 10% later than their time.
func PruneInterval(keep, keepDead time.Duration) time.Duration {
	shortest := keep
	if shortest < 0 || keepDead > 0 && keepDead < shortest {
		shortest = keepDead
	}
	return min(max(shortest/10, time.Second), time.Minute)
}

func (p *Pruner) loop(every time.Duration) {
	defer p.wg.Done()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			p.Prune(time.Now())
		case <-p.quit:
			return
		}
	}
}

// Stop stops p and waits for its goroutine to end.
func (p *Pruner) Stop() {
	close(p.quit)
	p.wg.Wait()
}

// Prune deletes, batch by batch, the jobs past their retention at now,
// and returns how many; it stops at the first error, or when p is
// stopped.
func (p *Pruner) Prune(now time.Time) (int64, error) {
	var finishedBefore, deadBefore int64
	if p.keep >= 0 {
		finishedBefore = now.Add(-p.keep).UnixMicro()
	}
	if p.keepDead > 0 {
		deadBefore = now.Add(-p.keepDead).UnixMicro()
	}
	var total int64
	for {
		n, err := p.batch(finishedBefore, deadBefore)
		total += n
		if err != nil {
			return total, err
		}
		select {
		case <-p.quit:
			return total, nil
		default:
		}
		if n < PruneBatch {
			return total, nil
		}
	}
}
