// Command syncengine runs a long-lived file sync engine on
// fairsched: two background watch profiles that always have files to sync,
// shared 3:1 by weight with a reservation for the smaller one, and a user
// who triggers a large high-priority sync in the middle of it.
//
// It draws the slots each of them holds over time, one row per half
// second, and checks the promise aging makes: however busy the engine,
// no file waits longer than AgingConfig.MaxWait before it is first in line.
//
//	go run ./examples/syncengine
//	go run ./examples/syncengine -scale 3    # everything three times slower
//
// The transfers only sleep.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/fairsched/fairsched"
)

// options sets the pace of a run. Tests use a smaller Scale.
type options struct {
	// Scale multiplies every duration: the phases, the transfers, the
	// aging config and the chart's rows. 1 runs for about 12 seconds.
	Scale float64
	Seed  uint64
}

func defaultOptions() options { return options{Scale: 1, Seed: 1} }

func main() {
	opts := defaultOptions()
	flag.Float64Var(&opts.Scale, "scale", opts.Scale, "multiply every duration by this (2 runs twice as long)")
	flag.Uint64Var(&opts.Seed, "seed", opts.Seed, "seed of the transfer lengths")
	flag.Parse()
	if !(opts.Scale > 0) {
		fmt.Fprintln(os.Stderr, "syncengine: -scale must be positive")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if _, err := run(ctx, opts, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "syncengine:", err)
		os.Exit(1)
	}
}

// The engine's parties, as fairness keys.
const (
	profileA = "profile-a" // s3://prod, 50,000 changed files
	profileB = "profile-b" // s3://b2-backup, a few hundred
	user     = "user"      // a sync the user asked for, now
)

const slots = 16

// timeline of a run at Scale 1.
const (
	userStarts = 4 * time.Second
	userStops  = 8500 * time.Millisecond
	loadStops  = 11 * time.Second
	row        = 500 * time.Millisecond
	transfer   = 150 * time.Millisecond // mean length of one file's sync
)

// Outstanding files each party keeps queued or running: more than it can
// run, so each always has work waiting.
var outstanding = map[string]int{profileA: 18, profileB: 9, user: 20}

// config is the sync engine's configuration, its durations multiplied by scale.
func config(scale float64) fairsched.Config {
	d := func(x time.Duration) time.Duration { return time.Duration(float64(x) * scale) }
	return fairsched.Config{
		MaxConcurrency: slots,
		Types: map[string]fairsched.TypeConfig{
			// A sync the user is waiting for must beat fairness, so it is
			// in a higher tier, not merely of a higher priority.
			"user-sync": {Tier: fairsched.Foreground, DefaultPriority: fairsched.PriorityHigh, DefaultCost: d(transfer)},
			"watch":     {Tier: fairsched.Background, DefaultPriority: fairsched.PriorityLow, DefaultCost: d(transfer)},
		},
		Keys: map[string]fairsched.KeyConfig{
			profileA: {Weight: 3, MaxConcurrency: 12},
			profileB: {Weight: 1, MaxConcurrency: 6, MinSlots: 2},
		},
		// After a second in the queue a file gains 10 priority points
		// every 250ms; at 100 it is urgent and goes first, whatever its
		// tier or key. A watch file (priority 20) is urgent after 3s.
		Aging: fairsched.AgingConfig{
			GracePeriod:     d(time.Second),
			Interval:        d(250 * time.Millisecond),
			Step:            10,
			MaxEffective:    fairsched.PriorityHigh,
			UrgentThreshold: 100,
		},
	}
}

// result is what a run measured; the tests check it.
type result struct {
	Rows []sample // the chart, one per row

	Jobs       map[string]int // files synced, per key
	Failed     int
	Submitted  int
	LongestJob time.Duration // the longest a file held its slot

	// The longest wait of a watch file, whose file it was, and the bound.
	LongestWait    time.Duration
	LongestWaitKey string
	Bound          time.Duration

	// Slots held on average per key, while the user was idle and both
	// profiles busy (Before) and while the user's sync ran (During).
	Before, During map[string]float64

	UrgentStarts, ReservedStarts uint64
}

