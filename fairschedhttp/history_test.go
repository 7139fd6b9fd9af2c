package fairschedhttp

import (
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/fairsched/fairsched"
)

// bareHistory is a history with no scheduler and no timer, sampled by
// hand.
func bareHistory() *history {
	return &history{every: time.Second, keys: map[string]*[2]ring{}, tiers: map[fairsched.Tier]*[2]ring{}, tierN: map[fairsched.Tier]string{}}
}

func chartOf(t *testing.T, h History, title string) Chart {
	t.Helper()
	for _, c := range h.Charts {
		if c.Title == title {
			return c
		}
	}
	t.Fatalf("no chart %q", title)
	return Chart{}
}

func lastOf(c Chart) map[string]float64 {
	out := map[string]float64{}
	for _, l := range c.Lines {
		out[l.Name] = l.Values[len(l.Values)-1]
	}
	return out
}

// A flood of keys costs the history a bounded number of lines: the
// busiest keys get lines while there is room, the rest are summed into
// "other", and the sums stay whole. A key idle for the whole history
// gives its line up.
func TestHistoryBoundsKeys(t *testing.T) {
	h := bareHistory()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := fairsched.Stats{OtherKeys: fairsched.KeySummary{Keys: 1000, Running: 5, Queued: 50}}
	total := 5
	for i := range 40 {
		st.Keys = append(st.Keys, fairsched.KeyStats{Key: fmt.Sprintf("k%02d", i), Running: 1, Queued: i})
		total++
	}
	for n := range 3 * historyLen {
		h.sampleLocked(st, t0.Add(time.Duration(n)*time.Second))
	}
	snap := h.snapshot()
	if len(snap.Times) != historyLen || !snap.Times[historyLen-1].Equal(t0.Add(time.Duration(3*historyLen-1)*time.Second)) {
		t.Fatalf("%d samples, the last at %v", len(snap.Times), snap.Times[len(snap.Times)-1])
	}
	running := chartOf(t, snap, "Running by key")
	if len(running.Lines) != maxKeyLines+1 || running.Lines[maxKeyLines].Name != otherLine {
		t.Fatalf("%d lines, the last %q", len(running.Lines), running.Lines[len(running.Lines)-1].Name)
	}
	sum := 0.0
	for _, v := range lastOf(running) {
		sum += v
	}
	if sum != float64(total) {
		t.Errorf("the lines sum to %v running, want %d", sum, total)
	}
	if _, ok := lastOf(running)["k39"]; !ok {
		t.Errorf("the busiest key has no line: %v", lastOf(running))
	}

	// The keys go idle; a new one gets a line once the old ones' history
	// is all idle.
	st = fairsched.Stats{Keys: []fairsched.KeyStats{{Key: "new", Running: 2}}}
	for range historyLen {
		h.sampleLocked(st, t0)
	}
	if got := lastOf(chartOf(t, h.snapshot(), "Running by key")); got["new"] != 0 || got[otherLine] != 2 {
		t.Errorf("while the old keys' history holds work: %v", got)
	}
	h.sampleLocked(st, t0)
	if got := lastOf(chartOf(t, h.snapshot(), "Running by key")); got["new"] != 2 || len(got) != 2 {
		t.Errorf("once it is idle: %v", got)
	}
}

// Tiers are charted by name; rates are per second of the interval; the
// waits are the quantiles of the jobs that started in the interval.
func TestHistoryRatesAndWaits(t *testing.T) {
	h := bareHistory()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	buckets := []float64{0.1, 1, 10}
	st := fairsched.Stats{
		Tiers:    []fairsched.TierStats{{Tier: fairsched.Foreground, Running: 3, Queued: 4}, {Tier: fairsched.Background, Running: 1}},
		Types:    []fairsched.TypeStats{{Name: "a", Started: 100}, {Name: "b", Started: 50}},
		Rejected: 7, DisabledRefusals: 1,
		QueueWait: fairsched.Histogram{Count: 10, Buckets: buckets, Counts: []uint64{10, 10, 10}},
	}
	h.sampleLocked(st, t0)
	st.Types[0].Started += 20
	st.Rejected += 4
	st.DisabledRefusals += 6
	// 100 more starts: 50 within 0.1 s, 48 within 1 s, 2 within 10 s.
	st.QueueWait = fairsched.Histogram{Count: 110, Buckets: buckets, Counts: []uint64{60, 108, 110}}
	h.sampleLocked(st, t0.Add(2*time.Second))
	snap := h.snapshot()
	if got := lastOf(chartOf(t, snap, "Starts")); got["starts"] != 10 {
		t.Errorf("starts %v, want 10/s", got)
	}
	if got := lastOf(chartOf(t, snap, "Refusals")); got["refused"] != 2 || got["disabled"] != 3 {
		t.Errorf("refusals %v, want 2/s refused and 3/s of disabled pairs", got)
	}
	waits := lastOf(chartOf(t, snap, "Wait to start"))
	if math.Abs(waits["p50"]-0.1) > 1e-9 || !(waits["p99"] > 1 && waits["p99"] <= 10) {
		t.Errorf("waits %v, want p50 0.1 s and p99 in (1, 10] s", waits)
	}
	tiers := lastOf(chartOf(t, snap, "Running and queued by tier"))
	if tiers["foreground running"] != 3 || tiers["foreground queued"] != 4 || tiers["background running"] != 1 {
		t.Errorf("tiers %v", tiers)
	}
	if first := chartOf(t, snap, "Starts").Lines[0].Values[0]; first != 0 {
		t.Errorf("the first sample has no interval, yet a rate: %v", first)
	}
}

