package decide

import "sync"

// Hub is the Link of replicas in one process: it carries each message to
// the leader's Receiver or to the Receiver of the replica it names, in
// order and by whole batches, each Receiver on a goroutine of its own.
// The tests run a cluster on it; a database's module carries the same
// messages between processes. It is safe for concurrent use.
type Hub struct {
	mu       sync.Mutex
	leader   string
	boxes    map[string]*mailbox
	stopping bool
	wg       sync.WaitGroup
}

// mailbox is one Receiver's queue of batches.
type mailbox struct {
	r       Receiver
	mu      sync.Mutex
	batches [][]Msg
	wake    chan struct{} // receives when batches becomes non-empty
	stop    chan struct{}
}

// NewHub returns a Hub with no one joined.
func NewHub() *Hub { return &Hub{boxes: make(map[string]*mailbox)} }

// Join makes r the Receiver of replica name, and returns the Link its
// decider sends on.
func (h *Hub) Join(name string, r Receiver) Link {
	b := &mailbox{r: r, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	h.mu.Lock()
	h.boxes[name] = b
	h.wg.Add(1)
	h.mu.Unlock()
	go b.run(&h.wg)
	return hubLink{h}
}

// Lead makes replica name the leader: the messages to the leader go to
// its Receiver.
func (h *Hub) Lead(name string) {
	h.mu.Lock()
	h.leader = name
	h.mu.Unlock()
}

// Close stops delivering; it returns once no Receiver is being called.
func (h *Hub) Close() {
	h.mu.Lock()
	for _, b := range h.boxes {
		close(b.stop)
	}
	h.boxes = map[string]*mailbox{}
	h.mu.Unlock()
	h.wg.Wait()
}

// Lose tells replica name's Receiver that messages may have been lost.
func (h *Hub) Lose(name string) {
	h.mu.Lock()
	b := h.boxes[name]
	h.mu.Unlock()
	if b != nil {
		b.put(nil)
	}
}

type hubLink struct{ h *Hub }

// Send routes msgs: each run of messages to one receiver is one batch.
func (l hubLink) Send(msgs []Msg) {
	h := l.h
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(msgs) > 0 {
		to := destination(&msgs[0], h.leader)
		n := 1
		for n < len(msgs) && destination(&msgs[n], h.leader) == to {
			n++
		}
		if b := h.boxes[to]; b != nil {
			b.put(msgs[:n:n])
		}
		msgs = msgs[n:]
	}
}

// destination returns the replica m is for.
func destination(m *Msg, leader string) string {
	switch m.Kind {
	case Grant, Ended, Resync, Admitted, Run:
		return m.Replica
	}
	return leader
}

// put queues a batch; nil stands for a loss.
func (b *mailbox) put(batch []Msg) {
	b.mu.Lock()
	b.batches = append(b.batches, batch)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// run hands the batches over, in order, until stopped.
func (b *mailbox) run(wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		select {
		case <-b.wake:
		case <-b.stop:
			return
		}
		b.mu.Lock()
		batches := b.batches
		b.batches = nil
		b.mu.Unlock()
		for _, batch := range batches {
			if batch == nil {
				b.r.Lost()
			} else {
				b.r.Receive(batch)
			}
		}
	}
}
