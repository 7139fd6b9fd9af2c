package store

import "testing"

// Of the state writes of one transaction, only the last of each name is
// written: an earlier Put, an earlier insert's state, are Overwritten,
// whatever their kinds; other requests never are.
func TestMarkOverwritten(t *testing.T) {
	state := func(name string) *StateWrite { return &StateWrite{Name: name} }
	rs := []*Request{
		{Kind: Put, Name: "schedule:a"},                                   // overwritten by the insert's
		{Kind: Insert, State: state("schedule:a")},                        // the last of a
		{Kind: Put, Name: "fair"},                                         // the only fair
		{Kind: Insert, State: state("schedule:b")},                        // overwritten by the Put
		{Kind: Put, Name: "schedule:b"},                                   // the last of b
		{Kind: Insert},                                                    // no state
		{Kind: Apply, Op: Op{Kind: OpComplete, ID: 1}, Overwritten: true}, // left false: not a state write
	}
	MarkOverwritten(rs)
	want := []bool{true, false, false, true, false, false, false}
	for i, r := range rs {
		if r.Overwritten != want[i] {
			t.Errorf("request %d (%v): Overwritten %v, want %v", i, r.Kind, r.Overwritten, want[i])
		}
	}

	one := []*Request{{Kind: Put, Name: "fair", Overwritten: true}, {Kind: Insert}}
	MarkOverwritten(one)
	if one[0].Overwritten {
		t.Error("a transaction's only state write is written")
	}
}
