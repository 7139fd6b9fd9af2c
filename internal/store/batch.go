package store

import (
	"sync"
	"time"
)

// Batcher commits requests in groups (group commit): callers queue
// requests, and one goroutine applies all those queued in one
// transaction, at most max at a time, while the next ones queue up behind
// it. Under load a transaction holds as many requests as arrived during
// the one before, so the cost of a commit (an fsync at
// synchronous=FULL) is shared; alone, a request waits for one commit.
//
// A request is applied after every request queued before it. Do waits
// for its own transaction; Post does not, and Flush waits for every
// request posted before it.
type Batcher[R any] struct {
	// apply applies rs in one transaction and commits it. It records
	// what belongs to one request in that request (R is usually a
	// pointer), and returns an error only when the transaction failed as a
	// whole: then every request in it failed.
	apply func(rs []R) error
	max   int

	mu sync.Mutex
	// Guarded by mu.
	queue     []entry[R]
	closed    bool
	postedErr error // the first failure of a transaction with posted requests since the last Flush

	kick chan struct{} // a token: the queue is not empty
	done chan struct{} // closed when the loop has ended

	pushed chan<- struct{} // tests: told of every request queued
}

type entry[R any] struct {
	r     R
	done  chan error // nil: posted
	flush bool       // not a request: a Flush waiting for those before it
	tries uint8      // failed transactions it was in
}

// A transaction that fails fails its waiting requests (Do), whose callers
// have the error, but its posted requests, whose callers have gone on,
// are tried again, in their order, after a pause that doubles from
// retryPause, at most maxTries times in all: a transient failure (another
// connection holding the write lock past the busy timeout) loses nothing.
// A Flush behind them waits for them.
const (
	maxTries   = 5
	retryPause = 10 * time.Millisecond
)

// NewBatcher returns a Batcher that applies at most max requests per
// transaction with apply, and starts its goroutine; Close stops it.
func NewBatcher[R any](max int, apply func(rs []R) error) *Batcher[R] {
	b := &Batcher[R]{apply: apply, max: max, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go b.loop()
	return b
}

// Do queues r and waits until the transaction that holds it has been
// committed, or has failed: its error.
func (b *Batcher[R]) Do(r R) error {
	done := make(chan error, 1)
	if !b.push(entry[R]{r: r, done: done}) {
		return ErrClosed
	}
	return <-done
}

// Post queues r and returns at once. It reports false if the Batcher is
// closed.
func (b *Batcher[R]) Post(r R) bool { return b.push(entry[R]{r: r}) }

// Flush waits until every request queued before it has been applied, and
// returns the first failure of a transaction that held posted requests
// since the last Flush.
func (b *Batcher[R]) Flush() error {
	done := make(chan error, 1)
	if !b.push(entry[R]{flush: true, done: done}) {
		return ErrClosed
	}
	return <-done
}

func (b *Batcher[R]) push(e entry[R]) bool {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return false
	}
	b.queue = append(b.queue, e)
	// The token goes with the request, under mu: Close cannot close kick
	// between them, and the loop, which drains the queue after every
	// token, applies the request before it stops.
	select {
	case b.kick <- struct{}{}:
	default: // a token is there already
	}
	b.mu.Unlock()
	if b.pushed != nil {
		b.pushed <- struct{}{}
	}
	return true
}

// Close applies what is queued, stops the goroutine and waits for it; it
// returns Flush's error. Requests queued after Close fail with ErrClosed.
func (b *Batcher[R]) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		<-b.done
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	close(b.kick)
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.postedErr
}

func (b *Batcher[R]) loop() {
	defer close(b.done)
	var batch, spare []entry[R]
	rs := make([]R, 0, b.max)
	for range b.kick {
		for {
			b.mu.Lock()
			batch, b.queue = b.queue, spare[:0]
			b.mu.Unlock()
			if len(batch) == 0 {
				spare = batch
				break
			}
			for i := 0; i < len(batch); {
				n := i
				rs = rs[:0]
				for n < len(batch) && len(rs) < b.max {
					if !batch[n].flush {
						rs = append(rs, batch[n].r)
					}
					n++
				}
				err := b.applied(rs)
				if err != nil && b.retry(batch[i:n], batch[n:], err) {
					break // what is left is queued again
				}
				b.settle(batch[i:n], err)
				i = n
			}
			clear(rs[:cap(rs)])
			clear(batch)
			spare = batch
		}
	}
}

// retry handles failed, the entries of a transaction that failed with
// err, and rest, those after them: if any posted request of failed may be
// tried again, it settles failed's waiting requests, queues the others
// again in front of what was queued since, with rest, pauses, and
// reports true. Otherwise it reports false, for failed to be settled.
func (b *Batcher[R]) retry(failed, rest []entry[R], err error) bool {
	tries := uint8(0) // the most of the posted requests tried again
	for _, e := range failed {
		if e.done == nil && !e.flush && e.tries+1 < maxTries {
			tries = max(tries, e.tries+1)
		}
	}
	if tries == 0 {
		return false
	}
	var again []entry[R]
	for _, e := range failed {
		switch {
		case e.flush:
			again = append(again, e) // it waits for the posted requests before it
		case e.done != nil:
			e.done <- err
		case e.tries+1 >= maxTries:
			b.settle([]entry[R]{e}, err) // given up: the next Flush reports it
		default:
			e.tries++
			again = append(again, e)
		}
	}
	again = append(again, rest...)
	b.mu.Lock()
	b.queue = append(again, b.queue...)
	b.mu.Unlock()
	time.Sleep(retryPause << (tries - 1))
	return true
}

// applied applies rs, if there are any.
func (b *Batcher[R]) applied(rs []R) error {
	if len(rs) == 0 {
		return nil
	}
	return b.apply(rs)
}

// settle wakes the callers of entries es, whose transaction ended with
// err.
func (b *Batcher[R]) settle(es []entry[R], err error) {
	for i := range es {
		e := &es[i]
		switch {
		case e.flush:
			b.mu.Lock()
			ferr := b.postedErr
			if ferr == nil {
				ferr = err
			}
			b.postedErr = nil
			b.mu.Unlock()
			e.done <- ferr
		case e.done != nil:
			e.done <- err
		case err != nil:
			b.mu.Lock()
			if b.postedErr == nil {
				b.postedErr = err
			}
			b.mu.Unlock()
		}
		*e = entry[R]{}
	}
}
