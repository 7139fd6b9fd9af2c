package fairschedhttp

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/fairsched/fairsched"
)

// A page's state is built once per interval however often it is asked
// for, each page its own, again after a reset; and the pages kept are
// bounded.
func TestStateCache(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := newStateCache(2*time.Second, func() time.Time { return now })
	builds := map[int]int{}
	build := func(page int) State { builds[page]++; return State{Page: page, Jobs: builds[page]} }
	get := func(page, wantBuilds int) {
		t.Helper()
		if st := c.get(page, build); st.Page != page || st.Jobs != wantBuilds || builds[page] != wantBuilds {
			t.Fatalf("page %d: state %d of %d built, want %d", page, st.Jobs, builds[page], wantBuilds)
		}
	}
	get(0, 1)
	get(0, 1)
	get(1, 1)
	now = now.Add(2*time.Second - 1)
	get(0, 1)
	now = now.Add(1)
	get(0, 2)
	get(1, 2)
	c.reset()
	get(0, 3)
	for p := range 3 * maxCachedPages {
		c.get(100+p, build)
		if len(c.pages) > maxCachedPages {
			t.Fatalf("%d pages kept", len(c.pages))
		}
	}
}

// Viewers polling state.json share one state per refresh interval: four
// at once, and one a moment later, see the state of the first, without
// a job submitted since; past the interval, or after a change made
// through the page, the next sees the scheduler as it is.
func TestAdminViewersShareOneState(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	adminNow = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	t.Cleanup(func() { adminNow = time.Now })
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	s, _ := adminHarness(t) // 2 jobs running and queued, 3 paused
	handler := newAdmin(t, s, AdminOptions{Authorize: allowAll})
	submit := func() {
		t.Helper()
		hold := make(chan struct{})
		t.Cleanup(func() { close(hold) })
		if _, err := s.Submit(context.Background(), fairsched.Job{Key: "c"}, func(context.Context) error { <-hold; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	jobs := func() int {
		t.Helper()
		st, _ := getState(t, handler, "", nil)
		return st.Jobs
	}

	var wg sync.WaitGroup
	seen := make([]int, 4)
	for i := range seen {
		wg.Add(1)
		go func() { defer wg.Done(); seen[i] = jobs() }()
	}
	wg.Wait()
	for _, n := range seen {
		if n != 5 {
			t.Fatalf("the viewers saw %v jobs, want 5 each", seen)
		}
	}
	submit()
	advance(refreshEvery - time.Millisecond)
	if n := jobs(); n != 5 {
		t.Fatalf("within the interval a viewer saw %d jobs, want the shared state's 5", n)
	}
	advance(time.Millisecond)
	if n := jobs(); n != 6 {
		t.Fatalf("past the interval a viewer saw %d jobs, want 6", n)
	}
	submit()
	if rec := post(handler, "/weight", url.Values{"key": {"a"}, "weight": {"2"}}, nil); rec.Code != http.StatusNoContent {
		t.Fatalf("a change: %d %s", rec.Code, rec.Body.String())
	}
	if n := jobs(); n != 7 {
		t.Fatalf("after a change a viewer saw %d jobs, want 7", n)
	}
}