// sample is the average slots held per key over one row of the chart.
type sample struct {
	At    time.Duration // end of the row, since the start
	Slots map[string]float64
}

// run runs the engine, writing to w, and returns what it measured. Every
// goroutine it starts has ended when it returns.
func run(ctx context.Context, opts options, w io.Writer) (*result, error) {
	scale := opts.Scale
	d := func(x time.Duration) time.Duration { return time.Duration(float64(x) * scale) }
	cfg := config(scale)
	s, err := fairsched.New(cfg)
	if err != nil {
		return nil, err
	}
	bound, _ := cfg.Aging.MaxWait(fairsched.PriorityLow)

	fmt.Fprintf(w, "syncengine: a file sync engine on fairsched, %d slots.\n", slots)
	fmt.Fprintf(w, "  Two watch profiles always have files to sync: %s (weight 3, cap 12) and %s\n", profileA, profileB)
	fmt.Fprintf(w, "  (weight 1, cap 6, 2 slots reserved). From %v to %v the user runs a large sync, in the\n", d(userStarts), d(userStops))
	fmt.Fprintf(w, "  foreground tier: %d files at a time, at high priority.\n", outstanding[user])
	fmt.Fprintf(w, "  Aging: a waiting watch file is urgent, and goes first, after MaxWait(%d) = %v.\n\n",
		fairsched.PriorityLow, bound)

	tr := newTracker()
	start := time.Now()
	var wg sync.WaitGroup
	stopLoad := make(chan struct{})

	// producer keeps n files of one party outstanding from from to until.
	producer := func(key, typ string, n int, from, until time.Duration, seed uint64) {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(opts.Seed, seed))
		if !sleepUntil(ctx, stopLoad, start.Add(from)) {
			return
		}
		stop := time.NewTimer(time.Until(start.Add(until)))
		defer stop.Stop()
		tokens := make(chan struct{}, n)
		for {
			select {
			case <-ctx.Done():
				return
			case <-stopLoad:
				return
			case <-stop.C:
				return
			case tokens <- struct{}{}:
			}
			length := time.Duration((0.5 + rng.Float64()) * float64(d(transfer)))
			rec := tr.add(key, length)
			fn := tr.fn(rec)
			if _, err := s.Submit(ctx, fairsched.Job{Type: typ, Key: key}, func(ctx context.Context) error {
				defer func() { <-tokens }()
				return fn(ctx)
			}); err != nil {
				tr.fail(err)
				return
			}
		}
	}
	wg.Add(3)
	go producer(profileA, "watch", outstanding[profileA], 0, d(loadStops), 1)
	go producer(profileB, "watch", outstanding[profileB], 0, d(loadStops), 2)
	go producer(user, "user-sync", outstanding[user], d(userStarts), d(userStops), 3)

	// The chart: the running counts, sampled every few milliseconds and
	// averaged over each row.
	res := &result{Bound: bound}
	chartDone := make(chan struct{})
	var chart sync.WaitGroup
	chart.Add(1)
	go func() {
		defer chart.Done()
		res.Rows = draw(w, tr, start, d(row), chartDone)
	}()

	sleepUntil(ctx, nil, start.Add(d(loadStops)))
	close(stopLoad)
	wg.Wait()
	if ctx.Err() != nil {
		s.Close()
	} else {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err = s.Shutdown(sctx)
		cancel()
		if err != nil {
			s.Close()
		}
	}
	close(chartDone)
	chart.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("the queue did not drain: %w", err)
	}
	if err := tr.err(); err != nil {
		return nil, err
	}

	st := s.Stats()
	res.UrgentStarts, res.ReservedStarts = st.UrgentStarts, st.ReservedStarts
	tr.summarise(res, start, d)
	report(w, res, d)
	return res, nil
}

