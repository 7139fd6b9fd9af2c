// Command demo shows fairsched at work on a small git server: one
// scheduler with 8 slots shared by foreground clones and background
// maintenance, fair between clients and between organisations, with aging
// so that low-priority work cannot starve and a conflict group so that no
// two jobs touch one repository at a time.
//
// It runs for a few seconds of real time, printing a live view every half
// second, then a summary of what the scheduler promised and what happened:
//
//	go run ./examples/demo
//	go run ./examples/demo -duration 30s
//
// The job functions only sleep; the point is the order in which they run.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fairsched/fairsched"
)

// options sets the size and pace of a run. Tests use shorter ones.
type options struct {
	Duration time.Duration // how long work keeps arriving; then the queue drains
	Tick     time.Duration // how often the live view prints a line
	Seed     uint64        // seeds the job mix, so runs are comparable
}

func defaultOptions() options {
	return options{Duration: 8 * time.Second, Tick: 500 * time.Millisecond, Seed: 1}
}

func main() {
	opts := defaultOptions()
	flag.DurationVar(&opts.Duration, "duration", opts.Duration, "how long work keeps arriving")
	flag.DurationVar(&opts.Tick, "tick", opts.Tick, "interval between lines of the live view")
	flag.Uint64Var(&opts.Seed, "seed", opts.Seed, "seed of the job mix")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if _, err := run(ctx, opts, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// The workload. Everything a job does is a sleep; these are its sizes.
const (
	slots           = 8 // MaxConcurrency
	backgroundSlots = 6 // TierLimits[Background]: 2 slots are always left to clones

	// Foreground: each client sends clone requests at its own rate.
	busyClient  = "ci-farm"
	lightClient = "laptop"

	// Background: each organisation keeps this many jobs outstanding, so
	// both always have work waiting and the weights decide who runs.
	bigOrg        = "org-big"
	smallOrg      = "org-small"
	bigBacklog    = 14
	smallBacklog  = 8
	repackEvery   = 8 // one job in repackEvery is a (low-priority) repack
	bigOrgRepos   = 12
	smallOrgRepos = 8
)

// workload is the clone rates and job lengths of a run.
var (
	clients = []struct {
		key   string
		every time.Duration // mean time between requests (or bursts of them)
		burst int           // requests sent at once
	}{
		{busyClient, time.Second, 8}, // a CI farm starting a batch of builds
		{lightClient, 300 * time.Millisecond, 1},
	}
	jobLength = map[string][2]time.Duration{ // [min, max)
		"clone":  {60 * time.Millisecond, 180 * time.Millisecond},
		"pull":   {80 * time.Millisecond, 160 * time.Millisecond},
		"repack": {200 * time.Millisecond, 400 * time.Millisecond},
	}
)

// config is the scheduler's configuration: the part of this file a service
// would copy.
func config() fairsched.Config {
	return fairsched.Config{
		MaxConcurrency: slots,
		TierLimits:     map[fairsched.Tier]int{fairsched.Background: backgroundSlots},
		Types: map[string]fairsched.TypeConfig{
			// A clone is a client waiting on the other end: foreground.
			"clone": {Tier: fairsched.Foreground, ConflictGroup: "git", DefaultCost: 120 * time.Millisecond},
			// Pulls and repacks are maintenance: background. All three
			// types share the conflict group "git", so at most one of them
			// runs on a given repository at a time.
			"pull":   {Tier: fairsched.Background, ConflictGroup: "git", DefaultCost: 120 * time.Millisecond},
			"repack": {Tier: fairsched.Background, ConflictGroup: "git", DefaultCost: 300 * time.Millisecond, DefaultPriority: fairsched.PriorityLow},
		},
		Keys: map[string]fairsched.KeyConfig{
			busyClient:  {},
			lightClient: {},
			bigOrg:      {Weight: 3},
			smallOrg:    {Weight: 1, MinSlots: 1},
		},
		// After a second in the queue a job gains 10 priority points every
		// 250ms; at 100 it is urgent and goes first. A repack (priority 20)
		// therefore waits at most 1s + 8*250ms = 3s for its turn.
		Aging: fairsched.AgingConfig{
			GracePeriod:     time.Second,
			Interval:        250 * time.Millisecond,
			Step:            10,
			MaxEffective:    fairsched.PriorityHigh,
			UrgentThreshold: 100,
		},
	}
}

// result is what a run measured; the tests check it.
type result struct {
	Submitted    int // jobs accepted by the scheduler
	Ran          int // jobs whose function ran
	RanTwice     int // jobs whose function ran more than once (must be 0)
	Failed       int // jobs that ended with an error (must be 0)
	Overlaps     int // times a job started on a repo another job held (must be 0)
	RepoConflict int // jobs that arrived while another job held their repo, and waited for it

	Keys         []keyResult   // in the order of the summary table
	MeasuredFrom time.Duration // shares are measured from then until work stops arriving

	LongestLowWait  time.Duration // the longest wait of a low-priority job
	StarvationBound time.Duration // AgingConfig.MaxWait for that priority
	LongestJob      time.Duration // the longest a job held its slot

	Stats fairsched.Stats // the scheduler's own count at the end
}

// keyResult describes one fairness key's jobs.
type keyResult struct {
	Key      string
	Tier     fairsched.Tier
	Weight   float64
	MinSlots int
	Jobs     int
	// Share is the key's fraction of the background tier's slot-time while
	// work was arriving, and Entitled the fraction that weights and
	// reservations promise it (background keys only).
	Share, Entitled float64
	WaitP50         time.Duration
	WaitMax         time.Duration
}

// run runs the demo, writing to w, and returns what it measured. Every
// goroutine it starts has ended when it returns.
func run(ctx context.Context, opts options, w io.Writer) (*result, error) {
	cfg := config()
	s, err := fairsched.New(cfg)
	if err != nil {
		return nil, err
	}
	bound, _ := cfg.Aging.MaxWait(fairsched.PriorityLow)

	fmt.Fprintf(w, "fairsched demo: %d slots shared by a git server's foreground and background work.\n", slots)
	fmt.Fprintf(w, "  foreground: clients %s (%d clones at once, every ~%v) and %s (a clone every ~%v)\n",
		busyClient, clients[0].burst, clients[0].every, lightClient, clients[1].every)
	fmt.Fprintf(w, "  call RunSync; they go before background work and share their tier fairly.\n")
	fmt.Fprintf(w, "  background: %s (weight 3) and %s (weight 1, 1 reserved slot) Submit pulls and\n", bigOrg, smallOrg)
	fmt.Fprintf(w, "  low-priority repacks in up to %d slots; jobs on one repo never overlap (conflict group \"git\").\n\n", backgroundSlots)

	tr := newTracker()
	start := time.Now()
	stopLoad := make(chan struct{})
	var load sync.WaitGroup // producers and the requests they spawn
	var submitErr error
	var errOnce sync.Once
	fail := func(err error) { errOnce.Do(func() { submitErr = err }) }

	// Foreground: open-loop clients, each request on its own goroutine, as
	// an HTTP server would have them.
	for i, client := range clients {
		rng := rand.New(rand.NewPCG(opts.Seed, uint64(i)))
		load.Add(1)
		go func() {
			defer load.Done()
			for {
				// Exponential gaps: requests arrive at random, sometimes close together.
				gap := time.Duration(rng.ExpFloat64() * float64(client.every))
				select {
				case <-stopLoad:
					return
				case <-ctx.Done():
					return
				case <-time.After(gap):
				}
				for range client.burst {
					rec := tr.add(client.key, "clone", pickRepo(rng), fairsched.PriorityNormal, length(rng, "clone"))
					load.Add(1)
					go func() {
						defer load.Done()
						err := s.RunSync(ctx, rec.job(), tr.fn(rec))
						if err != nil && ctx.Err() == nil {
							fail(err)
						}
					}()
				}
			}
		}()
	}

	// Background: closed-loop producers that keep a fixed backlog per org.
	for i, org := range []struct {
		key     string
		backlog int
		repos   int
	}{{bigOrg, bigBacklog, bigOrgRepos}, {smallOrg, smallBacklog, smallOrgRepos}} {
		rng := rand.New(rand.NewPCG(opts.Seed, uint64(100+i)))
		load.Add(1)
		go func() {
			defer load.Done()
			tokens := make(chan struct{}, org.backlog)
			for n := 0; ; n++ {
				select {
				case <-stopLoad:
					return
				case <-ctx.Done():
					return
				case tokens <- struct{}{}:
				}
				typ, prio := "pull", fairsched.PriorityNormal
				if n%repackEvery == repackEvery-1 {
					typ, prio = "repack", fairsched.PriorityLow
				}
				repo := fmt.Sprintf("%s/r%d", strings.TrimPrefix(org.key, "org-"), rng.IntN(org.repos))
				rec := tr.add(org.key, typ, repo, prio, length(rng, typ))
				fn := tr.fn(rec)
				_, err := s.Submit(ctx, rec.job(), func(ctx context.Context) error {
					defer func() { <-tokens }()
					return fn(ctx)
				})
				if err != nil {
					tr.remove(rec)
					fail(err)
					return
				}
			}
		}()
	}

	// The live view, until the queue has drained.
	viewDone := make(chan struct{})
	var view sync.WaitGroup
	view.Add(1)
	go func() {
		defer view.Done()
		live(w, s, tr, start, opts.Tick, viewDone)
	}()

	// Let work arrive for opts.Duration, then stop it and let the
	// scheduler finish what is queued.
	timer := time.NewTimer(opts.Duration)
	select {
	case <-timer.C:
	case <-ctx.Done():
		timer.Stop()
	}
	loadEnd := time.Now()
	close(stopLoad)
	load.Wait() // every RunSync has returned
	if ctx.Err() != nil {
		s.Close() // cancel what runs, discard what waits
	} else {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err = s.Shutdown(sctx)
		cancel()
		if err != nil {
			s.Close()
		}
	}
	close(viewDone)
	view.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("the queue did not drain: %w", err)
	}
	if submitErr != nil {
		return nil, submitErr
	}

	// Shares are measured once both organisations have work queued: in the
	// first moments, whichever submits first finds the slots free and
	// takes them all (nobody else is waiting), and the other joins at the
	// same virtual time rather than with credit for having been absent.
	warm := start.Add(min(time.Second, opts.Duration/4))
	res := tr.result(start, warm, loadEnd, cfg)
	res.MeasuredFrom = warm.Sub(start)
	res.StarvationBound = bound
	res.Stats = s.Stats()
	summary(w, res, loadEnd.Sub(start))
	return res, nil
}

// letters name the keys in the live view's slot map.
var letters = []struct {
	key    string
	letter string
}{{busyClient, "C"}, {lightClient, "L"}, {bigOrg, "B"}, {smallOrg, "S"}}

// live prints a line of the scheduler's state every tick until done is
// closed, then a last one. Everything in it comes from Stats, except the
// count of jobs done, which the demo keeps itself.
func live(w io.Writer, s *fairsched.Scheduler, tr *tracker, start time.Time, tick time.Duration, done <-chan struct{}) {
	fmt.Fprintf(w, "Live, every %v. Slots: C=%s L=%s B=%s S=%s .=idle\n", tick, busyClient, lightClient, bigOrg, smallOrg)
	fmt.Fprintf(w, "%6s  %14s %-*s  %-9s  %-7s %-6s %-7s %-9s  %s\n",
		"time", "done/submitted", slots, "slots", "fg  bg", busyClient, lightClient, bigOrg, smallOrg, "queued")
	line := func() {
		st := s.Stats()
		running := map[string]int{}
		for _, k := range st.Keys {
			running[k.Key] = k.Running
		}
		tiers := map[fairsched.Tier]int{}
		for _, t := range st.Tiers {
			tiers[t.Tier] = t.Running
		}
		var slotMap strings.Builder
		for _, l := range letters {
			slotMap.WriteString(strings.Repeat(l.letter, running[l.key]))
		}
		slotMap.WriteString(strings.Repeat(".", max(0, slots-st.Running)))
		ran, submitted := tr.progress()
		fmt.Fprintf(w, "%5.1fs  %14s %-*s  %2d %3d   %7d %6d %7d %9d  %6d\n",
			time.Since(start).Seconds(), fmt.Sprintf("%d/%d", ran, submitted),
			slots, slotMap.String(), tiers[fairsched.Foreground], tiers[fairsched.Background],
			running[busyClient], running[lightClient], running[bigOrg], running[smallOrg], st.Queued)
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			line()
		case <-done:
			line()
			return
		}
	}
}

