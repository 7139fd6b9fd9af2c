// Command httpserver shows fairsched in front of an HTTP service. Every
// request runs inside Scheduler.RunSync, keyed by the client, so a few
// slots are shared fairly between clients however hard each one pushes; a
// client that queues more than its share of requests is answered at once
// with 429 Too Many Requests and a Retry-After header instead of waiting
// in an ever longer queue. /metrics serves the scheduler's Prometheus
// metrics.
//
// With no flags it listens on a free loopback port, runs a short load test
// against itself and exits: a greedy client fires many concurrent requests
// and ignores Retry-After; a polite client sends one request at a time.
// The greedy one is held to its share and gets 429s; the polite one is
// served, quickly, every time. It prints what each client saw and a few
// lines of the /metrics scrape:
//
//	go run ./examples/httpserver
//	go run ./examples/httpserver -duration 10s
//
// With -addr it serves until interrupted instead (loopback addresses only):
//
//	go run ./examples/httpserver -addr 127.0.0.1:8080
//	curl -H 'X-Client: me' http://127.0.0.1:8080/work
//	curl http://127.0.0.1:8080/metrics
//
// The handler only sleeps; the point is who gets served.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedhttp"
	"github.com/fairsched/fairsched/fairschedprom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// config sets the server's limits and the shape of the load run. Tests use
// a shorter one.
type config struct {
	Addr     string        // serve on this loopback address until interrupted; "" runs the load test
	Duration time.Duration // how long the load test sends requests

	Slots      int           // requests handled at once (MaxConcurrency)
	MaxPending int           // requests one client may have waiting; past it, 429
	Work       time.Duration // how long one request takes to handle

	GreedyWorkers  int           // concurrent requests of the greedy client
	GreedyPause    time.Duration // how long it waits after a 429 (it ignores Retry-After)
	PoliteInterval time.Duration // pause between the polite client's requests
	MaxRequests    int64         // requests per client at most, whatever the duration
}

func defaultConfig() config {
	return config{
		Duration:       2 * time.Second,
		Slots:          4,
		MaxPending:     4,
		Work:           10 * time.Millisecond,
		GreedyWorkers:  24,
		GreedyPause:    5 * time.Millisecond,
		PoliteInterval: 20 * time.Millisecond,
		MaxRequests:    50_000,
	}
}

// maxDuration bounds a load run: this is a demonstration, not a soak test.
const maxDuration = 5 * time.Minute

func main() {
	cfg := defaultConfig()
	flag.StringVar(&cfg.Addr, "addr", "", "serve on this loopback address (e.g. 127.0.0.1:8080) until interrupted, instead of running the load test")
	flag.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long the load test sends requests (at most 5m)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if _, err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "httpserver:", err)
		os.Exit(1)
	}
}

// clientStats is what one client of the load test saw.
type clientStats struct {
	Name       string
	Requests   int
	OK         int           // 200 answers
	TooMany    int           // 429 answers
	RetryAfter int           // of those, how many carried a Retry-After header
	Other      int           // any other answer, or a transport error
	P50, P99   time.Duration // latency of the 200 answers
}

// summary is the outcome of a load run.
type summary struct {
	Clients []clientStats
	// Busy is a /metrics scrape taken halfway through the run, while both
	// clients have work queued; Final is one taken after it.
	Busy, Final string
}

func (s summary) client(name string) clientStats {
	for _, c := range s.Clients {
		if c.Name == name {
			return c
		}
	}
	return clientStats{Name: name}
}

