package fairschedhttp

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fairsched/fairsched"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// harness is a scheduler whose submissions are signalled, and a handler
// that holds each request until released.
type harness struct {
	s         *fairsched.Scheduler
	submitted chan uint64 // a job was queued or started
	entered   chan string // a request reached the handler: its path
	release   chan struct{}
}

func newHarness(t *testing.T, cfg fairsched.Config) *harness {
	t.Helper()
	h := &harness{submitted: make(chan uint64, 1024), entered: make(chan string, 1024), release: make(chan struct{})}
	cfg.OnEvent = func(ev fairsched.Event) {
		if ev.Kind == fairsched.EventSubmitted {
			h.submitted <- ev.Seq
		}
	}
	s, err := fairsched.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	t.Cleanup(func() { s.Close() })
	return h
}

// holding answers "ok" once released.
func (h *harness) holding() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.entered <- r.URL.Path
		select {
		case <-h.release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "ok")
	})
}

// serve runs req through handler on a goroutine; the recorder arrives on
// the channel when the handler returns.
func serve(handler http.Handler, req *http.Request) <-chan *httptest.ResponseRecorder {
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		done <- rec
	}()
	return done
}

func TestMiddlewareServes(t *testing.T) {
	h := newHarness(t, fairsched.Config{MaxConcurrency: 2})
	handler := Middleware(h.s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	}), Options{})
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 200 || rec.Body.String() != "hello" {
		t.Fatalf("got %d %q", rec.Code, rec.Body.String())
	}
}

// A full queue answers 429 with Retry-After: the wait the request would
// have had, in whole seconds, which grows with the queue ahead of it.
func TestMiddlewareFullQueue(t *testing.T) {
	retryAfter := func(queued int) int {
		h := newHarness(t, fairsched.Config{MaxConcurrency: 1, MaxQueue: queued,
			Types: map[string]fairsched.TypeConfig{RequestType: {Tier: fairsched.Foreground, DefaultCost: 2 * time.Second}}})
		handler := Middleware(h.s, h.holding(), Options{})
		var waiting []<-chan *httptest.ResponseRecorder
		for range queued + 1 { // one runs, the others wait
			waiting = append(waiting, serve(handler, httptest.NewRequest("GET", "/", nil)))
			<-h.submitted
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if rec.Code != http.StatusTooManyRequests {
			t.Fatalf("with %d queued: status %d, want 429", queued, rec.Code)
		}
		ra, err := strconv.Atoi(rec.Header().Get("Retry-After"))
		if err != nil || ra < 1 {
			t.Fatalf("with %d queued: Retry-After %q", queued, rec.Header().Get("Retry-After"))
		}
		close(h.release)
		for _, w := range waiting {
			if rec := <-w; rec.Code != 200 {
				t.Errorf("a request admitted ended %d", rec.Code)
			}
		}
		return ra
	}
	short, long := retryAfter(2), retryAfter(6)
	t.Logf("Retry-After: %d s with 2 queued, %d s with 6", short, long)
	// Each queued request is 2 s of work for the one slot, and the running
	// one has half of its 2 s left, on average: 2×2+1 and 6×2+1.
	if short != 5 || long != 13 {
		t.Errorf("Retry-After %d and %d, want 5 and 13", short, long)
	}
}

// A closing scheduler answers 503; exempt requests bypass it.
func TestMiddlewareClosingAndExempt(t *testing.T) {
	h := newHarness(t, fairsched.Config{})
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	handler := Middleware(h.s, ok, Options{Exempt: func(r *http.Request) bool { return r.URL.Path == "/healthz" }})
	h.s.Close()
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/work", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("closed: status %d, want 503", rec.Code)
	}
	rec = httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != 200 {
		t.Errorf("exempt: status %d, want 200", rec.Code)
	}
}

