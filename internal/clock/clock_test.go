package clock

import (
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// firing records what each timer saw when it fired.
type firing struct {
	name string
	at   time.Duration // the clock's reading, from t0
}

func TestFakeTimersFireInVirtualTime(t *testing.T) {
	c := NewFake(t0)
	var got []firing
	add := func(name string, d time.Duration) func() bool {
		return c.AfterFunc(d, func() { got = append(got, firing{name, c.Now().Sub(t0)}) })
	}
	add("c", 3*time.Second)
	add("a", time.Second)
	add("b1", 2*time.Second)
	add("b2", 2*time.Second) // same time: in the order made
	stopD := add("d", 4*time.Second)
	add("late", time.Minute)

	c.Advance(3500 * time.Millisecond)
	want := []firing{{"a", time.Second}, {"b1", 2 * time.Second}, {"b2", 2 * time.Second}, {"c", 3 * time.Second}}
	if !equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if now := c.Now().Sub(t0); now != 3500*time.Millisecond {
		t.Fatalf("the clock reads %v after Advance, want 3.5s", now)
	}
	if !stopD() {
		t.Fatal("Stop of a pending timer reported false")
	}
	if stopD() {
		t.Fatal("a second Stop reported true")
	}
	c.Set(t0.Add(10 * time.Second))
	if len(got) != 4 {
		t.Fatalf("a stopped timer fired: %v", got)
	}
	if c.Pending() != 1 {
		t.Fatalf("%d timers pending, want only the late one", c.Pending())
	}
}

// A function a timer runs may make timers and read the clock; one that
// falls due within the same Advance fires in it, at its own time.
func TestFakeTimerMadeByAFiringOne(t *testing.T) {
	c := NewFake(t0)
	var got []firing
	c.AfterFunc(time.Second, func() {
		got = append(got, firing{"first", c.Now().Sub(t0)})
		c.AfterFunc(time.Second, func() { got = append(got, firing{"second", c.Now().Sub(t0)}) })
		c.AfterFunc(time.Hour, func() { got = append(got, firing{"later", c.Now().Sub(t0)}) })
	})
	c.Advance(5 * time.Second)
	want := []firing{{"first", time.Second}, {"second", 2 * time.Second}}
	if !equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	var stop func() bool
	c.AfterFunc(0, func() { got = append(got, firing{"now", c.Now().Sub(t0)}) })
	stop = c.AfterFunc(time.Second, func() {})
	c.Advance(0)
	if got[len(got)-1] != (firing{"now", 5 * time.Second}) {
		t.Fatalf("a timer for now did not fire at the next Advance: %v", got)
	}
	c.Advance(time.Second)
	if stop() {
		t.Fatal("Stop after the timer fired reported true")
	}
}

func TestFakeRefusesToGoBack(t *testing.T) {
	c := NewFake(t0)
	for name, f := range map[string]func(){
		"Advance": func() { c.Advance(-time.Second) },
		"Set":     func() { c.Set(t0.Add(-time.Second)) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s backwards did not panic", name)
				}
			}()
			f()
		}()
	}
}

// Timers made, stopped and fired from several goroutines at once: each
// fires at most once, and none that was stopped in time fires (run with
// -race).
func TestFakeTimersConcurrent(t *testing.T) {
	c := NewFake(t0)
	var mu sync.Mutex
	fired := map[int]int{}
	stopped := map[int]bool{}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				id := g*1000 + i
				stop := c.AfterFunc(time.Duration(i)*time.Millisecond, func() {
					mu.Lock()
					fired[id]++
					mu.Unlock()
				})
				if i%3 == 0 && stop() {
					mu.Lock()
					stopped[id] = true
					mu.Unlock()
				}
				if i%10 == 0 {
					c.Advance(time.Millisecond)
				}
			}
		}(g)
	}
	wg.Wait()
	c.Advance(time.Hour)
	for id, n := range fired {
		if n != 1 || stopped[id] {
			t.Fatalf("timer %d fired %d times, stopped %v", id, n, stopped[id])
		}
	}
	if len(fired)+len(stopped) != 400 {
		t.Fatalf("%d fired and %d stopped of 400", len(fired), len(stopped))
	}
}

func TestRealAfterFunc(t *testing.T) {
	done := make(chan struct{})
	Real{}.AfterFunc(time.Millisecond, func() { close(done) })
	<-done
	stop := Real{}.AfterFunc(time.Hour, func() { t.Error("a stopped real timer fired") })
	if !stop() {
		t.Fatal("Stop of a pending real timer reported false")
	}
}

func equal(a, b []firing) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