// run starts the server, then either serves until ctx ends (cfg.Addr set)
// or runs the load test against it, and shuts down gracefully: the HTTP
// server first, so that no new request arrives, then the scheduler, once
// the requests in flight have finished.
func run(ctx context.Context, cfg config, w io.Writer) (summary, error) {
	serve := cfg.Addr != ""
	addr := cfg.Addr
	if !serve {
		addr = "127.0.0.1:0"
		if cfg.Duration <= 0 || cfg.Duration > maxDuration {
			return summary{}, fmt.Errorf("duration %v is out of range: it must be positive and at most %v", cfg.Duration, maxDuration)
		}
	}
	if err := checkLoopback(addr); err != nil {
		return summary{}, err
	}

	sched, err := fairsched.New(fairsched.Config{
		MaxConcurrency: cfg.Slots,
		// The queue as a whole is bounded too; per client, MaxPending
		// refuses a client's excess long before this is reached.
		MaxQueue: 64 * cfg.Slots,
		// DefaultCost is what a request is expected to cost before the
		// scheduler has measured any: close to the truth, it makes shares
		// fair from the first request on. (The default, one second, would
		// overcharge the first requests and delay a newcomer until the
		// estimates catch up.)
		Types: map[string]fairsched.TypeConfig{
			"request": {Tier: fairsched.Foreground, DefaultCost: cfg.Work},
		},
		DefaultKey: fairsched.KeyConfig{MaxPending: cfg.MaxPending},
		// Configured keys get series of their own in /metrics; every other
		// key (any client address) is summed up, so clients cannot grow
		// the number of series.
		Keys: map[string]fairsched.KeyConfig{
			"greedy": {MaxPending: cfg.MaxPending},
			"polite": {MaxPending: cfg.MaxPending},
		},
	})
	if err != nil {
		return summary{}, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(fairschedprom.NewCollector(sched))

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		sched.Close()
		return summary{}, err
	}
	// The admin page, open to this machine only: the example listens on
	// localhost and has no proxy in front (behind one, every request
	// would come from loopback; check the proxy's identity header then).
	// Close stops the sampling of its charts.
	admin := fairschedhttp.Admin(sched, fairschedhttp.AdminOptions{Authorize: fairschedhttp.LoopbackOnly})
	defer admin.Close()
	srv := &http.Server{
		Handler:           newHandler(sched, reg, cfg.Work, admin),
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          log.New(w, "httpserver: ", 0),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()

	var sum summary
	var runErr error
	if serve {
		fmt.Fprintf(w, "serving on %s: /work (key: X-Client header, else client address) and /metrics; interrupt to stop\n", base)
		select {
		case <-ctx.Done():
		case runErr = <-served:
		}
	} else {
		fmt.Fprintf(w, "load test against %s for %v: %d slots, at most %d waiting requests per client\n\n",
			base, cfg.Duration, cfg.Slots, cfg.MaxPending)
		sum, runErr = loadTest(ctx, base, cfg)
		if runErr == nil {
			report(w, sum)
		}
	}

	// Graceful shutdown, bounded in time.
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		runErr = errors.Join(runErr, fmt.Errorf("shutting down the HTTP server: %w", err))
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		runErr = errors.Join(runErr, err)
	}
	if err := sched.Shutdown(sctx); err != nil {
		sched.Close()
		runErr = errors.Join(runErr, fmt.Errorf("shutting down the scheduler: %w", err))
	}
	return sum, runErr
}

// checkLoopback refuses any address but a loopback one: this example is
// not meant to be reachable from other machines.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("address %q is not a loopback address; use 127.0.0.1, [::1] or localhost", addr)
}

// newHandler routes /work through the scheduler, serves /metrics from
// reg and the admin page under /admin/. Only the work is scheduled: a
// scrape must not wait behind the very load it is meant to show, nor the
// admin page behind the load it is opened to look at.
func newHandler(s *fairsched.Scheduler, reg *prometheus.Registry, work time.Duration, admin http.Handler) http.Handler {
	mux := http.NewServeMux()
	// fairschedhttp runs each request inside s.RunSync, keyed by the
	// client: a full queue (or the client's MaxPending) answers 429 with
	// Retry-After, the wait the request would have had; a closing
	// scheduler 503; a client that hangs up leaves the queue at once.
	mux.Handle("GET /work", fairschedhttp.Middleware(s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := time.NewTimer(work)
		defer t.Stop()
		select {
		case <-t.C:
			fmt.Fprintln(w, "done")
		case <-r.Context().Done():
		}
	}), fairschedhttp.Options{
		Key: clientKey,
		Job: func(*http.Request) fairsched.Job { return fairsched.Job{Type: "request"} },
	}))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/admin/", http.StripPrefix("/admin", admin))
	return mux
}

