package fairsched

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairsched/fairsched/internal/clock"
	"github.com/stretchr/testify/require"
)

// eventLog collects events from the hook.
type eventLog struct {
	mu  sync.Mutex
	evs []Event
}

func (l *eventLog) hook(e Event) {
	l.mu.Lock()
	l.evs = append(l.evs, e)
	l.mu.Unlock()
}

func (l *eventLog) kinds() []EventKind {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []EventKind
	for _, e := range l.evs {
		out = append(out, e.Kind)
	}
	return out
}

func (l *eventLog) of(kind EventKind) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Event
	for _, e := range l.evs {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func TestEventsOfOneJob(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var log eventLog
	s, err := New(Config{MaxConcurrency: 1, MaxQueue: 1, Clock: clk, OnEvent: log.hook,
		Types: map[string]TypeConfig{"clone": {Tier: Foreground}}})
	require.NoError(t, err)

	g := newGate()
	h, err := s.Submit(context.Background(), Job{Type: "clone", ID: "r1", Key: "alice", Priority: 80}, g.fn)
	require.NoError(t, err)
	<-g.entered
	clk.Advance(2 * time.Second)
	queued, err := s.Submit(context.Background(), Job{Key: "bob"}, func(context.Context) error { return errors.New("no") })
	require.NoError(t, err)
	_, err = s.Submit(context.Background(), Job{Key: "carol"}, g.fn)
	require.ErrorIs(t, err, ErrQueueFull)
	clk.Advance(3 * time.Second)
	close(g.open)
	require.NoError(t, h.Wait(context.Background()))
	require.Error(t, queued.Wait(context.Background()))
	require.NoError(t, s.Close()) // delivers every queued event before returning

	require.Equal(t, []EventKind{
		EventSubmitted, EventStarted, // alice runs at once
		EventSubmitted, EventRejected, // bob queues, carol is refused
		EventFinished, EventStarted, // alice ends at 5 s, bob runs
		EventDead, EventFinished, // and fails for good
	}, log.kinds())
	start := log.of(EventStarted)[0]
	require.Equal(t, "clone", start.Type)
	require.Equal(t, "r1", start.ID)
	require.Equal(t, "alice", start.Key)
	require.Equal(t, Foreground, start.Tier)
	require.Equal(t, 80, start.BasePriority)
	fin := log.of(EventFinished)
	require.Equal(t, OutcomeCompleted, fin[0].Outcome)
	require.Equal(t, 5*time.Second, fin[0].Duration)
	require.Equal(t, OutcomeFailed, fin[1].Outcome)
	require.EqualError(t, fin[1].Err, "no")
	require.Equal(t, 3*time.Second, fin[1].Wait, "bob waited from 2 s to 5 s")
	rej := log.of(EventRejected)[0]
	require.Equal(t, "carol", rej.Key)
	require.ErrorIs(t, rej.Err, ErrQueueFull)
	require.Equal(t, "finished", EventFinished.String())
	require.Equal(t, "failed", OutcomeFailed.String())
}

func TestAgedEvent(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var log eventLog
	s, err := New(Config{MaxConcurrency: 1, Clock: clk, OnEvent: log.hook,
		Aging: AgingConfig{Interval: 5 * time.Second, Step: 10}})
	require.NoError(t, err)
	g := newGate()
	_, err = s.Submit(context.Background(), Job{}, g.fn)
	require.NoError(t, err)
	<-g.entered
	old, err := s.Submit(context.Background(), Job{Priority: PriorityLowest}, noop)
	require.NoError(t, err)
	clk.Advance(25 * time.Second)
	close(g.open)
	require.NoError(t, old.Wait(context.Background()))
	require.NoError(t, s.Close())

	aged := log.of(EventAged)
	require.Len(t, aged, 1)
	require.Equal(t, 0, aged[0].BasePriority)
	require.Equal(t, 50, aged[0].EffectivePriority, "+10 per 5 s: priority 0 reaches 50 after 25 s")
	require.Equal(t, 25*time.Second, aged[0].Wait)
	require.EqualValues(t, 1, s.Stats().AgingPromotions)
}

func TestAllocationChangedEvents(t *testing.T) {
	var log eventLog
	s, err := New(Config{MaxConcurrency: 4, OnEvent: log.hook, Keys: map[string]KeyConfig{
		"a": {Weight: 1}, "b": {Weight: 1},
	}})
	require.NoError(t, err)
	g := newGate()
	for _, k := range []string{"a", "a", "a", "a", "b", "b", "b", "b"} {
		_, err := s.Submit(context.Background(), Job{Key: k}, g.fn)
		require.NoError(t, err)
	}
	require.NoError(t, s.SetKeyWeight("a", 3))
	close(g.open)
	require.NoError(t, s.Shutdown(context.Background()))

	var changes []Event
	for _, e := range log.of(EventAllocationChanged) {
		changes = append(changes, Event{Key: e.Key, OldSlots: e.OldSlots, NewSlots: e.NewSlots, Reason: e.Reason})
	}
	// After the weight change a holds 3 of 4 slots and b 1; each drains
	// to 0 at the end.
	require.Contains(t, changes, Event{Key: "a", OldSlots: 2, NewSlots: 3, Reason: ReasonConfigChange})
	require.Contains(t, changes, Event{Key: "b", OldSlots: 2, NewSlots: 1, Reason: ReasonRebalance})
	last := map[string]Event{}
	for _, c := range changes {
		last[c.Key] = c
	}
	require.Zero(t, last["a"].NewSlots)
	require.Zero(t, last["b"].NewSlots)
}

// A hook that never returns must not stall dispatch: events past the
// buffer are dropped and counted, and every job still runs.
func TestSlowHookDoesNotStallDispatch(t *testing.T) {
	block := make(chan struct{})
	var buf syncBuffer
	s, err := New(Config{MaxConcurrency: 4, EventBuffer: 8, OnEvent: func(Event) { <-block },
		Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	require.NoError(t, err)
	var hs []Handle
	for i := 0; i < 2000; i++ {
		h, err := s.Submit(context.Background(), Job{Key: "k"}, noop)
		require.NoError(t, err)
		hs = append(hs, h)
	}
	for _, h := range hs {
		require.NoError(t, h.Wait(context.Background()))
	}
	st := s.Stats()
	require.EqualValues(t, 2000, st.Completed)
	require.Greater(t, st.EventsDropped, uint64(2000), "3 events a job, 8 buffered")
	close(block)
	require.NoError(t, s.Close())
	require.Contains(t, buf.String(), "falling behind", "the drop is logged, once the hook returns")
}

// syncBuffer is a bytes.Buffer safe for a logger on another goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestPanickingHookIsLogged(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	s, err := New(Config{Logger: logger, OnEvent: func(e Event) {
		if e.Kind == EventStarted {
			panic("hook bug")
		}
	}})
	require.NoError(t, err)
	require.NoError(t, s.RunSync(context.Background(), Job{}, noop))
	require.NoError(t, s.Close())
	require.Contains(t, buf.String(), "event hook panicked")
	require.Contains(t, buf.String(), "hook bug")
}

// Shutdown's ctx bounds its wait for the hook too; Close then waits for
// the events to be delivered.
func TestShutdownCtxBoundsEventDelivery(t *testing.T) {
	entered, block := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	s, err := New(Config{MaxConcurrency: 1, OnEvent: func(Event) {
		if calls.Add(1) == 1 {
			close(entered)
			<-block
		}
	}})
	require.NoError(t, err)
	require.NoError(t, s.RunSync(context.Background(), Job{}, noop)) // submitted, started, finished
	<-entered

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, s.Shutdown(ctx), context.Canceled, "the hook holds the first event, two are queued")

	close(block)
	require.NoError(t, s.Close())
	require.EqualValues(t, 3, calls.Load(), "Close delivers the queued events")
	require.EqualValues(t, 0, s.Stats().EventsDropped)
}
