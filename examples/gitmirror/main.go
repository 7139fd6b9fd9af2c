// Command gitmirror runs a git mirror service in miniature on fairsched:
// clients clone repositories through RunSync, one call per request, while
// the mirror repacks and pulls them in the background through Submit.
//
// Clones, repacks and pulls share the conflict group "git", so at most one
// of them touches a repository at a time: a clone never reads a repository
// that is being repacked, and no lock is taken outside the scheduler. One
// client opening dozens of clones at once gets its fair share of the
// slots, not all of them: the other clients' clones still start quickly.
//
//	go run ./examples/gitmirror
//	go run ./examples/gitmirror -duration 20s -burst 60
//
// The jobs only sleep, for a time that depends on the repository's size.
package main

import (
	"context"
	"errors"
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
	Duration time.Duration // how long requests and maintenance keep arriving
	Burst    int           // clones the CI runner opens at once, twice per run
	Seed     uint64
}

func defaultOptions() options {
	return options{Duration: 5 * time.Second, Burst: 24, Seed: 1}
}

func main() {
	opts := defaultOptions()
	flag.DurationVar(&opts.Duration, "duration", opts.Duration, "how long work keeps arriving")
	flag.IntVar(&opts.Burst, "burst", opts.Burst, "clones the CI runner opens at once")
	flag.Uint64Var(&opts.Seed, "seed", opts.Seed, "seed of the request mix")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if _, err := run(ctx, opts, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gitmirror:", err)
		os.Exit(1)
	}
}

// The service's job types: clones in the foreground, git maintenance in the background.
const (
	typeClone  = "sync-clone"
	typeRepack = "repack"
	typePull   = "pull"
	groupGit   = "git"
)

// repos are the mirrored repositories and how long a clone of each takes;
// a repack takes 1.5 times as long and a pull half as long. The CI runner
// clones them all, developers the last smallRepos.
var repos = []struct {
	name  string
	clone time.Duration
}{
	{"linux", 500 * time.Millisecond},
	{"kubernetes", 400 * time.Millisecond},
	{"rust", 300 * time.Millisecond},
	{"go", 200 * time.Millisecond},
	{"curl", 120 * time.Millisecond},
	{"git", 100 * time.Millisecond},
	{"redis", 100 * time.Millisecond},
	{"sqlite", 80 * time.Millisecond},
}

const smallRepos = 4

// maxPending is how many clones a client may have queued.
const maxPending = 32

// The clients, by the address a service would use as the fairness key.
const (
	ciRunner = "ci-runner"
	alice    = "alice"
	bob      = "bob"
)

// config is the mirror's scheduler: 6 slots, background work in at most 2
// of them, and the three job types in one conflict group.
func config() fairsched.Config {
	return fairsched.Config{
		MaxConcurrency: 6,
		TierLimits:     map[fairsched.Tier]int{fairsched.Background: 2},
		Types: map[string]fairsched.TypeConfig{
			typeClone:  {Tier: fairsched.Foreground, ConflictGroup: groupGit, DefaultCost: 200 * time.Millisecond},
			typeRepack: {Tier: fairsched.Background, ConflictGroup: groupGit, DefaultCost: 400 * time.Millisecond, MaxConcurrency: 1},
			typePull:   {Tier: fairsched.Background, ConflictGroup: groupGit, DefaultCost: 200 * time.Millisecond, MaxConcurrency: 2},
		},
		// A client with this many clones queued is told to come back
		// later: RunSync fails at once with ErrQueueFull, which a service
		// answers with HTTP 429 and Retry-After. Try -burst 60.
		DefaultKey: fairsched.KeyConfig{MaxPending: maxPending},
	}
}

// result is what a run measured; the tests check it.
type result struct {
	Submitted, Ran int
	Failed         int
	// Overlaps counts pairs of jobs on one repository whose run times
	// overlapped, by pairName ("repack/sync-clone" and so on). It must be
	// empty.
	Overlaps map[string]int
	// Waited counts jobs that arrived while another job held their
	// repository, so the conflict group made them wait.
	Waited  int
	Clients []waits // one per client, then the background
	// LongestJob is the longest a job held its slot.
	LongestJob time.Duration
}

