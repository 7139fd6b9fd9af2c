package rt

// DuplicatePolicy is a type's duplicate policy, numbered as the API's.
type DuplicatePolicy uint8

// The duplicate policies (see the API's documentation of each).
const (
	AllowDuplicates DuplicatePolicy = iota
	Supersede
	JoinQueued
	JoinRunning
)

// dupKey is a job's identity for its type's DuplicatePolicy.
type dupKey struct{ typ, id string }

// duplicates holds what the duplicate policies keep: each type's policy,
// and, for each (type, ID), the job a new submission meets (joins, or
// replaces): the latest accepted while it waits, or, under JoinRunning,
// until it ends.
type duplicates struct {
	policy     map[string]DuplicatePolicy // the types that have one; nil: none has
	current    map[dupKey]*task
	joiners    map[*task]*joined // of each job that duplicates may join (join.go)
	joins      uint64            // submissions that joined a job
	superseded uint64            // jobs replaced
}

// note records type name's policy, if it has one.
func (d *duplicates) note(name string, p DuplicatePolicy) {
	if p == AllowDuplicates {
		return
	}
	if d.policy == nil {
		d.policy = make(map[string]DuplicatePolicy)
		d.current = make(map[dupKey]*task)
		d.joiners = make(map[*task]*joined)
	}
	d.policy[name] = p
}

// keyOf returns t's identity for its type's policy.
func keyOf(t *task) dupKey { return dupKey{t.rec.Type(), t.rec.ID()} }

// accepted applies t's type's policy to t, just accepted: under
// Supersede it returns the job t replaces, which the caller ends; and t
// becomes the job its duplicates meet, if it waits (or, under
// JoinRunning, runs).
func (d *duplicates) accepted(t *task) (replaced *task) {
	p := d.policy[t.rec.Type()]
	if p == AllowDuplicates {
		return nil
	}
	key := keyOf(t)
	if old := d.current[key]; p == Supersede && old != nil && old.waiting() {
		d.superseded++
		replaced = old
	}
	if t.waiting() || p == JoinRunning && t.granted() {
		d.current[key] = t
	}
	return replaced
}

// started closes t to its duplicates as it starts, unless its
// type joins running jobs.
func (d *duplicates) started(t *task) {
	if key := keyOf(t); d.current[key] == t && d.policy[key.typ] != JoinRunning {
		delete(d.current, key)
	}
}

// ended closes t to its duplicates as it ends, and lets its
// joiners go.
func (d *duplicates) ended(t *task) {
	if key := keyOf(t); d.current[key] == t {
		delete(d.current, key)
	}
	if js := d.joiners[t]; js != nil {
		delete(d.joiners, t)
		close(js.done)
	}
}
