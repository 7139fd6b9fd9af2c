package decide

import (
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/fairsched/fairsched/internal/engine"
)

// sampleMsgs are messages of every kind, with fields at their extremes,
// nil and empty Needs among them.
func sampleMsgs() []Msg {
	return []Msg{
		{Kind: Hello, Term: 7, Replica: "replica-a", N: 2},
		{Kind: Ask, Term: 7, Replica: "replica-a", Seq: 1, Desc: engine.Desc{Type: "mail", ID: "job-1", Key: "tenant-9", Priority: -3},
			Age: 1500, NotBefore: 10_000, StartBy: 60_000_000},
		{Kind: Running, Term: 7, Replica: "replica-a", Seq: 2, Desc: engine.Desc{Type: "mail"},
			Needs: []engine.Need{{Resource: "gpu", Units: 2}, {Resource: "gpu", Units: 1}, {Resource: "", Units: -1}}, Ran: 42},
		{Kind: Ask, Term: 7, Replica: "replica-a", Seq: 3, Needs: []engine.Need{}},
		{Kind: End, Term: math.MaxUint64, Replica: "é\x00z", Seq: math.MaxUint64, Outcome: engine.Outcome(255)},
		{Kind: Retry, Seq: 4, NotBefore: math.MinInt64, Age: math.MaxInt64},
		{Kind: Cancel, Seq: 5},
		{Kind: Raise, Seq: 6, Priority: math.MinInt32, Desc: engine.Desc{Priority: math.MaxInt32}},
		{Kind: Grant, Term: 8, Replica: "replica-b", Seq: 9},
		{Kind: Ended, Term: 8, Replica: "replica-b", Seq: 10, Refusal: engine.RefusalReason(3), Sync: 4},
		{Kind: Resync, Term: 8, Replica: "replica-b"},
		{Kind: Admitted, Term: 8, Replica: "replica-b", Seq: 11, Sync: 2},
		{Kind: Ask},
		{Kind: Hello, Term: 9, Replica: "replica-c", N: 1, Sync: 3, Types: []string{"mail", "", "report"}},
		{Kind: Runs, Term: 9, Replica: "replica-c", Seq: 1 << 40, Attempt: 3, Ran: 1500},
		{Kind: Run, Term: 9, Replica: "replica-c", Seq: 12, Attempt: 1, Desc: engine.Desc{Type: "mail"},
			Args: []byte(`{"to":"a@b"}` + "\x00\xff"), Sync: 3},
		{Kind: Done, Term: 9, Replica: "replica-c", Seq: 12, Attempt: math.MinInt32, Outcome: engine.Failed,
			Err: "smtp: 451 try again", Flags: DonePermanent | DoneLost},
		{Kind: Recorded, Term: 9, Replica: "replica-c", Seq: 12, Attempt: 2},
	}
}

// roundTrip encodes msgs into payloads of max bytes, checks each
// payload's size, and returns what decoding them gives.
func roundTrip(t *testing.T, msgs []Msg, max int) []Msg {
	t.Helper()
	payloads, err := EncodeMsgs(msgs, max)
	if err != nil {
		t.Fatalf("EncodeMsgs: %v", err)
	}
	var out []Msg
	for i, p := range payloads {
		if len(p) > max {
			t.Fatalf("payload %d takes %d bytes, more than %d", i, len(p), max)
		}
		got, err := DecodeMsgs(p)
		if err != nil {
			t.Fatalf("DecodeMsgs(payload %d): %v", i, err)
		}
		if len(got) == 0 {
			t.Fatalf("payload %d holds no message", i)
		}
		out = append(out, got...)
	}
	return out
}

func TestCodecRoundTrip(t *testing.T) {
	msgs := sampleMsgs()
	got := roundTrip(t, msgs, 8000)
	if !reflect.DeepEqual(got, msgs) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, msgs)
	}
	if got[3].Needs == nil || got[2].Needs == nil || got[0].Needs != nil {
		t.Fatalf("Needs: nil and empty must stay apart: %#v, %#v, %#v", got[0].Needs, got[2].Needs, got[3].Needs)
	}
	if got, err := EncodeMsgs(nil, 100); got != nil || err != nil {
		t.Fatalf("EncodeMsgs(nil) = %v, %v; want no payload", got, err)
	}
}