// waits sums up the queue waits of one client (or of the background).
type waits struct {
	Key           string
	Jobs          int
	P50, P95, Max time.Duration
	SlotTime      time.Duration // time its jobs held slots
	RepoBusyWaits int           // jobs that arrived while their repo was busy
	Rejected      int           // requests refused with ErrQueueFull (HTTP 429)
}

// run runs the service, writing to w, and returns what it measured.
// Every goroutine it starts has ended when it returns.
func run(ctx context.Context, opts options, w io.Writer) (*result, error) {
	s, err := fairsched.New(config())
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "gitmirror: a git mirror in miniature on fairsched, 6 slots.\n")
	fmt.Fprintf(w, "  Clients clone through RunSync (foreground, fair per client); the mirror repacks and pulls\n")
	fmt.Fprintf(w, "  through Submit (background, at most 2 slots). Conflict group %q: one job per repo at a time.\n", groupGit)
	fmt.Fprintf(w, "  %s opens %d clones of any repo at once, twice; %s and %s clone small repos one at a time.\n\n",
		ciRunner, opts.Burst, alice, bob)

	tr := &tracker{busy: map[string]*record{}}
	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	// wait sleeps for d, reporting false if the run is stopping.
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-stop:
			return false
		case <-ctx.Done():
			return false
		}
	}
	// clone is one client request: a clone through RunSync.
	clone := func(client, repo string, d time.Duration) {
		rec := tr.add(client, typeClone, repo, d)
		err := s.RunSync(ctx, fairsched.Job{Type: typeClone, ID: repo, Key: client}, tr.fn(rec))
		switch {
		case errors.Is(err, fairsched.ErrQueueFull):
			tr.reject(rec) // 429 Too Many Requests
		case err != nil && ctx.Err() == nil:
			fail(err)
		}
	}

	// The CI runner: a burst of clones over every repository, twice.
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(opts.Seed, 1))
		for _, at := range []time.Duration{opts.Duration / 10, opts.Duration * 5 / 10} {
			if !wait(at - time.Since(start)) {
				return
			}
			for i := range opts.Burst {
				r := repos[i%len(repos)]
				d := jitter(rng, r.clone)
				wg.Add(1)
				go func() {
					defer wg.Done()
					clone(ciRunner, r.name, d)
				}()
			}
		}
	}()

	// Developers: one clone of a small repository at a time, a short
	// pause in between.
	small := repos[len(repos)-smallRepos:]
	for i, dev := range []struct {
		key   string
		pause time.Duration
	}{{alice, 150 * time.Millisecond}, {bob, 300 * time.Millisecond}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(opts.Seed, uint64(10+i)))
			for wait(jitter(rng, dev.pause)) {
				r := small[rng.IntN(len(small))]
				clone(dev.key, r.name, jitter(rng, r.clone))
			}
		}()
	}

	// Maintenance: a pull of some repository every 150ms and a repack of
	// the next one in turn every 500ms, fire and forget. Background jobs
	// carry no fairness key.
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(opts.Seed, 20))
		for n := 0; wait(150 * time.Millisecond); n++ {
			r := repos[rng.IntN(len(repos))]
			submit := func(typ string, d time.Duration) {
				rec := tr.add("", typ, r.name, d)
				if _, err := s.Submit(ctx, fairsched.Job{Type: typ, ID: r.name}, tr.fn(rec)); err != nil {
					tr.forget(rec)
					fail(err)
				}
			}
			submit(typePull, jitter(rng, r.clone/2))
			if n%3 == 2 {
				r = repos[(n/3)%len(repos)]
				submit(typeRepack, jitter(rng, r.clone*3/2))
			}
		}
	}()

	// Stop taking work after opts.Duration, then let the queue drain.
	wait(opts.Duration)
	close(stop)
	wg.Wait()
	if ctx.Err() != nil {
		s.Close()
		return nil, ctx.Err()
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("the queue did not drain: %w", err)
	}
	if firstErr != nil {
		return nil, firstErr
	}

	res := tr.result()
	report(w, tr, res, start, time.Now())
	return res, nil
}

