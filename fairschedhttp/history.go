package fairschedhttp

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"time"
	"weak"

	"github.com/fairsched/fairsched"
)

// The charts' history. The handler samples the scheduler's Stats on a
// timer of its own, so that a page opened during an incident shows the
// minutes before it, and keeps the last historyLen samples of each line
// in a fixed ring. The lines are bounded too: at most maxKeyLines keys
// have lines of their own, the rest are summed into "other", so a flood
// of keys costs the history nothing.

const (
	// historyLen is how many samples each line keeps: five minutes at
	// the default interval.
	historyLen = 150
	// defaultHistoryEvery is the interval between samples by default.
	defaultHistoryEvery = 2 * time.Second
	// minHistoryEvery bounds the interval from below: each sample takes
	// the scheduler's lock for a Stats.
	minHistoryEvery = time.Second
	// maxKeyLines bounds the keys with lines of their own.
	maxKeyLines = 8
	// maxTierLines bounds the tiers with lines of their own.
	maxTierLines = 8
	// otherLine names the sum of the keys or tiers without a line.
	otherLine = "other"
)

// History is the recent past the page charts: a sample every Every, the
// oldest first.
type History struct {
	Every  time.Duration
	Times  []time.Time
	Charts []Chart
}

// Chart is one chart: its lines share the sample times and the unit.
type Chart struct {
	Title string
	Unit  string // "jobs", "s" (seconds) or "/s" (per second)
	Lines []Line
}

// Line is one line of a chart: a value per sample time.
type Line struct {
	Name   string
	Values []float64
}

// ring is one line's last historyLen values, by sample number modulo
// historyLen.
type ring [historyLen]float64

// history is the sampler and what it has kept. Its methods are safe for
// concurrent use.
//
// The timer's function holds the history, which holds the scheduler only
// weakly: a handler dropped without Close neither keeps its scheduler
// alive nor samples it for ever. The sampling stops at the first tick
// after the scheduler is closed (Scheduler.Done) or collected.
type history struct {
	s     weak.Pointer[fairsched.Scheduler]
	done  <-chan struct{} // s's Done
	every time.Duration

	mu    sync.Mutex
	timer *time.Timer // nil once closed
	n     int         // samples taken
	times [historyLen]time.Time
	keys  map[string]*[2]ring // by key: running, queued
	other [2]ring             // the keys without lines: running, queued
	tiers map[fairsched.Tier]*[2]ring
	tierN map[fairsched.Tier]string
	// otherTiers sums the tiers without lines, once there are some.
	otherTiers    [2]ring
	hasOtherTiers bool
	wait          [2]ring // p50, p99 of the waits to start in the interval, s
	starts        ring    // per second
	refuse        [2]ring // per second: Rejected, DisabledRefusals
	prev          struct {
		at                          time.Time
		started, rejected, disabled uint64
		wait                        fairsched.Histogram
	}
}

// newHistory starts sampling s every interval (0: the default; at least
// minHistoryEvery).
func newHistory(s *fairsched.Scheduler, every time.Duration) *history {
	if every == 0 {
		every = defaultHistoryEvery
	}
	every = max(every, minHistoryEvery)
	h := &history{s: weak.Make(s), done: s.Done(), every: every, keys: map[string]*[2]ring{}, tiers: map[fairsched.Tier]*[2]ring{}, tierN: map[fairsched.Tier]string{}}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sampleLocked(s.Stats(), time.Now())
	h.timer = time.AfterFunc(every, h.tick)
	return h
}

// tick takes a sample and sets the timer for the next, unless the
// scheduler is closed or gone: then it stops. Between ticks no goroutine
// is left waiting: the timer is the runtime's.
func (h *history) tick() {
	s := h.s.Value()
	select {
	case <-h.done:
		s = nil
	default:
	}
	if s == nil {
		h.close()
		return
	}
	st := s.Stats() // outside h.mu: a reader never waits for the scheduler's lock
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.timer == nil {
		return // closed while this tick waited
	}
	h.sampleLocked(st, time.Now())
	h.timer.Reset(h.every)
}

// close stops the sampling; what was kept stays readable.
func (h *history) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
}