// A client that goes away while its request waits leaves the queue at
// once, and nothing is written.
func TestMiddlewareClientGone(t *testing.T) {
	h := newHarness(t, fairsched.Config{MaxConcurrency: 1})
	handler := Middleware(h.s, h.holding(), Options{})
	first := serve(handler, httptest.NewRequest("GET", "/first", nil))
	<-h.entered
	ctx, cancel := context.WithCancel(context.Background())
	gone := serve(handler, httptest.NewRequest("GET", "/gone", nil).WithContext(ctx))
	<-h.submitted
	<-h.submitted
	cancel()
	rec := <-gone
	if rec.Code != 200 || rec.Body.Len() != 0 || len(rec.Header()) != 0 || rec.Flushed {
		t.Errorf("something was written: %d %q %v", rec.Code, rec.Body.String(), rec.Header())
	}
	if st := h.s.Stats(); st.Queued != 0 || st.Cancelled != 1 {
		t.Errorf("queued %d, cancelled %d: the request did not leave the queue", st.Queued, st.Cancelled)
	}
	close(h.release)
	if rec := <-first; rec.Code != 200 {
		t.Errorf("first: %d", rec.Code)
	}
}

// A handler that panics releases its slot; its client gets a 500 without
// the stack, unless the handler had written its header already; a panic
// with http.ErrAbortHandler goes on to net/http.
func TestMiddlewarePanic(t *testing.T) {
	h := newHarness(t, fairsched.Config{MaxConcurrency: 1})
	var reported []string
	handler := Middleware(h.s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/late":
			w.WriteHeader(http.StatusAccepted)
		case "/abort":
			panic(http.ErrAbortHandler)
		}
		panic("boom in " + r.URL.Path)
	}), Options{OnPanic: func(r *http.Request, p *fairsched.PanicError) { reported = append(reported, p.Value.(string)) }})

	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/early", nil))
	if rec.Code != 500 || strings.Contains(rec.Body.String(), "boom") || strings.Contains(rec.Body.String(), "goroutine") {
		t.Errorf("early panic: %d %q", rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/late", nil))
	if rec.Code != http.StatusAccepted {
		t.Errorf("late panic: status %d, want the handler's 202 kept", rec.Code)
	}
	if len(reported) != 2 || reported[0] != "boom in /early" {
		t.Errorf("reported %q", reported)
	}
	func() {
		defer func() {
			if v := recover(); v != http.ErrAbortHandler {
				t.Errorf("abort: recovered %v, want http.ErrAbortHandler", v)
			}
		}()
		handler.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/abort", nil))
	}()
	if st := h.s.Stats(); st.Running != 0 || st.Failed != 3 {
		t.Errorf("running %d, failed %d: a slot leaked", st.Running, st.Failed)
	}
}

// A forwarded-for header is believed only from a trusted proxy, and only
// as far as trusted proxies added to it. Each entry is an address however
// it is written (a port, brackets, a zone, IPv4-mapped), so that one
// client is one string; an entry that is no address stops the walk at the
// proxy that wrote it. A trusted prefix may be written IPv4-mapped.
func TestClientAddr(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128"),
		netip.MustParsePrefix("fe80::/10"), netip.MustParsePrefix("::ffff:192.168.0.0/112")}
	for _, tc := range []struct {
		remote string
		xff    []string
		want   string
	}{
		{"198.51.100.7:4321", nil, "198.51.100.7"},
		{"198.51.100.7:4321", []string{"203.0.113.9"}, "198.51.100.7"},             // not from a trusted proxy: the header is the client's
		{"10.1.2.3:80", []string{"203.0.113.9"}, "203.0.113.9"},                    // from a trusted proxy
		{"10.1.2.3:80", []string{"1.1.1.1, 203.0.113.9, 10.9.9.9"}, "203.0.113.9"}, // the nearest untrusted hop, not what the client wrote first
		{"10.1.2.3:80", []string{"10.2.2.2"}, "10.2.2.2"},                          // all trusted: the farthest
		{"[::1]:80", []string{"2001:db8::5"}, "2001:db8::5"},
		{"10.1.2.3:80", nil, "10.1.2.3"},
		{"10.1.2.3:80", []string{"203.0.113.9:40001"}, "203.0.113.9"},              // a proxy that writes the port
		{"10.1.2.3:80", []string{"[2001:db8:1:2::7]"}, "2001:db8:1:2::7"},          // brackets
		{"10.1.2.3:80", []string{"[2001:db8:1:2::7]:40001"}, "2001:db8:1:2::7"},    // brackets and a port
		{"10.1.2.3:80", []string{"[fe80::7%eth0]:1"}, "fe80::7"},                   // a zone
		{"10.1.2.3:80", []string{"::ffff:203.0.113.9"}, "203.0.113.9"},             // IPv4-mapped
		{"10.1.2.3:80", []string{"203.0.113.9, 10.4.4.4:80"}, "203.0.113.9"},       // a trusted hop with a port
		{"10.1.2.3:80", []string{"203.0.113.9", "10.4.4.4, ", " "}, "203.0.113.9"}, // several header lines, empty entries
		{"10.1.2.3:80", []string{"203.0.113.9, unknown, 10.4.4.4"}, "10.4.4.4"},    // no address: the proxy that wrote it
		{"10.1.2.3:80", []string{"203.0.113.9, unknown"}, "10.1.2.3"},
		{"[fe80::1%eth0]:80", []string{"203.0.113.9"}, "203.0.113.9"},       // a proxy's address with a zone
		{"[::ffff:10.1.2.3]:80", []string{"203.0.113.9"}, "203.0.113.9"},    // a proxy's address IPv4-mapped
		{"192.168.4.4:80", []string{"203.0.113.9"}, "203.0.113.9"},          // in a prefix written IPv4-mapped
		{"[::ffff:192.168.4.4]:80", []string{"203.0.113.9"}, "203.0.113.9"}, // both
		{"192.169.4.4:80", []string{"203.0.113.9"}, "192.169.4.4"},
		{"[2001:db8::1%eth0]:80", nil, "2001:db8::1"},
		{"@", []string{"203.0.113.9"}, ""}, // a Unix socket's: no address
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := ClientAddr(r, trusted); got != tc.want {
			t.Errorf("ClientAddr(%s, %q) = %s, want %s", tc.remote, tc.xff, got, tc.want)
		}
	}
}