// letters name the keys in the chart.
var letters = []struct{ key, letter string }{{user, "U"}, {profileA, "A"}, {profileB, "B"}}

// draw prints a row of the chart per interval until done is closed and
// returns the rows.
func draw(w io.Writer, tr *tracker, start time.Time, interval time.Duration, done <-chan struct{}) []sample {
	fmt.Fprintf(w, "Slots held, averaged over each %v (U %s, A %s, B %s, . idle):\n", interval, user, profileA, profileB)
	fmt.Fprintf(w, "  %6s  %-*s  %5s %5s %5s\n", "time", slots, "slots", "U", "A", "B")
	decimals := 1 // enough to tell the rows apart
	if interval%(100*time.Millisecond) != 0 {
		decimals = 2
	}
	tick := time.NewTicker(interval / 50)
	defer tick.Stop()
	var rows []sample
	sum := map[string]float64{}
	n := 0
	rowEnd := start.Add(interval)
	flush := func(at time.Time) {
		avg := map[string]float64{}
		for _, l := range letters {
			if n > 0 {
				avg[l.key] = sum[l.key] / float64(n)
			}
		}
		rows = append(rows, sample{At: at.Sub(start), Slots: avg})
		fmt.Fprintf(w, "  %5.*fs  %s  %5.1f %5.1f %5.1f\n", decimals, at.Sub(start).Seconds(), stack(avg),
			avg[user], avg[profileA], avg[profileB])
		clear(sum)
		n = 0
	}
	for {
		select {
		case now := <-tick.C:
			for k, v := range tr.runningNow() {
				sum[k] += float64(v)
			}
			n++
			if !now.Before(rowEnd) {
				flush(rowEnd)
				rowEnd = rowEnd.Add(interval)
			}
		case <-done:
			if n > 0 {
				flush(time.Now())
			}
			return rows
		}
	}
}

// stack draws a row: one character per slot, each key's average rounded
// so that the total stays true (largest remainder first).
func stack(avg map[string]float64) string {
	counts := make([]int, len(letters))
	rest := make([]float64, len(letters))
	total, held := 0.0, 0
	for i, l := range letters {
		counts[i] = int(avg[l.key])
		rest[i] = avg[l.key] - float64(counts[i])
		total += avg[l.key]
		held += counts[i]
	}
	for held < min(slots, int(math.Round(total))) {
		best := 0
		for i := range rest {
			if rest[i] > rest[best] {
				best = i
			}
		}
		counts[best]++
		rest[best] = -1
		held++
	}
	var b strings.Builder
	for i, l := range letters {
		b.WriteString(strings.Repeat(l.letter, counts[i]))
	}
	b.WriteString(strings.Repeat(".", max(0, slots-held)))
	return b.String()
}

// report prints the averages per phase and the starvation check.
func report(w io.Writer, r *result, d func(time.Duration) time.Duration) {
	fmt.Fprintf(w, "\nBoth profiles busy, user idle: %s held %.1f slots, %s %.1f (their weighted fair shares: 10-11 and 5-6).\n",
		profileA, r.Before[profileA], profileB, r.Before[profileB])
	fmt.Fprintf(w, "During the user's sync:        user %.1f, %s %.1f, %s %.1f: the foreground goes first,\n",
		r.During[user], profileA, r.During[profileA], profileB, r.During[profileB])
	fmt.Fprintf(w, "  %s keeps its 2 reserved slots, and %s's files get through when they turn urgent.\n", profileB, profileA)
	verdict := "ok"
	if r.LongestWait > r.Bound+r.LongestJob {
		verdict = "FAILED"
	}
	fmt.Fprintf(w, "Longest wait of a watch file: %v (%s); bound MaxWait(%d) = %v, plus a slot to free\n",
		r.LongestWait.Round(time.Millisecond), r.LongestWaitKey, fairsched.PriorityLow, r.Bound)
	fmt.Fprintf(w, "  (at most one transfer, %v): %s\n", r.LongestJob.Round(time.Millisecond), verdict)
	fmt.Fprintf(w, "Files synced: %s %d, %s %d, user %d; %d started urgent, %d in a reserved slot; %d failed.\n",
		profileA, r.Jobs[profileA], profileB, r.Jobs[profileB], r.Jobs[user], r.UrgentStarts, r.ReservedStarts, r.Failed)
}

