package decide

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
)

// The run-time changes of the configuration across replicas, for
// maintainers. A replica's Remote applies a change to its own engine
// (which refuses it, changing nothing, as in one process), and puts the
// change applied in its ChangeOutbox; the replica's Node appends it to
// the cluster's log of changes in the database, and every Node applies
// the log, in its order, to its own engine (Remote.Apply) and, while it
// leads, to the leader's (Leader.Apply). A new leader applies the whole
// log to its fresh engine before its term begins, so a change outlives
// the leader that applied it first. Every change sets a value (a pause
// pauses, a reset resets), so applying one again, as a replica does its
// own, changes nothing, and every engine that applied the log up to a
// change has the same configuration.

// ChangeOutbox holds the changes a replica's Remote applied, taken with
// the run-time layer's lock held, until a goroutine of its Node appends
// them to the cluster's log. It is safe for concurrent use; the zero
// value is ready.
type ChangeOutbox struct {
	mu      sync.Mutex
	list    []Change
	pending chan struct{} // receives once when list becomes non-empty
}

// Put adds c, and signals Pending if the outbox was empty.
func (o *ChangeOutbox) Put(c Change) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.pending == nil {
		o.pending = make(chan struct{}, 1)
	}
	o.list = append(o.list, c)
	if len(o.list) == 1 {
		select {
		case o.pending <- struct{}{}:
		default:
		}
	}
}

// Pending returns a channel that receives when changes wait.
func (o *ChangeOutbox) Pending() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.pending == nil {
		o.pending = make(chan struct{}, 1)
	}
	return o.pending
}

// Take returns the changes held, in the order put, and holds none.
func (o *ChangeOutbox) Take() []Change {
	o.mu.Lock()
	defer o.mu.Unlock()
	list := o.list
	o.list = nil
	return list
}

// A change's encoding, as the cluster's log keeps it: a version byte,
// the Kind (one byte), a mask of the fields that follow (a uvarint, a
// bit per field, in the order of the change* constants below), then
// those fields, in that order: strings as a uvarint length and their
// bytes, ints as zig-zag varints, floats as their IEEE 754 bits in 8
// bytes, little-endian. A field left out is zero. A decoder refuses a
// version, a Kind or a mask bit it does not know, and bytes left over:
// a new field or Kind is a new version, so that an older process
// refuses (and logs) a change it cannot read instead of misreading it.

// changeVersion is the encoding's version: an encoded change's first
// byte.
const changeVersion = 1

// lastChangeKind is the last ChangeKind known.
const lastChangeKind = ResumeType

// The fields of a change, as bits of its mask, in the order encoded.
const (
	changeName = 1 << iota
	changeTier
	changeN
	changeKeyWeight
	changeKeyMinSlots
	changeKeyMaxConcurrency
	changeKeyMaxPending
	changeKeyRatePeriod
	changeKeyRateBurst
	changeWeight
	changeAll = 1<<iota - 1
)

// EncodeChange returns c's encoding; it fails for a Kind not known.
func EncodeChange(c Change) ([]byte, error) {
	if c.Kind < SetMaxConcurrency || c.Kind > lastChangeKind {
		return nil, fmt.Errorf("decide: a change of unknown kind %d", c.Kind)
	}
	ints := [...]struct {
		bit uint64
		v   int64
	}{
		{changeTier, int64(c.Tier)}, {changeN, int64(c.N)},
		{changeKeyMinSlots, int64(c.Key.MinSlots)}, {changeKeyMaxConcurrency, int64(c.Key.MaxConcurrency)},
		{changeKeyMaxPending, int64(c.Key.MaxPending)}, {changeKeyRatePeriod, c.Key.Rate.Period},
		{changeKeyRateBurst, int64(c.Key.Rate.Burst)},
	}
	var mask uint64
	if c.Name != "" {
		mask |= changeName
	}
	for _, f := range ints {
		if f.v != 0 {
			mask |= f.bit
		}
	}
	// A float's bits, so that -0 and NaN come back as they went.
	if math.Float64bits(c.Key.Weight) != 0 {
		mask |= changeKeyWeight
	}
	if math.Float64bits(c.Weight) != 0 {
		mask |= changeWeight
	}
	b := make([]byte, 0, 16+len(c.Name))
	b = append(b, changeVersion, byte(c.Kind))
	b = binary.AppendUvarint(b, mask)
	if mask&changeName != 0 {
		b = appendString(b, c.Name)
	}
	for _, f := range ints[:2] { // Tier, N
		if mask&f.bit != 0 {
			b = binary.AppendVarint(b, f.v)
		}
	}
	if mask&changeKeyWeight != 0 {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(c.Key.Weight))
	}
	for _, f := range ints[2:] {
		if mask&f.bit != 0 {
			b = binary.AppendVarint(b, f.v)
		}
	}
	if mask&changeWeight != 0 {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(c.Weight))
	}
	return b, nil
}

// DecodeChange decodes an encoding of EncodeChange. It fails on another
// version, a Kind or a field it does not know, or bytes that are not
// exactly one well-formed change; it never panics.
func DecodeChange(p []byte) (Change, error) {
	var c Change
	if len(p) < 3 {
		return c, fmt.Errorf("decide: a change of %d bytes: too short", len(p))
	}
	if p[0] != changeVersion {
		return c, fmt.Errorf("decide: a change of version %d; this process reads version %d", p[0], changeVersion)
	}
	c.Kind = ChangeKind(p[1])
	if c.Kind < SetMaxConcurrency || c.Kind > lastChangeKind {
		return Change{}, fmt.Errorf("decide: a change of unknown kind %d", c.Kind)
	}
	d := decoder{b: p[2:]}
	mask := d.uvarint()
	if mask&^changeAll != 0 {
		return Change{}, fmt.Errorf("decide: a change with unknown fields (mask %#x)", mask)
	}
	has := func(bit uint64) bool { return mask&bit != 0 && d.err == nil }
	if has(changeName) {
		c.Name = d.string("")
	}
	if has(changeTier) {
		c.Tier = d.int()
	}
	if has(changeN) {
		c.N = d.int()
	}
	if has(changeKeyWeight) {
		c.Key.Weight = d.float()
	}
	if has(changeKeyMinSlots) {
		c.Key.MinSlots = d.int()
	}
	if has(changeKeyMaxConcurrency) {
		c.Key.MaxConcurrency = d.int()
	}
	if has(changeKeyMaxPending) {
		c.Key.MaxPending = d.int()
	}
	if has(changeKeyRatePeriod) {
		c.Key.Rate.Period = d.varint()
	}
	if has(changeKeyRateBurst) {
		c.Key.Rate.Burst = d.int()
	}
	if has(changeWeight) {
		c.Weight = d.float()
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail(fmt.Errorf("%d bytes left over", len(d.b)))
	}
	if d.err != nil {
		return Change{}, fmt.Errorf("decide: a change of kind %d: %w", c.Kind, d.err)
	}
	return c, nil
}

// float reads a float64's 8 bytes, little-endian.
func (d *decoder) float() float64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail(errShort)
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}
