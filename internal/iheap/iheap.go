// Package iheap is an indexed binary min-heap: every element knows its own
// position, so it can be removed or re-sorted in O(log n) after its key
// changes. The ordering and the index bookkeeping are supplied by the caller.
//
// Invariant, for every 0 < i < Len(): !less(items[i], items[(i-1)/2]), and
// index(items[i]) == i. Verify checks both.
package iheap

// Heap orders items of type T by less, smallest first. The zero value is
// not usable; create one with New. Not safe for concurrent use.
type Heap[T any] struct {
	items  []T
	less   func(a, b T) bool
	setIdx func(x T, i int)
}

// New returns an empty heap. setIdx is called whenever an item moves, with
// -1 when it leaves the heap.
func New[T any](less func(a, b T) bool, setIdx func(x T, i int)) Heap[T] {
	return Heap[T]{less: less, setIdx: setIdx}
}

// Len returns the number of items. O(1).
func (h *Heap[T]) Len() int { return len(h.items) }

// Top returns the smallest item; ok is false if the heap is empty. O(1).
func (h *Heap[T]) Top() (x T, ok bool) {
	if len(h.items) == 0 {
		return x, false
	}
	return h.items[0], true
}

// At returns the item at position i, for iteration in no particular order.
func (h *Heap[T]) At(i int) T { return h.items[i] }

// Push adds x. O(log n).
func (h *Heap[T]) Push(x T) {
	h.items = append(h.items, x)
	n := len(h.items) - 1
	h.setIdx(x, n)
	h.up(n)
}

// Pop removes and returns the smallest item. O(log n). It panics if the
// heap is empty.
func (h *Heap[T]) Pop() T { return h.Remove(0) }

// Remove removes the item at position i and returns it. O(log n).
func (h *Heap[T]) Remove(i int) T {
	n := len(h.items) - 1
	x := h.items[i]
	if n != i {
		h.swap(i, n)
	}
	var zero T
	h.items[n] = zero
	h.items = h.items[:n]
	if n != i {
		if !h.down(i) {
			h.up(i)
		}
	}
	h.setIdx(x, -1)
	if cap(h.items) > 64 && len(h.items) < cap(h.items)/4 {
		h.items = append([]T(nil), h.items...)
	}
	return x
}

// Fix restores the order after the key of the item at position i changed.
// O(log n).
func (h *Heap[T]) Fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

// Verify reports whether the heap invariant and the index bookkeeping hold;
// index returns an item's recorded position. For tests. O(n).
func (h *Heap[T]) Verify(index func(T) int) bool {
	for i, x := range h.items {
		if index(x) != i {
			return false
		}
		if i > 0 && h.less(x, h.items[(i-1)/2]) {
			return false
		}
	}
	return true
}

func (h *Heap[T]) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.setIdx(h.items[i], i)
	h.setIdx(h.items[j], j)
}

func (h *Heap[T]) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(h.items[j], h.items[i]) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h *Heap[T]) down(i0 int) bool {
	i, n := i0, len(h.items)
	for {
		j := 2*i + 1
		if j >= n || j < 0 {
			break
		}
		if r := j + 1; r < n && h.less(h.items[r], h.items[j]) {
			j = r
		}
		if !h.less(h.items[j], h.items[i]) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
