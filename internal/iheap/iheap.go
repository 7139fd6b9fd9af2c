// Package iheap is an indexed binary min-heap: every item has a handle, so
// it can be removed or re-sorted in O(log n) after its key changes.
// Entries carry their sort key inline, so that sifting a large heap of
// pointers does not dereference the items it passes, and the heap keeps
// the positions of its handles in a table of its own, so that sifting does
// not write to them either.
package iheap

import "math"

// Key is a sort key: two words, compared Hi first, then Lo. Callers encode
// their orders into it (Float and Int map numbers to words of the same
// order), so that a heap's comparisons are two integer compares, inline,
// rather than a call through a function value at every level of a sift.
type Key struct{ Hi, Lo uint64 }

// Less reports whether a sorts before b.
func (a Key) Less(b Key) bool { return a.Hi < b.Hi || a.Hi == b.Hi && a.Lo < b.Lo }

// Float maps x to a word that orders as x does: Float(x) < Float(y) if and
// only if x < y. Negative zero maps as zero; x must not be NaN.
func Float(x float64) uint64 {
	if x == 0 {
		return 1 << 63 // -0 and +0 alike
	}
	b := math.Float64bits(x)
	if b>>63 != 0 {
		return ^b // negative: larger magnitude, smaller word
	}
	return b | 1<<63
}

// Int maps x to a word that orders as x does.
func Int(x int64) uint64 { return uint64(x) ^ 1<<63 }

// IntOf is the inverse of Int.
func IntOf(w uint64) int64 { return int64(w ^ 1<<63) }

// Keyed is an indexed binary min-heap of items of type T, whose entries
// carry their sort Key inline. When an item's key changes, its owner calls
// Fix with the new key.
//
// An item is given a handle through setHandle when it is pushed. Sifts do
// not change it: they update the heap's position table, not the item.
// With large heaps of pointers, that saves a cache miss per comparison
// (the key is inline) and one per level moved (the position is in the
// table, which is small and hot, not in a cold item). The one exception
// is a Remove or Pop that shrinks the heap: it renumbers every handle,
// through setHandle, so a caller must read an item's handle afresh from
// wherever setHandle keeps it, never hold one across a removal.
//
// Invariant, for every 0 <= i < Len(): pos[handle(i)] == i, the item at i
// was last given handle(i), and, for i > 0, !key(i).Less(key((i-1)/2)).
// The handles not in use form a free list, so the table never holds more
// entries than the heap has held items at once. Verify checks all of it.
//
// The zero value is not usable: make one with NewKeyed.
type Keyed[T any] struct {
	// top is a copy of items[0], so that looking at the top, which the
	// scheduler does far more often than changing it, reads the heap's
	// header and not its (possibly cold) array. Zero when empty. It and
	// the length of items, which a look at the top reads too, come first,
	// in one cache line.
	top   keyed[T]
	items []keyed[T]
	// pos maps a handle in use to its item's position. A free handle's
	// entry holds the next free handle, encoded by freeLink (-1 ends the
	// list); free is the first free handle plus one, 0 when there is none.
	pos       []int32
	free      int32
	setHandle func(x T, h int)
}

type keyed[T any] struct {
	key Key
	x   T
	h   int32 // handle
}

// NewKeyed returns an empty heap, ordered by Key.Less. setHandle is
// called when an item is given a handle (when pushed, and in the rare
// renumbering after the heap shrinks), and with -1 when it leaves the heap.
func NewKeyed[T any](setHandle func(x T, h int)) Keyed[T] {
	return Keyed[T]{setHandle: setHandle}
}

// Len returns the number of items. O(1).
func (h *Keyed[T]) Len() int { return len(h.items) }

// Reset empties h and keeps its arrays, for a heap that is to be used
// again. O(1) for a heap already empty, else O(n); the items it held
// get no call of setHandle.
func (h *Keyed[T]) Reset() {
	clear(h.items)
	h.items, h.pos, h.free, h.top = h.items[:0], h.pos[:0], 0, keyed[T]{}
}

// Top returns the item with the smallest key; ok is false if the heap is
// empty. O(1).
func (h *Keyed[T]) Top() (x T, ok bool) {
	if len(h.items) == 0 {
		return x, false
	}
	return h.top.x, true
}

