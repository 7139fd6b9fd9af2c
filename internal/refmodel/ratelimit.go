package refmodel

import (
	"math"
	"time"
)

// Rate mirrors fairsched.RateLimit: a token bucket of Burst tokens (0
// means 1), refilled with one token every 1/PerSecond seconds, rounded to
// the microsecond. The zero Rate is no limit.
type Rate struct {
	PerSecond float64
	Burst     int
}

// period returns the µs between two tokens, and the bucket's size.
func (r Rate) period() (int64, int64) {
	p := int64(math.Round(float64(time.Second/time.Microsecond) / r.PerSecond))
	return max(p, 1), int64(max(r.Burst, 1))
}

// bucket is a token bucket's state: full is the instant from which it is
// full, had nothing been taken since. Its tokens at now are then
// size - (full - now)/period, at most size: it has one when
// full - (size-1)·period <= now, and a start takes one by moving full a
// period later (from now, if it was full already). A new bucket is full.
type bucket struct{ full int64 }

// has reports whether b, limited by r, has a token at now.
func (b *bucket) has(r Rate, now int64) bool {
	if r.PerSecond == 0 {
		return true
	}
	p, size := r.period()
	return b.full-(size-1)*p <= now
}

// take takes a token from b, limited by r, at now.
func (b *bucket) take(r Rate, now int64) {
	if r.PerSecond == 0 {
		return
	}
	p, _ := r.period()
	b.full = max(b.full, now) + p
}

// due returns when b, limited by r, next has a token, if it has none at
// now.
func (b *bucket) due(r Rate, now int64) (int64, bool) {
	if b.has(r, now) {
		return 0, false
	}
	p, size := r.period()
	return b.full - (size-1)*p, true
}

// typeBucket returns the token bucket of the job type name.
func (m *Model) typeBucket(name string) *bucket {
	if m.typeBuckets == nil {
		m.typeBuckets = map[string]*bucket{}
	}
	b := m.typeBuckets[name]
	if b == nil {
		b = &bucket{}
		m.typeBuckets[name] = b
	}
	return b
}

// hasTokens reports whether j's key and type both have a token at now.
func (m *Model) hasTokens(j *job, now int64) bool {
	return j.key.bucket.has(j.key.cfg.Rate, now) && m.typeBucket(j.typName).has(j.typ.Rate, now)
}

// takeTokens takes a token from j's key's and type's buckets as it starts.
func (m *Model) takeTokens(j *job, now int64) {
	j.key.bucket.take(j.key.cfg.Rate, now)
	m.typeBucket(j.typName).take(j.typ.Rate, now)
}

// nextToken returns the earliest time a bucket with no token at now gets
// one.
func (m *Model) nextToken(now int64) (int64, bool) {
	due, ok := int64(0), false
	consider := func(at int64, has bool) {
		if has && (!ok || at < due) {
			due, ok = at, true
		}
	}
	for _, k := range m.keys {
		consider(k.bucket.due(k.cfg.Rate, now))
	}
	for name, b := range m.typeBuckets {
		t, _ := m.typeOf(name)
		consider(b.due(t.Rate, now))
	}
	return due, ok
}
