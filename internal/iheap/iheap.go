// Package iheap is an indexed binary min-heap: every item knows its own
// position, so it can be removed or re-sorted in O(log n) after its key
// changes. Entries carry their sort key inline, so that sifting a large
// heap of pointers does not dereference the items it passes.
package iheap

// Keyed is an indexed binary min-heap whose entries carry their sort key
// inline, so that comparisons never dereference the items: with large
// heaps of pointers, that saves a cache miss or two per comparison. When an
// item's key changes, its owner calls Fix with the new key.
//
// Invariant, for every 0 < i < Len(): !less(key(i), key((i-1)/2)), and
// index(item(i)) == i. Verify checks both.
type Keyed[K, T any] struct {
	items  []keyed[K, T]
	less   func(a, b K) bool
	setIdx func(x T, i int)
}

type keyed[K, T any] struct {
	key K
	x   T
}

// NewKeyed returns an empty heap ordered by less on the keys. setIdx is
// called whenever an item moves, with -1 when it leaves the heap.
func NewKeyed[K, T any](less func(a, b K) bool, setIdx func(x T, i int)) Keyed[K, T] {
	return Keyed[K, T]{less: less, setIdx: setIdx}
}

// Len returns the number of items. O(1).
func (h *Keyed[K, T]) Len() int { return len(h.items) }

// Top returns the item with the smallest key; ok is false if the heap is
// empty. O(1).
func (h *Keyed[K, T]) Top() (x T, ok bool) {
	if len(h.items) == 0 {
		return x, false
	}
	return h.items[0].x, true
}

// TopKey is Top with the item's key. O(1).
func (h *Keyed[K, T]) TopKey() (x T, k K, ok bool) {
	if len(h.items) == 0 {
		return x, k, false
	}
	return h.items[0].x, h.items[0].key, true
}

// At returns the item and key at position i, in no particular order.
func (h *Keyed[K, T]) At(i int) (T, K) { return h.items[i].x, h.items[i].key }

// Push adds x with key k. O(log n).
func (h *Keyed[K, T]) Push(k K, x T) {
	h.items = append(h.items, keyed[K, T]{})
	h.up(len(h.items)-1, keyed[K, T]{k, x})
}

// Pop removes and returns the item with the smallest key. O(log n). It
// panics if the heap is empty.
func (h *Keyed[K, T]) Pop() T { return h.Remove(0) }

// Remove removes the item at position i and returns it. O(log n).
//
// The hole left at i sinks to a leaf along the smaller children, one
// comparison per level, and the last item rises from there: it is usually
// among the largest, so it rarely rises far (Floyd's heapsort trick).
func (h *Keyed[K, T]) Remove(i int) T {
	n := len(h.items) - 1
	x := h.items[i].x
	last := h.items[n]
	h.items[n] = keyed[K, T]{}
	h.items = h.items[:n]
	if i != n {
		h.up(h.sink(i), last)
	}
	h.setIdx(x, -1)
	if cap(h.items) > 64 && len(h.items) < cap(h.items)/4 {
		h.items = append([]keyed[K, T](nil), h.items...)
	}
	return x
}

// Fix sets the key of the item at position i to k and restores the order.
// O(log n).
//
// An item that stays where it is costs no write but its key's.
func (h *Keyed[K, T]) Fix(i int, k K) {
	h.items[i].key = k
	switch {
	case i > 0 && h.less(k, h.items[(i-1)/2].key):
		h.up(i, h.items[i])
	case h.childLess(i, k):
		h.down(i, h.items[i])
	}
}

// childLess reports whether a child of position i has a key less than k.
func (h *Keyed[K, T]) childLess(i int, k K) bool {
	c := 2*i + 1
	if c >= len(h.items) || c < 0 {
		return false
	}
	if r := c + 1; r < len(h.items) && h.less(h.items[r].key, k) {
		return true
	}
	return h.less(h.items[c].key, k)
}

// Verify reports whether the heap invariant and the index bookkeeping
// hold; index returns an item's recorded position. For tests. O(n).
func (h *Keyed[K, T]) Verify(index func(T) int) bool {
	for i, e := range h.items {
		if index(e.x) != i {
			return false
		}
		if i > 0 && h.less(e.key, h.items[(i-1)/2].key) {
			return false
		}
	}
	return true
}

// The sifts move a hole rather than swapping, so each level costs one
// entry write and one setIdx call.

// up places e at the hole j, or above it while e is less than its parent.
func (h *Keyed[K, T]) up(j int, e keyed[K, T]) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(e.key, h.items[i].key) {
			break
		}
		h.move(i, j)
		j = i
	}
	h.put(j, e)
}

// down places e at the hole i, or below it while a child is less than e.
func (h *Keyed[K, T]) down(i int, e keyed[K, T]) {
	n := len(h.items)
	for {
		c := 2*i + 1
		if c >= n || c < 0 {
			break
		}
		if r := c + 1; r < n && h.less(h.items[r].key, h.items[c].key) {
			c = r
		}
		if !h.less(h.items[c].key, e.key) {
			break
		}
		h.move(c, i)
		i = c
	}
	h.put(i, e)
}

// sink moves the hole at i down to a leaf, lifting the smaller child at
// each level, and returns where the hole ends.
func (h *Keyed[K, T]) sink(i int) int {
	n := len(h.items)
	for {
		c := 2*i + 1
		if c >= n || c < 0 {
			return i
		}
		if r := c + 1; r < n && h.less(h.items[r].key, h.items[c].key) {
			c = r
		}
		h.move(c, i)
		i = c
	}
}

// move copies the entry at from into the hole at to.
func (h *Keyed[K, T]) move(from, to int) {
	h.items[to] = h.items[from]
	h.setIdx(h.items[to].x, to)
}

func (h *Keyed[K, T]) put(i int, e keyed[K, T]) {
	h.items[i] = e
	h.setIdx(e.x, i)
}
