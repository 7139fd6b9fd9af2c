package engine

// Rejected counts n submissions of type name, a registered type, refused
// as Enqueue refuses them when the queue is full or, with closed, when
// the engine no longer accepts: for the jobs of a batch its caller
// refused as a whole, having checked them together (Room, Accepting).
// O(1).
func (e *Engine) Rejected(name string, closed bool, n int) {
	t := e.anyType
	if name != "" {
		if t = e.types[name]; t == nil {
			return
		}
	}
	if closed {
		t.stats.rejectedClosed += uint64(n)
	} else {
		t.stats.rejectedFull += uint64(n)
	}
}

// RejectedUnknownType counts a submission refused for naming a type the
// engine does not know, as Enqueue counts its own. O(1).
func (e *Engine) RejectedUnknownType() { e.counters.RejectedUnknownType++ }
