package fairsched

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/fairsched/fairsched/internal/clock"
	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/rt"
)

var rvT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func rvNew(t *testing.T, cfg Config) (*Scheduler, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(rvT0)
	if cfg.Clock == nil {
		cfg.Clock = clk
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, clk
}

func rvVerify(t *testing.T, s *Scheduler, what string) {
	t.Helper()
	if err := verify(s); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// rvBlocker returns a job function that signals when it starts and returns
// when released.
type rvBlocker struct {
	started chan struct{}
	release chan struct{}
}

func newRvBlocker() *rvBlocker {
	return &rvBlocker{started: make(chan struct{}, 1), release: make(chan struct{})}
}

func (b *rvBlocker) fn(ctx context.Context) error {
	b.started <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return nil
}

// RunSync, Submit, Cancel, SetKey, ResetKeys, Stats, Snapshot and Close
// racing, under -race, with the invariant checker: nothing else races Close
// against RunSync callers, Handle.Cancel and key changes.
func TestCloseRacingEveryCall(t *testing.T) {
	for iter := 0; iter < 10; iter++ {
		s, _ := rvNew(t, Config{
			MaxConcurrency: 3,
			Types: map[string]TypeConfig{
				"g":  {ConflictGroup: "g", Tier: Foreground},
				"bg": {MaxConcurrency: 1},
			},
			Keys:       map[string]KeyConfig{"a": {MinSlots: 1, MaxConcurrency: 2}},
			DefaultKey: KeyConfig{MaxConcurrency: 1},
			Clock:      clock.Real{},
			OnEvent:    func(Event) {},
			Aging:      AgingConfig{Interval: time.Microsecond, Step: 1, UrgentThreshold: 60},
		})
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(g), uint64(iter)))
				for i := 0; i < 200; i++ {
					desc := Job{Type: []string{"", "g", "bg"}[r.IntN(3)], ID: fmt.Sprint(r.IntN(2)), Key: []string{"a", "b", "c", ""}[r.IntN(4)], Priority: r.IntN(100)}
					switch r.IntN(6) {
					case 0:
						ctx, cancel := context.WithCancel(context.Background())
						if r.IntN(2) == 0 {
							cancel()
						}
						go cancel()
						_ = s.RunSync(ctx, desc, func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
						cancel()
					case 1:
						h, err := s.Submit(context.Background(), desc, func(ctx context.Context) error { return nil })
						if err == nil && r.IntN(2) == 0 {
							h.Cancel()
						}
					case 2:
						_ = s.SetKey([]string{"a", "b"}[r.IntN(2)], KeyConfig{MaxConcurrency: r.IntN(3), MinSlots: 0, Weight: 1 + float64(r.IntN(3))})
					case 3:
						_ = s.Stats()
						_ = s.Snapshot()
					case 4:
						_ = s.RunSync(context.Background(), desc, func(ctx context.Context) error { return nil })
					case 5:
						s.ResetKeys()
					}
					if err := verify(s); err != nil {
						t.Error(err)
						return
					}
				}
			}(g)
		}
		if iter%2 == 0 {
			go s.Close()
		}
		wg.Wait()
		_ = s.Close()
		st := s.Stats()
		if st.Running != 0 || st.Queued != 0 {
			t.Fatalf("after Close: %+v", st)
		}
		if st.Submitted != st.Completed+st.Failed+st.Cancelled {
			t.Fatalf("counters: %+v", st)
		}
	}
}

// Configuring a key after Close must not send an event on the closed event
// channel (a key unconfigured by ResetKeys while busy, configured again
// after Close, used to panic with "send on closed channel").
func TestSetKeyAfterCloseDoesNotPanic(t *testing.T) {
	s, _ := rvNew(t, Config{
		MaxConcurrency: 2,
		Keys:           map[string]KeyConfig{"a": {}},
		OnEvent:        func(Event) {},
	})
	b := newRvBlocker()
	h, err := s.Submit(context.Background(), Job{Key: "a"}, b.fn)
	if err != nil {
		t.Fatal(err)
	}
	<-b.started
	s.ResetKeys() // "a" unconfigured while it has an allocation of 2
	close(b.release)
	if err := h.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if v := recover(); v != nil {
			t.Fatalf("SetKey after Close panicked: %v", v)
		}
	}()
	if err := s.SetKey("a", KeyConfig{Weight: 2}); err != nil {
		t.Fatal(err)
	}
}

// Shutdown with an already-expired ctx on a scheduler with nothing to do
// has drained: it returns nil and stops the event goroutine, rather than
// picking at random between two ready select cases.
func TestShutdownOfIdleSchedulerIgnoresExpiredContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	errs := 0
	for i := 0; i < 64; i++ {
		s, err := New(Config{OnEvent: func(Event) {}})
		if err != nil {
			t.Fatal(err)
		}
		if s.Shutdown(ctx) != nil {
			errs++ // and s.events was not closed: its goroutine runs on
		}
		_ = s.Close()
	}
	if errs > 0 {
		t.Fatalf("Shutdown on an idle scheduler returned ctx.Err() in %d of 64 calls (and left the event goroutine running)", errs)
	}
}

// The same once events have been sent and all delivered: nothing is left
// for ctx to bound, so Shutdown waits for the event goroutine to end.
func TestShutdownAfterEventsDeliveredIgnoresExpiredContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := 0; i < 64; i++ {
		sig := rt.NewSignals()
		s, err := New(Config{OnEvent: func(Event) {}, signals: sig})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RunSync(context.Background(), Job{}, noop); err != nil {
			t.Fatal(err)
		}
		for range 3 { // submitted, started, finished: all delivered
			<-sig.Delivered
		}
		if err := s.Shutdown(ctx); err != nil {
			t.Fatalf("round %d: Shutdown = %v after every event was delivered", i, err)
		}
		_ = s.Close()
	}
}

