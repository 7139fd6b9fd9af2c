package store

// Groups puts a transaction's requests, but its inserts, into the groups
// a store writes together. Requests about different jobs commute, so they
// need not be applied in the order they came, only each job's in its
// order: first the starts, then the plain completions, of the jobs that
// have no other request in the transaction, each kind together; then the
// rest in order, consecutive starts or plain completions together. Its
// zero value is ready; it keeps its buffers for the next transaction. Not
// safe for concurrent use: a store's writer owns it.
type Groups struct {
	touched                 map[int64]int // requests per job
	starts, completes, rest []*Request
}

// Apply hands rs, but its inserts, to starts, completes and one in the
// groups above, and stops at the first error.
func (g *Groups) Apply(rs []*Request, starts, completes func([]*Request) error, one func(*Request) error) error {
	if g.touched == nil {
		g.touched = make(map[int64]int)
	}
	clear(g.touched)
	for _, r := range rs {
		if r.Kind == Start || r.Kind == Apply {
			g.touched[r.Op.ID]++
		}
	}
	ss, cs, rest := g.starts[:0], g.completes[:0], g.rest[:0]
	for _, r := range rs {
		switch {
		case r.Kind == Insert:
		case r.Kind == Start && g.touched[r.Op.ID] == 1:
			ss = append(ss, r)
		case PlainComplete(r) && g.touched[r.Op.ID] == 1:
			cs = append(cs, r)
		default:
			rest = append(rest, r)
		}
	}
	defer func() { // the buffers kept for the next transaction
		clear(ss)
		clear(cs)
		clear(rest)
		g.starts, g.completes, g.rest = ss[:0], cs[:0], rest[:0]
	}()
	if err := starts(ss); err != nil {
		return err
	}
	if err := completes(cs); err != nil {
		return err
	}
	for todo := rest; len(todo) > 0; {
		n := 1
		var err error
		switch r := todo[0]; {
		case r.Kind == Start:
			for n < len(todo) && todo[n].Kind == Start {
				n++
			}
			err = starts(todo[:n])
		case PlainComplete(r):
			for n < len(todo) && PlainComplete(todo[n]) {
				n++
			}
			err = completes(todo[:n])
		default:
			err = one(r)
		}
		if err != nil {
			return err
		}
		todo = todo[n:]
	}
	return nil
}

// PlainComplete reports whether r completes a job and records no attempt
// with it: such completions are written many to a statement.
func PlainComplete(r *Request) bool {
	return r.Kind == Apply && r.Op.Kind == OpComplete && r.Op.Attempt.Start == 0
}
