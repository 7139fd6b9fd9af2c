package rt

import "github.com/fairsched/fairsched/internal/engine"

// Signals lets the package's tests wait for what only the scheduler's
// own goroutines can tell, instead of polling: each channel, when a test
// sets it, receives a value at that point. Config.signals is nil outside
// the tests, and every send is behind that check.
type Signals struct {
	Accepted  chan uint64   // a job was queued or started: its Seq
	Retried   chan uint64   // a job's failed attempt was put back for a retry: its Seq
	Delivered chan struct{} // the hook returned and the event is counted delivered
	Joined    chan uint64   // a duplicate joined a job: the job's Seq
	// batched is called, with the lock held, after each job of a
	// SubmitMany is taken in.
	Batched func(h Handle, e *engine.Engine)
}

func NewSignals() *Signals {
	return &Signals{Accepted: make(chan uint64, 1<<16), Retried: make(chan uint64, 1<<16), Delivered: make(chan struct{}, 1<<16), Joined: make(chan uint64, 1<<16)}
}