// Reading X-Forwarded-For copies nothing, whatever its length: a hostile
// header of a megabyte, of commas or of one long entry, and a long chain
// of trusted proxies, each cost no allocation (joining and splitting the
// header allocated about 16 times its size); an entry that is no address
// ends the walk, and its parse's error is the one allocation.
func TestClientAddrHugeHeader(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for name, xff := range map[string][]string{
		"commas":        {strings.Repeat(",", 1<<20)},
		"one entry":     {strings.Repeat("9", 1<<20)},
		"trusted hops":  {"203.0.113.9, " + strings.Repeat("10.0.0.1, ", 1<<16)},
		"garbage":       {"203.0.113.9, " + strings.Repeat("x", 1<<20) + ", 10.0.0.1"},
		"many lines":    slices.Repeat([]string{" , "}, 1<<14),
		"client at far": {"203.0.113.9" + strings.Repeat(", 10.2.3.4:5", 1<<14)},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "10.1.2.3:80"
		r.Header["X-Forwarded-For"] = xff
		if allocs := testing.AllocsPerRun(5, func() { clientAddr(r, trusted) }); allocs > 1 {
			t.Errorf("%s: %v allocations reading the header", name, allocs)
		}
	}
}

// Middleware refuses a trusted prefix that would match nothing as
// written, and matches an IPv4-mapped one as its IPv4 prefix.
func TestMiddlewareTrustedProxiesChecked(t *testing.T) {
	h := newHarness(t, fairsched.Config{})
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	for _, bad := range []netip.Prefix{{}, netip.MustParsePrefix("::ffff:0:0/80")} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("TrustedProxies %v: no panic", bad)
				}
			}()
			Middleware(h.s, ok, Options{TrustedProxies: []netip.Prefix{bad}})
		}()
	}
	Middleware(h.s, ok, Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("::ffff:10.0.0.0/104")}})
}