// Tiers past maxTierLines are summed into "other", not dropped: the
// lines add up to every tier's jobs.
func TestHistoryBoundsTiers(t *testing.T) {
	h := bareHistory()
	st := fairsched.Stats{}
	for i := range maxTierLines + 3 {
		st.Tiers = append(st.Tiers, fairsched.TierStats{Tier: fairsched.Tier(100 - i), Running: 1, Queued: 10})
	}
	h.sampleLocked(st, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	tiers := chartOf(t, h.snapshot(), "Running and queued by tier")
	if len(tiers.Lines) != 2*(maxTierLines+1) {
		t.Errorf("%d lines, want %d: two per tier with a line, two for the others", len(tiers.Lines), 2*(maxTierLines+1))
	}
	got := lastOf(tiers)
	if got[otherLine+" running"] != 3 || got[otherLine+" queued"] != 30 {
		t.Errorf("the other tiers: %v, want 3 running and 30 queued", got)
	}
	sum := 0.0
	for _, v := range got {
		sum += v
	}
	if sum != float64(11*(maxTierLines+3)) {
		t.Errorf("the lines sum to %v, want %d", sum, 11*(maxTierLines+3))
	}
}

// The timer's tick samples the scheduler; after close it does nothing.
func TestHistoryTickAndClose(t *testing.T) {
	s, err := fairsched.New(fairsched.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := newHistory(s, time.Hour)
	h.tick()
	if n := len(h.snapshot().Times); n != 2 {
		t.Errorf("%d samples, want the first and the tick's", n)
	}
	h.close()
	h.close()
	h.tick()
	if n := len(h.snapshot().Times); n != 2 {
		t.Errorf("a tick after close sampled: %d samples", n)
	}
}

// stopped reports whether h's timer is stopped for good.
func stopped(h *history) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.timer == nil
}

// The first tick after the scheduler is closed stops the sampling, with
// no sample of a closed scheduler.
func TestHistoryStopsWhenSchedulerCloses(t *testing.T) {
	s, err := fairsched.New(fairsched.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h := newHistory(s, time.Hour)
	h.tick()
	if stopped(h) {
		t.Fatal("stopped while the scheduler runs")
	}
	s.Close()
	h.tick()
	if !stopped(h) {
		t.Error("a tick after the scheduler closed set the timer again")
	}
	if n := len(h.snapshot().Times); n != 2 {
		t.Errorf("%d samples, want 2: none of the closed scheduler", n)
	}
}

// An admin handler dropped without Close does not keep its scheduler
// alive: once closed, the scheduler is collected, though the sampler's
// timer is still set, and the sampler's next tick stops it.
func TestAdminDroppedWithoutCloseFreesScheduler(t *testing.T) {
	s, err := fairsched.New(fairsched.Config{})
	if err != nil {
		t.Fatal(err)
	}
	gone := weak.Make(s)
	h := Admin(s, AdminOptions{Authorize: allowAll, HistoryEvery: time.Hour}).history
	s.Close()
	s = nil
	runtime.GC()
	if gone.Value() != nil {
		t.Fatal("the closed scheduler is still reachable, from the sampler's timer")
	}
	h.tick()
	if !stopped(h) {
		t.Error("the sampler of a collected scheduler set its timer again")
	}
}

// HistoryEvery is at least a second.
func TestHistoryEveryBounded(t *testing.T) {
	s, err := fairsched.New(fairsched.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for every, want := range map[time.Duration]time.Duration{
		0: defaultHistoryEvery, time.Nanosecond: time.Second, -time.Hour: time.Second, 999 * time.Millisecond: time.Second, 3 * time.Second: 3 * time.Second,
	} {
		h := newHistory(s, every)
		h.close()
		if h.every != want {
			t.Errorf("HistoryEvery %v: every %v, want %v", every, h.every, want)
		}
	}
}