// summary prints what the run showed.
func summary(w io.Writer, r *result, load time.Duration) {
	fmt.Fprintf(w, "\nSummary: %d jobs; work arrived for %.1fs, then the queue drained.\n", r.Submitted, load.Seconds())
	fmt.Fprintf(w, "  %-10s %-4s %5s  %-12s %6s %6s  %8s %8s\n", "key", "tier", "jobs", "weight", "fair", "got", "wait p50", "wait max")
	for _, k := range r.Keys {
		tier, weight, fair, got := "fg", fmt.Sprintf("%g", k.Weight), "", ""
		if k.Tier == fairsched.Background {
			tier = "bg"
			fair, got = pct(k.Entitled), pct(k.Share)
			if k.MinSlots > 0 {
				weight += fmt.Sprintf(" + %d slot", k.MinSlots)
			}
		}
		fmt.Fprintf(w, "  %-10s %-4s %5d  %-12s %6s %6s  %8s %8s\n",
			k.Key, tier, k.Jobs, weight, fair, got, round(k.WaitP50), round(k.WaitMax))
	}
	fmt.Fprintf(w, "  got: each org's part of the background slot-time from %s until work stopped arriving.\n", round(r.MeasuredFrom))
	fmt.Fprintf(w, "  fair: %s's reserved slot, the rest split 3:1 (of %d slots, fewer while clients use them).\n\n",
		smallOrg, backgroundSlots)

	check := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "FAILED"
	}
	fmt.Fprintf(w, "  aging:     low-priority repacks waited at most %s; the bound is MaxWait(%d) = %s\n",
		round(r.LongestLowWait), fairsched.PriorityLow, round(r.StarvationBound))
	fmt.Fprintf(w, "             plus the wait for a slot to free (the longest job took %s): %s\n",
		round(r.LongestJob), check(r.LongestLowWait <= r.StarvationBound+r.LongestJob))
	fmt.Fprintf(w, "  conflicts: %d jobs arrived while another job held their repo and waited; overlaps: %d: %s\n",
		r.RepoConflict, r.Overlaps, check(r.Overlaps == 0))
	fmt.Fprintf(w, "  each job:  %d submitted, %d ran, %d ran twice, %d failed: %s\n",
		r.Submitted, r.Ran, r.RanTwice, r.Failed, check(r.Ran == r.Submitted && r.RanTwice == 0 && r.Failed == 0))
	st := r.Stats
	fmt.Fprintf(w, "  Stats():   %d completed, %d started in a reserved slot, %d aged above their priority, %d urgent.\n",
		st.Completed, st.ReservedStarts, st.AgingPromotions, st.UrgentStarts)
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

