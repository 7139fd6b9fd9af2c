package decide

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"

	"github.com/fairsched/fairsched/internal/engine"
)

// The messages' encoding, for a Link to carry them as bytes (wire.go).
// A payload is a version byte, then messages, each whole, until the
// payload's end. A message is its Kind (one byte), a mask of the fields
// that follow (a uvarint, a bit per field, in the order of the field*
// constants below), then those fields, in that order: unsigned numbers
// as uvarints, signed ones as zig-zag varints, strings as a uvarint
// length and their bytes, Outcome and Refusal as one byte each, Sync
// after them, then Attempt (a varint), Args (a uvarint length and its
// bytes), Err (a string), Flags (one byte) and Types (a uvarint count,
// then each as a string). A field
// left out is zero (an empty Args or Types is nil); Needs is in the mask when it is not nil, so that an
// empty list (own needs: none) stays apart from nil (its type's needs),
// and is a uvarint count, then each Need's Resource and Units. An Ask of
// a job with a short ID and no times takes about 20 bytes.
//
// A decoder refuses a payload of a version it does not know, a Kind it
// does not know, or a mask with bits it does not know: a change of the
// encoding, or a new Kind, is a new version, so that during a rolling
// upgrade an old process drops (and counts) what it cannot read instead
// of misreading it. Decoding never panics, and allocates in proportion
// to the payload's length: every count read is checked against the
// bytes left before anything is allocated for it.

// codecVersion is the encoding's version: a payload's first byte. 2: the
// durable jobs' messages (Run, Done, Runs) and fields. 3: an Ask's
// flags (AskAtOnce, AskAll), and a refusal's figures in its Ended. 4:
// Recorded, and the Dones a Hello carries again. 5: AskHeld and
// AskAdmitted, a job that waits in its replica for others.
const codecVersion = 5

// The fields of a message, as bits of its mask, in the order encoded.
const (
	fieldTerm = 1 << iota
	fieldReplica
	fieldSeq
	fieldType
	fieldID
	fieldKey
	fieldDescPriority
	fieldNeeds
	fieldAge
	fieldNotBefore
	fieldStartBy
	fieldRan
	fieldPriority
	fieldN
	fieldOutcome
	fieldRefusal
	fieldSync
	fieldAttempt
	fieldArgs
	fieldErr
	fieldFlags
	fieldTypes
	fieldAll = 1<<iota - 1
)

// ErrMsgTooLarge is returned by EncodeMsgs for a message whose encoding
// alone is larger than a payload may be.
var ErrMsgTooLarge = errors.New("decide: a message is larger than a payload may be")

// EncodeMsgs encodes msgs, in order, into payloads of at most max bytes
// each, as few as it can: each payload holds the messages that follow
// the last one's, as many as fit, and a message is never split across
// two. It fails, and returns no payload, if a message's Kind is not
// known, or if one alone does not fit in max bytes (ErrMsgTooLarge).
// No message: no payload.
func EncodeMsgs(msgs []Msg, max int) ([][]byte, error) {
	var out [][]byte
	var cur []byte
	var m []byte // one message's encoding, reused
	for i := range msgs {
		if k := msgs[i].Kind; k < Ask || k > lastKind {
			return nil, fmt.Errorf("decide: message %d of %d: unknown kind %d", i, len(msgs), k)
		}
		m = appendMsg(m[:0], &msgs[i])
		if 1+len(m) > max {
			return nil, fmt.Errorf("%w: message %d of %d (kind %d, job %d) takes %d bytes, a payload %d at most",
				ErrMsgTooLarge, i, len(msgs), msgs[i].Kind, msgs[i].Seq, 1+len(m), max)
		}
		if cur != nil && len(cur)+len(m) > max {
			out = append(out, cur)
			cur = nil
		}
		if cur == nil {
			cur = append(make([]byte, 0, min(max, 1<<10)), codecVersion)
		}
		cur = append(cur, m...)
	}
	if cur != nil {
		out = append(out, cur)
	}
	return out, nil
}