// TestCodecSizeBound: payloads are as large as max allows and no larger,
// each message whole in one; a message larger than max alone is an
// error; an Ask of a short job is about 20 bytes.
func TestCodecSizeBound(t *testing.T) {
	ask := Msg{Kind: Ask, Term: 3, Replica: "r1", Seq: 1000, Desc: engine.Desc{Type: "mail", ID: "j-1000"}, Age: 250}
	one, err := EncodeMsgs([]Msg{ask}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	size := len(one[0]) - 1
	if size != 23 {
		t.Errorf("an Ask takes %d bytes, want 23", size)
	}
	msgs := make([]Msg, 1000)
	for i := range msgs {
		msgs[i] = ask
	}
	for _, max := range []int{1 + size, 1 + 2*size - 1, 1 + 2*size, 500, 7999} {
		payloads, err := EncodeMsgs(msgs, max)
		if err != nil {
			t.Fatal(err)
		}
		per := (max - 1) / size
		if want := (len(msgs) + per - 1) / per; len(payloads) != want {
			t.Errorf("max %d: %d payloads, want %d", max, len(payloads), want)
		}
		n := 0
		for i, p := range payloads {
			if len(p) > max {
				t.Errorf("max %d: payload %d takes %d bytes", max, i, len(p))
			}
			got, err := DecodeMsgs(p)
			if err != nil {
				t.Fatal(err)
			}
			if i < len(payloads)-1 && len(got) != per {
				t.Errorf("max %d: payload %d holds %d messages, want %d", max, i, len(got), per)
			}
			n += len(got)
		}
		if n != len(msgs) {
			t.Errorf("max %d: %d messages decoded, want %d", max, n, len(msgs))
		}
	}
	if p, err := EncodeMsgs(msgs, size); !errors.Is(err, ErrMsgTooLarge) || p != nil {
		t.Errorf("max below one message: %d payloads, %v; want ErrMsgTooLarge", len(p), err)
	}
	if _, err := EncodeMsgs([]Msg{{Kind: lastKind + 1}}, 100); err == nil {
		t.Error("an unknown kind was encoded")
	}
	if _, err := EncodeMsgs([]Msg{{}}, 100); err == nil {
		t.Error("a message of kind 0 was encoded")
	}
}

// TestCodecRefuses: what a decoder does not know, or a truncated
// payload, is an error, not a misreading.
func TestCodecRefuses(t *testing.T) {
	good, err := EncodeMsgs(sampleMsgs(), 8000)
	if err != nil {
		t.Fatal(err)
	}
	p := good[0]
	for i := 1; i < len(p); i++ {
		if msgs, err := DecodeMsgs(p[:i]); err == nil {
			// A cut between two messages is a shorter payload, not an error.
			if reflect.DeepEqual(msgs, sampleMsgs()[:len(msgs)]) {
				continue
			}
			t.Fatalf("payload cut at %d decoded as %+v", i, msgs)
		}
	}
	for name, bad := range map[string][]byte{
		"empty":         {},
		"version 1":     append([]byte{1}, p[1:]...),
		"version next":  append([]byte{codecVersion + 1}, p[1:]...),
		"kind 0":        {codecVersion, 0, 0},
		"kind unknown":  {codecVersion, byte(lastKind + 1), 0},
		"field unknown": {codecVersion, byte(Ask), 0x80, 0x80, 0x80, 0x02},
		"many types":    {codecVersion, byte(Hello), 0x80, 0x80, 0x80, 0x01, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0},
		"long args":     {codecVersion, byte(Run), 0x80, 0x80, 0x10, 0xff, 0xff, 0x03, 'a'},
		"long string":   {codecVersion, byte(Ask), fieldReplica, 0xff, 0xff, 0xff, 0xff, 0x0f, 'a'},
		"many needs":    {codecVersion, byte(Ask), 0x80, 0x01, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0},
		"bad varint":    {codecVersion, byte(Ask), fieldTerm, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	} {
		if msgs, err := DecodeMsgs(bad); err == nil {
			t.Errorf("%s: decoded as %+v", name, msgs)
		}
	}
}

// FuzzCodec: any message round-trips, through payloads of any size that
// holds it; and any bytes decode without a panic, to messages that
// round-trip in turn.
func FuzzCodec(f *testing.F) {
	for _, m := range sampleMsgs() {
		f.Add(uint8(m.Kind), m.Term, m.Replica, m.Seq, m.Desc.Type, m.Desc.ID, m.Desc.Key, int64(m.Desc.Priority),
			m.Needs != nil, "gpu", int64(2), uint8(len(m.Needs)), m.Age, m.NotBefore, m.StartBy, m.Ran,
			int64(m.Priority), int64(m.N), uint8(m.Outcome), uint8(m.Refusal), m.Sync,
			int64(m.Attempt), m.Args, m.Err, uint8(m.Flags), uint8(len(m.Types)), uint16(100), []byte{})
	}
	good, _ := EncodeMsgs(sampleMsgs(), 8000)
	f.Add(uint8(Ask), uint64(0), "", uint64(0), "", "", "", int64(0), false, "", int64(0), uint8(0),
		int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), uint8(0), uint8(0), uint64(0),
		int64(0), []byte(nil), "", uint8(0), uint8(0), uint16(0), good[0])
	f.Fuzz(func(t *testing.T, kind uint8, term uint64, replica string, seq uint64, typ, id, key string, descPrio int64,
		hasNeeds bool, res string, units int64, nNeeds uint8, age, notBefore, startBy, ran, prio, n int64,
		outcome, refusal uint8, sync uint64, attempt int64, args []byte, errText string, flags, nTypes uint8,
		room uint16, raw []byte) {
		// Any bytes: no panic; what decodes encodes back to messages
		// equal to it.
		if msgs, err := DecodeMsgs(raw); err == nil && len(msgs) > 0 {
			again := roundTrip(t, msgs, 1<<20)
			if !reflect.DeepEqual(again, msgs) {
				t.Fatalf("decoded bytes do not round-trip:\n got %+v\nwant %+v", again, msgs)
			}
		}
		m := Msg{
			Kind: Ask + MsgKind(kind%uint8(lastKind)), Term: term, Replica: replica, Seq: seq,
			Desc: engine.Desc{Type: typ, ID: id, Key: key, Priority: int(descPrio)},
			Age:  age, NotBefore: notBefore, StartBy: startBy, Ran: ran,
			Priority: int(prio), N: int(n), Outcome: engine.Outcome(outcome), Refusal: engine.RefusalReason(refusal),
			Sync: sync, Attempt: int(attempt), Err: errText, Flags: DoneFlags(flags),
		}
		if len(args) > 0 { // none is nil
			m.Args = args
		}
		for i := range int(nTypes % 5) {
			m.Types = append(m.Types, typ[:len(typ)*i/5])
		}
		if hasNeeds {
			m.Needs = []engine.Need{}
			for i := range int(nNeeds % 8) {
				m.Needs = append(m.Needs, engine.Need{Resource: res[:len(res)*i/8], Units: int(units) - i})
			}
		}
		msgs := []Msg{m, {Kind: Grant, Replica: replica, Seq: seq + 1}, m}
		size := 0 // the largest message's payload alone
		for i := range msgs {
			one, err := EncodeMsgs(msgs[i:i+1], 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			size = max(size, len(one[0]))
		}
		limit := size + int(room%64)
		got := roundTrip(t, msgs, limit)
		if !reflect.DeepEqual(got, msgs) {
			t.Fatalf("round trip (max %d):\n got %+v\nwant %+v", limit, got, msgs)
		}
		if _, err := EncodeMsgs(msgs, size-1); !errors.Is(err, ErrMsgTooLarge) {
			t.Fatalf("max %d below a message of %d bytes: %v", size-1, size, err)
		}
	})
}