// TopKey is Top with the item's key. O(1).
func (h *Keyed[T]) TopKey() (x T, k Key, ok bool) {
	if len(h.items) == 0 {
		return x, k, false
	}
	return h.top.x, h.top.key, true
}

// TopAt returns the item with the smallest key, in a heap whose owner
// files items at or below their own keys (own returns an item's own key),
// never above them, and refiles only an item whose key falls. It refiles
// the top at its own key until the top is filed at it: then every other
// item's own key is at or above its filed key, at or above the top's, so
// the top is the least. An item alone is the least as it is filed. O(1)
// and a call of own, and O(log n) for each item refiled, each refiling
// standing for every raise of its key since it was last filed; ok is
// false if the heap is empty.
func (h *Keyed[T]) TopAt(own func(T) Key) (x T, ok bool) {
	if len(h.items) > 1 && own(h.top.x) != h.top.key {
		h.refileTop(own)
	}
	if len(h.items) == 0 {
		return x, false
	}
	return h.top.x, true
}

// refileTop refiles the top at its own key until it is filed at it.
func (h *Keyed[T]) refileTop(own func(T) Key) {
	for k := own(h.top.x); k != h.top.key; k = own(h.top.x) {
		h.Fix(int(h.top.h), k)
	}
}

// At returns the item and key at position i, in no particular order.
func (h *Keyed[T]) At(i int) (T, Key) { return h.items[i].x, h.items[i].key }

// KeyOf returns the key of the item with handle hd. O(1).
func (h *Keyed[T]) KeyOf(hd int) Key { return h.items[h.pos[hd]].key }

// Push adds x with key k and gives it a handle through setHandle.
// O(log n), amortised O(1) allocation.
func (h *Keyed[T]) Push(k Key, x T) {
	hd := h.takeHandle()
	h.items = append(h.items, keyed[T]{})
	h.setHandle(x, int(hd))
	h.up(len(h.items)-1, keyed[T]{k, x, hd})
}

// takeHandle returns a free handle, the first on the free list or a new
// one at the end of the table.
func (h *Keyed[T]) takeHandle() int32 {
	if h.free == 0 {
		h.pos = append(h.pos, 0)
		return int32(len(h.pos) - 1)
	}
	hd := h.free - 1
	h.free = freeLink(h.pos[hd]) + 1
	return hd
}

// releaseHandle puts hd at the front of the free list.
func (h *Keyed[T]) releaseHandle(hd int32) {
	h.pos[hd] = freeLink(h.free - 1)
	h.free = hd + 1
}

// freeLink converts between a free handle's successor on the free list (-1
// for none) and its entry in the position table, which is negative so that
// it is never taken for a position. It is its own inverse.
func freeLink(x int32) int32 { return -2 - x }

// Pop removes and returns the item with the smallest key. O(log n). It
// panics if the heap is empty.
func (h *Keyed[T]) Pop() T { return h.removeAt(0) }

// Remove removes the item with handle hd and returns it. O(log n).
func (h *Keyed[T]) Remove(hd int) T { return h.removeAt(int(h.pos[hd])) }

// removeAt removes the item at position i.
//
// The hole left at i sinks to a leaf along the smaller children, one
// comparison per level, and the last item rises from there: it is usually
// among the largest, so it rarely rises far (Floyd's heapsort trick).
func (h *Keyed[T]) removeAt(i int) T {
	n := len(h.items) - 1
	e := h.items[i]
	last := h.items[n]
	h.items[n] = keyed[T]{}
	h.items = h.items[:n]
	if i != n {
		h.up(h.sink(i), last)
	}
	if n == 0 {
		h.top = keyed[T]{} // hold no pointer to a removed item
	}
	h.releaseHandle(e.h)
	h.setHandle(e.x, -1)
	if cap(h.items) > minShrinkCap && len(h.items) < cap(h.items)/4 {
		h.shrink()
	}
	return e.x
}

// minShrinkCap is the capacity at or below which a heap keeps its array
// when it empties. It is small because heaps are many and mostly small
// (a lane has three): at 64, their spare capacity with a million jobs
// queued was about a tenth of all the scheduler held.
const minShrinkCap = 8

