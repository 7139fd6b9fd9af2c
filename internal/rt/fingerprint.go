package rt

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/fairsched/fairsched/internal/engine"
)

// Fingerprint returns the fingerprint of what a cluster's leader decides
// by: the engine's configuration e and every job type's, with the type's
// policies of the run-time layer, and the lease (cluster.Config.Lease:
// the leader declares dead a replica silent for its own, while the
// replica fences itself by its own). Replicas must agree on it
// (internal/cluster, doc.go, Configuration): it is 32 hex digits, the
// first 16 bytes of the SHA-256 of an encoding of them.
//
// The encoding writes each field explicitly, as a tag of its own and its
// value, in the order of the tags; maps as their entries sorted by key.
// A field at its zero value is not written, nor a struct or a map with
// nothing written: so a field added later, left at zero (which must mean
// what the configuration meant without it), does not change the
// fingerprint of a configuration that does not use it, and replicas of
// two versions with one configuration still agree. A tag is never
// reused; a field added gets the next one. The test enumerates the
// structs' fields by reflection: a field not encoded here fails it.
func Fingerprint(e engine.Config, types map[string]TypeConfig, lease time.Duration) string {
	var w fpWriter
	w.buf = append(w.buf, "fairsched config 1\x00"...)
	w.sub(1, func(w *fpWriter) { w.engineConfig(e) })
	w.sub(2, func(w *fpWriter) {
		for _, name := range slices.Sorted(maps.Keys(types)) {
			w.entry(name, func(w *fpWriter) { w.typeConfig(types[name]) })
		}
	})
	w.dur(3, lease)
	sum := sha256.Sum256(w.buf)
	return hex.EncodeToString(sum[:16])
}

// fpWriter is the encoding Fingerprint hashes: a field is its tag (a
// uvarint) then its value, an integer as a zigzag varint, a float as its
// 8 bytes of IEEE 754, a string or a struct as its length (a uvarint)
// then its bytes; a map is a struct whose fields are its entries, each a
// tag 1 then the key then the value, in the keys' order.
type fpWriter struct{ buf []byte }

func (w *fpWriter) tag(t uint64) { w.buf = binary.AppendUvarint(w.buf, t) }

func (w *fpWriter) int(t uint64, v int64) {
	if v != 0 {
		w.tag(t)
		w.buf = binary.AppendVarint(w.buf, v)
	}
}

func (w *fpWriter) float(t uint64, v float64) {
	if v != 0 {
		w.tag(t)
		w.buf = binary.BigEndian.AppendUint64(w.buf, math.Float64bits(v))
	}
}

func (w *fpWriter) dur(t uint64, d time.Duration) { w.int(t, int64(d)) }

func (w *fpWriter) str(t uint64, s string) {
	if s != "" {
		w.tag(t)
		w.bytes(s)
	}
}

func (w *fpWriter) bytes(s string) {
	w.buf = binary.AppendUvarint(w.buf, uint64(len(s)))
	w.buf = append(w.buf, s...)
}

// sub writes what f writes as field t, length-prefixed; nothing if f
// writes nothing.
func (w *fpWriter) sub(t uint64, f func(w *fpWriter)) {
	var inner fpWriter
	f(&inner)
	if len(inner.buf) == 0 {
		return
	}
	w.tag(t)
	w.bytes(string(inner.buf))
}

// entry writes a map's entry: its key, then its value (written even if
// empty: the entry's presence is part of the configuration).
func (w *fpWriter) entry(key string, value func(w *fpWriter)) {
	w.tag(1)
	w.bytes(key)
	var inner fpWriter
	value(&inner)
	w.bytes(string(inner.buf))
}

func (w *fpWriter) engineConfig(c engine.Config) {
	w.int(1, int64(c.MaxConcurrency))
	w.int(2, int64(c.MaxQueue))
	w.sub(3, func(w *fpWriter) {
		for _, tier := range slices.Sorted(maps.Keys(c.TierLimits)) {
			var k []byte
			k = binary.AppendVarint(k, int64(tier))
			w.entry(string(k), func(w *fpWriter) { w.int(1, int64(c.TierLimits[tier])) })
		}
	})
	w.sub(4, func(w *fpWriter) { w.engineType(c.DefaultType) })
	w.sub(5, func(w *fpWriter) {
		for _, name := range slices.Sorted(maps.Keys(c.Keys)) {
			w.entry(name, func(w *fpWriter) { w.key(c.Keys[name]) })
		}
	})
	w.sub(6, func(w *fpWriter) { w.key(c.DefaultKey) })
	w.sub(7, func(w *fpWriter) {
		a := c.Aging
		w.int(1, a.GracePeriod)
		w.int(2, a.Interval)
		w.int(3, int64(a.Step))
		w.int(4, int64(a.MaxEffective))
		w.int(5, int64(a.UrgentThreshold))
	})
	w.float(8, c.CostAlpha)
	w.float(9, c.DefaultCost)
	w.int(10, c.IdleTTL)
	w.sub(11, func(w *fpWriter) {
		for _, name := range slices.Sorted(maps.Keys(c.Resources)) {
			w.entry(name, func(w *fpWriter) { w.int(1, int64(c.Resources[name])) })
		}
	})
	w.int(12, int64(c.BackfillLookahead))
}

func (w *fpWriter) engineType(t engine.Type) {
	w.int(1, int64(t.Tier))
	w.int(2, int64(t.MaxConcurrency))
	w.str(3, t.ConflictGroup)
	w.float(4, t.DefaultCost)
	w.int(5, int64(t.DefaultPriority))
	w.int(6, t.StartTimeout)
	w.sub(7, func(w *fpWriter) { w.rate(t.Rate) })
	// Needs in their order, as given: a list, each need a struct.
	w.sub(8, func(w *fpWriter) {
		for _, n := range t.Needs {
			w.tag(1)
			var inner fpWriter
			inner.str(1, n.Resource)
			inner.int(2, int64(n.Units))
			w.bytes(string(inner.buf))
		}
	})
}

func (w *fpWriter) key(k engine.Key) {
	w.float(1, k.Weight)
	w.int(2, int64(k.MinSlots))
	w.int(3, int64(k.MaxConcurrency))
	w.int(4, int64(k.MaxPending))
	w.sub(5, func(w *fpWriter) { w.rate(k.Rate) })
}

func (w *fpWriter) rate(r engine.Rate) {
	w.int(1, r.Period)
	w.int(2, int64(r.Burst))
}

func (w *fpWriter) typeConfig(t TypeConfig) {
	w.sub(1, func(w *fpWriter) { w.engineType(t.Engine) })
	w.sub(2, func(w *fpWriter) {
		r := t.Retry
		w.int(1, int64(r.Attempts))
		w.dur(2, r.Backoff)
		w.dur(3, r.MaxBackoff)
		w.float(4, r.Jitter)
	})
	w.sub(3, func(w *fpWriter) {
		d := t.Disable
		w.int(1, int64(d.Failures))
		w.dur(2, d.Window)
		w.dur(3, d.For)
	})
	w.int(4, int64(t.Duplicates))
}
