package store

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

// TestBatcherGroups checks that requests queued while a transaction is
// applied share the next one, in order, and that every caller learns its
// transaction's fate.
func TestBatcherGroups(t *testing.T) {
	var applied [][]int
	release := make(chan struct{})
	first := make(chan struct{})
	b := NewBatcher(100, func(rs []int) error {
		if len(applied) == 0 {
			close(first)
			<-release // hold the first transaction while others queue
		}
		applied = append(applied, append([]int(nil), rs...))
		if rs[0] == 2 {
			return errors.New("disk full")
		}
		return nil
	})
	pushed := make(chan struct{}, 10)
	b.pushed = pushed
	errs := make([]error, 5)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); errs[0] = b.Do(0) }()
	<-pushed
	<-first
	// Queued behind the first transaction, in this order: they share the
	// second one, which fails as a whole.
	b.Post(2)
	<-pushed
	for i := 3; i < 5; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = b.Do(i) }()
		<-pushed
	}
	close(release)
	wg.Wait()
	b.pushed = nil
	if err := b.Flush(); err == nil || err.Error() != "disk full" {
		t.Fatalf("Flush after a failed posted request = %v, want disk full", err)
	}
	if err := b.Flush(); err != nil {
		t.Fatalf("second Flush = %v, want nil: a Flush reports a failure once", err)
	}
	// The second transaction failed; the posted 2 was tried alone again,
	// maxTries in all, each time failing, then given up.
	want := [][]int{{0}, {2, 3, 4}, {2}, {2}, {2}, {2}}
	if fmt.Sprint(applied) != fmt.Sprint(want) {
		t.Fatalf("transactions = %v, want %v", applied, want)
	}
	if errs[0] != nil || errs[3] == nil || errs[4] == nil {
		t.Fatalf("errors = %v, want nil for the first transaction, disk full for the second", errs)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Do(9); !errors.Is(err, ErrClosed) {
		t.Fatalf("Do after Close = %v, want ErrClosed", err)
	}
}

// TestBatcherMax checks that a transaction holds at most max requests.
func TestBatcherMax(t *testing.T) {
	var sizes []int
	b := NewBatcher(2, func(rs []int) error { sizes = append(sizes, len(rs)); return nil })
	b.mu.Lock() // queue five before the loop may take any
	for i := range 5 {
		b.queue = append(b.queue, entry[int]{r: i})
	}
	b.mu.Unlock()
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if len(sizes) != 3 || sizes[0] != 2 || sizes[1] != 2 || sizes[2] != 1 {
		t.Fatalf("transaction sizes = %v, want [2 2 1]", sizes)
	}
}

// A request queued as the Batcher closes is applied or refused, never
// lost, and Close never makes a Post panic.
func TestBatcherPostRacesClose(t *testing.T) {
	for range 200 {
		var applied sync.WaitGroup
		n := 0
		b := NewBatcher(10, func(rs []int) error { n += len(rs); return nil })
		posted := make(chan bool)
		applied.Add(1)
		go func() { defer applied.Done(); posted <- b.Post(1) }()
		closed := make(chan error)
		go func() { closed <- b.Close() }()
		ok := <-posted
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		applied.Wait()
		if ok != (n == 1) {
			t.Fatalf("Post reported %v, and %d requests were applied", ok, n)
		}
	}
}

// A failed transaction fails its waiting requests, but its posted ones
// are tried again, in order, until they are applied: a Flush behind them
// waits for them. Past maxTries they are given up, and Flush says so.
func TestBatcherRetriesPosted(t *testing.T) {
	var applied []int
	fails := 2
	b := NewBatcher(100, func(rs []int) error {
		if fails > 0 {
			fails--
			return errors.New("database is locked")
		}
		applied = append(applied, rs...)
		return nil
	})
	b.mu.Lock() // queue them together, before the loop takes any
	b.queue = append(b.queue, entry[int]{r: 1}, entry[int]{r: 2}, entry[int]{r: 3})
	b.mu.Unlock()
	waited := make(chan error, 1)
	go func() { waited <- b.Do(4) }()
	if err := b.Flush(); err != nil {
		t.Fatalf("Flush = %v, want nil: the posted requests were applied in the end", err)
	}
	if len(applied) < 3 || applied[0] != 1 || applied[1] != 2 || applied[2] != 3 {
		t.Fatalf("applied %v, want 1, 2, 3 first, once each", applied)
	}
	<-waited // failed or applied, depending on the transaction it fell in
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b = NewBatcher(100, func(rs []int) error { return errors.New("disk I/O error") })
	b.Post(1)
	if err := b.Flush(); err == nil {
		t.Fatal("Flush = nil after the posted request was given up")
	}
	b.Close()
}