// clientKey is the fairness key of a request: the X-Client header if set,
// else the client's IP address. The header lets the load test, whose
// clients share 127.0.0.1, pose as several clients. A real service must
// not trust a header the client chooses: key by an authenticated identity,
// or by the address a trusted proxy reports.
func clientKey(r *http.Request) string {
	if c := r.Header.Get("X-Client"); c != "" {
		return c
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// loadTest runs the greedy and the polite client against base for
// cfg.Duration (or until ctx ends), scraping /metrics halfway and at the
// end.
func loadTest(ctx context.Context, base string, cfg config) (summary, error) {
	transport := &http.Transport{MaxIdleConnsPerHost: cfg.GreedyWorkers + 1}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 10 * time.Second}

	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()

	greedy := &recorder{name: "greedy", max: cfg.MaxRequests}
	polite := &recorder{name: "polite", max: cfg.MaxRequests}
	var wg sync.WaitGroup
	for range cfg.GreedyWorkers {
		wg.Go(func() {
			for greedy.next(ctx) {
				if code := greedy.do(ctx, client, base); code == http.StatusTooManyRequests {
					pause(ctx, cfg.GreedyPause)
				}
			}
		})
	}
	wg.Go(func() {
		for polite.next(ctx) {
			polite.do(ctx, client, base)
			pause(ctx, cfg.PoliteInterval)
		}
	})

	var sum summary
	var busyErr error
	wg.Go(func() {
		pause(ctx, cfg.Duration/2)
		sum.Busy, busyErr = scrape(client, base)
	})
	wg.Wait()

	final, err := scrape(client, base)
	if err != nil {
		return summary{}, err
	}
	if busyErr != nil {
		return summary{}, busyErr
	}
	sum.Final = final
	sum.Clients = []clientStats{greedy.stats(), polite.stats()}
	return sum, nil
}

// pause waits for d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// recorder counts one client's requests and answers.
type recorder struct {
	name string
	max  int64
	sent atomic.Int64

	mu        sync.Mutex
	st        clientStats
	latencies []time.Duration // of 200 answers
}

// next reports whether the client may send another request: the run is
// on and the client is under its request budget.
func (r *recorder) next(ctx context.Context) bool {
	return ctx.Err() == nil && r.sent.Add(1) <= r.max
}

// do sends one request and records the answer; it returns the status
// code, or 0 if there was none.
func (r *recorder) do(ctx context.Context, c *http.Client, base string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/work", nil)
	if err != nil {
		panic(err) // the URL is ours
	}
	req.Header.Set("X-Client", r.name)
	start := time.Now()
	resp, err := c.Do(req)
	code := 0
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		code = resp.StatusCode
	}
	took := time.Since(start)
	if ctx.Err() != nil && code == 0 {
		return 0 // cut off by the end of the run: not an answer
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.Requests++
	switch code {
	case http.StatusOK:
		r.st.OK++
		r.latencies = append(r.latencies, took)
	case http.StatusTooManyRequests:
		r.st.TooMany++
		if resp.Header.Get("Retry-After") != "" {
			r.st.RetryAfter++
		}
	default:
		r.st.Other++
	}
	return code
}

func (r *recorder) stats() clientStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.st
	st.Name = r.name
	slices.Sort(r.latencies)
	st.P50, st.P99 = percentile(r.latencies, 0.50), percentile(r.latencies, 0.99)
	return st
}

// percentile returns the q-quantile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

// scrape fetches base/metrics. It is not tied to the load run's context,
// so that the final scrape works after the run has ended.
func scrape(c *http.Client, base string) (string, error) {
	resp, err := c.Get(base + "/metrics")
	if err != nil {
		return "", fmt.Errorf("scraping /metrics: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("scraping /metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("scraping /metrics: %s", resp.Status)
	}
	return string(b), nil
}

// report prints what each client saw and excerpts of the scrapes.
func report(w io.Writer, s summary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\trequests\t200\t429\tother\tp50 (200s)\tp99 (200s)\t")
	for _, c := range s.Clients {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%v\t%v\t\n", c.Name, c.Requests, c.OK, c.TooMany, c.Other,
			c.P50.Round(100*time.Microsecond), c.P99.Round(100*time.Microsecond))
	}
	tw.Flush()

	fmt.Fprintln(w, "\n/metrics halfway through, per client:")
	excerpt(w, s.Busy, "fairsched_key_allocation_slots", "fairsched_key_running_jobs", "fairsched_key_queued_jobs")
	fmt.Fprintln(w, "\n/metrics after the run:")
	excerpt(w, s.Final, "fairsched_jobs_started_total", "fairsched_jobs_rejected_total",
		"fairsched_jobs_finished_total", "fairsched_queue_wait_seconds_count", "fairsched_queue_wait_seconds_sum")
}

// excerpt prints the sample lines of the named metrics of the request type.
func excerpt(w io.Writer, scrape string, names ...string) {
	for line := range strings.Lines(scrape) {
		if strings.HasPrefix(line, "#") {
			continue
		}
		for _, n := range names {
			if strings.HasPrefix(line, n+"{") || strings.HasPrefix(line, n+" ") {
				if !strings.Contains(line, `type=""`) && !strings.Contains(line, `key=""`) {
					fmt.Fprint(w, "  ", line)
				}
				break
			}
		}
	}
}