// round prints a duration to a readable precision.
func round(d time.Duration) string {
	switch {
	case d < 10*time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(10 * time.Millisecond).String()
}

// pickRepo returns a repository for a clone: any repo of either org.
func pickRepo(rng *rand.Rand) string {
	if rng.IntN(bigOrgRepos+smallOrgRepos) < bigOrgRepos {
		return fmt.Sprintf("big/r%d", rng.IntN(bigOrgRepos))
	}
	return fmt.Sprintf("small/r%d", rng.IntN(smallOrgRepos))
}

// length returns a random duration for a job of type typ.
func length(rng *rand.Rand, typ string) time.Duration {
	r := jobLength[typ]
	return r[0] + time.Duration(rng.Int64N(int64(r[1]-r[0])))
}

// record is one job as the demo saw it.
type record struct {
	key, typ, repo string
	prio           int
	length         time.Duration
	submitted      time.Time
	started, ended time.Time
	runs           int
	err            error
}

func (r *record) job() fairsched.Job {
	return fairsched.Job{Type: r.typ, ID: r.repo, Key: r.key, Priority: r.prio}
}

// tracker records every job, and checks as jobs start that no two run on
// one repository at a time, independently of the scheduler.
type tracker struct {
	mu      sync.Mutex
	records []*record
	holder  map[string]*record // repo -> the job running on it
	waiters map[string]int     // repo -> jobs that arrived while it was held
	ran     int
	// Counted as jobs start:
	overlaps, conflicted int
}

func newTracker() *tracker {
	return &tracker{holder: map[string]*record{}, waiters: map[string]int{}}
}

// add records a job about to be submitted.
func (t *tracker) add(key, typ, repo string, prio int, length time.Duration) *record {
	r := &record{key: key, typ: typ, repo: repo, prio: prio, length: length}
	t.mu.Lock()
	defer t.mu.Unlock()
	r.submitted = time.Now()
	if t.holder[repo] != nil {
		t.conflicted++ // it will have to wait for the holder
	}
	t.records = append(t.records, r)
	return r
}

// remove forgets a job the scheduler refused.
func (t *tracker) remove(r *record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, x := range t.records {
		if x == r {
			t.records = append(t.records[:i], t.records[i+1:]...)
			if t.holder[r.repo] != nil {
				t.conflicted--
			}
			return
		}
	}
}

// fn returns the job's function: it records the start, checks for an
// overlap, works (sleeps) and records the end.
func (t *tracker) fn(r *record) func(context.Context) error {
	return func(ctx context.Context) error {
		t.mu.Lock()
		r.runs++
		r.started = time.Now()
		if t.holder[r.repo] != nil {
			t.overlaps++
		}
		t.holder[r.repo] = r
		t.mu.Unlock()

		err := sleep(ctx, r.length)

		t.mu.Lock()
		r.ended, r.err = time.Now(), err
		if t.holder[r.repo] == r {
			delete(t.holder, r.repo)
		}
		t.ran++
		t.mu.Unlock()
		return err
	}
}

// progress returns how many jobs have run and been submitted.
func (t *tracker) progress() (ran, submitted int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ran, len(t.records)
}

// result sums up the records. Shares are measured over [from, loadEnd],
// while both organisations had work waiting.
func (t *tracker) result(start, from, loadEnd time.Time, cfg fairsched.Config) *result {
	t.mu.Lock()
	defer t.mu.Unlock()
	res := &result{Submitted: len(t.records), Overlaps: t.overlaps, RepoConflict: t.conflicted}
	waits := map[string][]time.Duration{}
	slotTime := map[string]time.Duration{}
	var bgTime time.Duration
	for _, r := range t.records {
		if r.runs > 0 {
			res.Ran++
		}
		if r.runs > 1 {
			res.RanTwice++
		}
		if r.err != nil {
			res.Failed++
		}
		if r.runs == 0 {
			continue
		}
		wait := r.started.Sub(r.submitted)
		waits[r.key] = append(waits[r.key], wait)
		if r.prio < 25 && wait > res.LongestLowWait {
			res.LongestLowWait = wait
		}
		if d := r.ended.Sub(r.started); d > res.LongestJob {
			res.LongestJob = d
		}
		if cfg.Types[r.typ].Tier == fairsched.Background {
			d := overlap(r.started, r.ended, from, loadEnd)
			slotTime[r.key] += d
			bgTime += d
		}
	}

	entitled := entitlement(t.records, from, loadEnd, cfg)

	for _, k := range []string{busyClient, lightClient, bigOrg, smallOrg} {
		kc := cfg.Keys[k]
		kr := keyResult{Key: k, Tier: fairsched.Foreground, Weight: max(kc.Weight, 1), MinSlots: kc.MinSlots, Jobs: len(waits[k])}
		if k == bigOrg || k == smallOrg {
			kr.Tier = fairsched.Background
			if bgTime > 0 {
				kr.Entitled = entitled[k] / bgTime.Seconds()
				kr.Share = float64(slotTime[k]) / float64(bgTime)
			}
		}
		kr.WaitP50, kr.WaitMax = percentile(waits[k], 0.5), percentile(waits[k], 1)
		res.Keys = append(res.Keys, kr)
	}
	return res
}

// entitlement returns the slot-seconds that the weights and reservation
// promise each organisation in [start, end]. Clients come first, so the
// background does not always have all its 6 slots; at each moment, the
// slots it does hold are divided by the library's own rule, Allocate:
// org-small's reserved slot first, the rest 3:1.
func entitlement(records []*record, start, end time.Time, cfg fairsched.Config) map[string]float64 {
	orgs := []string{bigOrg, smallOrg}
	var demands []fairsched.AllocationDemand
	for _, k := range orgs {
		kc := cfg.Keys[k]
		// Both organisations always have more work waiting than slots.
		demands = append(demands, fairsched.AllocationDemand{Weight: kc.Weight, MinSlots: kc.MinSlots, Demand: slots})
	}

	// The number of background jobs running, as a step function of time.
	type step struct {
		at    time.Time
		delta int
	}
	var steps []step
	for _, r := range records {
		if r.runs == 0 || cfg.Types[r.typ].Tier != fairsched.Background || overlap(r.started, r.ended, start, end) == 0 {
			continue
		}
		steps = append(steps, step{later(r.started, start), +1}, step{earlier(r.ended, end), -1})
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i].at.Before(steps[j].at) })

	out := map[string]float64{}
	running := 0
	for i, st := range steps {
		running += st.delta
		if i+1 == len(steps) || running <= 0 {
			continue
		}
		dt := steps[i+1].at.Sub(st.at).Seconds()
		for j, a := range fairsched.Allocate(running, demands) {
			out[orgs[j]] += a * dt
		}
	}
	return out
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// overlap returns how much of [a, b] lies within [lo, hi].
func overlap(a, b, lo, hi time.Time) time.Duration {
	if a.Before(lo) {
		a = lo
	}
	if b.After(hi) {
		b = hi
	}
	if b.Before(a) {
		return 0
	}
	return b.Sub(a)
}

// percentile returns the q-quantile of ds (nearest rank), 0 for none.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
