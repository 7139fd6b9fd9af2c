package browsertest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

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

// TestAdminPageInBrowser loads the admin page of a scheduler with live
// jobs in headless Chromium: it sees the keys and the queue, sees a key
// that appears after it loaded once the page refreshes itself, and,
// authorised, pauses a key and sees it paused, in the page and in the
// scheduler.
func TestAdminPageInBrowser(t *testing.T) {
	browser := chromium(t)
	s, err := fairsched.New(fairsched.Config{MaxConcurrency: 2, Keys: map[string]fairsched.KeyConfig{"tenant-a": {Weight: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	defer s.Close()
	defer close(hold) // before Close, which waits for the jobs
	work := func(context.Context) error { <-hold; return nil }
	for _, key := range []string{"tenant-a", "tenant-a", "tenant-b", "tenant-b", "tenant-b"} {
		if _, err := s.Submit(context.Background(), fairsched.Job{Key: key}, work); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(fairschedhttp.Admin(s, fairschedhttp.AdminOptions{
		Authorize: func(*http.Request) bool { return true },
	}))
	defer srv.Close()

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	defer cancelTimeout()

	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-key="tenant-b"]`)),
	); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	keys, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#keys tbody`)))
	if err != nil {
		t.Fatal(err)
	}
	queue, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#queue tbody`)))
	if err != nil {
		t.Fatal(err)
	}
	queued, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#queue tbody tr").length`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(keys, "tenant-a") || queued != 5 || !strings.Contains(queue, "running") || !strings.Contains(queue, "turn") {
		t.Fatalf("the page shows keys %q and %d queue rows %q", keys, queued, queue)
	}

	// A key that appears after the page loaded shows up at its refresh.
	if _, err := s.Submit(context.Background(), fairsched.Job{Key: "late"}, work); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`tr[data-key="late"]`))); err != nil {
		t.Fatalf("waiting for the refresh: %v", err)
	}

	// Pause a key from the page.
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`tr[data-key="tenant-b"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-key="tenant-b"].is-paused`)),
	); err != nil {
		t.Fatalf("pausing a key: %v", err)
	}
	if !slices.Contains(s.Stats().PausedKeys, "tenant-b") {
		t.Fatal("the page showed the key paused, but the scheduler has not paused it")
	}

	if path := os.Getenv("FAIRSCHED_SCREENSHOT"); path != "" {
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