// jitter returns d give or take 20%.
func jitter(rng *rand.Rand, d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rng.Float64()))
}

// report prints a timeline of every repository, the clients' waits and
// the conflict check.
func report(w io.Writer, tr *tracker, r *result, start, end time.Time) {
	const columns = 60
	step := (end.Sub(start) / columns).Round(10 * time.Millisecond)
	if step <= 0 {
		step = 10 * time.Millisecond
	}
	fmt.Fprintf(w, "What ran on each repository, one column per %v (Ccc clone, Rrr repack, Ppp pull, . idle):\n", step)
	for _, repo := range repos {
		fmt.Fprintf(w, "  %-10s %s\n", repo.name, tr.timeline(repo.name, start, step, columns))
	}

	fmt.Fprintf(w, "\nQueue waits, from request to start:\n")
	fmt.Fprintf(w, "  %-12s %5s %9s %9s %9s %10s  %-9s %s\n", "client", "jobs", "wait p50", "p95", "max", "slot-time", "repo busy", "429s")
	for _, c := range r.Clients {
		name := c.Key
		if name == "" {
			name = "(background)"
		}
		fmt.Fprintf(w, "  %-12s %5d %9s %9s %9s %10s  %9d %4d\n", name, c.Jobs, round(c.P50), round(c.P95), round(c.Max),
			round(c.SlotTime), c.RepoBusyWaits, c.Rejected)
	}
	fmt.Fprintf(w, "  Clients share the slots fairly: %s's bursts wait behind its own clones, while %s\n", ciRunner, alice)
	fmt.Fprintf(w, "  and %s go next when a slot frees (their longer waits are for a busy repo). Background\n", bob)
	fmt.Fprintf(w, "  work waits for the clones: the foreground tier goes first. \"repo busy\": jobs that found\n")
	fmt.Fprintf(w, "  their repo in use when they arrived; \"429s\": clones refused, past %d queued per client.\n\n", maxPending)

	fmt.Fprintf(w, "Conflict group %q: %d jobs found their repository busy and waited without holding a slot.\n", groupGit, r.Waited)
	fmt.Fprintf(w, "  Pairs of jobs that ran at the same time on one repository, checked pair by pair:\n   ")
	total := 0
	types := []string{typeClone, typeRepack, typePull}
	for i, a := range types {
		for _, b := range types[i:] {
			n := r.Overlaps[pairName(a, b)]
			total += n
			fmt.Fprintf(w, " %s+%s %d,", strings.TrimPrefix(a, "sync-"), strings.TrimPrefix(b, "sync-"), n)
		}
	}
	verdict := "ok"
	if total > 0 {
		verdict = "FAILED"
	}
	fmt.Fprintf(w, " in all %d: %s\n", total, verdict)
	fmt.Fprintf(w, "  %d jobs submitted, %d ran, %d failed.\n", r.Submitted, r.Ran, r.Failed)
}

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

// record is one job as the service saw it.
type record struct {
	key, typ, repo string
	length         time.Duration
	submitted      time.Time
	started, ended time.Time
	busyOnArrival  string // the type of the job holding the repo when it arrived
	runs           int
	err            error
}

// tracker records every job. It knows which job holds each repository,
// independently of the scheduler, to see whether a job arrives at a busy
// repository.
type tracker struct {
	mu       sync.Mutex
	records  []*record
	busy     map[string]*record // repo -> the job running on it
	rejected map[string]int     // client -> requests refused
}

func (t *tracker) add(key, typ, repo string, length time.Duration) *record {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := &record{key: key, typ: typ, repo: repo, length: length, submitted: time.Now()}
	if h := t.busy[repo]; h != nil {
		r.busyOnArrival = h.typ
	}
	t.records = append(t.records, r)
	return r
}

