package browsertest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedhttp"
)

// fakeTimers is run in the page before its script: the page's timers of
// poll or refresh are recorded instead of set, so that the test fires
// them when it chooses (window.fire); the page's fetches of state.json
// are counted.
const fakeTimers = `
window.timers = []; window.intervals = []; window.fetches = 0; window.pending = [];
const realTimeout = window.setTimeout, realInterval = window.setInterval, realFetch = window.fetch;
const ours = f => typeof f === "function" && (f.name === "poll" || f.name === "refresh");
window.setTimeout = function (f, ...rest) { if (ours(f)) { window.timers.push(f); return 0; } return realTimeout.call(window, f, ...rest); };
window.setInterval = function (f, ...rest) { if (ours(f)) { window.intervals.push(f); return 0; } return realInterval.call(window, f, ...rest); };
window.fetch = function (url, ...rest) { if (String(url).startsWith("state.json")) window.fetches++; return realFetch.call(window, url, ...rest); };
window.fire = () => { window.pending.push(...[...window.timers.splice(0), ...window.intervals].map(f => f())); return window.fetches; };
`

// holdingServer serves admin, but holds the answer to one state.json
// request when told to: the state is read when the request arrives, and
// sent once released, as from a slow server.
type holdingServer struct {
	admin   http.Handler
	mu      sync.Mutex
	hold    bool
	arrived chan struct{}
	release chan struct{}
}

func (h *holdingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	hold := h.hold && r.URL.Path == "/state.json"
	h.hold = h.hold && !hold
	h.mu.Unlock()
	if !hold {
		h.admin.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	h.admin.ServeHTTP(rec, r)
	close(h.arrived)
	<-h.release
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

// TestAdminPagePolls drives the page's polling with its timers in the
// test's hands. A poll is not sent while the last is unanswered, however
// often the timers fire; an answer older than one drawn already is
// dropped, not drawn over it; and a weight being typed is kept, with the
// focus, across a refresh.
func TestAdminPagePolls(t *testing.T) {
	browser := chromium(t)
	s, err := fairsched.New(fairsched.Config{MaxConcurrency: 1, Keys: map[string]fairsched.KeyConfig{"tenant-a": {Weight: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hold := make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	defer release() // before Close, which waits for the jobs
	for range 2 {
		if _, err := s.Submit(context.Background(), fairsched.Job{Key: "tenant-a"}, func(context.Context) error { <-hold; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	admin := fairschedhttp.Admin(s, fairschedhttp.AdminOptions{Authorize: byRole})
	defer admin.Close()
	server := &holdingServer{admin: admin, arrived: make(chan struct{}), release: make(chan struct{})}
	srv := httptest.NewServer(server)
	defer srv.Close()
	unhold := sync.OnceFunc(func() { close(server.release) })
	defer unhold() // before srv.Close, which waits for the held request

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(ctx); err != nil { // starts the browser, outside the timeout
		t.Fatal(err)
	}
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	defer cancelTimeout()
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"X-Role": "operator"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: fakeTimers}); err != nil {
		t.Fatal(err)
	}
	eval := func(what, expr string, opts ...chromedp.EvaluateOption) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](expr, opts...))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return n
	}
	weight := `#keys tr[data-key="tenant-a"] input`
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(weight))); err != nil {
		t.Fatalf("loading the page: %v", err)
	}

	// The timers fire while a poll is unanswered: no other is sent.
	server.mu.Lock()
	server.hold = true
	server.mu.Unlock()
	sent := eval("firing the timers", `window.fire()`)
	<-server.arrived // the held poll's state is read, before the change below
	if again := eval("firing them again", `window.fire()`); again != sent {
		t.Errorf("the timers fired twice while a poll was unanswered: %d polls sent, then %d", sent, again)
	}

	// A change through the page, and a newer state drawn; the held, older
	// one then arrives and is dropped.
	eval("pausing a key", `change("pause-key", {name: "tenant-a"}).then(ok => ok ? 1 : 0)`, chromedp.EvalAwaitPromise)
	eval("a refresh", `refresh().then(() => 0)`, chromedp.EvalAwaitPromise)
	paused := `document.querySelectorAll('#keys tr[data-key="tenant-a"].is-paused').length`
	if n := eval("after the refresh", paused); n != 1 {
		t.Fatalf("the refresh after the change shows %d rows of the key paused", n)
	}
	unhold()
	eval("the held poll's answer", `Promise.all(window.pending).then(() => 0)`, chromedp.EvalAwaitPromise)
	if n := eval("after the held answer", paused); n != 1 {
		t.Error("an older state was drawn over a newer one: the key shows resumed")
	}

	// An operator types a weight; a refresh keeps it, and the focus.
	eval("typing a weight", `(() => { const i = document.querySelector(`+strconv.Quote(weight)+`); i.focus(); i.value = "7"; return 0; })()`)
	eval("a refresh while typing", `refresh().then(() => 0)`, chromedp.EvalAwaitPromise)
	typed, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.activeElement.dataset.weight || "none") + "=" + document.activeElement.value`))
	if err != nil {
		t.Fatal(err)
	}
	if typed != "tenant-a=7" {
		t.Errorf("after a refresh, the focused input and its value: %q, want tenant-a=7", typed)
	}
}
