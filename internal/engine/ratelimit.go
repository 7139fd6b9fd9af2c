package engine

import "github.com/fairsched/fairsched/internal/iheap"

// Rate limits (docs/design.md, Rate limits): a token bucket per key and per type,
// taken from when a job starts. A key or type out of tokens is a shut
// gate of its scope (gates.go): a type is passed over by pick, one check
// per type, as at its cap; a key shuts its cap gate, so that its lanes
// leave the fair orders and the urgent jobs found of it are held, as at
// its cap. Either opens by a timer when its next token is due, on the
// rateline beside the jobs' timeline.
//
// The bucket is kept in the exact integer form of the generic cell rate
// algorithm: with a token every period µs and room for burst tokens, the
// bucket's state is one time, tat, the instant at which it would be full
// again if nothing were taken; a start is allowed at now if
// tat - (burst-1)·period <= now (a token is there), and takes one token by
// tat = max(tat, now) + period. Its tokens at now are thus
// min(burst, burst - (tat - now)/period), never a fraction lost to
// rounding, and a change of rate or burst keeps tat and applies to what
// follows.

// Rate is a token bucket's configuration: a token every Period µs, room
// for Burst tokens. The zero Rate is no limit.
type Rate struct {
	Period int64 // µs per token; 0: no limit
	Burst  int   // >= 1 when Period > 0
}

// bucket is one key's or type's token bucket, and its gate's timer.
type bucket struct {
	rate  Rate
	tat   int64 // when it would be full again
	empty bool  // no token now: its gate is shut until due()
	idx   int32 // handle in Engine.rateline, -1 when not on it
	// What it gates: one of the two.
	key *keyState
	typ *typeState
}

// due returns the first instant at which the bucket has a token.
func (b *bucket) due() int64 { return b.tat - int64(b.rate.Burst-1)*b.rate.Period }

// take takes a token at now, which must be there, and reports whether the
// bucket is then empty.
func (b *bucket) take(now int64) bool {
	b.tat = max(b.tat, now) + b.rate.Period
	return b.due() > now
}

// newRateline returns an empty rateline: the empty buckets by due time.
func newRateline() iheap.Keyed[*bucket] {
	return iheap.NewKeyed(func(b *bucket, i int) { b.idx = int32(i) })
}

// takeTokens takes a token from j's key's and type's buckets, if they
// have a rate, as j starts at now, and shuts what it empties. A job
// adopted running (adopt.go) takes none: the leader that granted it did.
func (e *Engine) takeTokens(j *Job, now int64) {
	if j.is(flagAdopted) {
		return
	}
	if b := &j.lane.typ.bucket; b.rate.Period > 0 && b.take(now) {
		e.emptied(b)
	}
	if b := &j.lane.key.bucket; b.rate.Period > 0 && b.take(now) {
		e.emptied(b) // the caller shuts the key's gate
	}
}

// emptied shuts b's gate until its next token.
func (e *Engine) emptied(b *bucket) {
	b.empty = true
	e.rateline.Push(b.order(), b)
}

// order is b's place on the rateline: its due time. Buckets due at one
// instant open in any order: opening a gate decides nothing before the
// next dispatch.
func (b *bucket) order() iheap.Key { return iheap.Key{Hi: iheap.Int(b.due())} }

// openRates opens the gates of the buckets whose next token is due by now.
func (e *Engine) openRates(now int64) {
	for {
		b, key, ok := e.rateline.TopKey()
		if !ok || iheap.IntOf(key.Hi) > now {
			return
		}
		e.rateline.Pop()
		b.empty = false
		if b.key != nil {
			e.recap(b.key)
		}
	}
}

// setRate gives b the rate r from now: its tat is kept, and its gate
// opens or shuts as a token is there at now or not.
func (e *Engine) setRate(b *bucket, r Rate, now int64) {
	b.rate = r
	if r.Period > 0 {
		e.rated = true
	}
	if b.idx >= 0 {
		e.rateline.Remove(int(b.idx))
	}
	b.empty = r.Period > 0 && b.due() > now
	if b.empty {
		e.rateline.Push(b.order(), b)
	}
}

// Rated reports whether any key or type has a rate limit: then a start
// may set a timer, and the caller should look at NextDue after it.
func (e *Engine) Rated() bool { return e.rated }