// sampleLocked records st, taken at now, as the next sample.
func (h *history) sampleLocked(st fairsched.Stats, now time.Time) {
	i := h.n % historyLen
	h.n++
	h.times[i] = now

	// Keys: the busiest get lines, while there is room; a line whose key
	// has been idle for the whole history makes room.
	for k, r := range h.keys {
		if allZero(r[0]) && allZero(r[1]) {
			delete(h.keys, k)
		}
	}
	keys := slices.Clone(st.Keys)
	slices.SortFunc(keys, func(a, b fairsched.KeyStats) int {
		return cmp.Or(cmp.Compare(b.Running+b.Queued, a.Running+a.Queued), cmp.Compare(a.Key, b.Key))
	})
	for _, r := range h.keys {
		r[0][i], r[1][i] = 0, 0
	}
	h.other[0][i], h.other[1][i] = float64(st.OtherKeys.Running), float64(st.OtherKeys.Queued)
	for _, k := range keys {
		r := h.keys[k.Key]
		if r == nil && k.Running+k.Queued > 0 && len(h.keys) < maxKeyLines {
			r = new([2]ring)
			h.keys[k.Key] = r
		}
		if r == nil {
			h.other[0][i] += float64(k.Running)
			h.other[1][i] += float64(k.Queued)
			continue
		}
		r[0][i], r[1][i] = float64(k.Running), float64(k.Queued)
	}

	// Tiers: few, and named; past maxTierLines, summed into "other".
	for _, r := range h.tiers {
		r[0][i], r[1][i] = 0, 0
	}
	h.otherTiers[0][i], h.otherTiers[1][i] = 0, 0
	for _, t := range st.Tiers {
		r := h.tiers[t.Tier]
		if r == nil && len(h.tiers) < maxTierLines {
			r = new([2]ring)
			h.tiers[t.Tier] = r
			h.tierN[t.Tier] = t.Tier.String()
		}
		if r == nil {
			h.hasOtherTiers = true
			r = &h.otherTiers
			r[0][i] += float64(t.Running)
			r[1][i] += float64(t.Queued)
			continue
		}
		r[0][i], r[1][i] = float64(t.Running), float64(t.Queued)
	}

	// Rates and the waits of the jobs that started since the last sample.
	var started uint64
	for _, t := range st.Types {
		started += t.Started
	}
	h.starts[i], h.refuse[0][i], h.refuse[1][i], h.wait[0][i], h.wait[1][i] = 0, 0, 0, 0, 0
	if dt := now.Sub(h.prev.at).Seconds(); !h.prev.at.IsZero() && dt > 0 {
		h.starts[i] = float64(started-min(started, h.prev.started)) / dt
		h.refuse[0][i] = float64(st.Rejected-min(st.Rejected, h.prev.rejected)) / dt
		h.refuse[1][i] = float64(st.DisabledRefusals-min(st.DisabledRefusals, h.prev.disabled)) / dt
		h.wait[0][i] = quantileSince(h.prev.wait, st.QueueWait, 0.5)
		h.wait[1][i] = quantileSince(h.prev.wait, st.QueueWait, 0.99)
	}
	h.prev.at, h.prev.started, h.prev.rejected, h.prev.disabled, h.prev.wait = now, started, st.Rejected, st.DisabledRefusals, st.QueueWait
}

func allZero(r ring) bool { return r == ring{} }

// quantileSince estimates the q-quantile of the observations cur has and
// prev had not (both cumulative histograms with the same buckets), by
// linear interpolation within the bucket it falls in, as Prometheus's
// histogram_quantile does; 0 if there are none.
func quantileSince(prev, cur fairsched.Histogram, q float64) float64 {
	if cur.Count <= prev.Count || len(cur.Counts) == 0 {
		return 0
	}
	at := func(h fairsched.Histogram, i int) uint64 {
		if i < len(h.Counts) {
			return h.Counts[i]
		}
		return 0
	}
	total := float64(cur.Count - prev.Count)
	want := q * total
	lower, below := 0.0, 0.0
	for i, upper := range cur.Buckets {
		n := float64(at(cur, i) - min(at(cur, i), at(prev, i)))
		if n >= want {
			if n == below {
				return upper
			}
			return lower + (upper-lower)*(want-below)/(n-below)
		}
		lower, below = upper, n
	}
	return cur.Buckets[len(cur.Buckets)-1] // beyond the last bucket: its bound
}

// snapshot returns what the history holds, for the page.
func (h *history) snapshot() History {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := min(h.n, historyLen)
	first := h.n - n
	out := History{Every: h.every, Times: make([]time.Time, n)}
	for j := range n {
		out.Times[j] = h.times[(first+j)%historyLen]
	}
	line := func(name string, r *ring) Line {
		l := Line{Name: name, Values: make([]float64, n)}
		for j := range n {
			l.Values[j] = r[(first+j)%historyLen]
		}
		return l
	}
	keys := slices.Sorted(maps.Keys(h.keys))
	running := Chart{Title: "Running by key", Unit: "jobs"}
	queued := Chart{Title: "Queued by key", Unit: "jobs"}
	for _, k := range keys {
		name := k
		if name == "" {
			name = "(empty)"
		}
		running.Lines = append(running.Lines, line(name, &h.keys[k][0]))
		queued.Lines = append(queued.Lines, line(name, &h.keys[k][1]))
	}
	running.Lines = append(running.Lines, line(otherLine, &h.other[0]))
	queued.Lines = append(queued.Lines, line(otherLine, &h.other[1]))
	tiers := Chart{Title: "Running and queued by tier", Unit: "jobs"}
	for _, t := range slices.SortedFunc(maps.Keys(h.tiers), func(a, b fairsched.Tier) int { return cmp.Compare(b, a) }) {
		tiers.Lines = append(tiers.Lines, line(h.tierN[t]+" running", &h.tiers[t][0]), line(h.tierN[t]+" queued", &h.tiers[t][1]))
	}
	if h.hasOtherTiers {
		tiers.Lines = append(tiers.Lines, line(otherLine+" running", &h.otherTiers[0]), line(otherLine+" queued", &h.otherTiers[1]))
	}
	out.Charts = []Chart{
		running, queued, tiers,
		{Title: "Wait to start", Unit: "s", Lines: []Line{line("p50", &h.wait[0]), line("p99", &h.wait[1])}},
		{Title: "Starts", Unit: "/s", Lines: []Line{line("starts", &h.starts)}},
		{Title: "Refusals", Unit: "/s", Lines: []Line{line("refused", &h.refuse[0]), line("disabled", &h.refuse[1])}},
	}
	return out
}
