package store

import "context"

// What the stores' writers share: the requests they apply, in groups
// (Batcher), and the Store methods that queue them.

// Kind says what a Request writes.
type Kind uint8

// The writes.
const (
	Insert Kind = iota + 1 // Jobs, and State with them
	Start                  // an attempt of Op.ID starts at Op.At: the job's Args back
	Apply                  // Op
	Prune                  // one batch of old jobs (PruneFunc): Op.At, Op.NotBefore
	Put                    // Value under Name
)

// Request is one write, and, once applied, its result.
type Request struct {
	Kind   Kind
	Jobs   []*Job      // Insert
	State  *StateWrite // Insert: a state to put with the jobs
	Op     Op          // Apply; Start: ID and At; Prune: the two cutoffs
	Args   []byte      // Start: the job's arguments
	Err    error       // Start: the job was not queued
	Pruned int64       // Prune: the jobs deleted
	Name   string      // Put
	Value  []byte      // Put
	// Overwritten, set by MarkOverwritten, says that a later request of
	// the same transaction writes this one's state (a Put, or an
	// Insert's State) again: the writer writes only the last.
	Overwritten bool
}

// stateName returns the name of the state r writes, if it writes one.
func (r *Request) stateName() (string, bool) {
	switch {
	case r.Kind == Put:
		return r.Name, true
	case r.Kind == Insert && r.State != nil:
		return r.State.Name, true
	}
	return "", false
}

// MarkOverwritten sets Overwritten on each state write of rs, one
// transaction's requests in the order they were made, that a later one
// of rs writes again under the same name. A writer writes an insert's
// state with its jobs, first, and a Put among the other requests, after:
// without this, a Put made before an insert (a periodic schedule's next
// time, say) would be written after the insert's state of the same name,
// and the older value would be the one kept. Writing only the last of
// each name keeps the newest, whatever order the writer applies them in.
// It allocates only for a transaction with two state writes or more.
func MarkOverwritten(rs []*Request) {
	n := 0
	for _, r := range rs {
		r.Overwritten = false
		if _, ok := r.stateName(); ok {
			n++
		}
	}
	if n < 2 {
		return
	}
	later := make(map[string]bool, n)
	for i := len(rs) - 1; i >= 0; i-- {
		if name, ok := rs[i].stateName(); ok {
			rs[i].Overwritten = later[name]
			later[name] = true
		}
	}
}

// Writes are the methods of a Store that queue its writes on a Batcher of
// Requests, which its writer applies: a store embeds it (through an
// unexported alias, so that the field is not part of its API).
type Writes struct{ B *Batcher[*Request] }

// Insert is for the scheduler: it stores jobs, assigning their IDs, and
// returns once they are committed.
func (w Writes) Insert(ctx context.Context, state *StateWrite, jobs ...*Job) error {
	return w.B.Do(&Request{Kind: Insert, Jobs: jobs, State: state})
}

// Start is for the scheduler: it records that an attempt of job id
// starts, and returns the job's arguments once that is committed.
func (w Writes) Start(ctx context.Context, id int64, at int64) ([]byte, error) {
	r := &Request{Kind: Start, Op: Op{ID: id, At: at}}
	if err := w.B.Do(r); err != nil {
		return nil, err
	}
	return r.Args, r.Err
}

// Post is for the scheduler: it records op in a transaction to come.
func (w Writes) Post(op Op) { w.B.Post(&Request{Kind: Apply, Op: op}) }

// Flush is for the scheduler: it waits for every op posted before.
func (w Writes) Flush(ctx context.Context) error { return w.B.Flush() }

// PutState is for the scheduler: it records value under name in a
// transaction to come.
func (w Writes) PutState(name string, value []byte) {
	w.B.Post(&Request{Kind: Put, Name: name, Value: value})
}

// PruneThrough returns the PruneFunc that deletes one batch of old jobs
// through b.
func PruneThrough(b *Batcher[*Request]) PruneFunc {
	return func(finishedBefore, deadBefore int64) (int64, error) {
		r := &Request{Kind: Prune, Op: Op{At: finishedBefore, NotBefore: deadBefore}}
		err := b.Do(r)
		return r.Pruned, err
	}
}

// Interner keeps one copy of each type, key and ID read (up to a bound),
// so that a million recovered jobs of a few keys do not hold a million
// copies. The zero Interner is ready.
type Interner map[string]string

// Of returns the copy of s kept, or s.
func (in *Interner) Of(s string) string {
	if *in == nil {
		*in = make(map[string]string)
	}
	if c, ok := (*in)[s]; ok {
		return c
	}
	if len(*in) < 1<<16 {
		(*in)[s] = s
	}
	return s
}