// appendMsg appends the encoding of m to b.
func appendMsg(b []byte, m *Msg) []byte {
	var mask uint64
	set := func(bit uint64, nonzero bool) {
		if nonzero {
			mask |= bit
		}
	}
	set(fieldTerm, m.Term != 0)
	set(fieldReplica, m.Replica != "")
	set(fieldSeq, m.Seq != 0)
	set(fieldType, m.Desc.Type != "")
	set(fieldID, m.Desc.ID != "")
	set(fieldKey, m.Desc.Key != "")
	set(fieldDescPriority, m.Desc.Priority != 0)
	set(fieldNeeds, m.Needs != nil)
	set(fieldAge, m.Age != 0)
	set(fieldNotBefore, m.NotBefore != 0)
	set(fieldStartBy, m.StartBy != 0)
	set(fieldRan, m.Ran != 0)
	set(fieldPriority, m.Priority != 0)
	set(fieldN, m.N != 0)
	set(fieldOutcome, m.Outcome != 0)
	set(fieldRefusal, m.Refusal != 0)
	set(fieldSync, m.Sync != 0)
	set(fieldAttempt, m.Attempt != 0)
	set(fieldArgs, len(m.Args) != 0)
	set(fieldErr, m.Err != "")
	set(fieldFlags, m.Flags != 0)
	set(fieldTypes, len(m.Types) != 0)

	b = append(b, byte(m.Kind))
	b = binary.AppendUvarint(b, mask)
	has := func(bit uint64) bool { return mask&bit != 0 }
	if has(fieldTerm) {
		b = binary.AppendUvarint(b, m.Term)
	}
	if has(fieldReplica) {
		b = appendString(b, m.Replica)
	}
	if has(fieldSeq) {
		b = binary.AppendUvarint(b, m.Seq)
	}
	if has(fieldType) {
		b = appendString(b, m.Desc.Type)
	}
	if has(fieldID) {
		b = appendString(b, m.Desc.ID)
	}
	if has(fieldKey) {
		b = appendString(b, m.Desc.Key)
	}
	if has(fieldDescPriority) {
		b = binary.AppendVarint(b, int64(m.Desc.Priority))
	}
	if has(fieldNeeds) {
		b = binary.AppendUvarint(b, uint64(len(m.Needs)))
		for _, n := range m.Needs {
			b = appendString(b, n.Resource)
			b = binary.AppendVarint(b, int64(n.Units))
		}
	}
	for _, f := range [...]struct {
		bit uint64
		v   int64
	}{
		{fieldAge, m.Age}, {fieldNotBefore, m.NotBefore}, {fieldStartBy, m.StartBy}, {fieldRan, m.Ran},
		{fieldPriority, int64(m.Priority)}, {fieldN, int64(m.N)},
	} {
		if has(f.bit) {
			b = binary.AppendVarint(b, f.v)
		}
	}
	if has(fieldOutcome) {
		b = append(b, byte(m.Outcome))
	}
	if has(fieldRefusal) {
		b = append(b, byte(m.Refusal))
	}
	if has(fieldSync) {
		b = binary.AppendUvarint(b, m.Sync)
	}
	if has(fieldAttempt) {
		b = binary.AppendVarint(b, int64(m.Attempt))
	}
	if has(fieldArgs) {
		b = binary.AppendUvarint(b, uint64(len(m.Args)))
		b = append(b, m.Args...)
	}
	if has(fieldErr) {
		b = appendString(b, m.Err)
	}
	if has(fieldFlags) {
		b = append(b, byte(m.Flags))
	}
	if has(fieldTypes) {
		b = binary.AppendUvarint(b, uint64(len(m.Types)))
		for _, t := range m.Types {
			b = appendString(b, t)
		}
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// minMsgLen is the fewest bytes a message takes: its kind and its mask.
const minMsgLen = 2

// DecodeMsgs decodes a payload of EncodeMsgs. It fails on a payload of
// another version, or one that is not a whole number (one or more) of
// well-formed messages; it never panics, and allocates in proportion to len(p).
func DecodeMsgs(p []byte) ([]Msg, error) {
	if len(p) == 0 {
		return nil, errors.New("decide: an empty payload")
	}
	if p[0] != codecVersion {
		return nil, fmt.Errorf("decide: a payload of version %d; this process reads version %d", p[0], codecVersion)
	}
	if len(p) == 1 {
		return nil, errors.New("decide: a payload of no message")
	}
	d := decoder{b: p[1:]}
	var msgs []Msg
	for len(d.b) > 0 && d.err == nil {
		var m Msg
		d.msg(&m, msgs)
		if d.err == nil {
			msgs = append(msgs, m)
		}
	}
	if d.err != nil {
		return nil, fmt.Errorf("decide: a payload's message %d, at byte %d of %d: %w", len(msgs), len(p)-len(d.b), len(p), d.err)
	}
	return msgs, nil
}

// decoder reads a payload's messages; its first error stops it.
type decoder struct {
	b   []byte
	err error
}

var errShort = errors.New("truncated")

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errors.New("a malformed number"))
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errors.New("a malformed number"))
		return 0
	}
	d.b = d.b[n:]
	return v
}