// With http.Server.Shutdown, a request already running finishes.
func TestMiddlewareServerShutdown(t *testing.T) {
	h := newHarness(t, fairsched.Config{MaxConcurrency: 1})
	srv := httptest.NewServer(Middleware(h.s, h.holding(), Options{}))
	defer srv.Close()
	result := make(chan error, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/slow")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != "ok" {
				err = &answerError{resp.StatusCode, string(body)}
			}
		}
		result <- err
	}()
	<-h.entered
	shut := make(chan error, 1)
	go func() { shut <- srv.Config.Shutdown(context.Background()) }()
	close(h.release)
	if err := <-result; err != nil {
		t.Errorf("the running request: %v", err)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// answerError reports an unexpected answer.
type answerError struct {
	status int
	body   string
}

func (a *answerError) Error() string { return strconv.Itoa(a.status) + " " + a.body }

// With the queue full, the README's set-up still answers its probes and
// its admin page: the probes are exempt by default and the admin handler
// is mounted beside the middleware, while a request of the service's gets
// 429. A probe's path with another method is the service's, and queued;
// an Exempt of the service's replaces the default.
func TestMiddlewareProbesAndAdminDuringOverload(t *testing.T) {
	h := newHarness(t, fairsched.Config{MaxConcurrency: 1, MaxQueue: 1})
	api := http.NewServeMux()
	api.Handle("/work", h.holding())
	api.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "healthy") })
	api.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "# metrics") })
	root := http.NewServeMux()
	root.Handle("/admin/", http.StripPrefix("/admin", Admin(h.s, AdminOptions{})))
	root.Handle("/", Middleware(h.s, api, Options{}))

	running := serve(root, httptest.NewRequest("GET", "/work", nil))
	<-h.submitted
	<-h.entered
	queued := serve(root, httptest.NewRequest("GET", "/work", nil))
	<-h.submitted
	answer := func(method, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		root.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		return rec
	}
	if rec := answer("GET", "/work"); rec.Code != http.StatusTooManyRequests {
		t.Errorf("GET /work with the queue full: %d, want 429", rec.Code)
	}
	for _, path := range []string{"/healthz", "/metrics"} {
		if rec := answer("GET", path); rec.Code != 200 {
			t.Errorf("GET %s with the queue full: %d, want 200", path, rec.Code)
		}
	}
	for _, path := range []string{"/admin/", "/admin/state.json"} {
		if rec := answer("GET", path); rec.Code == http.StatusTooManyRequests || rec.Code == http.StatusServiceUnavailable {
			t.Errorf("GET %s with the queue full: %d", path, rec.Code)
		}
	}
	if rec := answer("POST", "/healthz"); rec.Code != http.StatusTooManyRequests {
		t.Errorf("POST /healthz with the queue full: %d, want 429 (only GET and HEAD are probes)", rec.Code)
	}
	strict := Middleware(h.s, api, Options{Exempt: func(*http.Request) bool { return false }})
	rec := httptest.NewRecorder()
	strict.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != http.StatusTooManyRequests {
		t.Errorf("GET /healthz exempting nothing: %d, want 429", rec.Code)
	}
	close(h.release)
	for _, done := range []<-chan *httptest.ResponseRecorder{running, queued} {
		if rec := <-done; rec.Code != 200 {
			t.Errorf("a request admitted ended %d", rec.Code)
		}
	}
}

