package browsertest

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedhttp"
)

// chromium returns the browser to drive, or skips the test, saying why.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	t.Skip("no Chromium installed: apt-get install -y chromium (.ci/run does)")
	return ""
}

// byRole is the service's Authorize in the test: the X-Role header, as
// an authenticating proxy would set it, says who the operator is.
func byRole(r *http.Request, access fairschedhttp.AdminAccess) bool {
	switch r.Header.Get("X-Role") {
	case "operator":
		return true
	case "viewer":
		return access == fairschedhttp.AdminRead
	}
	return false
}

// TestAdminPageInBrowser drives the admin page of a scheduler with live
// jobs in headless Chromium. Without authorisation it is refused and
// shows nothing; as a viewer it shows keys, the queue and charts, with no
// controls, and picks up a key that appears after it loaded; as an
// operator it pauses and resumes a key, retries a dead job, cancels a
// queued one, and disables and enables a pair, each seen in the page and
// then checked in the scheduler. With FAIRSCHED_SCREENSHOT set to a path,
// it runs a little workload and writes a screenshot of the page, charts
// drawn, there.
func TestAdminPageInBrowser(t *testing.T) {
	browser := chromium(t)
	s, err := fairsched.New(fairsched.Config{MaxConcurrency: 1,
		Types: map[string]fairsched.TypeConfig{
			"request": {Tier: fairsched.Foreground},
			"sync":    {},
		},
		Keys: map[string]fairsched.KeyConfig{"tenant-a": {Weight: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dead, err := s.Submit(context.Background(), fairsched.Job{Type: "sync", ID: "repo-9", Key: "tenant-a"}, func(context.Context) error {
		return errors.New("remote hung up")
	})
	if err != nil {
		t.Fatal(err)
	}
	<-dead.Done()
	hold := make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	defer release() // before Close, which waits for the jobs
	work := func(context.Context) error { <-hold; return nil }
	var queued []fairsched.Handle
	for _, key := range []string{"tenant-a", "tenant-a", "tenant-b", "tenant-b", "tenant-b"} {
		h, err := s.Submit(context.Background(), fairsched.Job{Key: key}, work)
		if err != nil {
			t.Fatal(err)
		}
		queued = append(queued, h)
	}
	admin := fairschedhttp.Admin(s, fairschedhttp.AdminOptions{Authorize: byRole, HistoryEvery: 200 * time.Millisecond, PageSize: 12})
	defer admin.Close()
	srv := httptest.NewServer(admin)
	defer srv.Close()

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
	as := func(role string) {
		t.Helper()
		if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"X-Role": role}}); err != nil {
			t.Fatal(err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return v
	}
	count := func(sel string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+strconv.Quote(sel)+`).length`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// No one: refused, and nothing of the scheduler's is shown.
	as("nobody")
	step("loading the page unauthorised", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`h1`)))
	if body := text(`body`); !strings.Contains(body, "Not authorised") || strings.Contains(body, "tenant-") {
		t.Fatalf("unauthorised, the page shows %q", body)
	}

	// A viewer: the page, read-only.
	as("viewer")
	step("loading the page as a viewer", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`tr[data-key="tenant-b"]`)))
	if keys, queue := text(`#keys tbody`), text(`#queue tbody`); !strings.Contains(keys, "tenant-a") || count(`#queue tbody tr`) != 5 ||
		!strings.Contains(queue, "running") || !strings.Contains(queue, "turn") {
		t.Fatalf("the page shows keys %q and queue %q", keys, queue)
	}
	if n := count(`button[data-action]`); n != 0 || !strings.Contains(text(`#summary`), "read-only") {
		t.Fatalf("a viewer sees %d controls", n)
	}
	if tiers := text(`#tiers tbody`); !strings.Contains(tiers, "foreground") || !strings.Contains(tiers, "background") {
		t.Errorf("the tiers are not named: %q", tiers)
	}
	if _, err := s.Submit(context.Background(), fairsched.Job{Key: "late"}, work); err != nil {
		t.Fatal(err)
	}
	step("waiting for the refresh", chromedp.WaitVisible(chromedp.CSS(`tr[data-key="late"]`)))

	// An operator: each control, seen in the page, then in the scheduler.
	as("operator")
	step("reloading as an operator", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`tr[data-key="tenant-b"] button[data-action="pause-key"]`)))
	step("pausing a key",
		chromedp.Click(chromedp.CSS(`tr[data-key="tenant-b"] button[data-action="pause-key"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-key="tenant-b"].is-paused`)))
	if !slices.Contains(s.Stats().PausedKeys, "tenant-b") {
		t.Fatal("the page showed the key paused, but the scheduler has not paused it")
	}
	step("resuming it",
		chromedp.Click(chromedp.CSS(`tr[data-key="tenant-b"] button[data-action="resume-key"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-key="tenant-b"]:not(.is-paused) button[data-action="pause-key"]`)))
	if len(s.Stats().PausedKeys) != 0 {
		t.Fatalf("resumed in the page, the scheduler has %v paused", s.Stats().PausedKeys)
	}

	deadRow := `#dead tr[data-seq="` + strconv.FormatUint(dead.Seq(), 10) + `"]`
	step("retrying the dead job",
		chromedp.Click(chromedp.CSS(deadRow+` button[data-action="retry-dead"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(deadRow)),
		chromedp.WaitVisible(chromedp.CSS(`#queue tr td.text`)))
	if st := s.Stats(); st.Dead != 0 || !slices.ContainsFunc(s.Snapshot(), func(j fairsched.JobInfo) bool { return j.Type == "sync" && j.ID == "repo-9" }) {
		t.Fatalf("retried in the page, the scheduler has %d dead and no repo-9 queued", st.Dead)
	}

	victim := queued[1] // tenant-a's second, queued behind the running one
	queueRow := `#queue tr[data-seq="` + strconv.FormatUint(victim.Seq(), 10) + `"]`
	step("cancelling a queued job",
		chromedp.WaitVisible(chromedp.CSS(queueRow)),
		chromedp.Click(chromedp.CSS(queueRow+` button[data-action="cancel"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(queueRow)))
	select {
	case <-victim.Done():
		if !errors.Is(victim.Err(), context.Canceled) {
			t.Fatalf("the cancelled job ended with %v", victim.Err())
		}
	default:
		t.Fatal("gone from the page, the job has not ended in the scheduler")
	}

	step("disabling a pair",
		chromedp.SendKeys(chromedp.CSS(`#disable input[name="type"]`), "sync"),
		chromedp.SendKeys(chromedp.CSS(`#disable input[name="id"]`), "repo-9"),
		chromedp.SendKeys(chromedp.CSS(`#disable input[name="for"]`), "30m"),
		chromedp.Click(chromedp.CSS(`#disable button`)),
		chromedp.WaitVisible(chromedp.CSS(`#disabled tr[data-id="repo-9"]`)))
	if d := s.Disabled(); len(d) != 1 || d[0].ID != "repo-9" || d[0].Until.Sub(d[0].Since) != 30*time.Minute {
		t.Fatalf("disabled in the page, the scheduler has %+v", d)
	}
	step("enabling it",
		chromedp.Click(chromedp.CSS(`#disabled tr[data-id="repo-9"] button[data-action="enable"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#disabled tr[data-id="repo-9"]`)))
	if d := s.Disabled(); len(d) != 0 {
		t.Fatalf("enabled in the page, the scheduler has %+v", d)
	}

	// The charts draw: six, with lines of several samples.
	step("waiting for the charts", chromedp.WaitVisible(chromedp.CSS(`#charts .chart polyline`)))
	if n := count(`#charts .chart svg`); n != 6 {
		t.Errorf("%d charts, want 6", n)
	}
	if pts, err := chromedp.Run(ctx, chromedp.Evaluate[int](
		`Math.max(...[...document.querySelectorAll("#charts polyline")].map(p => p.getAttribute("points").split(" ").length))`)); err != nil || pts < 2 {
		t.Errorf("the longest line has %d points (%v)", pts, err)
	}

	if path := os.Getenv("FAIRSCHED_SCREENSHOT"); path != "" {
		release()
		workload(t, s, 20*time.Second)
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Log("drove the admin page in", browser)
}

// workload runs requests and background jobs of three tenants for d, so
// that a screenshot's charts have something to show, then leaves some
// queued.
func workload(t *testing.T, s *fairsched.Scheduler, d time.Duration) {
	t.Helper()
	if err := s.SetMaxConcurrency(4); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for i, key := range []string{"tenant-a", "tenant-b", "tenant-c"} {
		wg.Go(func() {
			for ctx.Err() == nil {
				job := fairsched.Job{Key: key}
				if rand.IntN(3) == 0 {
					job.Type = "request"
				}
				// A burst of tenant-c's in the middle of the run.
				n := 1
				if i == 2 && rand.IntN(5) == 0 {
					n = 8
				}
				for range n {
					s.Submit(ctx, job, func(context.Context) error {
						time.Sleep(time.Duration(20+rand.IntN(200)) * time.Millisecond)
						return nil
					})
				}
				time.Sleep(time.Duration(100+rand.IntN(150*(i+1))) * time.Millisecond)
			}
		})
	}
	wg.Wait()
}