// int reads a varint that must fit in an int.
func (d *decoder) int() int {
	v := d.varint()
	if bits.UintSize == 32 && int64(int(v)) != v {
		d.fail(errors.New("a number out of an int's range"))
		return 0
	}
	return int(v)
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail(errShort)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// string reads a string; one equal to prev is prev, not a copy (a
// batch's messages share their replica's name and their types').
func (d *decoder) string(prev string) string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.fail(errShort)
		return ""
	}
	s := d.b[:n]
	d.b = d.b[n:]
	if string(s) == prev {
		return prev
	}
	return string(s)
}

// msg reads a message into m; prev are the payload's messages before it.
func (d *decoder) msg(m *Msg, prev []Msg) {
	var last Msg
	if len(prev) > 0 {
		last = prev[len(prev)-1]
	}
	m.Kind = MsgKind(d.byte())
	if d.err == nil && (m.Kind < Ask || m.Kind > lastKind) {
		d.fail(fmt.Errorf("unknown kind %d", m.Kind))
		return
	}
	mask := d.uvarint()
	if mask&^fieldAll != 0 {
		d.fail(fmt.Errorf("unknown fields (mask %#x)", mask))
		return
	}
	has := func(bit uint64) bool { return mask&bit != 0 && d.err == nil }
	if has(fieldTerm) {
		m.Term = d.uvarint()
	}
	if has(fieldReplica) {
		m.Replica = d.string(last.Replica)
	}
	if has(fieldSeq) {
		m.Seq = d.uvarint()
	}
	if has(fieldType) {
		m.Desc.Type = d.string(last.Desc.Type)
	}
	if has(fieldID) {
		m.Desc.ID = d.string("")
	}
	if has(fieldKey) {
		m.Desc.Key = d.string(last.Desc.Key)
	}
	if has(fieldDescPriority) {
		m.Desc.Priority = d.int()
	}
	if has(fieldNeeds) {
		n := d.uvarint()
		// A Need takes two bytes at least: no more can follow.
		if d.err == nil && n > uint64(len(d.b))/2 {
			d.fail(errShort)
		}
		if d.err == nil {
			m.Needs = make([]engine.Need, 0, n)
			for i := uint64(0); i < n && d.err == nil; i++ {
				var prevRes string
				if i > 0 {
					prevRes = m.Needs[i-1].Resource
				}
				r := d.string(prevRes)
				u := d.int()
				m.Needs = append(m.Needs, engine.Need{Resource: r, Units: u})
			}
		}
	}
	for _, f := range [...]struct {
		bit uint64
		v   *int64
	}{
		{fieldAge, &m.Age}, {fieldNotBefore, &m.NotBefore}, {fieldStartBy, &m.StartBy}, {fieldRan, &m.Ran},
	} {
		if has(f.bit) {
			*f.v = d.varint()
		}
	}
	if has(fieldPriority) {
		m.Priority = d.int()
	}
	if has(fieldN) {
		m.N = d.int()
	}
	if has(fieldOutcome) {
		m.Outcome = engine.Outcome(d.byte())
	}
	if has(fieldRefusal) {
		m.Refusal = engine.RefusalReason(d.byte())
	}
	if has(fieldSync) {
		m.Sync = d.uvarint()
	}
	if has(fieldAttempt) {
		m.Attempt = d.int()
	}
	if has(fieldArgs) {
		if a := d.string(""); a != "" { // none is nil, as encoded
			m.Args = []byte(a)
		}
	}
	if has(fieldErr) {
		m.Err = d.string("")
	}
	if has(fieldFlags) {
		m.Flags = DoneFlags(d.byte())
	}
	if has(fieldTypes) {
		n := d.uvarint()
		// A type takes a byte at least: no more can follow.
		if d.err == nil && n > uint64(len(d.b)) {
			d.fail(errShort)
		}
		if d.err == nil && n > 0 { // none is nil, as encoded
			m.Types = make([]string, 0, n)
			for i := uint64(0); i < n && d.err == nil; i++ {
				m.Types = append(m.Types, d.string(""))
			}
		}
	}
}
