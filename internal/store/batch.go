package store

import "sync"

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
}

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
				b.settle(batch[i:n], b.applied(rs))
				i = n
			}
			clear(rs[:cap(rs)])
			spare = batch
		}
	}
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
