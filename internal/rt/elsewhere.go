package rt

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fairsched/fairsched/internal/store"
)

// Following the end of a durable job a replica enqueued. The leader keeps
// the job, in another process, and tells no replica its end: the store
// the replicas share has it. A Handle of such a job (Handle.elsewhere)
// holds an endWait; asked for the end (Done, Err, Wait), it is followed:
// while any is, one goroutine of the replica's (follow) reads the store's
// state of the jobs followed, in one round trip, first followAfter after
// a job is followed, then at intervals doubling to followEvery while no
// new one is, and ends each wait whose job has finished. A job never asked
// for costs nothing; the end of one asked for is known within followEvery
// of its commit, sooner for a short one.
//
// When the replica closes (Shutdown, Close), the jobs still followed go on
// in the cluster: their waits end with ErrKept, as the Handles of the
// durable jobs one process takes out of memory do.

const (
	followAfter = 10 * time.Millisecond
	followEvery = 250 * time.Millisecond
)

// endWait is what a Handle of a durable job a replica enqueued knows of
// its end. Its fields are guarded by s.mu.
type endWait struct {
	s  *Runtime
	id int64

	done     chan struct{} // made when first asked for, closed at the end
	err      error
	ended    bool
	followed bool // in s.follow.waits
}

// following is what a replica follows. Guarded by Runtime.mu.
type following struct {
	waits   map[int64][]*endWait // by job ID: the Handles asked for its end
	added   chan struct{}        // receives when a job is followed
	stop    chan struct{}        // closed at Shutdown or Close
	ctx     context.Context      // of the reads: cancelled at Shutdown or Close
	cancel  context.CancelFunc
	running bool // the goroutine follows
	closed  bool
	wg      sync.WaitGroup
}

// newEndWait returns the endWait of a Handle of durable job id, enqueued
// on this replica.
func (s *Runtime) newEndWait(id int64) *endWait { return &endWait{s: s, id: id} }

// doneChan returns a channel closed at the job's end, and follows it.
func (w *endWait) doneChan() <-chan struct{} {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.ended {
		return closedChan
	}
	if w.done == nil {
		w.done = make(chan struct{})
	}
	s.followLocked(w)
	return w.done
}

// result returns the job's error once it has ended, nil before, and
// follows it.
func (w *endWait) result() error {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if !w.ended {
		s.followLocked(w) // which ends it at once if the replica closed
	}
	return w.err
}

// end ends w with err.
func (w *endWait) end(err error) {
	w.ended, w.err = true, err
	if w.done != nil {
		close(w.done)
	}
}

// followLocked follows w's job, starting the goroutine that follows if
// none runs.
func (s *Runtime) followLocked(w *endWait) {
	f := &s.follow
	if w.followed {
		return
	}
	if f.closed {
		w.end(ErrKept)
		return
	}
	w.followed = true
	if f.waits == nil {
		f.waits, f.added, f.stop = make(map[int64][]*endWait), make(chan struct{}, 1), make(chan struct{})
		f.ctx, f.cancel = context.WithCancel(context.Background())
	}
	f.waits[w.id] = append(f.waits[w.id], w)
	select {
	case f.added <- struct{}{}:
	default:
	}
	if !f.running {
		f.running = true
		f.wg.Add(1)
		go s.followEnds()
	}
}

// followEnds reads the ends of the jobs followed until none is, or the
// replica closes.
func (s *Runtime) followEnds() {
	f := &s.follow
	defer f.wg.Done()
	pause := followAfter
	failing := false // the last read failed: logged once, until one succeeds
	timer := time.NewTimer(pause)
	defer timer.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-f.added:
			// Sooner, not later: a stream of Handles asked for must not
			// put the next read off for ever.
			if pause > followAfter {
				pause = followAfter
				timer.Reset(pause)
			}
			continue
		case <-timer.C:
		}
		s.mu.Lock()
		ids := make([]int64, 0, len(f.waits))
		for id := range f.waits {
			ids = append(ids, id)
		}
		s.mu.Unlock()
		ends, err := readEnds(f.ctx, s.durable.st, ids)
		if err != nil && !failing && f.ctx.Err() == nil && s.cfg.Logger != nil {
			s.cfg.Logger.Warn("fairsched: reading the ends of durable jobs enqueued on this replica (tried again until it succeeds)", "err", err)
		}
		failing = err != nil
		s.mu.Lock()
		for id, end := range ends {
			for _, w := range f.waits[id] {
				w.followed = false
				w.end(end)
			}
			delete(f.waits, id)
		}
		if len(f.waits) == 0 {
			f.running = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		pause = min(2*pause, followEvery)
		timer.Reset(pause)
	}
}

// readEnds returns the errors the jobs of ids that finished ended with, by
// ID (nil: completed); a job the store no longer has (pruned) ended too.
func readEnds(ctx context.Context, st store.Store, ids []int64) (map[int64]error, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ends := make(map[int64]error)
	read := func(id int64, state store.State, why string, found bool) {
		switch {
		case !found:
			ends[id] = fmt.Errorf("fairsched: durable job %d ended, and the store no longer has it", id)
		case state == store.Completed:
			ends[id] = nil
		case state.Finished():
			if ends[id] = errorOf(why); ends[id] == nil {
				ends[id] = fmt.Errorf("fairsched: durable job %d ended without completing", id)
			}
		}
	}
	if r, ok := st.(store.EndsReader); ok {
		return ends, r.Ends(ctx, ids, read)
	}
	for _, id := range ids {
		state, why, found, err := st.Ended(ctx, id)
		if err != nil {
			return ends, err
		}
		read(id, state, why, found)
	}
	return ends, nil
}

// stopFollowing ends the waits of the jobs still followed with ErrKept,
// and those asked for from now on, as the replica closes, and returns
// once the goroutine that follows has.
func (s *Runtime) stopFollowing() {
	f := &s.follow
	s.mu.Lock()
	if !f.closed {
		f.closed = true
		if f.stop != nil {
			close(f.stop)
			f.cancel()
		}
		for id, ws := range f.waits {
			for _, w := range ws {
				w.followed = false
				w.end(ErrKept)
			}
			delete(f.waits, id)
		}
	}
	s.mu.Unlock()
	f.wg.Wait()
}
