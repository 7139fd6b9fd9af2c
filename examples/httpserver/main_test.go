package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedhttp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
)

// TestMain fails the tests if a goroutine outlives them: the server, the
// scheduler and the load test's clients must all be shut down.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestLoadRun runs the built-in load test briefly and checks what the
// example claims: the greedy client is refused with 429 and Retry-After,
// the polite one is always served, and /metrics shows the scheduler.
func TestLoadRun(t *testing.T) {
	cfg := defaultConfig()
	cfg.Duration = 500 * time.Millisecond
	var out strings.Builder
	sum, err := run(context.Background(), cfg, &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Logf("\n%s", out.String())

	greedy, polite := sum.client("greedy"), sum.client("polite")
	if greedy.TooMany == 0 {
		t.Errorf("greedy client got no 429: %+v", greedy)
	}
	if greedy.RetryAfter != greedy.TooMany {
		t.Errorf("greedy client: %d of %d 429s carried Retry-After", greedy.RetryAfter, greedy.TooMany)
	}
	if greedy.OK == 0 {
		t.Errorf("greedy client was never served: %+v", greedy)
	}
	if polite.Requests == 0 || polite.OK != polite.Requests {
		t.Errorf("polite client: %d requests, %d answered 200, want all: %+v", polite.Requests, polite.OK, polite)
	}
	if !strings.Contains(sum.Final, "fairsched_jobs_started_total") {
		t.Errorf("/metrics lacks fairsched_jobs_started_total:\n%s", sum.Final)
	}
	for _, want := range []string{"greedy", "polite", "fairsched_jobs_started_total{"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report does not mention %q", want)
		}
	}
}

// TestQueueFullIs429 fills one client's pending limit and checks that its
// next request is refused at once with 429 and Retry-After, while the
// scheduler changes nothing.
func TestQueueFullIs429(t *testing.T) {
	s, err := fairsched.New(fairsched.Config{
		MaxConcurrency: 1,
		Types:          map[string]fairsched.TypeConfig{"request": {Tier: fairsched.Foreground}},
		DefaultKey:     fairsched.KeyConfig{MaxPending: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	admin := fairschedhttp.Admin(s, fairschedhttp.AdminOptions{Authorize: fairschedhttp.LoopbackOnly})
	t.Cleanup(func() { admin.Close() })
	h := newHandler(s, prometheus.NewRegistry(), time.Millisecond, admin)

	// One job of client "c" holds the only slot, another waits.
	release := make(chan struct{})
	block := func(ctx context.Context) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
	job := fairsched.Job{Type: "request", Key: "c"}
	running, err := s.Submit(context.Background(), job, block)
	if err != nil {
		t.Fatal(err)
	}
	waiting, err := s.Submit(context.Background(), job, block)
	if err != nil {
		t.Fatal(err)
	}

	req := httptest.NewRequest(http.MethodGet, "/work", nil)
	req.Header.Set("X-Client", "c")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusTooManyRequests {
		t.Errorf("status %d, want 429", rec.Code)
	}
	if rec.Header().Get("Retry-After") == "" {
		t.Error("429 without a Retry-After header")
	}
	if st := s.Stats(); st.Queued != 1 || st.Rejected != 1 {
		t.Errorf("after the refusal: %d queued, %d rejected; want 1 and 1", st.Queued, st.Rejected)
	}

	close(release)
	<-running.Done()
	<-waiting.Done()

	// With the queue drained the same client is served.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Errorf("after draining: status %d, want 200", rec.Code)
	}
}

// lineWriter passes each line written to it to a channel.
type lineWriter struct{ lines chan string }

func (w lineWriter) Write(p []byte) (int, error) {
	sc := bufio.NewScanner(strings.NewReader(string(p)))
	for sc.Scan() {
		select {
		case w.lines <- sc.Text():
		default: // nobody listening any more
		}
	}
	return len(p), nil
}

// TestServeUntilCancelled runs the -addr mode: it serves /work and
// /metrics until its context ends, then shuts down cleanly.
func TestServeUntilCancelled(t *testing.T) {
	cfg := defaultConfig()
	cfg.Addr = "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := lineWriter{make(chan string, 16)}
	done := make(chan error, 1)
	go func() {
		_, err := run(ctx, cfg, w)
		done <- err
	}()

	var base string
	select {
	case line := <-w.lines:
		// "serving on http://127.0.0.1:PORT: /work ..."
		_, rest, ok := strings.Cut(line, "serving on ")
		base, _, _ = strings.Cut(rest, ": ")
		if !ok || !strings.HasPrefix(base, "http://127.0.0.1:") {
			t.Fatalf("unexpected first line %q", line)
		}
	case err := <-done:
		t.Fatalf("run ended before serving: %v", err)
	}

	client := &http.Client{Transport: &http.Transport{}}
	defer client.Transport.(*http.Transport).CloseIdleConnections()
	get := func(path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Header.Set("X-Client", "tester")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/work"); code != http.StatusOK {
		t.Errorf("/work: status %d", code)
	}
	code, body := get("/metrics")
	if code != http.StatusOK || !strings.Contains(body, `fairsched_jobs_started_total{tier="foreground",type="request"} 1`) {
		t.Errorf("/metrics: status %d, body:\n%s", code, body)
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}

func TestOnlyLoopback(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "127.1.2.3:8080", "[::1]:0", "localhost:0"} {
		if err := checkLoopback(addr); err != nil {
			t.Errorf("checkLoopback(%q): %v", addr, err)
		}
	}
	for _, addr := range []string{":8080", "0.0.0.0:0", "[::]:0", "10.0.0.1:80", "192.168.1.1:0", "example.com:80", "127.0.0.1"} {
		if err := checkLoopback(addr); err == nil {
			t.Errorf("checkLoopback(%q): no error", addr)
		}
	}

	cfg := defaultConfig()
	cfg.Addr = "0.0.0.0:0"
	if _, err := run(context.Background(), cfg, io.Discard); err == nil {
		t.Error("run on 0.0.0.0: no error")
	}
	cfg = defaultConfig()
	cfg.Duration = time.Hour
	if _, err := run(context.Background(), cfg, io.Discard); err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("run for an hour: got %v, want a refusal", err)
	}
}
