package iheap

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

type item struct {
	key int
	idx int // handle
}

// keyOf encodes a non-negative int in both words of a Key, tens in Hi and
// units in Lo, so that the heap's order depends on both.
func keyOf(x int) Key { return Key{Hi: uint64(x / 10), Lo: uint64(x % 10)} }

// TestEncodingsKeepOrder checks that Float and Int order words as their
// numbers, and that Key.Less is lexicographic.
func TestEncodingsKeepOrder(t *testing.T) {
	floats := []float64{math.Inf(-1), -1e300, -2.5, -1, -1e-300, math.Copysign(0, -1), 0, 1e-300, 1, 2.5, 1e300, math.Inf(1)}
	for i, x := range floats {
		for j, y := range floats {
			if got, want := Float(x) < Float(y), x < y; got != want {
				t.Errorf("Float(%v) < Float(%v) = %v, want %v (%d, %d)", x, y, got, want, i, j)
			}
		}
	}
	ints := []int64{math.MinInt64, -5, -1, 0, 1, 5, math.MaxInt64}
	for _, x := range ints {
		if IntOf(Int(x)) != x {
			t.Errorf("IntOf(Int(%d)) = %d", x, IntOf(Int(x)))
		}
		for _, y := range ints {
			if got, want := Int(x) < Int(y), x < y; got != want {
				t.Errorf("Int(%d) < Int(%d) = %v, want %v", x, y, got, want)
			}
		}
	}
	for _, c := range []struct {
		a, b Key
		want bool
	}{
		{Key{1, 9}, Key{2, 0}, true},
		{Key{2, 0}, Key{1, 9}, false},
		{Key{1, 1}, Key{1, 2}, true},
		{Key{1, 2}, Key{1, 2}, false},
	} {
		if got := c.a.Less(c.b); got != c.want {
			t.Errorf("%v.Less(%v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestRandomOperations applies random pushes, pops, removals and key
// changes, checking the invariant after each one and the pop order against
// a sorted model.
func TestRandomOperations(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	h := NewKeyed(func(x *item, i int) { x.idx = i })
	var live []*item
	index := func(x *item) int { return x.idx }
	for step := 0; step < 20000; step++ {
		switch op := rng.IntN(10); {
		case op < 4 || len(live) == 0:
			x := &item{key: rng.IntN(1000)}
			h.Push(keyOf(x.key), x)
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
			h.Fix(x.idx, keyOf(x.key))
		}
		if x, k, ok := h.TopKey(); ok && keyOf(x.key) != k {
			t.Fatalf("step %d: TopKey gave an item of key %d with key %v", step, x.key, k)
		}
		if h.Len() == 0 && h.top.x != nil {
			t.Fatalf("step %d: an empty heap keeps its last top", step)
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

// TestShrinkRenumbers grows a heap, removes most of it from random places
// so that it shrinks and renumbers its handles, and checks that the
// handles still reach their items and the free list adds up.
func TestShrinkRenumbers(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	h := NewKeyed(func(x *item, i int) { x.idx = i })
	index := func(x *item) int { return x.idx }
	var live []*item
	for round := 0; round < 3; round++ {
		for i := 0; i < 1000; i++ {
			x := &item{key: rng.IntN(100)}
			h.Push(keyOf(x.key), x)
			live = append(live, x)
		}
		for len(live) > 10 {
			i := rng.IntN(len(live))
			x := live[i]
			if got := h.Remove(x.idx); got != x || x.idx != -1 {
				t.Fatalf("Remove returned another item, or left it a handle")
			}
			live = append(live[:i], live[i+1:]...)
			if !h.Verify(index) {
				t.Fatalf("round %d, %d left: bookkeeping broken", round, len(live))
			}
		}
		if len(h.pos) > 64 {
			t.Fatalf("round %d: position table kept %d entries for %d items", round, len(h.pos), h.Len())
		}
		// The renumbered handles must still reach their items.
		for _, x := range live {
			x.key = rng.IntN(100)
			h.Fix(x.idx, keyOf(x.key))
			if !h.Verify(index) {
				t.Fatalf("round %d: Fix after renumbering broke the heap", round)
			}
		}
		for h.Len() > 5 {
			x := h.Pop()
			for _, y := range live {
				if y != x && y.idx >= 0 && y.key < x.key {
					t.Fatalf("round %d: popped key %d while %d remains", round, x.key, y.key)
				}
			}
			live = slices.DeleteFunc(live, func(y *item) bool { return y == x })
			if !h.Verify(index) {
				t.Fatalf("round %d: Pop after renumbering broke the heap", round)
			}
		}
	}
}

// TestResetReuses checks that a reset heap, emptied by removals or
// holding items, is empty, holds no pointer to its old items, and works
// as a new one with the arrays it kept.
func TestResetReuses(t *testing.T) {
	h := NewKeyed(func(x *item, i int) { x.idx = i })
	index := func(x *item) int { return x.idx }
	for _, keep := range []int{0, 3} {
		for i := 0; i < 6; i++ {
			h.Push(keyOf(10-i), &item{key: 10 - i})
		}
		for h.Len() > keep {
			h.Pop()
		}
		h.Reset()
		if h.Len() != 0 || h.free != 0 || len(h.pos) != 0 || h.top != (keyed[*item]{}) {
			t.Fatalf("reset with %d items: %d items, free %d, %d handles, top %+v", keep, h.Len(), h.free, len(h.pos), h.top)
		}
		for _, e := range h.items[:cap(h.items)] {
			if e.x != nil {
				t.Fatalf("reset with %d items: its array still holds item %d", keep, e.x.key)
			}
		}
		if _, ok := h.Top(); ok {
			t.Fatalf("reset with %d items: Top reports an item", keep)
		}
		items := []*item{{key: 5}, {key: 2}, {key: 7}}
		for _, x := range items {
			h.Push(keyOf(x.key), x)
		}
		if !h.Verify(index) || items[1].idx < 0 || h.Pop() != items[1] || h.Pop() != items[0] {
			t.Fatalf("reset with %d items: the heap does not work again", keep)
		}
		h.Pop()
	}
}

func TestTopOfEmpty(t *testing.T) {
	h := NewKeyed(func(*item, int) {})
	if _, ok := h.Top(); ok {
		t.Fatal("Top of an empty heap reported an item")
	}
	if _, _, ok := h.TopKey(); ok {
		t.Fatal("TopKey of an empty heap reported an item")
	}
}

// BenchmarkFIFO pushes 10,000 items in key order and pops them all, as a
// lane does with a burst of equal-priority jobs. ns/op is per item.
func BenchmarkFIFO(b *testing.B) {
	const n = 10000
	items := make([]*item, n)
	for i := range items {
		items[i] = &item{key: i}
	}
	h := NewKeyed(func(x *item, i int) { x.idx = i })
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += n {
		for _, x := range items {
			h.Push(keyOf(x.key), x)
		}
		for h.Len() > 0 {
			h.Pop()
		}
	}
}

// BenchmarkRandomRemove keeps 100,000 items with random keys and, per
// operation, removes one by a random handle and pushes it back.
func BenchmarkRandomRemove(b *testing.B) {
	const n = 100000
	rng := rand.New(rand.NewPCG(1, 2))
	items := make([]*item, n)
	h := NewKeyed(func(x *item, i int) { x.idx = i })
	for i := range items {
		items[i] = &item{key: rng.IntN(1 << 30)}
		h.Push(keyOf(items[i].key), items[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		x := h.Remove(rng.IntN(n))
		x.key = rng.IntN(1 << 30)
		h.Push(keyOf(x.key), x)
	}
}

// TestTopAtRefilesRaisedKeys: items whose keys rise are left where they
// are filed, and those whose keys fall are refiled at once, as an owner
// of a heap read with TopAt does; TopAt then gives an item of the least
// own key, refiled at it, after every step.
func TestTopAtRefilesRaisedKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	h := NewKeyed(func(x *item, i int) { x.idx = i })
	own := func(x *item) Key { return keyOf(x.key) }
	var live []*item
	below := 0
	for step := 0; step < 20000; step++ {
		switch op := rng.IntN(10); {
		case op < 3 || len(live) == 0:
			x := &item{key: rng.IntN(1000)}
			h.Push(own(x), x)
			live = append(live, x)
		case op < 4:
			x := live[rng.IntN(len(live))]
			h.Remove(x.idx)
			live = slices.DeleteFunc(live, func(y *item) bool { return y == x })
		case op < 8: // raised: left where it is filed
			live[rng.IntN(len(live))].key += 1 + rng.IntN(100)
		default: // lowered: refiled at once
			x := live[rng.IntN(len(live))]
			x.key = max(0, x.key-1-rng.IntN(100))
			h.Fix(x.idx, own(x))
		}
		before := h.Len()
		x, ok := h.TopAt(own)
		if !ok {
			t.Fatalf("step %d: TopAt found nothing in %d items", step, before)
		}
		for _, y := range live {
			if y.key < x.key {
				t.Fatalf("step %d: TopAt gave key %d while %d is in the heap", step, x.key, y.key)
			}
		}
		if _, k, _ := h.TopKey(); k != own(x) && h.Len() > 1 {
			t.Fatalf("step %d: the top is filed at %v, not at its own key %v", step, k, own(x))
		}
		for i := 0; i < h.Len(); i++ {
			y, k := h.At(i)
			if own(y).Less(k) {
				t.Fatalf("step %d: key %d filed above it, at %v", step, y.key, k)
			}
			if k != own(y) {
				below++ // one still to be refiled
			}
		}
		if !h.Verify(func(x *item) int { return x.idx }) || h.Len() != len(live) {
			t.Fatalf("step %d: invariant broken", step)
		}
	}
	if below == 0 {
		t.Fatal("no item was ever left below its key: the test raised none")
	}
	var empty Keyed[*item]
	if _, ok := empty.TopAt(own); ok {
		t.Fatal("TopAt found an item in an empty heap")
	}
}