// shrink reallocates a heap that has fallen below a quarter of its
// capacity, and renumbers its handles 0..n-1 so that the position table
// shrinks with it. Amortised O(1): since the heap last grew to this
// capacity it was at least half full, so at least n removals came since.
func (h *Keyed[T]) shrink() {
	h.items = append([]keyed[T](nil), h.items...)
	h.pos = make([]int32, len(h.items), cap(h.items))
	h.free = 0
	for i := range h.items {
		e := &h.items[i]
		e.h, h.pos[i] = int32(i), int32(i)
		h.setHandle(e.x, i)
	}
	if len(h.items) > 0 {
		h.top = h.items[0] // renumbered
	}
}

// Fix sets the key of the item with handle hd to k and restores the order.
// O(log n).
//
// An item that stays where it is costs no write but its key's.
func (h *Keyed[T]) Fix(hd int, k Key) {
	if len(h.items) == 1 { // alone, it stays (a flow alone in its tier: the uncontended case)
		h.items[0].key, h.top.key = k, k
		return
	}
	i := int(h.pos[hd])
	h.items[i].key = k
	if i == 0 {
		h.top.key = k
	}
	switch {
	case i > 0 && k.Less(h.items[(i-1)/2].key):
		h.up(i, h.items[i])
	case h.childLess(i, k):
		h.down(i, h.items[i])
	}
}

// childLess reports whether a child of position i has a key less than k.
func (h *Keyed[T]) childLess(i int, k Key) bool {
	c := 2*i + 1
	if c >= len(h.items) || c < 0 {
		return false
	}
	if r := c + 1; r < len(h.items) && h.items[r].key.Less(k) {
		return true
	}
	return h.items[c].key.Less(k)
}

// Verify reports whether the heap order and the handle bookkeeping hold;
// handle returns an item's recorded handle. For tests. O(n).
func (h *Keyed[T]) Verify(handle func(T) int) bool {
	for i, e := range h.items {
		if handle(e.x) != int(e.h) || e.h < 0 || int(e.h) >= len(h.pos) || h.pos[e.h] != int32(i) {
			return false
		}
		if i > 0 && e.key.Less(h.items[(i-1)/2].key) {
			return false
		}
	}
	if len(h.items) > 0 {
		t := h.items[0]
		if h.top.h != t.h || h.top.key.Less(t.key) || t.key.Less(h.top.key) || handle(h.top.x) != int(t.h) {
			return false
		}
	}
	free := 0
	for f := h.free - 1; f >= 0; f = freeLink(h.pos[f]) {
		if int(f) >= len(h.pos) || h.pos[f] >= 0 || free > len(h.pos) {
			return false
		}
		free++
	}
	return len(h.items)+free == len(h.pos)
}

// The sifts move a hole rather than swapping, so each level costs one
// entry write and one position-table write.

// up places e at the hole j, or above it while e is less than its parent.
func (h *Keyed[T]) up(j int, e keyed[T]) {
	for j > 0 {
		i := (j - 1) / 2
		if !e.key.Less(h.items[i].key) {
			break
		}
		h.move(i, j)
		j = i
	}
	h.put(j, e)
}

// down places e at the hole i, or below it while a child is less than e.
func (h *Keyed[T]) down(i int, e keyed[T]) {
	n := len(h.items)
	for {
		c := 2*i + 1
		if c >= n || c < 0 {
			break
		}
		if r := c + 1; r < n && h.items[r].key.Less(h.items[c].key) {
			c = r
		}
		if !h.items[c].key.Less(e.key) {
			break
		}
		h.move(c, i)
		i = c
	}
	h.put(i, e)
}

// sink moves the hole at i down to a leaf, lifting the smaller child at
// each level, and returns where the hole ends.
func (h *Keyed[T]) sink(i int) int {
	n := len(h.items)
	for {
		c := 2*i + 1
		if c >= n || c < 0 {
			return i
		}
		if r := c + 1; r < n && h.items[r].key.Less(h.items[c].key) {
			c = r
		}
		h.move(c, i)
		i = c
	}
}

// move copies the entry at from into the hole at to.
func (h *Keyed[T]) move(from, to int) {
	h.items[to] = h.items[from]
	h.pos[h.items[to].h] = int32(to)
	if to == 0 {
		h.top = h.items[0]
	}
}

func (h *Keyed[T]) put(i int, e keyed[T]) {
	h.items[i] = e
	h.pos[e.h] = int32(i)
	if i == 0 {
		h.top = e
	}
}