// A job function that ends its goroutine with runtime.Goexit (t.FailNow in
// a test) still ends the job and gives its slot back, so Close returns.
func TestGoexitInJobReleasesSlot(t *testing.T) {
	s, err := New(Config{MaxConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	h, err := s.Submit(context.Background(), Job{}, func(context.Context) error {
		defer close(exited)
		runtime.Goexit()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	<-exited
	s.rt.WaitGoroutines() // the job goroutine is gone
	running, state := s.Stats().Running, stateOf(h)
	if running != 0 || state != engine.StateDone {
		t.Fatalf("job goroutine exited via Goexit but the job is in state %d and holds a slot (running %d); Close would block for ever", state, running)
	}
	_ = s.Close()
}

// Every refusal counted in Stats.Rejected (unknown type, closed) produces
// an EventRejected, not only a full queue, and is counted under its reason.
func TestRejectedEventForEveryRefusal(t *testing.T) {
	var mu sync.Mutex
	var rejected int
	s, err := New(Config{OnEvent: func(e Event) {
		if e.Kind == EventRejected {
			mu.Lock()
			rejected++
			mu.Unlock()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(context.Background(), Job{Type: "nope"}, func(context.Context) error { return nil }); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("Submit: %v", err)
	}
	// Refuse a job while Shutdown drains (events stop once it returns).
	release := make(chan struct{})
	if _, err := s.Submit(context.Background(), Job{}, func(context.Context) error { <-release; return nil }); err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Shutdown(ended); !errors.Is(err, context.Canceled) { // stops new work, drains nothing
		t.Fatalf("Shutdown with an ended context: %v", err)
	}
	if _, err := s.Submit(context.Background(), Job{Key: "late"}, func(context.Context) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Submit while shutting down: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	mu.Lock()
	defer mu.Unlock()
	if st.Rejected != uint64(rejected) {
		t.Fatalf("Stats.Rejected = %d but %d EventRejected were delivered", st.Rejected, rejected)
	}
	// By reason: one unknown type, one closed (of the default type).
	def := st.Types[0]
	if st.RejectedUnknownType != 1 || def.Name != "" || def.RejectedClosed != 1 || def.RejectedFull != 0 || def.Rejected != 1 || st.Rejected != 2 {
		t.Fatalf("rejections: %d in all, %d unknown type; default type %d (%d full, %d closed); want 2, 1; 1 (0, 1)",
			st.Rejected, st.RejectedUnknownType, def.Rejected, def.RejectedFull, def.RejectedClosed)
	}
}

// A RunSync job's record is reused by later calls, but the context its
// function got is its own: kept past the return, it stays ended and keeps
// its caller's values while other calls run.
func TestRunSyncKeptContextOutlivesReuse(t *testing.T) {
	s, _ := rvNew(t, Config{MaxConcurrency: 2})
	type ctxKey struct{}
	var kept []context.Context
	for i := 0; i < 3; i++ {
		ctx := context.WithValue(context.Background(), ctxKey{}, i)
		err := s.RunSync(ctx, Job{}, func(c context.Context) error {
			kept = append(kept, c)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		for i, c := range kept {
			if c.Err() != context.Canceled {
				t.Fatalf("%s: kept context %d: Err() = %v, want context.Canceled", when, i, c.Err())
			}
			select {
			case <-c.Done():
			default:
				t.Fatalf("%s: kept context %d: Done() not closed", when, i)
			}
			if got := c.Value(ctxKey{}); got != i {
				t.Fatalf("%s: kept context %d carries value %v", when, i, got)
			}
		}
	}
	check("after the calls")
	err := s.RunSync(context.Background(), Job{}, func(c context.Context) error {
		check("during a later call")
		if c.Err() != nil {
			t.Fatalf("the running call's context has ended: %v", c.Err())
		}
		for _, k := range kept {
			if k == c {
				t.Fatal("a later call got a context handed out before")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRecycledRecordsHoldNothing checks that a RunSync record kept for
// reuse is blank: it pins no caller's memory and carries nothing into its
// next use, whichever way (fair, reserved, holding a conflict) it started.
func TestRecycledRecordsHoldNothing(t *testing.T) {
	s, _ := rvNew(t, Config{
		MaxConcurrency: 2,
		Types:          map[string]TypeConfig{"git": {ConflictGroup: "git"}},
		Keys:           map[string]KeyConfig{"reserved": {MinSlots: 1}},
	})
	for _, d := range []Job{{}, {Type: "git", ID: "repo", Key: "k"}, {Key: "reserved", Priority: 90}} {
		if err := s.RunSync(context.Background(), d, func(context.Context) error { return errors.New("boom") }); err == nil {
			t.Fatal("want the job's error")
		}
	}
	spare := s.rt.Spare()
	if len(spare) == 0 {
		t.Fatal("no record was kept for reuse")
	}
	for _, kept := range spare {
		v := reflect.ValueOf(kept).Elem()
		for i := 0; i < v.NumField(); i++ {
			if !v.Field(i).IsZero() {
				t.Errorf("a kept record's field %s is %v, want it cleared", v.Type().Field(i).Name, v.Field(i))
			}
		}
	}
}