// With zero Options a request is foreground work: a job of RequestType,
// registered in the Foreground tier; a Job that names no type runs as it
// too; a service's own configuration of RequestType stands.
func TestMiddlewareRequestsAreForeground(t *testing.T) {
	tierOf := func(t *testing.T, cfg fairsched.Config, o Options) fairsched.Tier {
		h := newHarness(t, cfg)
		var running fairsched.Stats
		handler := Middleware(h.s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			running = h.s.Stats()
		}), o)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if rec.Code != 200 {
			t.Fatalf("status %d", rec.Code)
		}
		for _, ty := range running.Types {
			if ty.Running == 1 {
				if ty.Name != RequestType {
					t.Errorf("the request ran as type %q", ty.Name)
				}
				return ty.Tier
			}
		}
		t.Fatal("no type ran the request")
		return 0
	}
	if tier := tierOf(t, fairsched.Config{}, Options{}); tier != fairsched.Foreground {
		t.Errorf("zero Options: tier %v, want foreground", tier)
	}
	named := Options{Job: func(*http.Request) fairsched.Job { return fairsched.Job{Priority: 80} }}
	if tier := tierOf(t, fairsched.Config{}, named); tier != fairsched.Foreground {
		t.Errorf("a Job naming no type: tier %v, want foreground", tier)
	}
	own := fairsched.Config{Types: map[string]fairsched.TypeConfig{RequestType: {Tier: 5}}}
	if tier := tierOf(t, own, Options{}); tier != 5 {
		t.Errorf("the service's own RequestType: tier %v, want 5", tier)
	}
}

// A job type misspelt in Options.Job is the service's mistake, not an
// overload: 500, logged once however many requests meet it.
func TestMiddlewareUnknownType(t *testing.T) {
	h := newHarness(t, fairsched.Config{})
	var logged strings.Builder
	log.SetOutput(&logged)
	defer log.SetOutput(os.Stderr)
	handler := Middleware(h.s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
		Options{Job: func(*http.Request) fairsched.Job { return fairsched.Job{Type: "serach"} }})
	for range 3 {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest("GET", "/search", nil))
		if rec.Code != http.StatusInternalServerError {
			t.Errorf("status %d, want 500", rec.Code)
		}
	}
	if n := strings.Count(logged.String(), `unknown job type "serach"`); n != 1 {
		t.Errorf("logged %d times, want once: %q", n, logged.String())
	}
}

// Types derived from what clients send cannot fill the log or the
// memory: after maxLogged types, one line says no more are logged.
func TestMiddlewareUnknownTypesBounded(t *testing.T) {
	h := newHarness(t, fairsched.Config{})
	var logged strings.Builder
	log.SetOutput(&logged)
	defer log.SetOutput(os.Stderr)
	handler := Middleware(h.s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
		Options{Job: func(r *http.Request) fairsched.Job { return fairsched.Job{Type: r.URL.Path} }})
	for i := range 3 * maxLogged {
		handler.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/t"+strconv.Itoa(i), nil))
	}
	if n := strings.Count(logged.String(), "\n"); n != maxLogged+1 {
		t.Errorf("%d lines logged, want %d", n, maxLogged+1)
	}
}

// A path is logged quoted: a client cannot add a line of its own to the
// log with an encoded newline, neither when a handler panics nor when
// Options.Job names an unknown type.
func TestMiddlewareLogsPathQuoted(t *testing.T) {
	h := newHarness(t, fairsched.Config{})
	var logged strings.Builder
	log.SetOutput(&logged)
	defer log.SetOutput(os.Stderr)
	panicking := Middleware(h.s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic("boom") }), Options{})
	misnamed := Middleware(h.s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
		Options{Job: func(*http.Request) fairsched.Job { return fairsched.Job{Type: "serach"} }})
	for _, handler := range []http.Handler{panicking, misnamed} {
		handler.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/a%0A2026/11/26%20fairschedhttp:%20forged", nil))
	}
	lines := strings.Split(strings.TrimSuffix(logged.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Errorf("2 requests logged %d lines: %q", len(lines), lines)
	}
	for _, line := range lines {
		if !strings.Contains(line, `"/a\n2026/11/26 fairschedhttp: forged"`) {
			t.Errorf("the path is not quoted in %q", line)
		}
	}
}