// forget drops a record of a job the scheduler refused.
func (t *tracker) forget(r *record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, x := range t.records {
		if x == r {
			t.records = append(t.records[:i], t.records[i+1:]...)
			return
		}
	}
}

// reject notes a request refused with ErrQueueFull.
func (t *tracker) reject(r *record) {
	t.forget(r)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rejected == nil {
		t.rejected = map[string]int{}
	}
	t.rejected[r.key]++
}

// fn returns the job's function: it records when the job held the repo.
func (t *tracker) fn(r *record) func(context.Context) error {
	return func(ctx context.Context) error {
		t.mu.Lock()
		r.runs++
		r.started = time.Now()
		t.busy[r.repo] = r
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
		if t.busy[r.repo] == r {
			delete(t.busy, r.repo)
		}
		t.mu.Unlock()
		return err
	}
}

// timeline draws what ran on repo, one character per step: the job that
// held the repository for most of the step, in capitals where a job
// starts, so that back-to-back jobs of one type stay apart.
func (t *tracker) timeline(repo string, start time.Time, step time.Duration, columns int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	letter := map[string]byte{typeClone: 'c', typeRepack: 'r', typePull: 'p'}
	best := make([]time.Duration, columns)
	line := []byte(strings.Repeat(".", columns))
	for _, r := range t.records {
		if r.repo != repo || r.runs == 0 {
			continue
		}
		first := true
		for i := int(r.started.Sub(start) / step); i < columns && start.Add(time.Duration(i)*step).Before(r.ended); i++ {
			lo, hi := start.Add(time.Duration(i)*step), start.Add(time.Duration(i+1)*step)
			if d := earlier(hi, r.ended).Sub(later(lo, r.started)); d > best[i] {
				best[i], line[i] = d, letter[r.typ]
				if first {
					line[i] -= 'a' - 'A'
				}
				first = false
			}
		}
	}
	return string(line)
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

// result sums up the records and checks, pair by pair, that no two jobs
// ran on one repository at the same time.
func (t *tracker) result() *result {
	t.mu.Lock()
	defer t.mu.Unlock()
	res := &result{Submitted: len(t.records), Overlaps: map[string]int{}}
	byRepo := map[string][]*record{}
	byKey := map[string][]*record{}
	for _, r := range t.records {
		if r.runs == 0 {
			continue
		}
		res.Ran++
		if r.err != nil {
			res.Failed++
		}
		if r.busyOnArrival != "" {
			res.Waited++
		}
		if d := r.ended.Sub(r.started); d > res.LongestJob {
			res.LongestJob = d
		}
		byRepo[r.repo] = append(byRepo[r.repo], r)
		byKey[r.key] = append(byKey[r.key], r)
	}
	for _, rs := range byRepo {
		for i, a := range rs {
			for _, b := range rs[i+1:] {
				if a.started.Before(b.ended) && b.started.Before(a.ended) {
					res.Overlaps[pairName(a.typ, b.typ)]++
				}
			}
		}
	}
	for _, key := range []string{ciRunner, alice, bob, ""} {
		rs := byKey[key]
		c := waits{Key: key, Jobs: len(rs), Rejected: t.rejected[key]}
		var ws []time.Duration
		for _, r := range rs {
			ws = append(ws, r.started.Sub(r.submitted))
			c.SlotTime += r.ended.Sub(r.started)
			if r.busyOnArrival != "" {
				c.RepoBusyWaits++
			}
		}
		sort.Slice(ws, func(i, j int) bool { return ws[i] < ws[j] })
		c.P50, c.P95, c.Max = quantile(ws, 0.5), quantile(ws, 0.95), quantile(ws, 1)
		res.Clients = append(res.Clients, c)
	}
	return res
}

// pairName names a pair of job types, in either order: "repack/sync-clone".
func pairName(a, b string) string {
	if a > b {
		a, b = b, a
	}
	return a + "/" + b
}

// quantile returns the q-quantile of sorted durations (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
