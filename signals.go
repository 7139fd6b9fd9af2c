package fairsched

// testSignals lets the package's tests wait for what only the scheduler's
// own goroutines can tell, instead of polling: each channel, when a test
// sets it, receives a value at that point. Config.signals is nil outside
// the tests, and every send is behind that check.
type testSignals struct {
	accepted  chan uint64   // a job was queued or started: its Seq
	retried   chan uint64   // a job's failed attempt was put back for a retry: its Seq
	delivered chan struct{} // the hook returned and the event is counted delivered
	joined    chan uint64   // a duplicate joined a job: the job's Seq
	// batched is called, with the lock held, after each job of a
	// SubmitMany is taken in.
	batched func(h Handle)
}

func newTestSignals() *testSignals {
	return &testSignals{accepted: make(chan uint64, 1<<16), retried: make(chan uint64, 1<<16), delivered: make(chan struct{}, 1<<16), joined: make(chan uint64, 1<<16)}
}
