package iheap

import (
	"math/rand/v2"
	"slices"
	"testing"
)

type item struct {
	key int
	idx int
}

// TestRandomOperations applies random pushes, pops, removals and key
// changes, checking the invariant after each one and the pop order against
// a sorted model.
func TestRandomOperations(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	h := NewKeyed(func(a, b int) bool { return a < b }, func(x *item, i int) { x.idx = i })
	var live []*item
	index := func(x *item) int { return x.idx }
	for step := 0; step < 20000; step++ {
		switch op := rng.IntN(10); {
		case op < 4 || len(live) == 0:
			x := &item{key: rng.IntN(1000)}
			h.Push(x.key, x)
			live = append(live, x)
		case op < 6:
			x := h.Pop()
			if x.idx != -1 {
				t.Fatalf("popped item keeps index %d", x.idx)
			}
			for _, y := range live {
				if y.key < x.key {
					t.Fatalf("popped %d while %d remains", x.key, y.key)
				}
			}
			live = slices.DeleteFunc(live, func(y *item) bool { return y == x })
		case op < 8:
			x := live[rng.IntN(len(live))]
			if got := h.Remove(x.idx); got != x {
				t.Fatalf("Remove returned another item")
			}
			live = slices.DeleteFunc(live, func(y *item) bool { return y == x })
		default:
			x := live[rng.IntN(len(live))]
			x.key = rng.IntN(1000)
			h.Fix(x.idx, x.key)
		}
		if !h.Verify(index) || h.Len() != len(live) {
			t.Fatalf("step %d: invariant broken (len %d, want %d)", step, h.Len(), len(live))
		}
	}
	var last = -1
	for h.Len() > 0 {
		x := h.Pop()
		if x.key < last {
			t.Fatalf("pop order: %d after %d", x.key, last)
		}
		last = x.key
	}
}

func TestTopOfEmpty(t *testing.T) {
	h := NewKeyed(func(a, b int) bool { return a < b }, func(*item, int) {})
	if _, ok := h.Top(); ok {
		t.Fatal("Top of an empty heap reported an item")
	}
}