// sleepUntil sleeps until t, or until ctx ends or stop is closed (stop may
// be nil), and reports whether t was reached.
func sleepUntil(ctx context.Context, stop <-chan struct{}, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
}

// record is one file's sync.
type record struct {
	key            string
	length         time.Duration
	submitted      time.Time
	started, ended time.Time
	err            error
}

// tracker records every file and counts what runs, per key.
type tracker struct {
	mu       sync.Mutex
	records  []*record
	running  map[string]int
	firstErr error
}

func newTracker() *tracker { return &tracker{running: map[string]int{}} }

func (t *tracker) add(key string, length time.Duration) *record {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := &record{key: key, length: length, submitted: time.Now()}
	t.records = append(t.records, r)
	return r
}

// fail records a submission the scheduler refused.
func (t *tracker) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.firstErr == nil {
		t.firstErr = err
	}
	t.records = t.records[:len(t.records)-1]
}

func (t *tracker) err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.firstErr
}

func (t *tracker) fn(r *record) func(context.Context) error {
	return func(ctx context.Context) error {
		t.mu.Lock()
		r.started = time.Now()
		t.running[r.key]++
		t.mu.Unlock()

		timer := time.NewTimer(r.length)
		defer timer.Stop()
		var err error
		select {
		case <-timer.C:
		case <-ctx.Done():
			err = ctx.Err()
		}

		t.mu.Lock()
		r.ended, r.err = time.Now(), err
		t.running[r.key]--
		t.mu.Unlock()
		return err
	}
}

func (t *tracker) runningNow() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int, len(t.running))
	for k, v := range t.running {
		out[k] = v
	}
	return out
}

// summarise fills in res from the records: counts, the longest wait, and
// the slots held per key in two windows, from the files' own run times.
func (t *tracker) summarise(res *result, start time.Time, d func(time.Duration) time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	res.Submitted = len(t.records)
	res.Jobs = map[string]int{}
	// Leave the profiles a moment to fill their slots, and the scheduler a
	// moment to hand the user's slots back, before measuring.
	before := [2]time.Time{start.Add(d(time.Second)), start.Add(d(userStarts))}
	during := [2]time.Time{start.Add(d(userStarts + time.Second)), start.Add(d(userStops))}
	held := map[string][2]time.Duration{}
	for _, r := range t.records {
		if r.started.IsZero() {
			continue
		}
		res.Jobs[r.key]++
		if r.err != nil {
			res.Failed++
		}
		if l := r.ended.Sub(r.started); l > res.LongestJob {
			res.LongestJob = l
		}
		if w := r.started.Sub(r.submitted); r.key != user && w > res.LongestWait {
			res.LongestWait, res.LongestWaitKey = w, r.key
		}
		h := held[r.key]
		h[0] += overlap(r.started, r.ended, before)
		h[1] += overlap(r.started, r.ended, during)
		held[r.key] = h
	}
	res.Before, res.During = map[string]float64{}, map[string]float64{}
	for k, h := range held {
		res.Before[k] = float64(h[0]) / float64(before[1].Sub(before[0]))
		res.During[k] = float64(h[1]) / float64(during[1].Sub(during[0]))
	}
}

// overlap returns how much of [a, b] lies in the window.
func overlap(a, b time.Time, window [2]time.Time) time.Duration {
	if a.Before(window[0]) {
		a = window[0]
	}
	if b.After(window[1]) {
		b = window[1]
	}
	if b.Before(a) {
		return 0
	}
	return b.Sub(a)
}
